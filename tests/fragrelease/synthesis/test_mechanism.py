"""The marginal-synthesis mechanism (docs/specification.md §10): coding, budget, selection, model, sampler."""
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from fragrelease.errors import InvalidParameterError
from fragrelease.rng.diffgen import SeededDiffGenRandomness
from fragrelease.rng.laplace import FastLaplace
from fragrelease.synthesis.domain import CodedAttribute, SynthesisDomain, contingency
from fragrelease.synthesis.mechanism import (
    SamplingPlan,
    SynthesisBudget,
    add_owners,
    choose_tree,
    cliques_to_measure,
    fit_model,
    measure_cliques,
    measure_round_one,
    noisy_total,
    sample_codes,
)


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
    assert b.spent(dom, cliques, selection_steps=2) <= 1
    with pytest.raises(InvalidParameterError):
        SynthesisBudget(Fraction(0))
    with pytest.raises(InvalidParameterError):
        SynthesisBudget(Fraction(1), Fraction(1, 2), Fraction(1, 2))


def _correlated(n, seed):
    """x drives y exactly; z independent of both."""
    gen = np.random.default_rng(seed)
    x = gen.integers(0, 3, n)
    return pd.DataFrame({"x": x, "y": x.copy(), "z": gen.integers(0, 3, n)})


def test_selection_finds_the_dependent_pair_at_a_large_budget():
    dom = SynthesisDomain(tuple(CodedAttribute(n, ("a", "b", "c")) for n in "xyz"))
    codes = _correlated(3000, 1)
    one = {a: contingency(codes, (a,), dom.sizes) for a in dom.names}
    pairs = {(a, b): contingency(codes, (a, b), dom.sizes) for a, b in (("x", "y"), ("x", "z"), ("y", "z"))}
    hits = 0
    for seed in range(20):
        r = measure_round_one(dom, one, pairs, SynthesisBudget(Fraction(10)), randomness=SeededDiffGenRandomness(seed),
                              noise=FastLaplace())
        assert len(r.edges) == 2
        hits += ("x", "y") in r.edges
    assert hits >= 19
    assert choose_tree(dom, [[("x", "y"), ("y", "z")], [("x", "y"), ("x", "z")], [("y", "x"), ("y", "z")]]) == \
        (("x", "y"), ("y", "z"))


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
    rand = SeededDiffGenRandomness(5)
    rounds = []
    for frag in owners:
        one = {a: contingency(frag, (a,), dom.sizes) for a in dom.names}
        pairs = {(a, b): contingency(frag, (a, b), dom.sizes) for a, b in (("x", "y"), ("x", "z"), ("y", "z"))}
        rounds.append(measure_round_one(dom, one, pairs, budget, randomness=rand, noise=FastLaplace()))
    tree = choose_tree(dom, [r.edges for r in rounds])
    cliques = cliques_to_measure(dom, tree)
    measured = [measure_cliques(dom, {c: contingency(f, c, dom.sizes) for c in cliques}, cliques, budget,
                                noise=FastLaplace()) for f in owners]
    one_sums, clique_sums = add_owners(rounds, measured)
    plan = fit_model(dom, one_sums, budget.one_way_noise(dom), clique_sums, budget.clique_noise(dom, cliques),
                     owners=3, iters=300)
    n = noisy_total(one_sums, budget.one_way_noise(dom))
    assert abs(n - 6000) < 100
    out = pd.DataFrame(sample_codes(plan, n, _uniforms(4)))
    assert ("x", "y") in tree
    assert np.mean(out["x"] == out["y"]) > 0.95  # the dependence survives
    assert abs(np.corrcoef(out["x"], out["z"])[0, 1]) < 0.1  # and no false one appears
    p = np.bincount(out["z"], minlength=3) / n
    assert np.abs(p - np.bincount(codes["z"], minlength=3) / 6000).max() < 0.03


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
    from fragrelease.synthesis.mechanism import MISSING_MBI, compile_plan

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
