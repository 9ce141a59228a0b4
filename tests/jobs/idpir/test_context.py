"""Party contexts (fragrelease.jobs.protocol.context): what an owner or the aggregator owns, resolved once,
without data, Spark or a write (issue 40 item 4). No Spark here."""
import dataclasses
import os

import pytest

from fragrelease.errors import ConfigError
from fragrelease.jobs.protocol import layout
from fragrelease.jobs.protocol.context import aggregator_context, owner_context
from fragrelease.jobs.protocol.keys import owner_pseudonym_key
from fragrelease.protocol.config import config_from_dict, load_config
from fragrelease.schemas.datasets import resolve_schema


@pytest.fixture
def root(tmp_path, monkeypatch):
    r = tmp_path / "private-root"
    monkeypatch.setenv("FRAGRELEASE_PRIVATE_ROOT", str(r))
    return r


def _horizontal(tmp_path, **owner_b):
    return config_from_dict(dict(
        name="ctx", dataset="adult", fragmentation="horizontal", epsilon="1", k=3,
        owners=[{"name": "a", "source": {"path": str(tmp_path / "a.csv"), "format": "csv"}},
                {"name": "b", "source": {"path": str(tmp_path / "b.csv"), "format": "csv"}, **owner_b}],
        work_dir=str(tmp_path / "work"), output=str(tmp_path / "release")))


def test_the_owner_context_holds_the_owners_paths_schema_and_attributes(tmp_path, root):
    cfg = _horizontal(tmp_path, ledger={"path": str(tmp_path / "ledger-b"), "lifetime_epsilon": "5"})
    ctx = owner_context(cfg, "b")
    work, private = str(tmp_path / "work"), str(root / "ctx" / "b")
    assert (ctx.name, ctx.index, ctx.owner is cfg.owners[1], ctx.config is cfg) == ("b", 1, True, True)
    assert ctx.schema == resolve_schema("adult") and ctx.id_type == "long"
    assert ctx.offered == tuple(resolve_schema("adult").protected)  # horizontal: every released attribute
    assert ctx.ledger is not None and ctx.ledger.path == str(tmp_path / "ledger-b")
    assert owner_context(cfg, "a").ledger is None
    p = ctx.paths
    assert (p.owner, p.work_dir, p.plan, p.metadata, p.protected, p.pseudonyms, p.manifest, p.owner_dir) == (
        "b", work, f"{work}/plan.json", f"{work}/metadata/b.json", f"{work}/owners/b/protected",
        f"{work}/owners/b/pseudonyms", f"{work}/owners/b/manifest.json", f"{work}/owners/b")
    assert p.id_digests("n1") == f"{work}/metadata/ids/b/n1"
    assert (p.private_dir, p.nonce, p.report) == (private, f"{private}/metadata-nonce", f"{private}/report.html")
    assert p.fragment == cfg.owners[1].source
    # no owner sets private_dir: one shared key file under <root>/<release>, which an owner step may create
    assert ctx.shares_key_root and p.generated_key == str(root / "ctx" / "pseudonym-key")
    # the same paths as the layout functions (the one place they are written)
    assert p.manifest == layout.manifest_path(cfg.work_dir, "b")
    assert p.generated_key == layout.generated_key_path(cfg, cfg.owners[1])


def test_an_owner_with_its_own_private_folder_keeps_its_key_there(tmp_path, root):
    cfg = _horizontal(tmp_path, private_dir=str(tmp_path / "b-private"))
    ctx = owner_context(cfg, "b")
    assert not ctx.shares_key_root
    assert ctx.paths.generated_key == str(tmp_path / "b-private" / "pseudonym-key")
    assert ctx.paths.report == str(tmp_path / "b-private" / "report.html")
    from fragrelease.errors import PseudonymKeyError

    # no configured key and none generated: refused, naming the owner and the path it looked at
    with pytest.raises(PseudonymKeyError, match=r"owner 'b' has no pseudonym_key in its configuration and no "
                                                 r"generated release key at '.*b-private/pseudonym-key'"):
        owner_pseudonym_key(ctx)


def test_a_vertical_owner_offers_its_own_attributes():
    cfg = load_config("conf/wine-vertical.yaml")
    ctx = owner_context(cfg, "owner-sugar-sulfur")
    assert [a.name for a in ctx.offered] == ["residual_sugar", "chlorides", "free_sulfur_dioxide",
                                             "total_sulfur_dioxide"]
    assert ctx.index == 1


def test_an_unknown_owner_is_refused_with_one_line(tmp_path):
    cfg = _horizontal(tmp_path)
    with pytest.raises(ConfigError) as err:
        owner_context(cfg, "c")
    assert str(err.value) == "owner 'c' is not in configuration 'ctx'; owners: ['a', 'b']"


def test_contexts_are_frozen(tmp_path, root):
    cfg = _horizontal(tmp_path)
    ctx, agg = owner_context(cfg, "a"), aggregator_context(cfg)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.owner = cfg.owners[1]  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.paths.protected = "elsewhere"  # type: ignore[misc]
    with pytest.raises(TypeError):
        agg.owners["c"] = ctx.paths  # type: ignore[index]


def test_the_aggregator_context_holds_the_plan_its_pin_and_every_owners_paths(tmp_path, root):
    cfg = _horizontal(tmp_path)
    agg = aggregator_context(cfg)
    assert agg.config is cfg and agg.schema == resolve_schema("adult")
    assert agg.plan == str(tmp_path / "work" / "plan.json")
    assert agg.private_dir == str(root / "ctx" / "_aggregator")
    assert agg.plan_pin == layout.plan_pin_path("ctx", cfg.work_dir)
    assert os.path.dirname(agg.plan_pin) == agg.private_dir
    assert list(agg.owners) == ["a", "b"]
    assert agg.owners["b"] == owner_context(cfg, "b").paths


def test_building_contexts_writes_nothing(tmp_path, root):
    cfg = _horizontal(tmp_path)
    for o in cfg.owners:
        owner_context(cfg, o.name)
    aggregator_context(cfg)
    assert sorted(os.listdir(tmp_path)) == []  # no work folder, no private root, no key file
