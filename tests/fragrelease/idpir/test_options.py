"""The release options are declared once (fragrelease/protocol/options.py) and every layer carries and
checks all of them without naming them: the configuration, the plan, the manifest, the owner's plan
check, the aggregator's manifest check, the owner's spec and the release's provenance."""
from __future__ import annotations

import json
import typing
from fractions import Fraction

import pytest

from fragrelease.errors import InvalidParameterError, ManifestMismatchError
from fragrelease.protocol.config import ReleaseConfig, config_from_dict
from fragrelease.protocol.messages import Manifest, OwnerMetadata, Plan, check_manifest, make_plan, manifest_for
from fragrelease.protocol.options import DEFAULT_OPTIONS, OPTION_NAMES, ReleaseOptions
from fragrelease.protocol.plan_check import check_plan_for_owner, expected_plan_terms
from fragrelease.schemas.datasets import resolve_schema

AGE = {"name": "age", "kind": "numeric", "type": "integer", "domain": [17, 90]}
SEX = {"name": "sex", "kind": "categorical", "type": "string", "categories": ["Female", "Male"]}


def _other_value(name: str):
    """A valid value of option ``name`` that differs from its default, derived from its declared type."""
    field = ReleaseOptions.model_fields[name]
    if typing.get_origin(field.annotation) is typing.Literal:
        return next(c for c in typing.get_args(field.annotation) if c != field.default)
    if name == "synthesis_target":  # Optional[str]: an attribute name
        return "age"
    if name == "synthesis_collusion":  # Optional[int]: t, the owners that may collude with the aggregator
        return 1
    if isinstance(field.default, int):  # synthesis_bins
        return field.default + 2
    assert isinstance(field.default, Fraction), name  # the share: another exact fraction in (0, 1)
    return field.default / 2


def test_there_are_options_and_each_has_another_valid_value():
    assert OPTION_NAMES == ("category_order", "category_order_share", "linkage", "postprocess", "synthesis_target",
                            "synthesis_bins", "synthesis_collusion")
    for name in OPTION_NAMES:
        assert ReleaseOptions.of(**{name: _other_value(name)}).option_values()[name] != getattr(DEFAULT_OPTIONS, name)


@pytest.mark.parametrize("model", [ReleaseConfig, Plan, Manifest])
def test_every_carrier_declares_every_option_with_the_same_type_and_default(model):
    for name in OPTION_NAMES:
        mine, theirs = ReleaseOptions.model_fields[name], model.model_fields[name]
        assert (theirs.annotation, theirs.default) == (mine.annotation, mine.default), (model.__name__, name)


def test_options_refuse_unknown_names_and_values_naming_both():
    with pytest.raises(InvalidParameterError, match=r"linkage: .*'joined'"):
        ReleaseOptions.of(linkage="joined")
    with pytest.raises(InvalidParameterError, match="category_order_share"):
        ReleaseOptions.of(category_order_share="3/2")
    with pytest.raises(InvalidParameterError, match="linkagee"):
        ReleaseOptions.of(linkagee="linked")
    assert ReleaseOptions.of(category_order_share="0.25").category_order_share == Fraction(1, 4)  # exact
    assert ReleaseOptions.of(linkage=None) == DEFAULT_OPTIONS  # None keeps the default


def _metas(n=100):
    return [OwnerMetadata(owner=o, dataset="adult", fragmentation="horizontal", attributes=(AGE, SEX), n_records=n,
                          id_column="record_id") for o in ("a", "b")]


@pytest.mark.parametrize("name", OPTION_NAMES)
def test_plan_and_manifest_carry_each_option_flat_and_the_checks_refuse_a_changed_one(name):
    options = ReleaseOptions.of(**{name: _other_value(name)})
    plan = make_plan(_metas(), fragmentation="horizontal", mechanism="idp-ir", k=5, epsilon="1", options=options)
    wire = json.loads(plan.to_json())
    assert str(wire[name]) == options.wire()[name]  # flat, as exact text
    read = Plan.model_validate_json(plan.to_json())
    assert read.options == options and read.spec_for("a").options == options
    manifest = manifest_for(read, "a", 100, "sha256-sum60:100:1")
    assert manifest.options == options
    check_manifest(manifest, read)
    changed = manifest.model_copy(update={name: getattr(DEFAULT_OPTIONS, name)})
    with pytest.raises(ManifestMismatchError, match=name):
        check_manifest(changed, read)


@pytest.mark.parametrize("name", OPTION_NAMES)
def test_an_owner_refuses_a_plan_that_differs_from_its_configuration_in_any_option(tmp_path, name):
    cfg = config_from_dict({
        "name": "r", "dataset": "adult", "fragmentation": "horizontal", "epsilon": "1", "k": 5,
        "owners": [{"name": "a", "source": {"path": str(tmp_path / "a.csv"), "format": "csv"}},
                   {"name": "b", "source": {"path": str(tmp_path / "b.csv"), "format": "csv"}}],
        "work_dir": str(tmp_path / "work"), "output": str(tmp_path / "out"),
    })
    schema = resolve_schema(cfg.dataset)
    metas = [OwnerMetadata(owner=o.name, dataset="adult", fragmentation="horizontal",
                           attributes=tuple(a.public_spec() for a in schema.protected), n_records=100,
                           id_column=schema.id_column) for o in cfg.owners]
    honest = make_plan(metas, fragmentation="horizontal", mechanism="idp-ir", k=5, epsilon="1", options=cfg.options)
    check_plan_for_owner(honest, "a", expected_plan_terms(cfg, schema, "a"))
    other = ReleaseOptions.of(**{name: _other_value(name)})
    tampered = make_plan(metas, fragmentation="horizontal", mechanism="idp-ir", k=5, epsilon="1", options=other)
    # the same plan but for the option (an order or a share also changes the budgets, checked on their own)
    tampered = tampered.model_copy(update={"plan_id": honest.plan_id, "owners": honest.owners})
    with pytest.raises(ManifestMismatchError, match=f"{name} is"):
        check_plan_for_owner(tampered, "a", expected_plan_terms(cfg, schema, "a"))
