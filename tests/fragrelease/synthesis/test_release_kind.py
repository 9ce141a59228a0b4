"""The synthetic release kind without Spark: configuration, spec, messages and their checks, preview, guarantee.

docs/specification.md §10. The Spark side (two owner rounds, the aggregator's verification and commit,
the ledger's spends) is tested in tests/jobs/synthesis/test_synthetic_release.py.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from fragrelease.errors import ConfigError, InvalidParameterError, ManifestMismatchError
from fragrelease.protocol.config import config_from_dict
from fragrelease.protocol.kind import release_kind
from fragrelease.rng.diffgen import SeededDiffGenRandomness
from fragrelease.rng.laplace import FastLaplace
from fragrelease.schemas.datasets import resolve_schema
from fragrelease.synthesis.mechanism import measure_round_one
from fragrelease.synthesis.preview import synthesis_preview
from fragrelease.synthesis.protocol import (
    Measurement,
    RoundOneMessage,
    RoundTwoMessage,
    check_round_one,
    check_round_two,
    cliques_from_round_one,
    round_one_digest,
    round_two_digest,
    synthesis_spec,
)


def _cfg(**kw):
    data = dict(name="s", dataset="adult-income", fragmentation="horizontal", epsilon="1", k=50, linkage="synthetic",
                synthesis_target="income", owners=[{"name": "a", "rows": 22611}, {"name": "b", "rows": 22611}],
                work_dir="/tmp/fr-test-synth/work", output="/tmp/fr-test-synth/out")
    data.update(kw)
    return config_from_dict(data)


def test_vertical_keep_id_and_risk_check_are_refused_with_one_line_each():
    with pytest.raises(ConfigError, match=r"linkage: synthetic is for horizontal fragments only") as e:
        _cfg(fragmentation="vertical", owners=[{"name": "a", "attributes": ["age"]}, {"name": "b", "attributes": ["sex"]}])
    assert "\n" not in str(e.value).strip()
    with pytest.raises(ConfigError, match=r"keep_id: true cannot be used with linkage: synthetic"):
        _cfg(keep_id=True)
    with pytest.raises(ConfigError, match=r"risk_check: not available with linkage: synthetic"):
        _cfg(risk_check={"attacks": 100})
    with pytest.raises(ConfigError, match=r"synthesis_target/synthesis_bins/synthesis_collusion: for linkage: synthetic only"):
        _cfg(linkage="linked")
    with pytest.raises(ConfigError, match="synthesis_bins"):
        _cfg(synthesis_bins=1)


def test_the_spec_splits_epsilon_exactly_and_refuses_an_unknown_target():
    attrs = resolve_schema("adult-income").protected
    spec = synthesis_spec(attrs, Fraction(1), target="income", bins=10)
    assert spec.round_one_epsilon + spec.round_two_epsilon == Fraction(1)
    assert (spec.budget.one_way, spec.round_one_epsilon - spec.budget.one_way) == (Fraction(1, 5), Fraction(1, 20))
    assert spec.clique_count == 9 + 10  # the tree over 10 features, the income star
    assert spec.domain.sizes["age"] == 10 and spec.domain.sizes["income"] == 2
    with pytest.raises(InvalidParameterError, match=r"synthesis_target: 'salary' is not a released attribute"):
        synthesis_spec(attrs, Fraction(1), target="salary")
    with pytest.raises(InvalidParameterError, match="at least 2 released attributes"):
        synthesis_spec(attrs[:1], Fraction(1))


def _spec():
    attrs = [a for a in resolve_schema("adult-income").protected if a.name in ("age", "sex", "race", "income")]
    return synthesis_spec(attrs, Fraction(2), target="income", bins=4)


def _round_one(spec, seed=1):
    gen = np.random.default_rng(seed)
    sizes = spec.domain.sizes
    one = {a: gen.integers(0, 50, sizes[a]).astype(float) for a in spec.domain.names}
    feats = spec.features
    pairs = {(a, b): gen.integers(0, 20, (sizes[a], sizes[b])).astype(float)
             for i, a in enumerate(feats) for b in feats[i + 1:]}
    return measure_round_one(spec.domain, one, pairs, spec.budget, target=spec.target,
                             randomness=SeededDiffGenRandomness(seed), noise=FastLaplace())


def _message(spec, r1, **kw):
    one_way = tuple(Measurement.of((a,), r1.one_way[a]) for a in spec.domain.names)
    fields = dict(plan_id="p1", owner="a", dataset="adult-income", epsilon=spec.round_one_epsilon, n_records=100,
                  content_digest=round_one_digest(one_way, r1.edges), created_at="now", one_way=one_way,
                  edges=r1.edges)
    fields.update(kw)
    return RoundOneMessage(**fields)


def test_round_one_messages_are_checked_against_the_plan_and_their_digest():
    spec = _spec()
    r1 = _round_one(spec)
    msg = RoundOneMessage.model_validate_json(_message(spec, r1).to_json())  # a JSON round trip
    got = check_round_one(msg, spec, plan_id="p1", owner="a", n_records=100)
    assert got.edges == r1.edges and all(np.array_equal(got.one_way[a], r1.one_way[a]) for a in spec.domain.names)
    with pytest.raises(ManifestMismatchError, match="is for plan 'p0'"):
        check_round_one(_message(spec, r1, plan_id="p0"), spec, plan_id="p1", owner="a", n_records=100)
    with pytest.raises(ManifestMismatchError, match="names owner 'b'"):
        check_round_one(_message(spec, r1, owner="b"), spec, plan_id="p1", owner="a", n_records=100)
    with pytest.raises(ManifestMismatchError, match=r"spent ε = 1, the plan gives"):
        check_round_one(_message(spec, r1, epsilon=Fraction(1)), spec, plan_id="p1", owner="a", n_records=100)
    changed = list(_message(spec, r1).one_way)
    changed[0] = Measurement(attributes=changed[0].attributes, counts=(1e6,) + changed[0].counts[1:])
    with pytest.raises(ManifestMismatchError, match="does not match its content digest"):
        check_round_one(_message(spec, r1, one_way=tuple(changed)), spec, plan_id="p1", owner="a", n_records=100)
    swapped = list(_message(spec, r1).one_way)
    swapped[0], swapped[1] = swapped[1], swapped[0]
    names = spec.domain.names
    with pytest.raises(ManifestMismatchError) as info:  # the first marginal that differs, not the plan's whole list
        check_round_one(_message(spec, r1, one_way=tuple(swapped), content_digest=round_one_digest(swapped, r1.edges)),
                        spec, plan_id="p1", owner="a", n_records=100)
    got = [names[1], names[0], *names[2:]]  # a short list is shown whole, a long one by its first difference
    assert str(info.value) == (f"owner 'a': synthesis round one measures other 1-way marginals than the plan's "
                               f"attributes (1-way marginal is {got!r}, the plan's is {list(names)!r}): refused")
    bad_edges = (("age", "age"),) + tuple(r1.edges[1:])
    with pytest.raises(ManifestMismatchError, match="pairs of distinct features"):
        check_round_one(_message(spec, r1, edges=bad_edges, content_digest=round_one_digest(
            _message(spec, r1).one_way, bad_edges)), spec, plan_id="p1", owner="a", n_records=100)


def test_every_party_derives_the_same_cliques_and_round_two_must_measure_them():
    spec = _spec()
    rounds = [_round_one(spec, seed) for seed in (1, 2, 3)]
    cliques = cliques_from_round_one(spec, rounds)
    assert cliques == cliques_from_round_one(spec, list(rounds))  # deterministic post-processing
    assert len(cliques) == spec.clique_count and ("income", "age") in cliques
    measured = tuple(Measurement.of(c, np.zeros([spec.domain.sizes[a] for a in c])) for c in cliques)
    msg = RoundTwoMessage(plan_id="p1", owner="a", dataset="adult-income", epsilon=spec.round_two_epsilon,
                          n_records=100, content_digest=round_two_digest(measured), created_at="now", cliques=measured)
    assert set(check_round_two(msg, spec, cliques, plan_id="p1", owner="a", n_records=100)) == set(cliques)
    other = measured[::-1]
    with pytest.raises(ManifestMismatchError, match="measured other cliques"):
        check_round_two(msg.model_copy(update={"cliques": other, "content_digest": round_two_digest(other)}), spec,
                        cliques, plan_id="p1", owner="a", n_records=100)
    short = (Measurement(attributes=cliques[0], counts=(0.0,)),) + measured[1:]
    with pytest.raises(ManifestMismatchError, match="cells, not the"):
        check_round_two(msg.model_copy(update={"cliques": short, "content_digest": round_two_digest(short)}), spec,
                        cliques, plan_id="p1", owner="a", n_records=100)


def test_the_preview_gives_the_laplace_scale_of_each_measurement_from_public_terms():
    spec = synthesis_spec(resolve_schema("adult-income").protected, Fraction(1), target="income")
    pv = synthesis_preview(spec, owners=4, records=45_222)
    one, tree, star = pv.rows
    assert one.epsilon_each == Fraction(1, 55) and one.scale == pytest.approx(110.0)  # 2 / (ε/5 / 11)
    assert tree.epsilon_each == star.epsilon_each == Fraction(3, 4) / 19
    assert tree.summed_sd == pytest.approx(np.sqrt(8) * 2 / (0.75 / 19))
    assert star.cells == (4, 82) and one.mean_count == (45_222 / 41, 45_222 / 2)
    assert sum(r.epsilon_total for r in pv.rows) == Fraction(1) - Fraction(1, 20)  # the rest is the selection
    assert pv.warning_text() is None
    tiny = synthesis_preview(synthesis_spec(resolve_schema("adult-income").protected, Fraction(1, 100)), 4, 1_000)
    assert "1-way marginal" in (tiny.warning_text() or "")


def test_the_guarantee_of_a_synthetic_release_is_whole_table_epsilon_dp():
    g = release_kind("synthetic").guarantee(mechanism="idp-ir", epsilon="1", composition="parallel",
                                            category_order="declared")
    assert g["table"].startswith("whole table ε-DP, ε = 1")
    assert "differential privacy" in g["notion"] and "individual" not in g["notion"]
    assert "aggregator" in g["against"] and "write access" in g["against"]
