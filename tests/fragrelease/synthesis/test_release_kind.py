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
from fragrelease.rng.polya import SeededShareSource
from fragrelease.schemas.datasets import resolve_schema
from fragrelease.secagg import KeyAgreementKey, encode_vector, mask, pair_keys, session_context
from fragrelease.synthesis.domain import contingency
from fragrelease.synthesis.mechanism import measure_shares
from fragrelease.synthesis.preview import synthesis_preview
from fragrelease.synthesis.protocol import (
    KeyMessage,
    MaskedMessage,
    MaskedVector,
    check_key_message,
    check_masked,
    cliques_from_sums,
    decode_round,
    key_digest,
    mask_label,
    masked_digest,
    synthesis_spec,
)


def _cfg(**kw):
    data = dict(name="s", dataset="adult-income", fragmentation="horizontal", epsilon="1", linkage="synthetic",
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
    with pytest.raises(ConfigError, match=r"synthesis_target: not used by linkage: linked \(for linkage: synthetic only"):
        _cfg(linkage="linked", k=50)
    with pytest.raises(ConfigError, match="synthesis_bins"):
        _cfg(synthesis_bins=1)


def test_the_spec_splits_epsilon_exactly_and_refuses_an_unknown_target():
    attrs = resolve_schema("adult-income").protected
    spec = synthesis_spec(attrs, Fraction(1), target="income", bins=10, owners=16)
    assert spec.round_epsilon(1) == 0 and spec.round_epsilon(2) + spec.round_epsilon(3) == Fraction(1)
    assert (spec.budget.one_way, spec.round_epsilon(2) - spec.budget.one_way) == (Fraction(1, 5), Fraction(1, 5))
    assert (spec.collusion, spec.parts) == (5, 11)  # the default t = ⌊16/3⌋
    assert synthesis_spec(attrs, Fraction(1), target="income", owners=16, collusion=15).parts == 1
    with pytest.raises(InvalidParameterError, match=r"synthesis_collusion must lie in \[0, 15\] for 16 owners"):
        synthesis_spec(attrs, Fraction(1), target="income", owners=16, collusion=16)
    assert spec.clique_count == 9 + 10  # the tree over 10 features, the income star
    assert spec.domain.sizes["age"] == 10 and spec.domain.sizes["income"] == 2
    with pytest.raises(InvalidParameterError, match=r"synthesis_target: 'salary' is not a released attribute"):
        synthesis_spec(attrs, Fraction(1), target="salary")
    with pytest.raises(InvalidParameterError, match="at least 2 released attributes"):
        synthesis_spec(attrs[:1], Fraction(1))


def _spec():
    attrs = [a for a in resolve_schema("adult-income").protected if a.name in ("age", "sex", "race", "income")]
    return synthesis_spec(attrs, Fraction(2), target="income", bins=4)


def _owners(spec, n):
    """n owners' fresh keys and the plan's participant list (plan order)."""
    keys = {f"o{i}": KeyAgreementKey.generate() for i in range(n)}
    return keys, tuple((name, k.public_hex()) for name, k in keys.items())


def _masked(spec, number, cliques, frag, name, key, participants, *, plan_id="p1", seed=1, **update):
    """Owner ``name``'s masked message of round ``number`` over fragment ``frag`` (a code table), as the owner writes it."""
    shares = measure_shares(spec.domain, {c: contingency(frag, c, spec.domain.sizes) for c in cliques},
                            spec.round_noise(number, cliques), source=SeededShareSource(seed))
    pk = pair_keys(name, key, dict(participants), context=session_context(plan_id, dict(participants)))
    vectors = tuple(MaskedVector(attributes=c, cells=encode_vector(mask(shares[c], own_name=name, keys=pk,
                                                                         label=mask_label(number, c)))) for c in cliques)
    check = encode_vector(mask(np.array([len(frag)]), own_name=name, keys=pk, label=mask_label(number, ())))
    fields = dict(kind=f"synthesis-round-{number}", plan_id=plan_id, owner=name, dataset="adult-income",
                  epsilon=spec.round_epsilon(number), n_records=len(frag), collusion=spec.collusion,
                  content_digest=masked_digest(participants, vectors, check), created_at="now",
                  participants=participants, vectors=vectors, check=check)
    fields.update(update)
    return MaskedMessage(**fields)


def _fragments(spec, n, rows=200, seed=3):
    gen = np.random.default_rng(seed)
    import pandas as pd

    table = pd.DataFrame({a: gen.integers(0, spec.domain.sizes[a], rows * n) for a in spec.domain.names})
    table["sex"] = table["income"] % spec.domain.sizes["sex"]  # a dependence the structure must find
    return [table.iloc[i * rows:(i + 1) * rows] for i in range(n)], table


def test_key_messages_are_checked_against_the_plan_and_their_digest():
    spec = _spec()
    key = KeyAgreementKey.generate().public_hex()
    fields = dict(plan_id="p1", owner="a", dataset="adult-income", n_records=100, collusion=0,
                  content_digest=key_digest(key), created_at="now", key_agreement=key)
    msg = KeyMessage.model_validate_json(KeyMessage(**fields).to_json())
    assert check_key_message(msg, spec, plan_id="p1", owner="a", n_records=100) == key
    for change, match in (({"plan_id": "p0"}, "is for plan 'p0'"), ({"owner": "b"}, "names owner 'b'"),
                          ({"collusion": 1}, "collusion bound t = 1"),
                          ({"key_agreement": "00" + key[2:]}, "does not match its content digest")):
        with pytest.raises(ManifestMismatchError, match=match):
            check_key_message(KeyMessage(**{**fields, **change}), spec, plan_id="p1", owner="a", n_records=100)
    with pytest.raises(ValueError):
        KeyMessage(**fields, epsilon="1/10")  # a key round spends nothing


def test_only_the_sum_over_every_owner_decodes_and_every_party_derives_the_same_cliques():
    spec = synthesis_spec([a for a in resolve_schema("adult-income").protected if a.name in ("age", "sex", "race", "income")],
                          Fraction(8), target="income", bins=4, owners=3)
    keys, participants = _owners(spec, 3)
    frags, table = _fragments(spec, 3)
    cliques = spec.measure_cliques
    msgs = [_masked(spec, 2, cliques, f, name, keys[name], participants, seed=i)
            for i, (f, (name, _)) in enumerate(zip(frags, participants))]
    masked = [check_masked(MaskedMessage.model_validate_json(m.to_json()), spec, 2, cliques, participants,
                           plan_id="p1", owner=m.owner, n_records=200) for m in msgs]
    sums = decode_round(masked, cliques, total=600, number=2)
    # the decoded sum is the union's counts plus the three owners' seeded shares, exactly
    shares = [measure_shares(spec.domain, {c: np.zeros([spec.domain.sizes[a] for a in c]) for c in cliques},
                             spec.round_noise(2), source=SeededShareSource(i)) for i in range(3)]
    for c in cliques:
        want = contingency(table, c, spec.domain.sizes).ravel() + sum(s[c] for s in shares)
        assert np.array_equal(sums[c], want)
    # one owner's message alone says nothing of its counts: it differs from its counts plus shares everywhere
    alone = masked[0][0][("age",)].view(np.int64)
    assert not np.array_equal(alone, contingency(frags[0], ("age",), spec.domain.sizes).ravel() + shares[0][("age",)])
    # a missing owner, or one masking against another participant list, decodes nothing
    with pytest.raises(ManifestMismatchError, match="masks do not cancel"):
        decode_round(masked[:2], cliques, total=400, number=2)
    other_keys, other_list = _owners(spec, 3)
    stray = _masked(spec, 2, cliques, frags[2], "o2", other_keys["o2"], other_list, seed=2)
    with pytest.raises(ManifestMismatchError, match="masked against other participants"):
        check_masked(stray, spec, 2, cliques, participants, plan_id="p1", owner="o2", n_records=200)
    forged = check_masked(stray, spec, 2, cliques, other_list, plan_id="p1", owner="o2", n_records=200)
    with pytest.raises(ManifestMismatchError, match="masks do not cancel"):
        decode_round(masked[:2] + [forged], cliques, total=600, number=2)
    cl = cliques_from_sums(spec, sums)
    assert cl == cliques_from_sums(spec, dict(sums))  # deterministic post-processing
    assert ("race", "sex") in cl or ("age", "sex") in cl and len(cl) == spec.clique_count
    with pytest.raises(ManifestMismatchError, match="measures other marginals"):
        check_masked(_masked(spec, 3, cl[:-1], frags[0], "o0", keys["o0"], participants), spec, 3, cl, participants,
                     plan_id="p1", owner="o0", n_records=200)
    bad = msgs[0].model_copy(update={"check": msgs[1].check})
    with pytest.raises(ManifestMismatchError, match="does not match its content digest"):
        check_masked(bad, spec, 2, cliques, participants, plan_id="p1", owner="o0", n_records=200)


def test_the_preview_gives_the_noise_of_each_measurement_from_public_terms():
    spec = synthesis_spec(resolve_schema("adult-income").protected, Fraction(1), target="income", owners=4)
    pv = synthesis_preview(spec, owners=4, records=45_222)
    one, pairs, tree, star = pv.rows
    assert one.epsilon_each == Fraction(1, 55) and one.scale == pytest.approx(110.0)  # 2 / (ε/5 / 11)
    assert pairs.count == 45 and pairs.epsilon_each == Fraction(1, 5) / 45
    assert tree.epsilon_each == star.epsilon_each == Fraction(3, 5) / 19
    # t = 1 of 4 owners: the shares of 3 owners make one noise; the sum's variance is 4/3 of one discrete Laplace's
    from fragrelease.rng.polya import DivisibleDiscreteLaplace

    alpha = float(DivisibleDiscreteLaplace.calibrate(Fraction(3, 5) / 19, 2, 3).alpha)
    assert tree.summed_sd == pytest.approx(np.sqrt(4 / 3 * 2 * alpha / (1 - alpha) ** 2))
    assert star.cells == (4, 82) and one.mean_count == (45_222 / 41, 45_222 / 2)
    assert sum(r.epsilon_total for r in pv.rows) == Fraction(1)
    assert any("collusion bound t = 1 of 4 owners" in n for n in pv.notes)
    assert pv.warning_text() is None
    tiny = synthesis_preview(synthesis_spec(resolve_schema("adult-income").protected, Fraction(1, 100)), 4, 1_000)
    assert "1-way marginal" in (tiny.warning_text() or "")


def test_the_guarantee_of_a_synthetic_release_is_whole_table_epsilon_dp():
    g = release_kind("synthetic").guarantee(mechanism="idp-ir", epsilon="1", composition="parallel",
                                            category_order="declared")
    assert g["table"].startswith("whole table ε-DP, ε = 1")
    assert "differential privacy" in g["notion"] and "individual" not in g["notion"]
    assert "aggregator" in g["against"] and "write access" in g["against"]
