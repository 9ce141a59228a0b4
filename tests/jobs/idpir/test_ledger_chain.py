"""A ledger whose removed last commit is detected (issue 49, item 6, part C): the hash chain with running
totals in every row, and this machine's private anchor of the latest spend it recorded.

Every ledger here holds two spends of 1/2 of owner 'o' on 'd' (versions 1 and 2, total 1; lifetime 3/2),
so forgetting either one would let a spend of 1 through. Each machine is its own private root
(``FRAGRELEASE_PRIVATE_ROOT``); the anchors lie under it.
"""
from __future__ import annotations

import json
import os
import re
import stat
from fractions import Fraction

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from fragrelease.errors import ConfigError, LedgerDamagedError, LedgerStorageError
from fragrelease.jobs.cli import run_cli
from fragrelease.jobs.protocol import ledger_anchor
from fragrelease.jobs.protocol.ledger import (
    LEDGER_SCHEMA,
    LEGACY_COLUMNS,
    check_intact,
    check_ledger,
    check_spend,
    record_spend,
    spent,
)
from fragrelease.jobs.protocol.ledger_anchor import anchor_file, read_anchor, write_anchor
from fragrelease.jobs.protocol.ledger_chain import GENESIS, chain_hash

LIFETIME = Fraction(3, 2)
REFUSED = "; every spend is refused until it is restored from a backup; nothing was spent"


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """Switch to machine ``name``: its own private root (returns the root)."""
    def switch(name: str) -> str:
        root = str(tmp_path / f"private-{name}")
        monkeypatch.setenv("FRAGRELEASE_PRIVATE_ROOT", root)
        return root
    switch("a")
    return switch


def _ledger(tmp_path, name: str = "ledger") -> str:
    path = str(tmp_path / name)
    record_spend(path, owner="o", dataset="d", plan_id="p1", epsilon=Fraction(1, 2), lifetime=LIFETIME)
    record_spend(path, owner="o", dataset="d", plan_id="p2", epsilon=Fraction(1, 2), lifetime=LIFETIME)
    return path


def _commit(path: str, version: int) -> str:
    return os.path.join(path, "_delta_log", f"{version:020d}.json")


def _data_file(path: str, version: int) -> str:
    with open(_commit(path, version)) as f:
        adds = [json.loads(line)["add"]["path"] for line in f if '"add"' in line]
    assert len(adds) == 1
    return os.path.join(path, adds[0])


def _snapshot(path: str) -> dict[str, bytes]:
    out = {}
    for root, _, names in os.walk(path):
        for n in names:
            with open(os.path.join(root, n), "rb") as f:
                out[os.path.relpath(os.path.join(root, n), path)] = f.read()
    return out


def _rewrite(path: str, version: int, **changes) -> dict:
    """Rewrite the row of ``version`` in place with ``changes``; ``rechain=True`` recomputes its hash."""
    file = _data_file(path, version)
    row = pq.read_table(file).to_pylist()[0]
    rechain = changes.pop("rechain", False)
    row.update(changes)
    if rechain:
        row["chain"] = chain_hash(row["prev_chain"], row["commit_version"], tuple(
            row[c] for c in ("owner", "dataset", "plan_id", "epsilon", "total", "recorded_at")))
    pq.write_table(pa.Table.from_pylist([row], schema=LEDGER_SCHEMA), file)
    return row


def _refused_everywhere(path: str, expected: str, capsys) -> None:
    """The spend, the check of a spend, spent() and `ledger check` all refuse, with one line; nothing is written."""
    before = _snapshot(path)
    message = f"budget ledger {path!r} is damaged: {expected}{REFUSED}"
    for call in (record_spend, check_spend):
        with pytest.raises(LedgerDamagedError) as info:
            call(path, owner="o", dataset="d", plan_id="p3", epsilon=Fraction(1, 100), lifetime=LIFETIME)
        assert str(info.value) == message
    for read in (lambda: spent(path, "o", "d"), lambda: check_intact(path)):  # check_intact: validate, before Spark
        with pytest.raises(LedgerDamagedError) as info:
            read()
        assert str(info.value) == message
    capsys.readouterr()
    assert run_cli(["ledger", "check", path]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"error: {message}\n"
    assert run_cli(["ledger", "history", path]) == 2
    assert capsys.readouterr().err == f"error: {message}\n"
    assert _snapshot(path) == before  # nothing spent, nothing removed


def test_a_removed_last_commit_is_refused_by_the_check_and_by_the_next_spend(tmp_path, machine, capsys):
    path = _ledger(tmp_path)
    anchor = anchor_file(path)
    os.remove(_commit(path, 2))  # removed cleanly: versions 0..1 are contiguous and parse
    _refused_everywhere(path, "version 2 is missing: the ledger ends at version 1 (rolled back, or its last commit "
                              f"removed), but this machine recorded the spend of owner 'o' on 'd' at its version 2 (anchor "
                              f"{anchor!r})", capsys)


def test_a_folder_replaced_by_an_older_copy_is_refused(tmp_path, machine, capsys):
    import shutil

    path = str(tmp_path / "ledger")
    record_spend(path, owner="o", dataset="d", plan_id="p1", epsilon=Fraction(1, 2), lifetime=LIFETIME)
    shutil.copytree(path, tmp_path / "backup")
    record_spend(path, owner="o", dataset="d", plan_id="p2", epsilon=Fraction(1, 2), lifetime=LIFETIME)
    shutil.rmtree(path)
    shutil.copytree(tmp_path / "backup", path)  # the backup restored over the newer spend
    _refused_everywhere(path, "version 2 is missing: the ledger ends at version 1 (rolled back, or its last commit "
                              f"removed), but this machine recorded the spend of owner 'o' on 'd' at its version 2 (anchor "
                              f"{anchor_file(path)!r})", capsys)


def test_a_failed_anchor_write_counts_the_spend_and_says_so(tmp_path, machine, monkeypatch):
    import errno

    path = _ledger(tmp_path)
    real = os.replace

    def replace(src, dst):
        if dst == anchor_file(path):
            raise OSError(errno.EIO, "Input/output error")
        real(src, dst)

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", replace)
        with pytest.raises(LedgerStorageError) as info:
            record_spend(path, owner="o", dataset="d", plan_id="p3", epsilon=Fraction(1, 4), lifetime=LIFETIME)
    assert str(info.value) == (f"budget ledger {path!r}: the spend at version 3 was recorded but this machine's anchor "
                               f"{anchor_file(path)!r} cannot be written: Input/output error; no noise was drawn")
    assert spent(path, "o", "d") == [Fraction(1, 2), Fraction(1, 2), Fraction(1, 4)]  # it counts
    assert read_anchor(path).version == 2  # the anchor as it was; no temporary file left behind
    assert sorted(os.listdir(os.path.dirname(anchor_file(path)))) == sorted(
        [os.path.basename(anchor_file(path)), os.path.basename(anchor_file(path))[:-5] + ".lock"])


def test_a_deleted_ledger_is_refused_where_this_machine_spent(tmp_path, machine, capsys):
    import shutil

    path = _ledger(tmp_path)
    shutil.rmtree(path)
    _refused_everywhere(path, "it is gone (no folder, or an empty one), but this machine recorded the spend of owner 'o' "
                              f"on 'd' at its version 2 (anchor {anchor_file(path)!r})", capsys)
    assert not os.path.exists(path)


def test_a_rollback_rewritten_by_another_spend_is_refused(tmp_path, machine, capsys):
    """Version 2 removed, then another machine (no anchor) spends: version 2 exists again, another spend."""
    path = _ledger(tmp_path)
    os.remove(_commit(path, 2))
    machine("b")
    record_spend(path, owner="o", dataset="d", plan_id="p3", epsilon=Fraction(1), lifetime=LIFETIME)  # undetected there
    machine("a")
    _refused_everywhere(path, "its version 2 holds another spend, but this machine recorded the spend of owner 'o' on 'd' "
                              f"at its version 2 (anchor {anchor_file(path)!r}) (rolled back and rewritten)", capsys)


def test_a_rewritten_middle_row_breaks_the_chain(tmp_path, machine, capsys):
    path = _ledger(tmp_path)
    record_spend(path, owner="o", dataset="d", plan_id="p3", epsilon=Fraction(1, 4), lifetime=Fraction(2))
    _rewrite(path, 1, epsilon="1/100")  # the ε lowered, the hash kept
    at = "the spend at version 1 (owner 'o', dataset 'd', plan 'p1')"
    _refused_everywhere(path, f"{at} does not match its chain hash (rewritten after it was recorded)", capsys)

    _rewrite(path, 1, epsilon="1/2", total="1/2", rechain=True)  # back as it was: intact again
    assert spent(path, "o", "d") == [Fraction(1, 2), Fraction(1, 2), Fraction(1, 4)]

    _rewrite(path, 1, epsilon="1/100", total="1/100", rechain=True)  # a consistent row: the next one's link breaks
    _refused_everywhere(path, "the spend at version 2 (owner 'o', dataset 'd', plan 'p2') does not link to version "
                              "1's (a spend removed, inserted or rewritten before it)", capsys)


def test_a_running_total_that_is_not_the_sum_is_refused(tmp_path, machine, capsys):
    path = _ledger(tmp_path)
    machine("b")  # no anchor here: the chain alone
    _rewrite(path, 2, total="1/2", rechain=True)
    _refused_everywhere(path, "the spend at version 2 (owner 'o', dataset 'd', plan 'p2') carries the running total 1/2 "
                              "but the spends up to it add up to 1", capsys)


def test_a_ledger_ahead_of_the_anchor_is_fine(tmp_path, machine, capsys):
    path = _ledger(tmp_path)  # machine a anchored version 2
    machine("b")
    record_spend(path, owner="q", dataset="d", plan_id="x1", epsilon=Fraction(1, 3), lifetime=LIFETIME)
    record_spend(path, owner="o", dataset="e", plan_id="x2", epsilon=Fraction(1, 3), lifetime=LIFETIME)
    machine("a")
    capsys.readouterr()
    assert run_cli(["ledger", "check", path]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"budget ledger {path!r}: OK, 4 spends in 5 versions (0..4); hash chain intact over 4 "
                          "spends, head version 4 (")
    assert out.endswith("; this machine's anchor: version 2, in the chain, 2 spends behind the head (recorded "
                        "elsewhere since)\n"), out
    # a rollback to a version at or after this machine's anchor is, here, a ledger ahead of the anchor
    os.remove(_commit(path, 4))
    assert spent(path, "o", "d") == [Fraction(1, 2), Fraction(1, 2)]
    assert record_spend(path, owner="o", dataset="d", plan_id="p3", epsilon=Fraction(1, 2), lifetime=LIFETIME) == LIFETIME
    assert read_anchor(path).version == 4


def test_the_anchor_never_goes_back_and_a_missed_anchor_write_is_harmless(tmp_path, machine, monkeypatch):
    from fragrelease.jobs.protocol import ledger as ledger_module

    path = _ledger(tmp_path)
    anchor = read_anchor(path)
    assert (anchor.version, anchor.owner, anchor.dataset, anchor.total) == (2, "o", "d", 1)
    assert not write_anchor(path, version=1, chain="f" * 64, owner="o", dataset="d", total=Fraction(1, 2))
    assert read_anchor(path) == anchor  # a late writer of an earlier version changed nothing
    # a crash between the commit and the anchor write: the ledger is ahead of the anchor, which is fine
    with monkeypatch.context() as patch:
        patch.setattr(ledger_module, "write_anchor", lambda *a, **k: None)
        record_spend(path, owner="o", dataset="d", plan_id="p3", epsilon=Fraction(1, 4), lifetime=LIFETIME)
    assert read_anchor(path) == anchor
    assert record_spend(path, owner="o", dataset="d", plan_id="p4", epsilon=Fraction(1, 4), lifetime=LIFETIME) == LIFETIME
    assert read_anchor(path).version == 4


def test_the_anchor_is_private_and_outside_the_ledger(tmp_path, machine):
    path = _ledger(tmp_path)
    root = machine("a")
    file = anchor_file(path)
    assert os.path.dirname(file) == os.path.join(root, "ledger-anchors")
    assert stat.S_IMODE(os.stat(os.path.dirname(file)).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(file).st_mode) == 0o600
    assert sorted(os.listdir(os.path.dirname(file))) == sorted([os.path.basename(file),
                                                                os.path.basename(file)[:-5] + ".lock"])  # no temp file left
    assert not any("anchor" in name for name in _snapshot(path))
    os.chmod(file, 0o644)
    with pytest.raises(ConfigError, match=re.escape(f"anchor file {file!r} is readable or writable by group or others "
                                                    f"(mode 0644); run 'chmod 600 {file}'")):
        record_spend(path, owner="o", dataset="d", plan_id="p3", epsilon=Fraction(1, 4), lifetime=LIFETIME)
    os.chmod(file, 0o600)
    with open(file, "w") as f:
        f.write("{")
    with pytest.raises(ConfigError, match="is not an anchor of this ledger"):
        spent(path, "o", "d")
    assert spent(str(tmp_path / "elsewhere"), "o", "d") == []  # another ledger's anchor is another file


def _legacy_ledger(path: str) -> None:
    """A ledger as fragrelease 0.16.0 wrote it: five string columns, rows without chain."""
    legacy = pa.schema([(c, pa.string()) for c in LEGACY_COLUMNS])
    write_deltalake(path, pa.table({c: pa.array([], pa.string()) for c in LEGACY_COLUMNS}, schema=legacy))
    for plan, eps in (("old1", "1/4"), ("old2", "1/4")):
        write_deltalake(path, pa.table({"owner": ["o"], "dataset": ["d"], "plan_id": [plan], "epsilon": [eps],
                                        "recorded_at": ["2025-01-01T00:00:00+00:00"]}, schema=legacy), mode="append")


def test_a_ledger_of_0_16_0_is_read_and_its_chain_starts_at_the_first_new_spend(tmp_path, machine, capsys):
    path = str(tmp_path / "ledger")
    _legacy_ledger(path)
    assert spent(path, "o", "d") == [Fraction(1, 4), Fraction(1, 4)]
    capsys.readouterr()
    assert run_cli(["ledger", "check", path]) == 0
    assert capsys.readouterr().out == (
        f"budget ledger {path!r}: OK, 2 spends in 3 versions (0..2); no spend chained yet; 2 spends from before the "
        "chain (0.16.0 or earlier), not covered until the next spend; no anchor on this machine (it recorded no "
        "spend here: a removed last commit is not detected here)\n")
    assert record_spend(path, owner="o", dataset="d", plan_id="new", epsilon=Fraction(1, 2), lifetime=LIFETIME) == 1
    # version 3 adds the chain's columns to the table (no spend), version 4 is the spend
    assert [f.name for f in DeltaTable(path).schema().fields] == LEDGER_SCHEMA.names
    assert DeltaTable(path, version=3).file_uris() == DeltaTable(path, version=2).file_uris()
    row = pq.read_table(_data_file(path, 4)).to_pylist()[0]
    assert (row["commit_version"], row["total"]) == (4, "1")
    assert row["prev_chain"] != GENESIS  # it covers the rows before it
    summary = check_ledger(path)
    assert [s.epsilon for s in summary.spends] == [Fraction(1, 4), Fraction(1, 4), Fraction(1, 2)]
    assert summary.chain.legacy == 2 and [s.version for s in summary.chain.chained] == [4]
    capsys.readouterr()
    assert run_cli(["ledger", "check", path]) == 0
    assert "; 2 spends from before the chain (0.16.0 or earlier), covered from version 4 on; this machine's anchor: " \
           "version 4, in the chain, at the head\n" in capsys.readouterr().out
    # from now on a rewritten old row breaks the chain too
    old = _data_file(path, 1)
    legacy = pq.read_table(old)
    pq.write_table(legacy.set_column(3, "epsilon", pa.array(["1/100"])), old)
    _refused_everywhere(path, "the spend at version 4 (owner 'o', dataset 'd', plan 'new') does not link to the hash "
                              "of the 2 spends written before the chain (a spend removed, inserted or rewritten before "
                              "it)", capsys)


def test_what_the_chain_and_anchor_still_cannot_detect(tmp_path, machine, capsys):
    """docs/known-limitations.md, "Budget ledger scope": a machine without an anchor (it never spent on
    the ledger) reads a ledger whose last commit was removed as a smaller total; an attacker who also
    writes this machine's private folder can move the anchor back. This test pins both."""
    path = _ledger(tmp_path)
    orphan = os.path.basename(_data_file(path, 2))
    os.remove(_commit(path, 2))
    machine("b")
    assert spent(path, "o", "d") == [Fraction(1, 2)]
    capsys.readouterr()
    assert run_cli(["ledger", "check", path]) == 0
    assert capsys.readouterr().out.endswith(
        "no anchor on this machine (it recorded no spend here: a removed last commit is not detected here); 1 data "
        f"files no version references (a spend killed before its commit, or a removed commit: compare with a "
        f"backup), e.g. {orphan}\n")
    machine("a")
    with pytest.raises(LedgerDamagedError):
        spent(path, "o", "d")
    os.remove(anchor_file(path))  # the private folder's anchor removed too: nothing left to compare
    assert spent(path, "o", "d") == [Fraction(1, 2)]


def test_racing_threads_leave_the_anchor_at_the_last_version(tmp_path, machine):
    import threading

    path = str(tmp_path / "ledger")
    barrier = threading.Barrier(4)

    def spend(i):
        barrier.wait()
        record_spend(path, owner="o", dataset="d", plan_id=f"r{i}", epsilon=Fraction(1, 10), lifetime=LIFETIME)

    threads = [threading.Thread(target=spend, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    summary = check_ledger(path)
    assert [s.version for s in summary.chain.chained] == [1, 2, 3, 4]
    assert [s.total for s in summary.chain.chained] == [Fraction(k, 10) for k in (1, 2, 3, 4)]
    assert read_anchor(path).version == 4 and read_anchor(path).chain == summary.chain.head
    assert ledger_anchor.anchor_folder().startswith(str(tmp_path))


def test_run_and_validate_refuse_a_rolled_back_ledger_before_spark_starts(tmp_path, machine, capsys, monkeypatch):
    import yaml

    from fragrelease.jobs.cli import _common as cli_common

    def no_spark(master):
        raise AssertionError("a SparkSession was asked for")

    monkeypatch.setattr(cli_common, "_spark", no_spark)
    path = _ledger(tmp_path)
    conf = tmp_path / "release.yaml"
    conf.write_text(yaml.safe_dump({
        "name": "rolled-back-ledger", "dataset": "wine", "fragmentation": "horizontal", "epsilon": "1", "k": 50,
        "owners": [{"name": "owner-1", "rows": 500, "ledger": {"path": path, "lifetime_epsilon": "3/2"}},
                   {"name": "owner-2", "rows": 1000}, {"name": "owner-3", "rows": 4997}],
        "work_dir": str(tmp_path / "work"), "output": str(tmp_path / "release")}))
    assert run_cli(["validate", str(conf)]) == 0
    os.remove(_commit(path, 2))
    capsys.readouterr()
    for argv in (["validate", str(conf)], ["run", str(conf)]):
        assert run_cli(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith(f"error: budget ledger {path!r} is damaged: version 2 is missing: ") and err.count("\n") == 1
    assert not os.path.exists(tmp_path / "release")
