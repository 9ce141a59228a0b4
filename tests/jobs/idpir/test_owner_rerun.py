"""An owner step that stopped midway can be run again (issue 22, item 6).

A protected fragment is published only by its manifest. A run killed between the table commit and
the manifest left a table that made every rerun fail with ReleaseExistsError; the rerun now discards
that unpublished fragment (after checking that its commit names this plan and this owner) and
protects again. An owner with a ledger spent on the plan before it was killed: its ledger refuses a
second spend on the same plan (issue 36, a plan is spent once), so it asks for a new plan, and the
ledger keeps the first attempt's spend (an over-count, documented).
"""
import errno
import glob
import json
import logging
import os
from fractions import Fraction

import pytest
from deltalake import DeltaTable

from fragrelease.errors import PlanAlreadySpentError, ReleaseExistsError, StorageError
from fragrelease.idpir.config import PRIVATE_ROOT_ENV, config_from_dict
from fragrelease.jobs.idpir import aggregator, owner, simulate
from fragrelease.jobs.idpir.context import aggregator_context, owner_context
from fragrelease.jobs.idpir.layout import manifest_path, plan_path, protected_path
from fragrelease.jobs.idpir.ledger import spent
from fragrelease.schemas.datasets import resolve_schema


class Killed(BaseException):
    """Stands for the process dying at this point: no handler of the owner step runs."""


@pytest.fixture(scope="module")
def wine_source(spark, wine_pdf, tmp_path_factory):
    from fragrelease.schemas.wine import SCHEMA

    path = str(tmp_path_factory.mktemp("rerun") / "wine")
    spark.createDataFrame(wine_pdf.sample(300, random_state=4), SCHEMA.struct_type()).write.parquet(path)
    return path


def _config(tmp, source):
    data = dict(name="rerun", dataset="wine", fragmentation="horizontal", epsilon="1", k=10,
                source={"path": source, "format": "parquet"}, if_exists="error",
                owners=[{"name": "a", "rows": 150},
                        {"name": "b", "rows": 150,
                         "ledger": {"path": str(tmp / "ledger-b"), "lifetime_epsilon": "5"}}],
                work_dir=str(tmp / "work"), output=str(tmp / "release"), reports=False)
    from signing_keys import with_keys  # tests/helpers: owners sign their manifests

    return with_keys(config_from_dict(data), tmp / "keys")


@pytest.fixture(scope="module")
def prepared(spark, wine_source, tmp_path_factory):
    """The fragments cut, both owners' metadata steps and the plan, run once: its folder, which holds
    the owners' private root (fragments, nonces, the generated key); a test works on a copy (:func:`_copy`)."""
    root = tmp_path_factory.mktemp("prepared")
    with pytest.MonkeyPatch.context() as m:
        m.setenv(PRIVATE_ROOT_ENV, str(root / "private-root"))
        cfg = _config(root, wine_source)
        schema = resolve_schema(cfg.dataset)
        simulate.split_fragments(spark, cfg, schema, simulate.load_dataset(spark, cfg, schema))
        for o in cfg.owners:
            owner.describe_fragment(spark, owner_context(cfg, o.name))
        aggregator.issue_plan(aggregator_context(cfg))
    return root


def _copy(prepared, tmp, source, monkeypatch):
    """A copy of :func:`prepared`'s folder in ``tmp`` (``copy_state``), its private root in use; its configuration."""
    from copied_state import copy_state  # tests/helpers

    copy_state(prepared, tmp)
    monkeypatch.setenv(PRIVATE_ROOT_ENV, str(tmp / "private-root"))
    return _config(tmp, source)


def _only_active_parquet(table: str) -> None:
    listed = {os.path.realpath(f) for f in glob.glob(os.path.join(table, "**", "*.parquet"), recursive=True)}
    active = {os.path.realpath(u.removeprefix("file://")) for u in DeltaTable(table).file_uris()}
    assert listed == active


@pytest.mark.slow  # the owners' steps and the aggregator's release end to end
def test_a_rerun_after_a_kill_before_the_manifest_completes_and_the_release_goes_through(
        spark, tmp_path, wine_source, prepared, monkeypatch, caplog):
    cfg = _copy(prepared, tmp_path, wine_source, monkeypatch)
    ledger = cfg.owners[1].ledger.path

    def killed(*args, **kwargs):
        raise Killed()

    # owner b (with a ledger) is killed after its spend: the same plan is never spent again
    with monkeypatch.context() as m:
        m.setattr(owner, "write_text", killed)
        with pytest.raises(Killed):
            owner.protect_owner_fragment(spark, owner_context(cfg, "b"))
    with open(plan_path(cfg.work_dir)) as f:
        plan_id = json.load(f)["plan_id"]
    assert spent(ledger, "b", "wine") == [Fraction(1)]
    with pytest.raises(PlanAlreadySpentError) as info:
        owner.protect_owner_fragment(spark, owner_context(cfg, "b"))
    assert str(info.value) == (f"owner 'b' already spent on plan {plan_id!r} (dataset 'wine', budget ledger "
                               f"{os.path.abspath(ledger)!r}); a plan is spent once; ask the aggregator for a new plan")
    assert spent(ledger, "b", "wine") == [Fraction(1)]  # nothing more spent
    aggregator.issue_plan(aggregator_context(cfg))  # the new plan the message asks for
    owner.protect_owner_fragment(spark, owner_context(cfg, "b"))  # b's unpublished fragment was discarded by the refused rerun

    # owner a (no ledger) is killed before its manifest: the rerun discards the fragment and completes
    with monkeypatch.context() as m:
        m.setattr(owner, "write_text", killed)
        with pytest.raises(Killed):
            owner.protect_owner_fragment(spark, owner_context(cfg, "a"))
    target = protected_path(cfg.work_dir, "a")
    assert DeltaTable.is_deltatable(target) and not os.path.exists(manifest_path(cfg.work_dir, "a"))
    first_files = set(DeltaTable(target).file_uris())

    with caplog.at_level(logging.WARNING, logger="fragrelease.jobs.idpir.owner"):
        owner.protect_owner_fragment(spark, owner_context(cfg, "a"))  # before the fix: ReleaseExistsError
    assert any("discarded the unpublished protected fragment of plan" in r.getMessage() for r in caplog.records)
    assert not first_files & set(DeltaTable(target).file_uris())  # the first attempt's rows are gone
    _only_active_parquet(target)
    result = aggregator.release(spark, aggregator_context(cfg))
    assert result.version == 0 and result.rows == 300
    assert spent(ledger, "b", "wine") == [Fraction(1), Fraction(1)]  # the documented over-count: one per plan

    with pytest.raises(ReleaseExistsError, match=r"owner 'b' already published a protected fragment for plan"):
        owner.protect_owner_fragment(spark, owner_context(cfg, "b"))  # a published fragment is never discarded


def test_a_failed_manifest_write_removes_the_fragment_and_says_so(spark, tmp_path, wine_source, prepared,
                                                                   monkeypatch):
    cfg = _copy(prepared, tmp_path, wine_source, monkeypatch)

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(owner, "write_text", disk_full)
        with pytest.raises(StorageError) as info:
            owner.protect_owner_fragment(spark, owner_context(cfg, "a"))
    target = protected_path(cfg.work_dir, "a")
    assert str(info.value) == ("owner 'a' could not publish its protected fragment: No space left on device (ENOSPC); "
                               f"the unpublished fragment at {target!r} was removed; run the owner step again")
    assert not os.path.exists(target)
    owner.protect_owner_fragment(spark, owner_context(cfg, "a"))
    assert os.path.exists(manifest_path(cfg.work_dir, "a"))


def test_a_fragment_of_another_plan_is_refused_and_kept(spark, tmp_path, wine_source, prepared, monkeypatch):
    cfg = _copy(prepared, tmp_path, wine_source, monkeypatch)
    with monkeypatch.context() as m:
        m.setattr(owner, "write_text", lambda *a, **k: (_ for _ in ()).throw(Killed()))
        with pytest.raises(Killed):
            owner.protect_owner_fragment(spark, owner_context(cfg, "a"))
    old_plan = DeltaTable(protected_path(cfg.work_dir, "a")).history()[0]
    aggregator.issue_plan(aggregator_context(cfg))  # a new plan: the table is not an unpublished fragment of it
    with pytest.raises(ReleaseExistsError, match=r"holds a Delta table \(role 'protected-fragment', plan '[0-9a-f-]+', "
                                                 r"owner 'a', version 0\) that is not an unpublished protected "
                                                 r"fragment of owner 'a' under plan [0-9a-f-]+; it was left in place"):
        owner.protect_owner_fragment(spark, owner_context(cfg, "a"))
    assert DeltaTable(protected_path(cfg.work_dir, "a")).history()[0] == old_plan


def _cfg_only(tmp):
    return config_from_dict(dict(name="x", dataset="wine", fragmentation="horizontal", epsilon="1", k=10,
                                 source={"path": str(tmp / "src"), "format": "parquet"},
                                 owners=[{"name": "a", "rows": 20}, {"name": "b", "rows": 20}],
                                 work_dir=str(tmp / "work"), output=str(tmp / "release")))


def test_files_of_an_interrupted_write_are_discarded_and_anything_else_is_kept(tmp_path):
    cfg = _cfg_only(tmp_path)
    target = protected_path(cfg.work_dir, "a")
    leftover = os.path.join(target, "part-" + "0" * 31 + "1")
    os.makedirs(leftover)
    with open(os.path.join(leftover, "part-00000-x.snappy.parquet"), "wb") as f:
        f.write(b"rows")
    os.makedirs(os.path.join(target, "_delta_log"))
    owner.discard_unpublished_fragment(owner_context(cfg, "a"), "plan", target)
    assert not os.path.exists(target)  # before the fix the orphan Parquet files stayed readable

    os.makedirs(target)
    with open(os.path.join(target, "notes.txt"), "w") as f:
        f.write("keep")
    with pytest.raises(ReleaseExistsError, match=r"is not a Delta table but holds \['notes.txt'\], which the step of owner 'a' "
                                                 r"did not write; it was left in place"):
        owner.discard_unpublished_fragment(owner_context(cfg, "a"), "plan", target)
    assert open(os.path.join(target, "notes.txt")).read() == "keep"
