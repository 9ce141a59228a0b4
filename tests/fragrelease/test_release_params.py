"""The params models and typed results of systems 2-4 (tiers, publications, DiffGen): frozen, exact, strict on names."""
from __future__ import annotations

import json
from fractions import Fraction

import pydantic
import pytest

from fragrelease.diffgen.params import DiffGenParams, ProtocolParams, TwoPartyParams
from fragrelease.errors import InvalidParameterError
from fragrelease.publications.params import AnonymizeParams, AuditParams, AuditSummary
from fragrelease.taxonomy import QuasiIdentifier
from fragrelease.tiers import TiersParams

AGE = QuasiIdentifier("age", "numeric", domain=(17.0, 90.0))

EXAMPLES = [
    (TiersParams, dict(delta="0.05", hops=2, output="out")),
    (AnonymizeParams, dict(source="s", output="o", qis=(AGE,), sensitive="occupation")),
    (AuditParams, dict(releases=("a", "b"), output="o", person="id", sensitive="occupation")),
    (ProtocolParams, dict(epsilon=1, specializations=2)),
    (DiffGenParams, dict(epsilon="1", specializations=2, output="o")),
    (TwoPartyParams, dict(hospital_attributes=("age",), insurer_attributes=("sex",), epsilon="1", specializations=2,
                          output="o")),
]


@pytest.mark.parametrize("model,values", EXAMPLES, ids=[m.__name__ for m, _ in EXAMPLES])
def test_every_params_model_is_frozen_and_refuses_an_unknown_field_by_name(model, values):
    params = model.of(**values)
    with pytest.raises(pydantic.ValidationError):
        params.output = "elsewhere"  # type: ignore[misc]
    with pytest.raises(InvalidParameterError, match=r"^outptu: Extra inputs are not permitted"):
        model.of(**values, outptu="x")


def test_tiers_delta_keeps_its_exact_text():
    assert TiersParams.of(delta=0.05, hops=1, output="o").delta == "0.05"
    assert TiersParams.of(delta=Fraction(1, 20), hops=1, output="o").delta == "1/20"
    assert TiersParams.of(delta="1/20", hops=1, output="o").delta == "1/20"
    assert TiersParams.of(dataset="german", delta="1", hops=1, output="o").builtin
    assert not TiersParams.of(dataset="/data/t", delta="1", hops=1, output="o").builtin


def test_the_two_parties_share_exact_protocol_parameters_with_the_laplace_each_default():
    two = TwoPartyParams.of(**dict(EXAMPLES[-1][1]), key_bits=4096)
    proto = two.protocol(Fraction(1, 4))
    assert (proto.epsilon, proto.specializations, proto.key_bits, proto.noise) == (Fraction(1, 4), 2, 4096,
                                                                                   "laplace-each")
    assert ProtocolParams(epsilon="1/3", specializations=0).epsilon == Fraction(1, 3)


def test_the_audit_summary_file_holds_the_note_only_when_nobody_overlaps():
    pairs = ({"release_a": "a", "release_b": "b", "overlapping": 3, "risky": 1},)
    found = json.loads(AuditSummary(pairs, overlapping_people=3, risky_people=1, max_risky_in_a_pair=1).to_json())
    assert found == {"pairs": [dict(pairs[0])], "overlapping_people": 3, "risky_people": 1, "max_risky_in_a_pair": 1}
    none = json.loads(AuditSummary((), 0, 0, 0, note="no person appears in two releases").to_json())
    assert none["note"] == "no person appears in two releases"
