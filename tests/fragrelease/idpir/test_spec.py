"""One typed protection spec from the plan to the noise (docs/specification.md §1-3).

ε is a Fraction in Python and exact text on the wire; the per-attribute split is computed by one
function and an owner's spec comes from the plan it has verified.
"""
import json
from fractions import Fraction

import pytest
from pydantic import BaseModel, ValidationError

from fragrelease.budget import Epsilon, EpsilonPart
from fragrelease.errors import InvalidParameterError
from fragrelease.idpir.category_order import AttributeBudget
from fragrelease.idpir.spec import ProtectionSpec, attribute_budgets, protection_spec
from fragrelease.protocol.messages import OwnerMetadata, Plan, make_plan
from fragrelease.protocol.options import OPTION_NAMES, ReleaseOptions

AGE = {"name": "age", "kind": "numeric", "domain": [17.0, 90.0]}
SEX = {"name": "sex", "kind": "categorical", "categories": ["Female", "Male"]}


class _Msg(BaseModel):
    e: Epsilon
    p: EpsilonPart


def test_epsilon_is_a_fraction_inside_and_exact_text_on_the_wire():
    m = _Msg(e="0.1", p="0")
    assert m.e == Fraction(1, 10) and isinstance(m.e, Fraction) and m.p == 0
    assert json.loads(m.model_dump_json()) == {"e": "1/10", "p": "0"}
    assert _Msg.model_validate_json(m.model_dump_json()) == m
    assert _Msg(e=0.1, p=0).e == Fraction(1, 10)  # a float by its shortest repr, not the nearest double
    for bad in ("0", "-1", "x", "inf", True):
        with pytest.raises(ValidationError):
            _Msg(e=bad, p="0")
    with pytest.raises(ValidationError):
        _Msg(e="1", p="-1/2")


def test_attribute_budget_parts_must_add_up_and_keep_their_wire_names():
    b = AttributeBudget.model_validate({"attribute": "sex", "epsilon": "1/2", "epsilon_order": "1/20",
                                        "epsilon_centroids": "9/20"})
    assert (b.total, b.order, b.centroids) == (Fraction(1, 2), Fraction(1, 20), Fraction(9, 20))
    assert b.to_dict() == {"attribute": "sex", "epsilon": "1/2", "epsilon_order": "1/20", "epsilon_centroids": "9/20"}
    with pytest.raises(ValidationError, match="is not its total"):
        AttributeBudget.model_validate({**b.to_dict(), "epsilon_order": "0"})


def test_the_split_adds_up_exactly_for_awkward_fractions():
    budgets = attribute_budgets([("a", False), ("b", True), ("c", True)], Fraction(1, 7),
                                options=ReleaseOptions.of(category_order="dp-frequency", category_order_share=Fraction(1, 3)))
    assert [b.total for b in budgets] == [Fraction(1, 21)] * 3
    assert sum((b.total for b in budgets), Fraction(0)) == Fraction(1, 7)
    assert [b.order for b in budgets] == [0, Fraction(1, 63), Fraction(1, 63)]


def _spec(**kw):
    args = dict(owner="o", dataset="d", plan_id="p", attributes=[("age", False), ("sex", True)], mechanism="idp-ir",
                k=5, epsilon=Fraction(1), category_order="dp-frequency", category_order_share=Fraction(1, 10),
                postprocess="isotonic", linkage="linked", n_records=100)
    args.update(kw)
    options = ReleaseOptions.of(**{name: args.pop(name, None) for name in OPTION_NAMES})
    return protection_spec(options=options, **args)


def test_spec_is_frozen_and_checks_itself():
    s = _spec()
    assert s.attributes == ("age", "sex") and s.epsilon_per_attribute == Fraction(1, 2) and s.k_used == 5
    assert _spec(mechanism="idp").k_used == 1
    with pytest.raises(AttributeError):
        s.k = 3  # type: ignore[misc]
    with pytest.raises(InvalidParameterError, match="k = 5 exceeds the 4 records of owner 'o'"):
        _spec(n_records=4)
    with pytest.raises(InvalidParameterError, match="add up to 1/2, not its ε = 1"):
        ProtectionSpec(**{**s.__dict__, "budgets": s.budgets[:1]})
    with pytest.raises(InvalidParameterError, match="twice"):
        ProtectionSpec(**{**s.__dict__, "budgets": (s.budgets[0], s.budgets[0]), "epsilon": Fraction(1)})
    with pytest.raises(InvalidParameterError, match="linkage"):
        _spec(linkage="loose")


def test_the_plan_yields_each_owner_its_spec_unchanged_through_plan_json():
    metas = [OwnerMetadata(owner=o, dataset="adult", fragmentation="vertical", attributes=attrs, n_records=50,
                           id_column="rid", id_digest="x") for o, attrs in (("a", (AGE,)), ("b", (AGE | {"name": "hours"}, SEX)))]
    plan = make_plan(metas, fragmentation="vertical", mechanism="dp-ir", k=5, epsilon="0.9", epsilon_split="by-attributes")
    read = Plan.model_validate_json(plan.to_json())  # what an owner reads from the shared folder
    for name, eps in (("a", Fraction(3, 10)), ("b", Fraction(3, 5))):
        spec = read.spec_for(name)
        assert spec == plan.spec_for(name)
        assert spec.epsilon == eps and spec.mechanism.name == "dp-ir" and spec.n_records == 50
        assert spec.budgets == attribute_budgets([(a["name"], a["kind"] == "categorical") for a in
                                                  next(m for m in metas if m.owner == name).attributes], eps,
                                                 options=ReleaseOptions.of(category_order="dp-frequency",
                                                                           category_order_share=Fraction(1, 10)))
    assert sum((read.spec_for(n).epsilon for n in ("a", "b")), Fraction(0)) == read.epsilon == Fraction(9, 10)
