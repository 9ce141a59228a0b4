"""Linked vs unlinked releases (docs/specification.md §2): the six-record example through the Spark path.

D = (10,10), (20,20), ..., (60,60); D' changes one record to (10,60); k = 3, DP-IR, ε_attr = 1/2 each.
A linked release of D always shows row-tuple multiplicities (3,3), or (6) when clamping merges the
clusters; under D' it usually shows (1,1,2,2), an outcome impossible under D: no ε bounds the joint
table. An unlinked release (every column shuffled on its own) shows (1,1,2,2) under D too.
"""
from collections import Counter
from fractions import Fraction

import pytest
from specs import protect_with

from fragrelease.jobs.idpir.unlink import unlink_columns
from fragrelease.schemas.base import Attribute

# a few protect calls through Spark in one fixture; CI runs it
pytestmark = pytest.mark.slow

D = [(i, 10.0 * i, 10.0 * i) for i in range(1, 7)]
D_PRIME = [(1, 10.0, 60.0)] + D[1:]
#: Releases per case. Each is one pair of attributes (a_i, b_i) of one protect call: every attribute has its own
#: clusters, scale and draws, so the pairs are independent releases of the example (20 releases cost one call;
#: 6 releases as 6 calls each cost as much). Clamping merges a column's two clusters with probability 0.123 (a)
#: and 0.114 (b), so P[(1,1,2,2) | D', linked] = 0.777 and P[(1,1,2,2) | D, unlinked] = 0.769 · 0.9 = 0.692 per
#: release; a correct release misses it in all 20 with probability 9e-14 and 6e-11 (in 6 releases: 1.2e-4 and
#: 8.6e-4, a false failure about one CI run in 1,000).
RUNS = 20
NAMES = [(f"a{i}", f"b{i}") for i in range(RUNS)]
ATTRS = [Attribute(name=n, type="double", role="quasi-identifier", kind="numeric", domain=(0.0, 100.0))
         for pair in NAMES for n in pair]


def _pattern(rows, a: str, b: str) -> tuple:
    return tuple(sorted(Counter((r[a], r[b]) for r in rows).values()))


def _releases(spark, data, unlinked: bool) -> list[tuple]:
    """RUNS releases of ``data`` (columns a, b), linked or unlinked: the row-tuple multiplicities of each."""
    df = spark.createDataFrame([(i, *(v for _ in NAMES for v in (a, b))) for i, a, b in data],
                               "record_id long, " + ", ".join(f"{n} double" for pair in NAMES for n in pair))
    # the secure sampler; postprocess "none" is the paper's release of the example (the isotonic
    # projection often pools a column's two clusters into one value, which hides the pattern as often)
    out = protect_with(df, ATTRS, id_column="record_id", k=3, epsilon_per_attribute=Fraction(1, 2),
                       mechanism="dp-ir", postprocess="none")
    if unlinked:
        out = unlink_columns(out.drop("record_id"), [n for pair in NAMES for n in pair])
    rows = out.collect()
    return [_pattern(rows, a, b) for a, b in NAMES]


@pytest.fixture(scope="module")
def patterns(spark):
    return {(name, unlinked): _releases(spark, data, unlinked)
            for name, data, unlinked in (("D", D, False), ("D'", D_PRIME, False), ("D", D, True))}


def test_linked_release_of_d_only_shows_whole_clusters(patterns):
    assert set(patterns[("D", False)]) <= {(3, 3), (6,)}


def test_linked_release_tells_d_prime_apart(patterns):
    # P[(1,1,2,2) | D'] = 0.777 per release; over RUNS = 20 releases it fails to appear with probability 9e-14
    assert (1, 1, 2, 2) in patterns[("D'", False)]


def test_unlinked_release_of_d_shows_the_same_outcomes(patterns):
    # a random pairing of two 3+3 columns splits (1,1,2,2) with probability 0.9 whenever both columns'
    # centroids differ (0.769): the outcome no longer tells D' from D (missed in 20 releases: 6e-11)
    assert (1, 1, 2, 2) in patterns[("D", True)]


def test_unlinking_keeps_each_column_multiset(spark):
    df = spark.createDataFrame([(i, float(i), float(100 - i)) for i in range(200)], "record_id long, a double, b double")
    out = unlink_columns(df.drop("record_id"), ["a", "b"]).toPandas()
    assert sorted(out["a"]) == [float(i) for i in range(200)]
    assert sorted(out["b"]) == sorted(float(100 - i) for i in range(200))
    assert (out["a"] + out["b"] != 100).sum() > 150  # the rows no longer pair a record's values
