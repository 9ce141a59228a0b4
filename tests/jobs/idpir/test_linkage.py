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

from fragrelease.jobs.idpir.aggregator import unlink_columns
from fragrelease.schemas.base import Attribute

# 24 small releases through Spark in one fixture (about 45 s on the suite's shared cores); CI runs it
pytestmark = pytest.mark.slow

A = Attribute(name="a", type="double", role="quasi-identifier", kind="numeric", domain=(0.0, 100.0))
B = Attribute(name="b", type="double", role="quasi-identifier", kind="numeric", domain=(0.0, 100.0))
D = [(i, 10.0 * i, 10.0 * i) for i in range(1, 7)]
D_PRIME = [(1, 10.0, 60.0)] + D[1:]
RUNS = 6


def _pattern(rows) -> tuple:
    return tuple(sorted(Counter((r["a"], r["b"]) for r in rows).values()))


def _release(spark, data, unlinked: bool):
    df = spark.createDataFrame(data, "record_id long, a double, b double")
    # the secure sampler; postprocess "none" is the paper's release of the example (the isotonic
    # projection often pools a column's two clusters into one value, which hides the pattern as often)
    out = protect_with(df, [A, B], id_column="record_id", k=3, epsilon_per_attribute=Fraction(1, 2),
                           mechanism="dp-ir", postprocess="none")
    if unlinked:
        out = unlink_columns(out.drop("record_id"), ["a", "b"])
    return out.collect()


@pytest.fixture(scope="module")
def patterns(spark):
    return {(name, unlinked): [_pattern(_release(spark, data, unlinked)) for _ in range(RUNS)]
            for name, data in (("D", D), ("D'", D_PRIME)) for unlinked in (False, True)}


def test_linked_release_of_d_only_shows_whole_clusters(patterns):
    assert set(patterns[("D", False)]) <= {(3, 3), (6,)}


def test_linked_release_tells_d_prime_apart(patterns):
    # P[(1,1,2,2) | D'] ≈ 0.77 per release; over 6 releases it fails to appear with probability < 2e-4
    assert (1, 1, 2, 2) in patterns[("D'", False)]


def test_unlinked_release_of_d_shows_the_same_outcomes(patterns):
    # a random pairing of two 3+3 columns splits (1,1,2,2) with probability 0.9 whenever the centroids
    # differ: the outcome no longer tells D' from D (over 6 releases it is missed with probability ~1e-5)
    assert (1, 1, 2, 2) in patterns[("D", True)]


def test_unlinking_keeps_each_column_multiset(spark):
    df = spark.createDataFrame([(i, float(i), float(100 - i)) for i in range(200)], "record_id long, a double, b double")
    out = unlink_columns(df.drop("record_id"), ["a", "b"]).toPandas()
    assert sorted(out["a"]) == [float(i) for i in range(200)]
    assert sorted(out["b"]) == sorted(float(100 - i) for i in range(200))
    assert (out["a"] + out["b"] != 100).sum() > 150  # the rows no longer pair a record's values
