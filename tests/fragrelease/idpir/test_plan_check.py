"""Owners check the plan against their own configuration before any budget is spent (issue 22 item 3).

At 13383f1 an owner obeyed plan.json blindly: a plan saying ε = 50, k = 3 made an owner configured for
ε = 1, k = 20 spend ε = 50. Spark-free: the check runs before the data is read.
"""
import os

import pytest

from fragrelease.errors import ManifestMismatchError
from fragrelease.jobs.protocol.context import aggregator_context, owner_context
from fragrelease.protocol.config import config_from_dict
from fragrelease.protocol.messages import OwnerMetadata, PlanOwner, make_plan
from fragrelease.protocol.plan_check import check_plan_for_owner, expected_plan_terms
from fragrelease.schemas.datasets import resolve_schema


def _cfg(tmp_path, **kw):
    data = dict(name="p", dataset="adult", fragmentation="horizontal", epsilon="1", k=20,
                owners=[{"name": "clinic-a", "source": {"path": str(tmp_path / "a.csv"), "format": "csv"},
                         "ledger": {"path": str(tmp_path / "ledger-a"), "lifetime_epsilon": "10"}},
                        {"name": "clinic-b", "source": {"path": str(tmp_path / "b.csv"), "format": "csv"}}],
                work_dir=str(tmp_path / "work"), output=str(tmp_path / "release"))
    data.update(kw)
    return config_from_dict(data)


def _vcfg(tmp_path, **kw):
    data = dict(name="v", dataset="wine", fragmentation="vertical", epsilon="1", k=20, epsilon_split="by-attributes",
                owners=[{"name": "acid", "attributes": ["fixed_acidity", "pH"],
                         "source": {"path": str(tmp_path / "a.csv"), "format": "csv"}},
                        {"name": "insurer", "attributes": ["alcohol"],
                         "source": {"path": str(tmp_path / "b.csv"), "format": "csv"}}],
                work_dir=str(tmp_path / "work"), output=str(tmp_path / "release"))
    data.update(kw)
    return config_from_dict(data)


def _plan(cfg, n=100):
    """The plan an honest aggregator issues for ``cfg`` (make_plan on the owners' metadata)."""
    schema = resolve_schema(cfg.dataset)
    metas = []
    for o in cfg.owners:
        attrs = schema.protected if cfg.fragmentation == "horizontal" else [schema.attribute(a) for a in o.attributes]
        metas.append(OwnerMetadata(owner=o.name, dataset=schema.name, fragmentation=cfg.fragmentation,
                                   attributes=tuple(a.public_spec() for a in attrs), n_records=n,
                                   id_column=schema.id_column, id_digest="d" if cfg.fragmentation == "vertical" else None))
    return make_plan(metas, fragmentation=cfg.fragmentation, mechanism=cfg.mechanism, k=cfg.k, epsilon=cfg.epsilon,
                     epsilon_split=cfg.epsilon_split, keep_id=cfg.keep_id, options=cfg.options)


def _check(cfg, plan, owner):
    check_plan_for_owner(plan, owner, expected_plan_terms(cfg, resolve_schema(cfg.dataset), owner))


def _forge_owner(plan, owner, **update):
    return plan.model_copy(update={"owners": tuple(o.model_copy(update=update) if o.name == owner else o
                                                   for o in plan.owners)})


def test_honest_plans_pass(tmp_path):
    for cfg in (_cfg(tmp_path), _vcfg(tmp_path), _vcfg(tmp_path, epsilon_split="equal"),
                _cfg(tmp_path, mechanism="idp"), _cfg(tmp_path, category_order="declared", linkage="unlinked"),
                _cfg(tmp_path, keep_id=True, postprocess="none", category_order_share="1/4")):
        plan = _plan(cfg)
        for o in cfg.owners:
            _check(cfg, plan, o.name)


def test_forged_plan_epsilon_50_k_3_is_refused_naming_both_values(tmp_path):
    cfg = _cfg(tmp_path)
    forged = _plan(_cfg(tmp_path, epsilon="50", k=3))
    with pytest.raises(ManifestMismatchError) as info:
        _check(cfg, forged, "clinic-a")
    assert str(info.value) == (f"owner 'clinic-a' refuses plan {forged.plan_id}: epsilon is 50 in the plan, "
                               "its configuration says 1")
    with pytest.raises(ManifestMismatchError) as info:
        _check(cfg, _plan(_cfg(tmp_path, k=3)), "clinic-a")
    assert "k is 3 in the plan, its configuration says 20" in str(info.value)


def _field_cases(tmp_path):
    h, v = _cfg(tmp_path), _vcfg(tmp_path)
    hp, vp = _plan(h), _plan(v)
    b = hp.owner("clinic-a")
    return [
        # (field, config, forged plan, owner, expected fragment of the message)
        ("epsilon_j horizontal", h, _forge_owner(hp, "clinic-a", epsilon="50"), "clinic-a",
         "epsilon_j is 50 in the plan, its configuration says 1"),
        ("epsilon_j vertical by-attributes", v, _forge_owner(vp, "insurer", epsilon="1/2"), "insurer",
         "epsilon_j is 1/2 in the plan, its configuration says 1/3"),
        ("epsilon_j vertical equal", _vcfg(tmp_path, epsilon_split="equal"), _plan(v), "acid",
         "epsilon_split is by-attributes in the plan, its configuration says equal"),
        ("epsilon per attribute", h, _forge_owner(hp, "clinic-a", epsilon_per_attribute="1"), "clinic-a",
         "epsilon_per_attribute is 1 in the plan, its configuration says 1/"),
        ("k", h, hp.model_copy(update={"k": 3}), "clinic-a", "k is 3 in the plan, its configuration says 20"),
        ("plain idp fixes k = 1", _cfg(tmp_path, mechanism="idp"),
         _plan(_cfg(tmp_path, mechanism="idp")).model_copy(update={"k": 5}), "clinic-a",
         "k is 5 in the plan, its configuration says 1"),
        ("mechanism", h, hp.model_copy(update={"mechanism": "dp-ir"}), "clinic-a",
         "mechanism is dp-ir in the plan, its configuration says idp-ir"),
        ("attributes", h, _forge_owner(hp, "clinic-a", attributes=b.attributes[:-1]), "clinic-a",
         "attributes: item 10 is absent (it has 9 items) in the plan, its configuration says 'native-country'"),
        ("attribute domain", h, hp.model_copy(update={"attributes": tuple(
            {**a, "domain": [0.0, 1000.0]} if a["name"] == "age" else a for a in hp.attributes)}), "clinic-a",
         "attribute_specs: attribute 'age' domain is [0.0, 1000.0] in the plan, its configuration says [0.0, 100.0]"),
        ("attribute categories", h, hp.model_copy(update={"attributes": tuple(
            {**a, "categories": ["Male", "Female"]} if a["name"] == "sex" else a for a in hp.attributes)}), "clinic-a",
         "attribute_specs: attribute 'sex' categories is ['Male', 'Female'] in the plan, its configuration says "
         "['Female', 'Male']"),
        ("category order", h, hp.model_copy(update={"category_order": "declared"}), "clinic-a",
         "category_order is declared in the plan, its configuration says dp-frequency"),
        ("category order share", h, hp.model_copy(update={"category_order_share": "1/2"}), "clinic-a",
         "category_order_share is 1/2 in the plan, its configuration says 1/10"),
        ("budget split", h, _forge_owner(hp, "clinic-a", budgets=tuple(
            {**x.to_dict(), "epsilon_order": "0"} for x in b.budgets)), "clinic-a",
         "budgets: attribute 'workclass' epsilon_order is '0' in the plan, its configuration says '1/100'"),
        ("postprocess", h, hp.model_copy(update={"postprocess": "none"}), "clinic-a",
         "postprocess is none in the plan, its configuration says isotonic"),
        ("linkage", h, hp.model_copy(update={"linkage": "unlinked"}), "clinic-a",
         "linkage is unlinked in the plan, its configuration says linked"),
        ("keep_id", h, hp.model_copy(update={"keep_id": True}), "clinic-a",
         "keep_id is True in the plan, its configuration says False"),
        ("dataset", h, hp.model_copy(update={"dataset": "wine"}), "clinic-a",
         "dataset is wine in the plan, its configuration says adult"),
        ("fragmentation", h, hp.model_copy(update={"fragmentation": "vertical"}), "clinic-a",
         "fragmentation is vertical in the plan, its configuration says horizontal"),
        ("owners", h, hp.model_copy(update={"owners": hp.owners + (PlanOwner(
            name="mallory", epsilon="1", epsilon_per_attribute=b.epsilon_per_attribute, attributes=b.attributes,
            n_records=5, budgets=b.budgets),)}), "clinic-a", "owners is ['clinic-a', 'clinic-b', 'mallory'] in the plan"),
    ]


_FIELDS = [c[0] for c in _field_cases(__import__("pathlib").Path("/nonexistent"))]


@pytest.mark.parametrize("field", _FIELDS)
def test_each_field_that_differs_is_refused(field, tmp_path):
    _, cfg, plan, owner, text = next(c for c in _field_cases(tmp_path) if c[0] == field)
    with pytest.raises(ManifestMismatchError) as info:
        _check(cfg, plan, owner)
    msg = str(info.value)
    assert msg.startswith(f"owner {owner!r} refuses plan {plan.plan_id}: ") and "\n" not in msg, msg
    assert text in msg, msg


def test_a_forged_long_category_list_is_answered_with_its_first_difference_only(tmp_path, monkeypatch):
    """A forged domain of an attribute with many categories: one short line, not the spec list."""
    import fragrelease.protocol.plan_check as pc

    cats = [f"city-{i}" for i in range(5000)]
    want = {"attribute_specs": [{"name": "age", "kind": "numeric", "domain": [0.0, 120.0]},
                                {"name": "city", "kind": "categorical", "categories": cats}]}
    plan = _plan(_cfg(tmp_path))
    stated = pc.plan_terms
    for forged_cats, said in ((cats[:3] + ["mallory"] + cats[4:],
                               "categories item 4 is 'mallory' in the plan, its configuration says 'city-3'"),
                              (cats + ["extra"], "categories item 5001 is 'extra' in the plan, its configuration "
                                                 "says absent (it has 5000 items)")):
        forged = [want["attribute_specs"][0], {"name": "city", "kind": "categorical", "categories": forged_cats}]
        monkeypatch.setattr(pc, "plan_terms", lambda p, o, forged=forged: {**stated(p, o), "attribute_specs": forged})
        with pytest.raises(ManifestMismatchError) as info:
            pc.check_plan_for_owner(plan, "clinic-a", want)
        assert str(info.value) == f"owner 'clinic-a' refuses plan {plan.plan_id}: attribute_specs: attribute 'city' {said}"


def test_owner_not_in_the_plan_is_refused(tmp_path):
    cfg = _cfg(tmp_path)
    plan = _plan(cfg)
    plan = plan.model_copy(update={"owners": plan.owners[1:]})
    with pytest.raises(ManifestMismatchError, match="'clinic-a' is not part of plan"):
        _check(cfg, plan, "clinic-a")


def test_protect_refuses_a_forged_plan_before_the_ledger_or_spark(tmp_path):
    """The owner step itself (no SparkSession needed to refuse): the ledger is never created."""
    from signing_keys import with_keys  # tests/helpers: owners' signing keys (checked before the plan)

    from fragrelease.jobs.idpir.owner_round import protect_owner_fragment
    from fragrelease.jobs.protocol.layout import plan_path
    from fragrelease.jobs.protocol.workspace import claim_work_dir
    from fragrelease.jobs.storage import write_text

    keys = tmp_path / "keys"
    cfg = with_keys(_cfg(tmp_path), keys)
    forged = _plan(_cfg(tmp_path, epsilon="50", k=3))
    claim_work_dir(cfg)  # as the release's first step does
    write_text(plan_path(cfg.work_dir), forged.to_json())
    with pytest.raises(ManifestMismatchError, match="epsilon is 50 in the plan, its configuration says 1"):
        protect_owner_fragment(None, owner_context(cfg, "clinic-a"))  # spark=None: refused before any Spark call
    assert not os.path.exists(tmp_path / "ledger-a")
    assert not os.path.exists(tmp_path / "work" / "owners")


@pytest.mark.parametrize("field, forged, said", [("linkage", "unlinked", "linked"), ("keep_id", True, "False")])
def test_the_aggregator_refuses_a_plan_json_that_differs_from_its_configuration(tmp_path, field, forged, said):
    """plan.json lies on shared storage; the release-wide terms (linkage, keep_id) are pinned by no
    owner's signature, so the aggregator recomputes every term from its own configuration."""
    from fragrelease.jobs.protocol.aggregator import check_plan_against_config

    cfg = _cfg(tmp_path)
    honest = _plan(cfg)
    check_plan_against_config(honest, aggregator_context(cfg))  # the honest plan passes
    with pytest.raises(ManifestMismatchError, match=rf"^the aggregator refuses plan.json \(owner 'clinic-a' refuses plan "
                                                    rf"[0-9a-f-]+: {field} is .* in the plan, its configuration says {said}\)$"):
        check_plan_against_config(honest.model_copy(update={field: forged}), aggregator_context(cfg))
