"""The line-up of released values by id (fragrelease.jobs.idpir.assembly.line_up): ids placed by a table
of positions (dense integral ids) or by a sort (sparse ids), the same rows either way, and ids that
differ between attributes refused."""
from __future__ import annotations

import numpy as np
import pytest
from pyspark.sql import types as T

from fragrelease.errors import IdentifierError
from fragrelease.jobs.idpir import assembly
from fragrelease.jobs.idpir.bucket_sort import F8, I8, pack
from fragrelease.schemas.base import Attribute

ATTRS = [Attribute(name=f"a{j}", type="double", role="quasi-identifier", kind="numeric", domain=(0, 1000))
         for j in range(3)]


def _values(spark, ids_per_attr, rng):
    """``(group, attr, rid, value)`` rows, each attribute's ids in its own order, cut into 3 rows; value = id / 7 + attr."""
    rows = []
    for j, ids in enumerate(ids_per_attr):
        for part in np.array_split(rng.permutation(ids), 3):
            rows.append((0, j, pack(part, I8), pack(part / 7 + j, F8)))
    return spark.createDataFrame(rows, assembly.values_schema(T.LongType(), False))


def _lined_up(values):
    return assembly.line_up(values, ATTRS, groups=1, carry_rid=False, rid_type=T.LongType(), rank_orders={},
                            id_type=T.LongType(), id_column="id").toPandas()


@pytest.mark.parametrize("spacing", [1, 3, 1000])  # dense ids (a table of positions) and sparse ones (a sort)
def test_the_line_up_puts_every_value_beside_its_id(spark, spacing):
    rng = np.random.default_rng(spacing)
    ids = np.arange(200, dtype=np.int64) * spacing - 50
    assert assembly._Places.usable(ids) == (spacing < assembly._TABLE_SPAN)
    got = _lined_up(_values(spark, [ids] * 3, rng))
    assert got["id"].tolist() == ids.tolist()  # one row per id, in id order
    for j in range(3):
        assert np.array_equal(got[f"a{j}"].to_numpy(), ids / 7 + j)


@pytest.mark.parametrize("change", ["other id", "id twice", "one id fewer"])
def test_attributes_with_other_ids_are_refused(spark, change):
    rng = np.random.default_rng(0)
    ids = np.arange(100, dtype=np.int64)
    other = ids.copy()
    if change == "other id":
        other[5] = 100  # an id the other attributes do not have (and one of theirs missing)
    elif change == "id twice":
        other[5] = 6
    else:
        other = other[:-1]
    with pytest.raises(Exception, match="protected attributes disagree on the set of ids") as err:
        _lined_up(_values(spark, [ids, ids, other], rng))
    assert "IdentifierError" in str(err.value) or isinstance(err.value, IdentifierError)


def test_the_table_places_a_permutation_only():
    ids = np.arange(10, 20, dtype=np.int64)
    places = assembly._Places(ids)
    rid = ids[::-1].copy()
    assert places.of(rid).tolist() == list(range(9, -1, -1))
    assert places.of(np.r_[rid[:-1], rid[0]]) is None  # an id twice, one missing
    assert places.of(np.r_[rid[:-1], 20]) is None  # outside the range
    assert places.of(np.r_[rid[:-1], 9]) is None  # below it
    assert places.of(rid[:-1]) is None  # one id fewer
    assert not assembly._Places.usable(np.array([1, 1, 2], dtype=np.int64))  # an id twice: sorted instead
