"""Injected failures at each stage: nothing partial becomes visible, earlier versions stay intact,
and a rerun completes (issue: fault safety)."""
import errno
import glob
import os

import pytest
from deltalake import DeltaTable

from fragrelease.errors import BudgetExceededError, ManifestMismatchError, TableWriteError
from fragrelease.jobs.idpir import owner_round
from fragrelease.jobs.protocol import aggregator, owner, simulate
from fragrelease.jobs.protocol.context import aggregator_context, owner_context
from fragrelease.jobs.protocol.layout import manifest_path, protected_path
from fragrelease.jobs.protocol.release import run_local_release
from fragrelease.jobs.storage import commit as release_commit  # monkeypatched: commit_delta as commit.py sees it
from fragrelease.protocol.config import config_from_dict
from fragrelease.schemas.datasets import resolve_schema


@pytest.fixture(scope="module")
def wine_source(spark, wine_pdf, tmp_path_factory):
    from fragrelease.schemas.wine import SCHEMA

    path = str(tmp_path_factory.mktemp("fs") / "wine")
    spark.createDataFrame(wine_pdf.sample(400, random_state=8), SCHEMA.struct_type()).write.parquet(path)
    return path


def cfg_for(tmp, source, work="work", ledger=None, **kw):
    b = {"name": "b", "rows": 250}
    if ledger:
        b["ledger"] = {"path": str(tmp / "ledger-b"), "lifetime_epsilon": ledger}
    data = dict(name="fs", dataset="wine", fragmentation="horizontal", epsilon="1", k=10,
                source={"path": source, "format": "parquet"}, if_exists="new-version",
                owners=[{"name": "a", "rows": 150}, b],
                work_dir=str(tmp / work), output=str(tmp / "release"), reports=False)
    data.update(kw)
    from signing_keys import with_keys  # owners protect in separate steps here: they need signing keys

    return with_keys(config_from_dict(data), tmp / f"keys-{work}")


def prepare(spark, cfg):
    schema = resolve_schema(cfg.dataset)
    simulate.split_fragments(spark, cfg, schema, simulate.load_dataset(spark, cfg, schema))
    for o in cfg.owners:
        owner.describe_fragment(spark, owner_context(cfg, o.name))
    return aggregator.issue_plan(aggregator_context(cfg))


def disk_full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.slow  # whole releases end to end (minutes with the suite's load); CI runs it
def test_failures_never_expose_partial_releases(spark, tmp_path, wine_source, monkeypatch):
    from fragrelease.jobs.storage import files

    # the delta-rs commit path's faults (Delta's Spark write path: tests/jobs/test_lakehouse.py)
    monkeypatch.setattr(files, "delta_available", lambda _spark: False)
    cfg = cfg_for(tmp_path, wine_source)
    # version 0: the earlier release that every later failure must leave intact
    from fragrelease.jobs.storage import commit_delta

    earlier = spark.read.parquet(wine_source).drop("record_id", "quality", "color").limit(123)
    commit_delta(earlier, cfg.output, provenance={"role": "release", "system": "idpir", "dataset": "wine"},
                 if_exists="error")
    rows_v0 = DeltaTable(cfg.output).to_pyarrow_table().num_rows
    assert rows_v0 == 123

    cfg2 = cfg_for(tmp_path, wine_source, work="work2")
    prepare(spark, cfg2)

    # 1. an owner fails in the middle of writing (data files written, Delta commit fails: disk full)
    import deltalake.transaction as tx

    with monkeypatch.context() as m:
        m.setattr(tx, "create_table_with_add_actions", disk_full)
        with pytest.raises(TableWriteError, match=r"No space left on device \(ENOSPC\); nothing was committed"):
            owner_round.protect_owner_fragment(spark, owner_context(cfg2, "a"))
    assert not glob.glob(os.path.join(protected_path(cfg2.work_dir, "a"), "part-*"))  # the written files were removed
    assert not DeltaTable.is_deltatable(protected_path(cfg2.work_dir, "a"))        # and no table is visible
    assert not os.path.exists(manifest_path(cfg2.work_dir, "a"))
    # nor is anything left of this attempt's private copy (draw once: kept only once written whole)
    assert not glob.glob(os.path.join(owner_context(cfg2, "a").paths.private_dir, "draws", "*", "tables-*"))
    owner_round.protect_owner_fragment(spark, owner_context(cfg2, "a"))                     # the rerun completes

    # 2. disk full while the owner writes its manifest: the aggregator refuses the fragment
    from fragrelease.jobs.protocol import publish

    with monkeypatch.context() as m:
        m.setattr(publish, "write_text", disk_full)
        with pytest.raises(OSError):
            owner_round.protect_owner_fragment(spark, owner_context(cfg2, "b"))
    with pytest.raises(ManifestMismatchError, match="'b' has no manifest"):
        aggregator.release(spark, aggregator_context(cfg2))
    assert DeltaTable(cfg.output).version() == 0

    # 3. the aggregator dies during its commit: version 0 stays the current, intact release
    cfg3 = cfg_for(tmp_path, wine_source, work="work3")
    prepare(spark, cfg3)
    for o in cfg3.owners:
        owner_round.protect_owner_fragment(spark, owner_context(cfg3, o.name))
    with monkeypatch.context() as m:
        m.setattr(DeltaTable, "create_write_transaction", disk_full)
        m.setattr(tx, "create_table_with_add_actions", disk_full)  # the replace when the description changes
        with pytest.raises(OSError):
            aggregator.release(spark, aggregator_context(cfg3))
    assert DeltaTable(cfg.output).version() == 0
    assert DeltaTable(cfg.output).to_pyarrow_table().num_rows == rows_v0

    # 4. the aggregator dies before its commit
    with monkeypatch.context() as m:
        m.setattr(release_commit, "commit_delta", disk_full)  # the one commit path (commit_release)
        with pytest.raises(OSError):
            aggregator.release(spark, aggregator_context(cfg3))
    assert DeltaTable(cfg.output).version() == 0

    # 5. a fragment truncated after its owner wrote it is refused, nothing is committed
    victim = sorted(glob.glob(os.path.join(protected_path(cfg3.work_dir, "a"), "part-*", "*.parquet")))[0]
    with open(victim, "r+b") as f:
        f.truncate(os.path.getsize(victim) // 2)
    with pytest.raises(ManifestMismatchError, match="'a'"):
        aggregator.release(spark, aggregator_context(cfg3))
    assert DeltaTable(cfg.output).version() == 0

    # a full rerun completes and becomes version 1; version 0 is still readable
    second = run_local_release(spark, cfg3)
    assert second.version == 1
    assert DeltaTable(cfg.output, version=0).to_pyarrow_table().num_rows == rows_v0


@pytest.mark.slow  # whole releases end to end (minutes with the suite's load); CI runs it
def test_ledger_refuses_a_release_past_the_lifetime_budget(spark, tmp_path, wine_source):
    from fractions import Fraction

    from fragrelease.jobs.protocol.ledger import record_spend, spent

    cfg = cfg_for(tmp_path, wine_source, ledger="2", epsilon="1/2")
    record_spend(cfg.owners[1].ledger.path, owner="b", dataset="wine", plan_id="earlier", epsilon=Fraction(3, 2),
                 lifetime=Fraction(2))
    run_local_release(spark, cfg)  # 3/2 + 1/2 = 2: fits exactly
    assert sum(spent(cfg.owners[1].ledger.path, "b", "wine")) == 2
    from fragrelease.errors import ReleaseExistsError

    with pytest.raises(ReleaseExistsError, match="is already released"):  # the same run again: nothing new to spend on
        run_local_release(spark, cfg)
    with pytest.raises(BudgetExceededError, match=r"'b' has spent ε = 2 of its lifetime budget 2"):
        run_local_release(spark, cfg, new_plan=True)
    assert DeltaTable(cfg.output).version() == 0 and sum(spent(cfg.owners[1].ledger.path, "b", "wine")) == 2
