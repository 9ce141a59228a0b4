"""The marginal-synthesis mechanism (docs/specification.md §10): coding, budget, selection, model, sampler."""
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from fragrelease.errors import InvalidParameterError
from fragrelease.rng.polya import SeededShareSource
from fragrelease.synthesis.domain import CodedAttribute, SynthesisDomain, contingency
from fragrelease.synthesis.mechanism import (
    SynthesisBudget,
    add_vectors,
    choose_tree,
    cliques_to_measure,
    default_collusion_bound,
    feature_pairs,
    honest_parts,
    measure_shares,
    pair_score,
    round_two_cliques,
)
from fragrelease.synthesis.model import Measured, SamplingPlan, fit_model, noisy_total, sample_codes


def _uniforms(seed):
    gen = np.random.default_rng(seed)
    return lambda size: gen.random(size)


def test_integer_bins_decode_to_whole_numbers_inside_their_bin():
    age = CodedAttribute.numeric("age", 17, 90, bins=10, integer=True)
    assert age.edges[0] == 17 and age.edges[-1] == 90 and all(float(e).is_integer() for e in age.edges)
    values = pd.Series(np.arange(17, 91))
    codes = age.encode(values)
    assert codes.min() == 0 and codes.max() == age.size - 1
    decoded = age.decode(codes, _uniforms(0))
    assert np.all(decoded == np.floor(decoded))
    assert np.array_equal(age.encode(pd.Series(decoded)), codes)  # every value decodes into its own bin


def test_a_bad_value_is_named_with_its_source_and_column():
    dom = SynthesisDomain((CodedAttribute("sex", ("Female", "Male")), CodedAttribute.numeric("age", 17, 90)))
    with pytest.raises(InvalidParameterError, match=r"owner clinic-a: column 'sex': value 'F' is not one of"):
        dom.encode(pd.DataFrame({"sex": ["Male", "F"], "age": [30, 40]}), source="owner clinic-a")
    with pytest.raises(InvalidParameterError, match=r"column 'age': value 120 lies outside the declared domain"):
        dom.encode(pd.DataFrame({"sex": ["Male", "Male"], "age": [30, 120]}))


def test_the_budget_is_exact_and_spent_within_epsilon():
    dom = SynthesisDomain(tuple(CodedAttribute(n, ("a", "b", "c")) for n in "xyz"))
    b = SynthesisBudget(Fraction(1))
    assert b.one_way + b.selection + b.cliques == 1
    cliques = (("x", "y"), ("y", "z"))
    assert b.spent(dom, feature_pairs(dom, None), cliques) <= 1
    with pytest.raises(InvalidParameterError):
        SynthesisBudget(Fraction(0))
    with pytest.raises(InvalidParameterError):
        SynthesisBudget(Fraction(1), Fraction(1, 2), Fraction(1, 2))


def test_the_default_collusion_bound_and_its_noise_factor():
    assert [default_collusion_bound(m) for m in (1, 2, 3, 4, 16, 64)] == [0, 1, 1, 1, 5, 21]
    for m in range(1, 200):
        t = default_collusion_bound(m)
        assert 0 <= t < m
        assert m / honest_parts(m, t) <= (2 if m == 2 else 1.5)  # the variance factor m/(m − t)
    with pytest.raises(InvalidParameterError, match=r"synthesis_collusion must lie in \[0, 3\] for 4 owners"):
        honest_parts(4, 4)
    with pytest.raises(InvalidParameterError):
        default_collusion_bound(0)


def _correlated(n, seed):
    """x drives y exactly; z independent of both."""
    gen = np.random.default_rng(seed)
    x = gen.integers(0, 3, n)
    return pd.DataFrame({"x": x, "y": x.copy(), "z": gen.integers(0, 3, n)})


def _decoded(dom, frags, noise, seed):
    """Every owner's counts plus its share, added up (what secure aggregation decodes)."""
    source = SeededShareSource(seed)
    return add_vectors([measure_shares(dom, {c: contingency(f, c, dom.sizes) for c in noise}, noise, source=source)
                        for f in frags])


def test_selection_finds_the_dependent_pair_from_the_decoded_sums():
    dom = SynthesisDomain(tuple(CodedAttribute(n, ("a", "b", "c")) for n in "xyz"))
    codes = _correlated(3000, 1)
    budget = SynthesisBudget(Fraction(4))
    noise = {**budget.one_way_noise(dom, 2), **budget.selection_noise(feature_pairs(dom, None), 2)}
    assert list(noise) == list(round_two_cliques(dom, None))
    hits = 0
    for seed in range(20):
        sums = _decoded(dom, [codes.iloc[0::3], codes.iloc[1::3], codes.iloc[2::3]], noise, seed)
        tree = choose_tree(dom, sums, {c: n.variance_of_sum(3) for c, n in noise.items()})
        assert len(tree) == 2
        hits += ("x", "y") in tree
    assert hits >= 19


def test_the_pair_score_does_not_favour_many_categories_for_their_noise():
    # an independent pair of 41 x 16 cells against an independent pair of 2 x 2 cells, both measured with the
    # same per-cell noise: the score's expectation is 0 for both, and the wide pair's spread is penalized, so it
    # outscores the small one in far fewer than half of the draws (without the correction: almost always)
    gen = np.random.default_rng(7)
    variance = 400.0 ** 2
    wins = 0
    for _ in range(200):
        big = 100.0 + gen.laplace(0, 400 / np.sqrt(2), (41, 16))
        small = 16400.0 / 4 + gen.laplace(0, 400 / np.sqrt(2), (2, 2))
        sb = pair_score(big, variance, np.full(41, 1 / 41), np.full(16, 1 / 16))
        ss = pair_score(small, variance, np.full(2, 0.5), np.full(2, 0.5))
        wins += sb > ss
    assert wins <= 20
    naive = [float(np.sum((100.0 + gen.laplace(0, 400 / np.sqrt(2), (41, 16)) - 100.0) ** 2)) for _ in range(5)]
    assert min(naive) > 100 * 400.0 ** 2  # what an uncorrected squared distance gives the wide pair: pure noise


def test_a_dependent_wide_pair_still_wins_on_its_signal():
    p = np.full(10, 0.1)
    table = np.diag(np.full(10, 300.0))  # 3,000 records, x = y: strongly dependent
    assert pair_score(table, 50.0 ** 2, p, p) > 0


def test_the_sampler_keeps_independent_children_independent():
    # parent a, children b and c independent given a (each a fair coin whatever a is): a comonotone
    # sampler (mbi 1.1.0's "round") puts b = c in almost every row
    cdf_a = np.array([0.5, 1.0])
    cdf_child = np.array([[0.5, 1.0], [0.5, 1.0]])
    plan = SamplingPlan((("a", (), cdf_a), ("b", ("a",), cdf_child), ("c", ("a",), cdf_child)))
    out = sample_codes(plan, 20_000, _uniforms(3), chunk=7_000)
    assert {len(v) for v in out.values()} == {20_000}
    assert abs(np.corrcoef(out["b"], out["c"])[0, 1]) < 0.05
    assert abs(np.mean(out["b"] == out["c"]) - 0.5) < 0.02
    assert abs(out["a"].mean() - 0.5) < 0.02


def test_protocol_end_to_end_keeps_the_dependence_and_the_marginals():
    dom = SynthesisDomain(tuple(CodedAttribute(n, ("a", "b", "c")) for n in "xyz"))
    codes = _correlated(6000, 2)
    owners = [codes.iloc[i::3] for i in range(3)]
    budget = SynthesisBudget(Fraction(4))
    parts = honest_parts(3, default_collusion_bound(3))
    first = {**budget.one_way_noise(dom, parts), **budget.selection_noise(feature_pairs(dom, None), parts)}
    sums = _decoded(dom, owners, first, 5)
    variances = {c: n.variance_of_sum(3) for c, n in first.items()}
    tree = choose_tree(dom, sums, variances)
    cliques = cliques_to_measure(dom, tree)
    second = budget.clique_noise(cliques, parts)
    sums2 = _decoded(dom, owners, second, 6)
    one = [Measured((a,), sums[(a,)], float(np.sqrt(variances[(a,)]))) for a in dom.names]
    plan = fit_model(dom, one + [Measured(c, sums2[c], float(np.sqrt(n.variance_of_sum(3))))
                                 for c, n in second.items()], iters=300)
    n = noisy_total(one)
    assert abs(n - 6000) < 100
    out = pd.DataFrame(sample_codes(plan, n, _uniforms(4)))
    assert ("x", "y") in tree
    assert np.mean(out["x"] == out["y"]) > 0.95  # the dependence survives
    assert abs(np.corrcoef(out["x"], out["z"])[0, 1]) < 0.1  # and no false one appears
    p = np.bincount(out["z"], minlength=3) / n
    assert np.abs(p - np.bincount(codes["z"], minlength=3) / 6000).max() < 0.03


def test_the_decoded_sum_is_the_unions_counts_plus_the_shares_whatever_the_split():
    dom = SynthesisDomain(tuple(CodedAttribute(n, ("a", "b", "c")) for n in "xy"))
    codes = _correlated(900, 3)[["x", "y"]]
    noise = SynthesisBudget(Fraction(1)).one_way_noise(dom, 2)
    split = [codes.iloc[:100], codes.iloc[100:700], codes.iloc[700:]]
    sums = _decoded(dom, split, noise, 11)
    shares = [measure_shares(dom, {c: np.zeros(3) for c in noise}, noise, source=SeededShareSource(11))
              for _ in split]  # the same seeded shares on zero counts
    assert not np.array_equal(sums[("x",)], contingency(codes, ("x",), dom.sizes))  # noise was added
    with pytest.raises(InvalidParameterError, match="not whole numbers"):
        measure_shares(dom, {c: np.full(3, 0.5) for c in noise}, noise)
    assert shares  # shapes only: the exact-sum property itself is tested in tests/fragrelease/test_secagg.py


def test_bins_are_left_open_as_opendps_cuts():
    hours = CodedAttribute.numeric("hours", 1, 99, integer=True, cuts=range(10, 99, 10))
    codes = hours.encode(pd.Series([1, 10, 11, 40, 41, 90, 91, 99]))
    assert codes.tolist() == [0, 0, 1, 3, 4, 8, 9, 9]
    decoded = hours.decode(np.repeat(np.arange(hours.size), 200), _uniforms(1))
    assert np.array_equal(hours.encode(pd.Series(decoded)), np.repeat(np.arange(hours.size), 200))
    assert decoded.min() == 1 and decoded.max() == 99


def test_a_missing_mbi_is_one_line_naming_the_extra(monkeypatch):
    import sys

    from fragrelease.errors import MissingDependencyError
    from fragrelease.synthesis.model import MISSING_MBI, compile_plan

    monkeypatch.setitem(sys.modules, "mbi", None)
    with pytest.raises(MissingDependencyError) as exc:
        compile_plan(object())
    assert str(exc.value) == MISSING_MBI and "fragrelease[synthesis]" in MISSING_MBI and "\n" not in MISSING_MBI


def test_the_cliques_are_the_tree_and_the_targets_star_or_its_joint_triples():
    dom = SynthesisDomain(tuple(CodedAttribute(n, ("a", "b")) for n in ("t", "x", "y", "z")))
    tree = (("x", "y"), ("y", "z"))
    with pytest.raises(InvalidParameterError):
        cliques_to_measure(dom, tree, target="nobody")
    assert cliques_to_measure(dom, tree, target="t") == (("x", "y"), ("y", "z"), ("t", "x"), ("t", "y"), ("t", "z"))
    assert cliques_to_measure(dom, tree, target="t", joint=True) == (("t", "x", "y"), ("t", "y", "z"))
