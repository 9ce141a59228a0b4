"""Tiered releases (docs/specification.md §6): formulas on hand-computed examples, chain properties, determinism
and bad input (the Spark job against this reference: tests/jobs/tiers/)."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from fragrelease import tiers as tm
from fragrelease.errors import DomainError, InvalidParameterError, SchemaMismatchError, ThresholdTooLooseError


@pytest.fixture(scope="module")
def german():
    from fragrelease.schemas.datasets import GERMAN_COLUMNS, load_german_credit_pandas

    qi = [c for c in GERMAN_COLUMNS if c != "credit_class"]
    return tm.standardize(load_german_credit_pandas(), qi), tm.TierColumns.make(qi, "credit_class", "record_id")


@pytest.fixture(scope="module")
def chains(german):
    df, cols = german
    # the input's ids kept (surrogate_ids=False) so tiers can be matched to df by row id
    return {alg: tm.run_chain(df, cols, "0.03", 3, alg, surrogate_ids=False) for alg in tm.ALGORITHMS}


def test_js_divergence_hand_examples():
    assert tm.js_divergence([1, 0], [0, 1]) == pytest.approx(1.0)
    assert tm.js_divergence([0.3, 0.7], [0.3, 0.7]) == pytest.approx(0.0, abs=1e-15)
    # p = (1/2, 1/2), q = (1, 0): m = (3/4, 1/4)
    kl_pm = 0.5 * math.log2(0.5 / 0.75) + 0.5 * math.log2(0.5 / 0.25)
    kl_qm = 1.0 * math.log2(1 / 0.75)
    assert tm.js_divergence([0.5, 0.5], [1, 0]) == pytest.approx(0.5 * (kl_pm + kl_qm), rel=1e-12)
    assert 0.5 * (kl_pm + kl_qm) == pytest.approx(0.311278, abs=1e-6)
    # counts are normalized; symmetric
    assert tm.js_divergence([2, 2], [3, 0]) == pytest.approx(tm.js_divergence([1, 0], [1, 1]), rel=1e-12)


def test_disclosure_is_max_js_over_classes():
    counts = np.array([[2, 0], [1, 1], [1, 3]])  # table distribution (4/8, 4/8)
    q = (0.25, 0.75)
    m = (0.375, 0.625)
    js3 = 0.5 * (0.5 * math.log2(0.5 / m[0]) + 0.5 * math.log2(0.5 / m[1])) \
        + 0.5 * (q[0] * math.log2(q[0] / m[0]) + q[1] * math.log2(q[1] / m[1]))
    js1 = tm.js_divergence([0.5, 0.5], [1, 0])
    assert js1 > js3 > 0
    assert tm.disclosure(counts) == pytest.approx(js1, rel=1e-12)
    assert tm.disclosure(counts[1:], p=np.array([0.5, 0.5])) == pytest.approx(js3, rel=1e-12)


def test_table_disclosure_groups_rows_by_identical_quasi_identifiers():
    df = pd.DataFrame({"r": [0, 1, 2, 3, 4, 5, 6, 7], "x": [0., 0, 1, 1, 2, 2, 2, 2],
                       "s": ["a", "a", "a", "b", "a", "b", "b", "b"]})
    cols = tm.TierColumns.make(["x"], "s", "r")
    assert tm.table_disclosure(df, cols) == pytest.approx(tm.disclosure(np.array([[2, 0], [1, 1], [1, 3]])))


def test_weighted_distance_and_table_distance():
    assert tm.weighted_distance([0, 0], [2, 2], [0.25, 0.75]) == pytest.approx(2.0)
    assert tm.weighted_distance([0, 0], [2, 0], [0.25, 0.75]) == pytest.approx(1.0)
    assert tm.table_distance([[0, 0], [0, 0]], [[2, 2], [2, 0]], [0.25, 0.75]) == pytest.approx(3.0)


def test_utility_loss_hand_examples():
    x = np.array([[0.], [2.], [4.], [6.]])  # mean 3, d(T, T~) = 3 + 1 + 1 + 3 = 8
    assert tm.utility_loss(x, x, [1.0]) == 0.0
    assert tm.utility_loss(tm.class_means(x, np.array([0, 0, 0, 1])), x, [1.0]) == pytest.approx(0.25)  # 1+1+1+3 = 6
    assert tm.utility_loss(tm.class_means(x, np.array([0, 1, 1, 0])), x, [1.0]) == pytest.approx(1.0)  # all at 3
    assert tm.utility_loss(np.full((4, 1), 3.0), x, [1.0]) == pytest.approx(1.0)
    # 2-D with weights: rows (0,0), (2,0), (0,4), (2,4); mean (1,2); w = (0.5, 0.5)
    y = np.array([[0., 0], [2, 0], [0, 4], [2, 4]])
    base = 4 * math.sqrt(0.5 * 1 + 0.5 * 4)
    merged = tm.class_means(y, np.array([0, 0, 1, 1]))  # (1,0) and (1,4): each row at distance sqrt(0.5*4) = sqrt 2
    assert tm.utility_loss(merged, y, [0.5, 0.5]) == pytest.approx(1 - 4 * math.sqrt(2) / base)


def test_class_means_keep_the_table_mean():
    rng = np.random.default_rng(7)  # test data only
    x = rng.normal(size=(50, 3))
    labels = rng.integers(0, 6, size=50)
    np.testing.assert_allclose(tm.class_means(x, labels).mean(axis=0), x.mean(axis=0), atol=1e-12)


def test_thresholds_are_exact_and_decreasing():
    assert tm.thresholds("0.05", 3) == [Fraction(3, 20), Fraction(1, 10), Fraction(1, 20)]
    assert tm.thresholds("1/40", 1) == [Fraction(1, 40)]


def test_fla_look_ahead_rule():
    assert tm.fla_choose(2.0, 3.0, 0.9)        # 4 > 3.9: publish the stricter table
    assert not tm.fla_choose(2.0, 3.0, 1.0)    # tie goes to the current-level table
    assert not tm.fla_choose(1.0, 3.0, 0.0)


@pytest.mark.parametrize("alg", tm.ALGORITHMS)
def test_every_tier_meets_its_threshold_and_sanitizes_the_previous(german, chains, alg):
    df, cols = german
    chain = chains[alg]
    assert [t.threshold for t in chain] == [Fraction(9, 100), Fraction(6, 100), Fraction(3, 100)]
    prev = df[[cols.row_id, *cols.quasi_identifiers, cols.sensitive]]
    previous_ul = 0.0
    for t in chain:
        p = tm.table_disclosure(t.table, cols)
        assert p == pytest.approx(t.disclosure)
        assert p < float(t.threshold)
        assert tm.is_sanitization(prev, t.table, cols)
        assert previous_ul - 1e-12 <= t.utility_loss <= 1.0
        assert t.table[cols.sensitive].tolist() == prev.sort_values(cols.row_id)[cols.sensitive].tolist()
        prev, previous_ul = t.table, t.utility_loss
    assert chain[-1].table[list(cols.quasi_identifiers)].drop_duplicates().shape[0] > 1  # not the trivial table


def test_is_sanitization_detects_a_split_class():
    cols = tm.TierColumns.make(["x"], "s", "r")
    prev = pd.DataFrame({"r": [0, 1, 2, 3], "x": [1.0, 1.0, 5.0, 7.0], "s": [0, 1, 0, 1]})
    merged = prev.assign(x=[1.0, 1.0, 6.0, 6.0])
    split = prev.assign(x=[1.0, 3.0, 3.0, 7.0])
    assert tm.is_sanitization(prev, merged, cols)
    assert not tm.is_sanitization(prev, split, cols)


def test_fla_keeps_at_least_the_utility_of_bua_and_tda_per_step(german):
    df, cols = german
    values = tm.sensitive_values(df[cols.sensitive])
    ctx = tm.table_context(df.astype({c: float for c in cols.quasi_identifiers}), cols, values)
    u = {}
    for alg in tm.ALGORITHMS:
        out = tm.sanitize(df, cols, 0.05, alg, values=values)
        u[alg] = tm.utility(out[list(cols.quasi_identifiers)].to_numpy(float), cols.weights, ctx.mean)
    assert u["fla"] >= max(u["bua"], u["tda"]) * (1 - 1e-9)


def test_tda_does_not_depend_on_max_node_rows_and_fla_meets_thresholds_with_it(german):
    df, cols = german
    df = df.iloc[:300]
    whole = tm.run_chain(df, cols, "0.05", 2, "tda", surrogate_ids=False)
    by_levels = tm.run_chain(df, cols, "0.05", 2, "tda", max_node_rows=40, surrogate_ids=False)
    for a, b in zip(whole, by_levels):
        pd.testing.assert_frame_equal(a.table, b.table, check_exact=True)
    for t in tm.run_chain(df, cols, "0.05", 2, "fla", max_node_rows=40):
        assert t.disclosure < float(t.threshold)


def test_same_chain_twice_gives_identical_tables_even_from_shuffled_rows(german):
    df, cols = german
    df = df.iloc[:400]
    first = tm.run_chain(df, cols, "0.04", 2, "fla", surrogate_ids=False)
    again = tm.run_chain(df.sample(frac=1.0, random_state=3), cols, "0.04", 2, "fla", surrogate_ids=False)
    for a, b in zip(first, again):
        pd.testing.assert_frame_equal(a.table, b.table, check_exact=True)
        assert a.disclosure == b.disclosure


def test_ties_are_broken_by_row_number():
    # identical quasi-identifiers are one class; a duplicate QI pair never separates
    df = pd.DataFrame({"r": [5, 1, 3, 0, 2, 4], "x": [1.0, 1.0, 2.0, 2.0, 9.0, 9.0], "s": [0, 1, 0, 1, 0, 1]})
    cols = tm.TierColumns.make(["x"], "s", "r")
    for alg in tm.ALGORITHMS:
        # δ = 0.3 < 0.311, the singleton disclosure of (1/2, 1/2); the input's ids kept
        chain = tm.run_chain(df, cols, "0.3", 1, alg, surrogate_ids=False)
        out = chain[0].table
        assert tm.is_sanitization(df, out, cols)
        assert out["r"].tolist() == [0, 1, 2, 3, 4, 5]


@pytest.mark.parametrize("delta", [0, -0.1, "0", "abc", float("nan"), float("inf")])
def test_bad_delta_names_the_value(delta):
    with pytest.raises(InvalidParameterError, match="delta"):
        tm.thresholds(delta, 3)


@pytest.mark.parametrize("hops", [0, -2, 1.5, True])
def test_bad_hops_names_the_value(hops):
    with pytest.raises(InvalidParameterError, match=str(hops)):
        tm.thresholds("0.05", hops)


def test_bad_columns_and_values_are_named(german):
    df, cols = german
    with pytest.raises(SchemaMismatchError, match="'nope'"):
        tm.run_chain(df, tm.TierColumns.make(["nope"], "credit_class", "record_id"), "0.05", 2)
    with pytest.raises(SchemaMismatchError, match="'credit_grade'"):
        tm.run_chain(df, tm.TierColumns.make(["age"], "credit_grade", "record_id"), "0.05", 2)
    with_null = df.copy()
    with_null.loc[7, "age"] = np.nan
    with pytest.raises(DomainError, match="'age'"):
        tm.run_chain(with_null, cols, "0.05", 2)
    null_sensitive = df.astype({"credit_class": "Int64"})
    null_sensitive.loc[3, "credit_class"] = pd.NA
    with pytest.raises(DomainError, match="'credit_class'"):
        tm.run_chain(null_sensitive, cols, "0.05", 2)
    dup = df.copy()
    dup.loc[1, "record_id"] = 0
    with pytest.raises(DomainError, match="record_id"):
        tm.run_chain(dup, cols, "0.05", 2)
    text = df.assign(age=df["age"].astype(str))
    with pytest.raises(SchemaMismatchError, match="'age'"):
        tm.run_chain(text, cols, "0.05", 2)
    with pytest.raises(InvalidParameterError, match="'greedy'"):
        tm.run_chain(df, cols, "0.05", 2, "greedy")
    with pytest.raises(InvalidParameterError, match="2"):
        tm.TierColumns.make(["a", "b"], "s", "r", weights=[1.0])
    with pytest.raises(InvalidParameterError, match="-1"):
        tm.TierColumns.make(["a", "b"], "s", "r", weights=[2.0, -1.0])
    with pytest.raises(InvalidParameterError, match="'s'"):
        tm.TierColumns.make(["a", "s"], "s", "r")


def test_cli_rejects_bad_delta_and_hops_before_spark(capsys, tmp_path):
    from fragrelease.jobs.cli import run_cli

    assert run_cli(["tiers", "run", "--delta", "-0.5", "--hops", "3", "--output", str(tmp_path)]) == 2
    assert "-0.5" in capsys.readouterr().err
    assert run_cli(["tiers", "run", "--delta", "0.05", "--hops", "0", "--output", str(tmp_path)]) == 2
    assert "0" in capsys.readouterr().err
    assert run_cli(["tiers", "run", "--delta", "0.05", "--hops", "2", "--weight", "age:3", "--output", str(tmp_path)]) == 2
    assert "age:3" in capsys.readouterr().err


def test_threshold_at_or_above_the_singleton_disclosure_is_refused(german):
    """Before: δ = 0.5, l = 1 on German Credit returned T_1 equal to T_0 (P(T_0) ≤ 0.493 < 0.5)."""
    df, cols = german
    qi = list(cols.quasi_identifiers)
    s = tm.js_divergence([0.7, 0.3], [0.0, 1.0])  # German Credit: 700 good, 300 bad; a lone "bad" record
    assert s == pytest.approx(0.4934, abs=1e-4)
    assert tm.singleton_disclosure([700, 300]) == pytest.approx(s, rel=1e-12)
    assert tm.singleton_disclosure([1.0]) == 0.0  # one sensitive value: every threshold is refused
    with pytest.raises(ThresholdTooLooseError, match=r"l·δ = 0\.5 .*tier 1.*0\.4934") as exc:
        tm.run_chain(df, cols, "0.5", 1, "bua")
    assert (exc.value.tier, exc.value.threshold) == (1, Fraction(1, 2))
    assert exc.value.singleton_disclosure == pytest.approx(s, rel=1e-12)
    # the check is on l·δ: 4 × 0.125 = 0.5 refuses the chain although δ alone is small
    with pytest.raises(ThresholdTooLooseError, match=r"l = 4, δ = 0\.125.*tier 1 of 4"):
        tm.run_chain(df, cols, "0.125", 4, "bua")
    with pytest.raises(ThresholdTooLooseError, match=r"tiers 1\.\.2 of 3"):
        tm.run_chain(df, cols, "0.25", 3, "bua")  # thresholds 0.75, 0.5, 0.25
    # exactly at the singleton disclosure: refused too
    with pytest.raises(ThresholdTooLooseError):
        tm.refuse_loose_thresholds([Fraction(s)], s)
    # just below: accepted, and the tier is sanitized (lone "bad" records are merged)
    tier = tm.run_chain(df, cols, "0.49", 1, "bua", surrogate_ids=False)[0]
    assert tier.disclosure < 0.49
    assert not np.array_equal(tier.table[qi].to_numpy(float), df.sort_values("record_id")[qi].to_numpy(float))


def test_tiers_carry_surrogate_ids_and_rows_keep_their_classes(german, monkeypatch):
    """Before: every tier's id column was the input's record_id."""
    df, cols = german
    df = df.iloc[:300].sample(frac=1.0, random_state=5)  # input order ≠ id order
    qi = list(cols.quasi_identifiers)
    drawn = []

    def spy(n):  # the real CSPRNG draw, recorded so the test can map surrogates back
        ids = real(n)
        drawn.append(ids)
        return ids

    import fragrelease.tiers.chain as tchain

    real = tm.draw_surrogate_ids
    monkeypatch.setattr(tchain, "draw_surrogate_ids", spy)
    chain = tm.run_chain(df, cols, "0.04", 3, "fla")
    assert len(drawn) == 1  # drawn once, before T_1; every tier carries the same surrogates
    ids = drawn[0]
    input_ids = df["record_id"].to_numpy()
    assert len(np.unique(ids)) == len(ids)
    assert not set(ids.tolist()) & set(input_ids.tolist())
    by_surrogate = input_ids[np.argsort(ids)]
    assert not (np.all(np.diff(by_surrogate) > 0) or np.all(np.diff(by_surrogate) < 0))  # not monotone
    x0 = df[qi].to_numpy(float)
    for t in chain:
        assert sorted(t.table["record_id"].tolist()) == sorted(ids.tolist())
        assert not np.array_equal(t.table["record_id"].to_numpy(), np.sort(input_ids))
        rows = t.table.set_index("record_id").loc[ids]  # row j of df ↔ surrogate ids[j]
        assert rows["credit_class"].tolist() == df["credit_class"].tolist()
        labels = rows[qi].groupby(qi, sort=False).ngroup().to_numpy()
        # each row's quasi-identifiers are the mean of its class's *own* source rows
        np.testing.assert_allclose(rows[qi].to_numpy(float), tm.class_means(x0, labels), rtol=0, atol=1e-9)
        assert t.disclosure < float(t.threshold)
    # with the same surrogates the chain is deterministic (what keeps colluders to the best tier)
    again = tm.run_chain(df.assign(record_id=ids), cols, "0.04", 3, "fla", surrogate_ids=False)
    for a, b in zip(chain, again):
        pd.testing.assert_frame_equal(a.table, b.table, check_exact=True)
