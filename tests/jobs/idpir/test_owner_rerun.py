"""An owner step that stopped midway, or whose published fragment was deleted, is run again: draw once
(issue 22 item 6, issue 49 items 1 and 3).

A protected fragment is kept in the owner's private draw folder before anything is shared, then
published to ``work_dir`` as a copy and by its manifest. Before issue 49, a rerun after a kill
before the manifest discarded the unpublished table and protected again (a second draw of the same
records, with the same plan and pseudonyms: linkable record by record), and an owner with a ledger
found its plan spent and could never publish. Now a rerun re-publishes the very tables it kept
(file for file, row for row) without spending, whatever ``work_dir`` holds, and an attempt that
stopped before keeping its output draws again without a second spend.
"""
import errno
import glob
import json
import os
from fractions import Fraction

import pytest
from deltalake import DeltaTable

from fragrelease.errors import ManifestMismatchError, ReleaseExistsError, StorageError
from fragrelease.jobs.idpir import owner_round
from fragrelease.jobs.protocol import aggregator, owner, publish, simulate
from fragrelease.jobs.protocol.context import aggregator_context, owner_context
from fragrelease.jobs.protocol.layout import manifest_path, plan_path, protected_path, pseudonyms_path
from fragrelease.jobs.protocol.ledger import spent
from fragrelease.protocol.config import PRIVATE_ROOT_ENV, config_from_dict
from fragrelease.schemas.datasets import resolve_schema


class Killed(BaseException):
    """Stands for the process dying at this point: no handler of the owner step runs."""


@pytest.fixture(scope="module")
def wine_source(spark, wine_pdf, tmp_path_factory):
    from fragrelease.schemas.wine import SCHEMA

    path = str(tmp_path_factory.mktemp("rerun") / "wine")
    spark.createDataFrame(wine_pdf.sample(300, random_state=4), SCHEMA.struct_type()).write.parquet(path)
    return path


def _config(tmp, source, **kw):
    data = dict(name="rerun", dataset="wine", fragmentation="horizontal", epsilon="1", k=10,
                source={"path": source, "format": "parquet"}, if_exists="error",
                owners=[{"name": "a", "rows": 150},
                        {"name": "b", "rows": 150,
                         "ledger": {"path": str(tmp / "ledger-b"), "lifetime_epsilon": "5"}}],
                work_dir=str(tmp / "work"), output=str(tmp / "release"), reports=False, **kw)
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


def _copy(prepared, tmp, source, monkeypatch, **kw):
    """A copy of :func:`prepared`'s folder in ``tmp`` (``copy_state``), its private root in use; its configuration."""
    from copied_state import copy_state  # tests/helpers

    copy_state(prepared, tmp)
    monkeypatch.setenv(PRIVATE_ROOT_ENV, str(tmp / "private-root"))
    cfg = _config(tmp, source, **kw)
    from fragrelease.protocol.messages import Plan

    # the aggregator's pin names its work_dir: the copy's plan pinned for the copy's folder
    aggregator.pin_plan(aggregator_context(cfg), Plan.model_validate_json(open(plan_path(cfg.work_dir)).read()))
    return cfg


def _files(folder) -> dict:
    """Every file under ``folder``: relative path → SHA-256 of its bytes (what a second draw could not match)."""
    import hashlib

    out = {}
    for root, _dirs, names in os.walk(folder):
        for n in names:
            p = os.path.join(root, n)
            out[os.path.relpath(p, folder)] = hashlib.sha256(open(p, "rb").read()).hexdigest()
    return out


def _rows(spark, path):
    return sorted(map(tuple, spark.read.format("delta").load(path).toPandas().itertuples(index=False)))


def _only_active_parquet(table: str) -> None:
    listed = {os.path.realpath(f) for f in glob.glob(os.path.join(table, "**", "*.parquet"), recursive=True)}
    active = {os.path.realpath(u.removeprefix("file://")) for u in DeltaTable(table).file_uris()}
    assert listed == active


@pytest.mark.slow  # the owners' steps and the aggregator's release end to end
def test_a_rerun_after_a_kill_before_the_manifest_republishes_the_same_draw_and_the_release_goes_through(
        spark, tmp_path, wine_source, prepared, monkeypatch):
    cfg = _copy(prepared, tmp_path, wine_source, monkeypatch)
    ledger = cfg.owners[1].ledger.path

    def killed(*args, **kwargs):
        raise Killed()

    # owner b (with a ledger) is killed after its draw was kept, before its manifest: the rerun publishes that draw
    with monkeypatch.context() as m:
        m.setattr(publish, "write_text", killed)
        with pytest.raises(Killed):
            owner_round.protect_owner_fragment(spark, owner_context(cfg, "b"))
    assert spent(ledger, "b", "wine") == [Fraction(1)]
    target = protected_path(cfg.work_dir, "b")
    assert DeltaTable.is_deltatable(target) and not os.path.exists(manifest_path(cfg.work_dir, "b"))
    first = _files(target)
    owner_round.protect_owner_fragment(spark, owner_context(cfg, "b"))  # before issue 49: PlanAlreadySpentError
    assert _files(target) == first and os.path.exists(manifest_path(cfg.work_dir, "b"))
    assert spent(ledger, "b", "wine") == [Fraction(1)]  # spent once
    _only_active_parquet(target)

    # owner a is killed before it kept its draw: nothing was shared, so the rerun draws (its claim stands for the spend)
    with monkeypatch.context() as m:
        m.setattr(publish, "keep_tables", killed)
        m.setattr(owner_round, "keep_tables", killed)
        with pytest.raises(Killed):
            owner_round.protect_owner_fragment(spark, owner_context(cfg, "a"))
    assert not os.path.exists(protected_path(cfg.work_dir, "a"))  # nothing left the owner
    owner_round.protect_owner_fragment(spark, owner_context(cfg, "a"))
    result = aggregator.release(spark, aggregator_context(cfg))
    assert result.version == 0 and result.rows == 300
    assert spent(ledger, "b", "wine") == [Fraction(1)]  # one release, one spend

    # a published fragment deleted by whoever writes work_dir: re-published, file for file, no new draw
    before = _files(protected_path(cfg.work_dir, "a"))
    manifest = open(manifest_path(cfg.work_dir, "a")).read()
    import shutil

    shutil.rmtree(protected_path(cfg.work_dir, "a"))
    owner_round.protect_owner_fragment(spark, owner_context(cfg, "a"))
    assert _files(protected_path(cfg.work_dir, "a")) == before and open(manifest_path(cfg.work_dir, "a")).read() == manifest


@pytest.mark.slow  # one owner's protection, then its fragment deleted piece by piece
@pytest.mark.parametrize("linkage", ["linked", "unlinked"])
def test_deleting_the_table_or_the_manifest_never_buys_a_second_draw(spark, tmp_path, wine_source, prepared,
                                                                     monkeypatch, linkage):
    import shutil

    cfg = _copy(prepared, tmp_path, wine_source, monkeypatch, linkage=linkage)
    if linkage == "unlinked":  # the prepared plan is linked: a plan of this configuration
        for o in cfg.owners:
            owner.describe_fragment(spark, owner_context(cfg, o.name))
        aggregator.issue_plan(aggregator_context(cfg))
    ledger = cfg.owners[1].ledger.path
    owner_round.protect_owner_fragment(spark, owner_context(cfg, "b"))
    tables = [protected_path(cfg.work_dir, "b")] + ([pseudonyms_path(cfg.work_dir, "b")] if linkage == "unlinked" else [])
    files = {t: _files(t) for t in tables}
    rows = {t: _rows(spark, t) for t in tables}
    manifest = open(manifest_path(cfg.work_dir, "b")).read()
    for gone in [*tables, manifest_path(cfg.work_dir, "b"), "all"]:
        for path in (tables + [manifest_path(cfg.work_dir, "b")] if gone == "all" else [gone]):
            shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
        owner_round.protect_owner_fragment(spark, owner_context(cfg, "b"))
        assert {t: _files(t) for t in tables} == files, gone
        assert {t: _rows(spark, t) for t in tables} == rows, gone
        assert open(manifest_path(cfg.work_dir, "b")).read() == manifest, gone
    assert spent(ledger, "b", "wine") == [Fraction(1)]
    owner_round.protect_owner_fragment(spark, owner_context(cfg, "a"))
    assert aggregator.release(spark, aggregator_context(cfg)).rows == 300


def test_a_failed_manifest_write_keeps_the_draw_and_the_rerun_publishes_it(spark, tmp_path, wine_source, prepared,
                                                                          monkeypatch):
    cfg = _copy(prepared, tmp_path, wine_source, monkeypatch)

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(publish, "write_text", disk_full)
        with pytest.raises(StorageError) as info:
            owner_round.protect_owner_fragment(spark, owner_context(cfg, "a"))
    target = protected_path(cfg.work_dir, "a")
    assert str(info.value) == ("owner 'a' could not publish its protected fragment: No space left on device (ENOSPC); "
                               "its draw is kept privately: run the owner step again to publish it")
    first = _files(target)
    owner_round.protect_owner_fragment(spark, owner_context(cfg, "a"))
    assert os.path.exists(manifest_path(cfg.work_dir, "a")) and _files(target) == first


def test_a_new_plan_in_the_same_work_dir_replaces_the_owners_own_entry_and_a_consumed_nonce_is_refused(
        spark, tmp_path, wine_source, prepared, monkeypatch):
    """Issue 49 item 3: a deliberate new plan where an older plan's fragment lies."""
    cfg = _copy(prepared, tmp_path, wine_source, monkeypatch)
    owner_round.protect_owner_fragment(spark, owner_context(cfg, "a"))
    old_plan = json.load(open(plan_path(cfg.work_dir)))["plan_id"]
    new = aggregator.issue_plan(aggregator_context(cfg))  # from the same metadata: a's nonce is consumed
    with pytest.raises(ManifestMismatchError, match=rf"^owner 'a': plan {new.plan_id} carries the metadata nonce that "
                                                    rf"plan {old_plan} consumed"):
        owner_round.protect_owner_fragment(spark, owner_context(cfg, "a"))
    for o in cfg.owners:  # a new metadata round, then a new plan
        owner.describe_fragment(spark, owner_context(cfg, o.name))
    newer = aggregator.issue_plan(aggregator_context(cfg))
    with pytest.raises(ManifestMismatchError, match=rf"^owner 'a' has not published its protected fragment of plan "
                                                    rf"{newer.plan_id} yet \(.* is of plan {old_plan}\); run its "
                                                    "protect step first"):
        aggregator.release(spark, aggregator_context(cfg))
    for o in cfg.owners:
        owner_round.protect_owner_fragment(spark, owner_context(cfg, o.name))  # a's older table replaced, not refused
    assert DeltaTable(protected_path(cfg.work_dir, "a")).history()[-1]["userMetadata"].count(newer.plan_id) == 1
    assert aggregator.release(spark, aggregator_context(cfg)).rows == 300


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
    publish.clear_own_entry(owner_context(cfg, "a"), target, "protected-fragment")
    assert not os.path.exists(target)  # before the fix the orphan Parquet files stayed readable

    os.makedirs(target)
    with open(os.path.join(target, "notes.txt"), "w") as f:
        f.write("keep")
    with pytest.raises(ReleaseExistsError, match=r"is not a Delta table but holds \['notes.txt'\], which the step of owner 'a' "
                                                 r"did not write; it was left in place"):
        publish.clear_own_entry(owner_context(cfg, "a"), target, "protected-fragment")
    assert open(os.path.join(target, "notes.txt")).read() == "keep"
