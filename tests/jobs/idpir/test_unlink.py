"""Unlinking by CSPRNG keys, key buckets and output blocks (fragrelease.jobs.idpir.unlink; docs/specification.md §2).

The numpy steps are checked on their own (a uniformly random permutation through several buckets
and blocks, fixed sample sizes and thresholds), then the Spark plan with small buckets and blocks.
"""
from collections import Counter
from itertools import permutations

import numpy as np
import pytest

from fragrelease.errors import SchemaMismatchError
from fragrelease.jobs.idpir import unlink
from fragrelease.jobs.idpir.bucket_sort import I8, unpack


def _permute(values: np.ndarray, bits: int, boundaries: np.ndarray) -> np.ndarray:
    """The module's scatter, count, place and line-up of one column, in numpy: the output column."""
    pieces = unlink.scatter(0, values, bits)
    counts = Counter()
    for _, b, key, _, _ in pieces:
        counts[(0, b)] += len(key) // 8
    n, first = unlink.first_positions(counts, ["a"], values.size)
    placed = []
    for b in sorted({p[1] for p in pieces}):
        mine = [p for p in pieces if p[1] == b]
        key = unpack([p[2] for p in mine], I8)
        vals = np.concatenate([np.frombuffer(p[3], dtype=values.dtype) for p in mine])
        placed += unlink.place(key, vals, first[(0, b)], boundaries)
    out = np.empty(n, dtype=values.dtype)
    for _, pos, v in placed:
        out[pos:pos + v.size] = v
    return out


def test_place_cuts_a_bucket_at_the_block_boundaries():
    key = np.array([30, 10, 20, 40, 50], dtype=np.int64)
    values = np.array([3.0, 1.0, 2.0, 4.0, 5.0])
    got = unlink.place(key, values, 8, np.array([0, 5, 10, 12, 15]))
    assert [(t, pos, v.tolist()) for t, pos, v in got] == [(1, 8, [1.0, 2.0]), (2, 10, [3.0, 4.0]), (3, 12, [5.0])]


def test_layout_sizes_buckets_and_blocks_from_n_alone(monkeypatch):
    monkeypatch.setattr(unlink, "BLOCK_VALUES", 10)
    assert unlink.layout(0)[0] == 0 and unlink.layout(0)[1].tolist() == [0, 0]
    bits, bounds = unlink.layout(25)  # 3 blocks of 8, 8, 9 positions; 4 key buckets
    assert bits == 2 and bounds.tolist() == [0, 8, 16, 25]


def test_each_column_gets_a_uniformly_random_permutation_through_buckets_and_blocks():
    # 4 values, 4 key buckets, 2 output blocks: all 24 orders, each expected 750 times in 18,000 runs
    # (sd 26.8). The band [600, 900] is 5.6 sd on each side: a correct shuffle leaves it with
    # probability 7e-7 over the 24 orders (exact binomial tails; 12,000 runs with [400, 600], 4.6 sd,
    # failed 1 run in 8,000). It is ±20 % of the expectation as before: an order 20 % too likely or too
    # rare still fails about half the time, one 30 % too likely 99.3 % of the time (97.8 % before).
    # The pairing test below: [850, 1150] is 5.2 sd, 1.2e-6 over its 6 pairings.
    values = np.arange(4, dtype=np.float64)
    runs = Counter(tuple(_permute(values, 2, np.array([0, 2, 4])).tolist()) for _ in range(18_000))
    assert set(runs) == set(permutations(values.tolist()))
    assert 600 <= min(runs.values()) and max(runs.values()) <= 900


def test_two_columns_are_paired_uniformly_at_random():
    # three values per column: the 6 pairings of b to a, each expected 1,000 times in 6,000 runs
    a = np.arange(3, dtype=np.int64)
    pairings = Counter()
    for _ in range(6_000):
        col_a, col_b = _permute(a, 1, np.array([0, 1, 3])), _permute(a + 10, 1, np.array([0, 1, 3]))
        pairings[tuple(int(col_b[np.flatnonzero(col_a == v)[0]]) for v in a)] += 1
    assert len(pairings) == 6 and 850 <= min(pairings.values()) and max(pairings.values()) <= 1150


def test_columns_of_different_lengths_are_refused():
    with pytest.raises(SchemaMismatchError, match="column 'b' has 4 values, expected 5"):
        unlink.first_positions({(0, 0): 5, (1, 0): 3, (1, 1): 1}, ["a", "b"], None)


def test_unlink_columns_keeps_each_column_and_its_type_through_many_blocks(spark, monkeypatch):
    monkeypatch.setattr(unlink, "BLOCK_VALUES", 64)  # 1,000 rows: 16 key buckets, 16 output blocks
    n = 1_000
    df = spark.createDataFrame([(float(i), i * 3, f"s{i % 7}", float(-i)) for i in range(n)],
                               "a double, b long, c string, d float")
    out = unlink.unlink_columns(df, ["a", "b", "c", "d"])
    assert [(f.name, f.dataType.simpleString()) for f in out.schema.fields] == [
        ("a", "double"), ("b", "bigint"), ("c", "string"), ("d", "float")]
    pdf = out.toPandas()
    assert len(pdf) == n
    assert sorted(pdf["a"]) == [float(i) for i in range(n)]
    assert sorted(pdf["b"]) == [i * 3 for i in range(n)]
    assert Counter(pdf["c"]) == Counter(f"s{i % 7}" for i in range(n))
    assert sorted(pdf["d"]) == sorted(float(-i) for i in range(n))
    assert (pdf["b"] != pdf["a"] * 3).sum() > 950  # no longer a record's values side by side
    assert (pdf["a"].diff().dropna() == 1).sum() < 50  # rows not in input order


def test_vertical_frames_are_lined_up_and_must_match_in_length(spark, monkeypatch):
    monkeypatch.setattr(unlink, "BLOCK_VALUES", 50)
    left = spark.createDataFrame([(float(i),) for i in range(120)], "a double")
    right = spark.createDataFrame([(f"r{i}", i) for i in range(120)], "b string, c int")
    pdf = unlink.unlink_frames([(left, ["a"]), (right, ["b", "c"])]).toPandas()
    assert list(pdf.columns) == ["a", "b", "c"] and len(pdf) == 120
    assert sorted(pdf["c"]) == list(range(120)) and sorted(pdf["a"]) == [float(i) for i in range(120)]
    assert (pdf["b"] != "r" + pdf["c"].astype(str)).sum() > 100
    short = spark.createDataFrame([(f"r{i}",) for i in range(119)], "b string")
    with pytest.raises(SchemaMismatchError, match="column 'b' has 119 values, expected 120"):
        unlink.unlink_frames([(left, ["a"]), (short, ["b"])]).collect()


def test_a_null_in_a_numeric_column_is_refused(spark):
    df = spark.createDataFrame([(1.0,), (None,), (3.0,)], "a double")
    with pytest.raises(Exception, match="column 'a' holds a null value"):
        unlink.unlink_columns(df, ["a"], n=3).collect()


@pytest.mark.parametrize("plan", ["small", "whole", "distributed"])
def test_an_owners_unlinked_columns_hold_exactly_its_released_values(spark, monkeypatch, plan):
    """Unlinked straight from the released values (no line-up by id): per column the same multiset as
    the lined-up release of the same stored noise, categorical values as their labels."""
    from fractions import Fraction

    from specs import spec_for

    from fragrelease.jobs.idpir import protect
    from fragrelease.schemas.base import Attribute

    if plan != "small":  # 1,200 × 2 values: the small fragment's one task unless the gate is 0
        monkeypatch.setattr(protect, "SMALL_VALUES", 0)
    if plan == "distributed":
        monkeypatch.setattr(protect, "_WHOLE_ATTRIBUTE_ROWS", 0)
        monkeypatch.setattr(protect, "_VALUES_PER_BUCKET", 300)
    monkeypatch.setattr(unlink, "BLOCK_VALUES", 100)  # 1,200 ids: 16 key buckets, 12 output blocks
    attrs = [Attribute(name="x", type="double", role="quasi-identifier", kind="numeric", domain=(0.0, 100.0)),
             Attribute(name="g", type="string", role="quasi-identifier", kind="categorical",
                       categories=("a", "b", "c"))]
    df = spark.createDataFrame([(i, float(i % 97), "abc"[i % 3]) for i in range(1_200)], "rid long, x double, g string")
    spec = spec_for(df, attrs, k=5, epsilon_per_attribute=Fraction(1), mechanism="dp-ir", n_records=1_200,
                    category_order="declared")
    released = protect.released_fragment(df, attrs, spec, id_column="rid")
    assert (released.routed.together is not None) == (plan == "small")
    lined = released.lined_up().toPandas()
    unlinked = released.unlinked()
    assert unlinked.columns == ["x", "g"]
    got = unlinked.toPandas()
    assert len(got) == 1_200
    assert sorted(got["x"]) == sorted(lined["x"]) and Counter(got["g"]) == Counter(lined["g"])
    assert set(got["g"]) <= {"a", "b", "c"}
