"""Audit of the aggregator's view: one attribute's column as it reads an owner's protected fragment.

The six-record pair of the linkage audit (issue 13, item 2), one attribute: D = 10, 20, ..., 60 and
D' with record 0 set to 60; DP-IR, k = 3, ε_attr = 1/2. The statistic reads what the aggregator
reads: rows sorted by their label (pseudonym, or record id in the old fragments), and counts
neighbouring rows with equal values. With record ids in id order it sees which identified records
share a cluster (D: {0,1,2},{3,4,5}; D': {1,2,3},{0,4,5}), so the same audit that stays within ε on
the pseudonymized, shuffled fragment measures a lower bound near 5 on the old view: the negative
control proving the test can fail.
"""
from fractions import Fraction

import numpy as np
import pytest
from noise_injection import ZeroNoise

from fragrelease.experiments.audit_tables import adjacent_equal_pairs, aggregator_views, audit_aggregator_view
from fragrelease.rng.laplace import FastLaplace

ALPHA = 1e-6
RUNS = 5000  # per side, plus 1,000 calibration runs per side: the linkage audit's sizes
X_D = np.array([10.0, 20.0, 30.0, 40.0, 50.0, 60.0])
X_N = X_D.copy()
X_N[0] = 60.0
COLUMN = dict(k=3, lo=10.0, hi=60.0, epsilon_attribute=Fraction(1, 2), mechanism="dp-ir")


@pytest.mark.parametrize("view", ["pseudonyms", "ids"])
def test_aggregator_view_of_one_column_stays_within_epsilon_only_with_pseudonyms(view):
    r = audit_aggregator_view(X_D, X_N, runs=RUNS, noise=FastLaplace(), view=view, alpha=ALPHA, **COLUMN)
    print(f"aggregator view ({view}): lower={r.epsilon_lower_bound:.3f} point={r.epsilon_point_estimate:.3f} "
          f"(claimed eps={r.epsilon}, {r.runs} runs/side, {r.thresholds} thresholds)")
    assert r.epsilon == 0.5
    if view == "pseudonyms":
        assert r.epsilon_lower_bound <= 0.5
    else:  # the old fragments (ids, id order): the claim is broken by far
        assert r.epsilon_lower_bound > 3.0


def test_id_view_shows_the_clusters_and_the_pseudonym_view_does_not():
    ids_d = adjacent_equal_pairs(aggregator_views(X_D, runs=2000, noise=FastLaplace(), view="ids", **COLUMN))
    ids_n = adjacent_equal_pairs(aggregator_views(X_N, runs=2000, noise=FastLaplace(), view="ids", **COLUMN))
    assert set(ids_d) <= {4, 5} and not (ids_n == 4).any()  # (A,A,A,B,B,B) vs (B,A,A,A,B,B)
    ps_d = adjacent_equal_pairs(aggregator_views(X_D, runs=2000, noise=FastLaplace(), view="pseudonyms", **COLUMN))
    assert {1, 2, 3, 4} <= set(ps_d)  # random labels: every arrangement of the two clusters


def test_the_audited_view_is_the_fragment_the_owner_writes(spark, tmp_path):
    """Cross-check with the Spark path: the owner's protection, pseudonyms and shuffle give the audited view."""
    import pandas as pd
    from specs import protect_with

    from fragrelease.jobs.protocol.shuffle import pseudonymize, shuffle_rows
    from fragrelease.schemas.base import Attribute

    key, plan_id = b"k" * 32, "plan-audit"
    attr = Attribute(name="a", type="double", role="quasi-identifier", kind="numeric", domain=(10.0, 60.0))
    df = spark.createDataFrame(pd.DataFrame({"rid": np.arange(6), "a": X_N}))
    protected = protect_with(df, [attr], id_column="rid", k=3, epsilon_per_attribute=Fraction(1, 2),
                                 mechanism="dp-ir", noise=ZeroNoise(), postprocess="none")
    written = shuffle_rows(pseudonymize(protected, "rid", key, plan_id), "pseudonym").toPandas()
    assert list(written.columns) == ["pseudonym", "a"]
    got = written.sort_values("pseudonym")["a"].to_numpy()
    want = aggregator_views(X_N, runs=1, noise=ZeroNoise(), view="pseudonyms", key=key, contexts=[plan_id], **COLUMN)[0]
    assert np.array_equal(got, want)
    assert sorted(set(got)) == [30.0, 170.0 / 3]  # D' clusters {20,30,40}, {50,60,60}
