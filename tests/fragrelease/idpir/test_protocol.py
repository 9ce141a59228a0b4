"""Protocol refusals (docs/specification.md §3): metadata validation, plan parameters and manifests."""
import json
from fractions import Fraction

import pytest

from fragrelease.errors import IdentifierError, InvalidParameterError, ManifestMismatchError, ProtocolError
from fragrelease.protocol.messages import OwnerMetadata, check_manifest, make_plan, manifest_for
from fragrelease.protocol.options import OPTION_NAMES, ReleaseOptions

AGE = {"name": "age", "kind": "numeric", "domain": [0.0, 100.0]}
SEX = {"name": "sex", "kind": "categorical", "categories": ["Female", "Male"]}
HOURS = {"name": "hours", "kind": "numeric", "domain": [1.0, 99.0]}


def meta(owner, attrs, n=100, frag="horizontal", digest=None):
    return OwnerMetadata(owner=owner, dataset="d", fragmentation=frag, attributes=tuple(attrs), n_records=n,
                         id_column="record_id", id_digest=digest)


def hplan(**kw):
    args = dict(fragmentation="horizontal", mechanism="idp-ir", k=5, epsilon="1")
    args.update(kw)
    options = ReleaseOptions.of(**{name: args.pop(name) for name in OPTION_NAMES if name in args})
    return make_plan([meta("a", [AGE, SEX]), meta("b", [AGE, SEX], n=50)], options=options, **args)


def wire(plan):
    """The plan as plan.json holds it: budgets as exact text."""
    return json.loads(plan.to_json())


def test_horizontal_plan_gives_every_owner_full_epsilon():
    plan = hplan(epsilon="0.5")
    assert plan.composition == "parallel"
    assert [(o["epsilon"], o["epsilon_per_attribute"]) for o in wire(plan)["owners"]] == [("1/2", "1/4"), ("1/2", "1/4")]
    assert [(o.epsilon, o.epsilon_per_attribute) for o in plan.owners] == [(Fraction(1, 2), Fraction(1, 4))] * 2


def test_vertical_plan_splits_epsilon():
    metas = [meta("a", [AGE], frag="vertical", digest="x"), meta("b", [SEX, HOURS], frag="vertical", digest="x")]
    eq = make_plan(metas, fragmentation="vertical", mechanism="idp-ir", k=5, epsilon="1", epsilon_split="equal")
    assert [o["epsilon"] for o in wire(eq)["owners"]] == ["1/2", "1/2"]
    by = make_plan(metas, fragmentation="vertical", mechanism="idp-ir", k=5, epsilon="1", epsilon_split="by-attributes")
    assert [o["epsilon"] for o in wire(by)["owners"]] == ["1/3", "2/3"]
    assert {o["epsilon_per_attribute"] for o in wire(by)["owners"]} == {"1/3"}


def test_refuses_horizontal_schema_mismatch():
    with pytest.raises(ProtocolError, match="'sex'"):
        make_plan([meta("a", [AGE, SEX]), meta("b", [AGE])], fragmentation="horizontal", mechanism="idp-ir", k=5, epsilon=1)
    other_domain = dict(AGE, domain=[0.0, 120.0])
    with pytest.raises(ProtocolError) as info:
        make_plan([meta("a", [AGE]), meta("b", [other_domain])], fragmentation="horizontal", mechanism="idp-ir", k=5, epsilon=1)
    assert str(info.value) == (f"attribute 'age' is declared differently by 'a' and 'b': domain is {AGE['domain']!r} "
                               "for 'a', [0.0, 120.0] for 'b'")  # the first key that differs, not both specs


def test_refuses_overlapping_vertical_attributes():
    metas = [meta("a", [AGE], frag="vertical", digest="x"), meta("b", [AGE, SEX], frag="vertical", digest="x")]
    with pytest.raises(ProtocolError, match="'age' is held by 'a' and 'b'"):
        make_plan(metas, fragmentation="vertical", mechanism="idp-ir", k=5, epsilon=1)


def test_refuses_vertical_id_mismatch():
    metas = [meta("a", [AGE], frag="vertical", digest="x"), meta("b", [SEX], frag="vertical", digest="y")]
    with pytest.raises(IdentifierError, match="different sets of record ids"):
        make_plan(metas, fragmentation="vertical", mechanism="idp-ir", k=5, epsilon=1)
    metas = [meta("a", [AGE], frag="vertical", digest="x"), meta("b", [SEX], n=99, frag="vertical", digest="x")]
    with pytest.raises(IdentifierError, match="100"):
        make_plan(metas, fragmentation="vertical", mechanism="idp-ir", k=5, epsilon=1)
    metas = [meta("a", [AGE], frag="vertical", digest="x"), meta("b", [SEX], frag="vertical", digest=None)]
    with pytest.raises(IdentifierError, match="'b'"):
        make_plan(metas, fragmentation="vertical", mechanism="idp-ir", k=5, epsilon=1)


@pytest.mark.parametrize("k,match", [(2, "k must be >= 3, not 2"), (51, "k = 51 exceeds the 50 records of owner 'b'")])
def test_refuses_bad_k(k, match):
    with pytest.raises(InvalidParameterError, match=match):
        hplan(k=k)


@pytest.mark.parametrize("eps", [0, "-1", "0.0"])
def test_refuses_non_positive_epsilon(eps):
    with pytest.raises(InvalidParameterError, match="epsilon"):
        hplan(epsilon=eps)


def test_refuses_single_owner_and_wrong_fragmentation():
    with pytest.raises(ProtocolError, match="at least 2"):
        make_plan([meta("a", [AGE])], fragmentation="horizontal", mechanism="idp-ir", k=5, epsilon=1)
    with pytest.raises(ProtocolError, match="'vertical'"):
        make_plan([meta("a", [AGE]), meta("b", [AGE], frag="vertical")], fragmentation="horizontal",
                  mechanism="idp-ir", k=5, epsilon=1)


def test_manifest_must_match_plan():
    plan = hplan()
    good = manifest_for(plan, "a", 100, "sha256-sum60:100:1")
    check_manifest(good, plan)
    for field, value in [("epsilon", "2"), ("k", 4), ("plan_id", "other"), ("mechanism", "dp-ir"), ("n_records", 99),
                         ("category_order", "declared"), ("category_order_share", "1/5"),
                         ("budgets", ({"attribute": "age", "epsilon": "1/2", "epsilon_order": "0",
                                       "epsilon_centroids": "1/2"},)), ("postprocess", "none"), ("linkage", "unlinked")]:
        bad = good.model_copy(update={field: value})
        with pytest.raises(ManifestMismatchError, match=field):
            check_manifest(bad, plan)
    with pytest.raises(ManifestMismatchError, match="'zz'"):
        check_manifest(good.model_copy(update={"owner": "zz"}), plan)


def test_messages_carry_no_data_dependent_fields():
    plan = hplan()
    m = manifest_for(plan, "a", 100, "sha256-sum60:100:1")
    text = m.to_json() + plan.to_json()
    for word in ("sensitivity", "min", "max", "frequency", "count", "scale"):
        assert f'"{word}' not in text
    # the release options are pinned by name in test_options.py; here: they and nothing data-dependent
    assert set(m.model_dump()) == set(OPTION_NAMES) | {
                                   "plan_id", "owner", "dataset", "fragmentation", "mechanism", "k", "epsilon",
                                   "epsilon_per_attribute", "attributes", "n_records", "id_column", "budgets",
                                   "content_digest", "created_at", "pseudonym_digest", "pseudonym_key_check",
                                   # signed manifests: the committed table's version, files (sizes and
                                   # hashes of the protected data only) and log, and the owner's signature
                                   "table_version", "files", "delta_log", "signature",
                                   "pseudonym_table_version", "pseudonym_files", "pseudonym_delta_log"}


def test_plan_splits_each_categorical_budget_exactly_and_records_it():
    plan = hplan()  # age (numeric) and sex (categorical), ε = 1: 1/2 per attribute
    budgets = {b["attribute"]: b for b in wire(plan)["owners"][0]["budgets"]}
    assert budgets["age"] == {"attribute": "age", "epsilon": "1/2", "epsilon_order": "0", "epsilon_centroids": "1/2"}
    assert budgets["sex"] == {"attribute": "sex", "epsilon": "1/2", "epsilon_order": "1/20",
                              "epsilon_centroids": "9/20"}
    assert (plan.category_order, wire(plan)["category_order_share"], plan.linkage) == ("dp-frequency", "1/10", "linked")
    declared = hplan(category_order="declared")
    assert {b["attribute"]: b["epsilon_order"] for b in wire(declared)["owners"][0]["budgets"]} == {"age": "0", "sex": "0"}
    with pytest.raises(InvalidParameterError, match="'data-frequency'"):
        hplan(category_order="data-frequency")  # the paper's order is not a release option
    with pytest.raises(InvalidParameterError, match="'joined'"):
        hplan(linkage="joined")
