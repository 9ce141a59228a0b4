"""A ledger that fails closed (issue 36, item 3): damage refuses every spend, a plan is spent once.

On 0.8.4 a ledger with its last commit truncated to 0 bytes (a crash without fsync) or its
``_delta_log`` deleted forgot spends: a spend of 1 against a lifetime of 1.5 with 1 already spent
was accepted. Every ledger here holds two spends of 1/2 (versions 0..2, total 1), so forgetting
either one would let a spend of 1 through. Each damage must refuse that spend with one line naming
the ledger and the damage, through ``record_spend`` and through ``fragrelease ledger check`` (exit 2),
and leave every file on disk as it was, byte for byte.
"""
from __future__ import annotations

import os
import re
import shutil
from fractions import Fraction

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from fragrelease.errors import BudgetExceededError, LedgerDamagedError, LedgerStorageError, PlanAlreadySpentError
from fragrelease.jobs.cli import run_cli
from fragrelease.jobs.protocol import ledger as ledger_module
from fragrelease.jobs.protocol.ledger import LEDGER_SCHEMA, record_spend, spent

LIFETIME = Fraction(3, 2)
REFUSED = "; every spend is refused until it is restored from a backup; nothing was spent"


def _ledger(tmp_path) -> str:
    path = str(tmp_path / "ledger")
    record_spend(path, owner="o", dataset="d", plan_id="p1", epsilon=Fraction(1, 2), lifetime=LIFETIME)
    record_spend(path, owner="o", dataset="d", plan_id="p2", epsilon=Fraction(1, 2), lifetime=LIFETIME)
    assert DeltaTable(path).version() == 2 and spent(path, "o", "d") == [Fraction(1, 2), Fraction(1, 2)]
    return path


def _commit(path: str, version: int) -> str:
    return os.path.join(path, "_delta_log", f"{version:020d}.json")


def _data_file(path: str, version: int) -> str:
    """The data file the commit of ``version`` added."""
    import json

    with open(_commit(path, version)) as f:
        adds = [json.loads(line)["add"]["path"] for line in f if '"add"' in line]
    assert len(adds) == 1
    return adds[0]


def _snapshot(path: str) -> dict[str, bytes]:
    files = {}
    for root, dirs, names in os.walk(path):
        for d in dirs:
            files[os.path.relpath(os.path.join(root, d), path) + "/"] = b""
        for n in names:
            with open(os.path.join(root, n), "rb") as f:
                files[os.path.relpath(os.path.join(root, n), path)] = f.read()
    return files


def _truncate_last_commit(path):
    open(_commit(path, 2), "wb").close()
    return f"commit {2:020d}.json (version 2) is empty (a crash before it reached the disk?)"


def _delete_log(path):
    shutil.rmtree(os.path.join(path, "_delta_log"))
    names = sorted(os.listdir(path))
    assert len(names) == 2 and all(n.endswith(".parquet") for n in names)
    return f"it holds {names[0]}, {names[1]} but no _delta_log (its log is missing)"


def _garbage_data_file(path):
    name = _data_file(path, 1)
    with open(os.path.join(path, name), "wb") as f:
        f.write(b"this is not parquet" * 10)
    return re.compile(re.escape(f"data file {name!r} (version 1) is not readable Parquet (") + r"[^\n]*magic bytes[^\n]*\)")


def _gap(path):
    os.remove(_commit(path, 1))
    return "commit version 1 is missing from its _delta_log (a gap in versions 0..2)"


def _half_written_commit(path):
    with open(_commit(path, 2), "rb") as f:
        data = f.read()
    cut = len(data) // 2
    if data[cut - 1:cut] == b"\n":
        cut -= 1  # cut inside a line, as a crash mid-write does
    with open(_commit(path, 2), "wb") as f:
        f.write(data[:cut])
    line = data[:cut].count(b"\n") + 1
    return f"commit {2:020d}.json (version 2) is not valid JSON at line {line} (truncated or half-written)"


def _missing_data_file(path):
    name = _data_file(path, 2)
    os.remove(os.path.join(path, name))
    return f"data file {name!r} (version 2) is missing"


def _bad_epsilon(path):
    name = _data_file(path, 1)
    row = pq.read_table(os.path.join(path, name)).to_pylist()[0] | {"epsilon": "half"}
    pq.write_table(pa.Table.from_pylist([row], schema=LEDGER_SCHEMA), os.path.join(path, name))
    return f"data file {name!r} (version 1) holds a row whose ε is 'half', not a number > 0"


def _log_replaced_by_a_file(path):
    shutil.rmtree(os.path.join(path, "_delta_log"))
    with open(os.path.join(path, "_delta_log"), "w") as f:
        f.write("x")
    return "its _delta_log is a file, not a folder"


DAMAGES = {
    "last commit truncated to 0 bytes": _truncate_last_commit,
    "_delta_log deleted": _delete_log,
    "garbage in a data file": _garbage_data_file,
    "gap in the versions": _gap,
    "half-written commit": _half_written_commit,
    "referenced data file missing": _missing_data_file,
    "unparseable epsilon": _bad_epsilon,
    "_delta_log is a file": _log_replaced_by_a_file,
}


def _matches(expected, message: str, path: str) -> bool:
    prefix = f"budget ledger {path!r} is damaged: "
    if not (message.startswith(prefix) and message.endswith(REFUSED)):
        return False
    middle = message[len(prefix):-len(REFUSED)]
    return bool(expected.fullmatch(middle)) if isinstance(expected, re.Pattern) else middle == expected


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_ledger_refuses_every_spend_and_is_left_as_it_was(tmp_path, capsys, damage):
    path = _ledger(tmp_path)
    expected = DAMAGES[damage](path)
    before = _snapshot(path)

    with pytest.raises(LedgerDamagedError) as info:
        record_spend(path, owner="o", dataset="d", plan_id="p3", epsilon=Fraction(1), lifetime=LIFETIME)
    message = str(info.value)
    assert "\n" not in message and _matches(expected, message, path), message
    assert isinstance(info.value, LedgerStorageError)
    with pytest.raises(LedgerDamagedError) as again:  # another owner or dataset in the same ledger too
        record_spend(path, owner="q", dataset="other", plan_id="p9", epsilon=Fraction(1, 100), lifetime=LIFETIME)
    assert str(again.value) == message
    with pytest.raises(LedgerDamagedError):
        spent(path, "o", "d")
    assert _snapshot(path) == before  # nothing written, nothing removed

    capsys.readouterr()
    assert run_cli(["ledger", "check", path]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"error: {message}\n"
    assert run_cli(["ledger", "history", path]) == 2
    assert capsys.readouterr().err == f"error: {message}\n"
    assert _snapshot(path) == before


def test_a_folder_without_a_log_is_never_made_a_new_ledger(tmp_path):
    path = tmp_path / "ledger"
    path.mkdir()
    (path / "notes.txt").write_text("keep")
    with pytest.raises(LedgerDamagedError, match=re.escape(
            f"budget ledger {str(path)!r} is damaged: it holds notes.txt but no _delta_log (its log is missing)"
            + REFUSED)):
        record_spend(str(path), owner="o", dataset="d", plan_id="p", epsilon=Fraction(1), lifetime=LIFETIME)
    assert sorted(os.listdir(path)) == ["notes.txt"] and (path / "notes.txt").read_text() == "keep"


@pytest.mark.parametrize("make", ["missing", "empty folder"])
def test_a_missing_path_or_an_empty_folder_becomes_a_new_ledger(tmp_path, make):
    path = tmp_path / "ledger"
    if make == "empty folder":
        path.mkdir()
    assert record_spend(str(path), owner="o", dataset="d", plan_id="p", epsilon=Fraction(1), lifetime=LIFETIME) == 1
    assert spent(str(path), "o", "d") == [Fraction(1)] and DeltaTable(str(path)).version() == 1


def test_a_plan_is_spent_once(tmp_path):
    path = _ledger(tmp_path)
    before = _snapshot(path)
    with pytest.raises(PlanAlreadySpentError) as info:
        record_spend(path, owner="o", dataset="d", plan_id="p2", epsilon=Fraction(1, 4), lifetime=LIFETIME)
    assert str(info.value) == (f"owner 'o' already spent on plan 'p2' (dataset 'd', budget ledger {path!r}); "
                               "a plan is spent once; ask the aggregator for a new plan")
    assert _snapshot(path) == before and spent(path, "o", "d") == [Fraction(1, 2), Fraction(1, 2)]
    # the same plan id is another owner's, or the same owner's on another dataset: not a reuse
    assert record_spend(path, owner="q", dataset="d", plan_id="p2", epsilon=Fraction(1, 4), lifetime=LIFETIME) == Fraction(1, 4)
    assert record_spend(path, owner="o", dataset="e", plan_id="p2", epsilon=Fraction(1, 4), lifetime=LIFETIME) == Fraction(1, 4)
    assert spent(path, "o", "d") == [Fraction(1, 2), Fraction(1, 2)]


def test_a_spend_is_fsynced_before_it_returns(tmp_path, monkeypatch):
    path = _ledger(tmp_path)
    synced: list[str] = []
    real = os.fsync

    def fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    record_spend(path, owner="o", dataset="d", plan_id="p3", epsilon=Fraction(1, 4), lifetime=LIFETIME)
    monkeypatch.undo()
    data = os.path.join(os.path.realpath(path), _data_file(path, 3))
    commit, log_dir = os.path.realpath(_commit(path, 3)), os.path.realpath(os.path.join(path, "_delta_log"))
    assert {data, commit, log_dir, os.path.realpath(path)} <= set(synced), synced
    assert synced.index(data) < synced.index(commit)  # the data file is on disk before the commit names it


def test_a_failed_fsync_after_the_commit_counts_the_spend_and_says_so(tmp_path, monkeypatch):
    import errno

    path = _ledger(tmp_path)
    real = os.fsync

    def fsync(fd):
        if os.readlink(f"/proc/self/fd/{fd}").endswith(f"{3:020d}.json"):
            raise OSError(errno.EIO, "Input/output error")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(LedgerStorageError) as info:
        record_spend(path, owner="o", dataset="d", plan_id="p3", epsilon=Fraction(1, 4), lifetime=LIFETIME)
    monkeypatch.undo()
    assert str(info.value) == (f"budget ledger {path!r}: the spend was recorded but cannot be made durable: "
                               "Input/output error (EIO); no noise was drawn")
    assert spent(path, "o", "d") == [Fraction(1, 2), Fraction(1, 2), Fraction(1, 4)]  # it counts


def test_ledger_check_and_history_print_what_the_ledger_holds(tmp_path, capsys):
    path = _ledger(tmp_path)
    record_spend(path, owner="q", dataset="e", plan_id="x", epsilon=Fraction(1, 3), lifetime=LIFETIME)
    capsys.readouterr()
    assert run_cli(["ledger", "check", path]) == 0
    out = capsys.readouterr().out
    assert re.fullmatch(re.escape(f"budget ledger {path!r}: OK, 3 spends in 4 versions (0..3); hash chain intact over 3 "
                                  "spends, head version 3 (") + "[0-9a-f]{12}" + re.escape(
        "); this machine's anchor: version 3, in the chain, at the head") + "\n", out), out

    assert run_cli(["ledger", "history", path]) == 0
    lines = capsys.readouterr().out.splitlines()
    fields = [line.split("  ") for line in lines]
    assert [(f[0], *f[2:]) for f in fields] == [
        ("version=1", "owner=o", "dataset=d", "plan=p1", "ε=1/2", "total=1/2"),
        ("version=2", "owner=o", "dataset=d", "plan=p2", "ε=1/2", "total=1"),
        ("version=3", "owner=q", "dataset=e", "plan=x", "ε=1/3", "total=1/3"),
    ]
    assert all(re.fullmatch(r"recorded_at=\d{4}-\d\d-\d\dT[\d:.]+\+00:00", f[1]) for f in fields)

    assert run_cli(["ledger", "history", path, "--owner", "o", "--dataset", "d"]) == 0
    assert [line.split("  ")[4] for line in capsys.readouterr().out.splitlines()] == ["plan=p1", "plan=p2"]
    assert run_cli(["ledger", "history", path, "--owner", "q"]) == 0
    assert [line.split("  ")[4] for line in capsys.readouterr().out.splitlines()] == ["plan=x"]


def test_ledger_check_of_a_path_without_a_ledger_exits_2(tmp_path, capsys):
    path = str(tmp_path / "nothing")
    assert run_cli(["ledger", "check", path]) == 2
    assert capsys.readouterr().err == (f"error: budget ledger {path!r} does not exist (no folder, or an empty one); "
                                       "no spend was ever recorded there\n")
    assert not os.path.exists(path)


def test_a_checkpointed_ledger_is_read_whole(tmp_path):
    """A checkpoint replaces the early commits as the base of the log: its files still count."""
    path = _ledger(tmp_path)
    DeltaTable(path).create_checkpoint()
    assert spent(path, "o", "d") == [Fraction(1, 2), Fraction(1, 2)]
    for v in (0, 1):  # log clean-up after the retention period removes commits before the checkpoint
        os.remove(_commit(path, v))
    assert spent(path, "o", "d") == [Fraction(1, 2), Fraction(1, 2)]
    summary = ledger_module.check_ledger(path)
    assert summary.version == 2 and [s.version for s in summary.spends] == [1, 2]  # as recorded in each row
    with pytest.raises(BudgetExceededError):
        record_spend(path, owner="o", dataset="d", plan_id="p3", epsilon=Fraction(1), lifetime=LIFETIME)
    assert spent(path, "o", "d") == [Fraction(1, 2), Fraction(1, 2)]


def test_what_a_ledger_cannot_detect_without_an_anchor(tmp_path, capsys, monkeypatch):
    """docs/known-limitations.md #12: seen from a machine that never spent on the ledger (no anchor), a
    last commit removed cleanly, or the whole folder deleted, reads as a smaller total (this test pins
    the documented limitation; it fails if it ever changes); ``ledger check`` reports the data file the
    removed commit left unreferenced. The machine that spent refuses both (tests/jobs/idpir/test_ledger_chain.py)."""
    path = _ledger(tmp_path)
    orphan = _data_file(path, 2)
    os.remove(_commit(path, 2))
    with pytest.raises(LedgerDamagedError, match="version 2 is missing"):
        spent(path, "o", "d")  # the machine that spent
    monkeypatch.setenv("FRAGRELEASE_PRIVATE_ROOT", str(tmp_path / "another-machine"))
    assert spent(path, "o", "d") == [Fraction(1, 2)]
    assert os.path.exists(os.path.join(path, orphan))  # unreferenced: not counted
    capsys.readouterr()
    assert run_cli(["ledger", "check", path]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"budget ledger {path!r}: OK, 1 spends in 2 versions (0..1); hash chain intact over 1 spends")
    assert out.endswith(f"; no anchor on this machine (it recorded no spend here: a removed last commit is not detected "
                        f"here); 1 data files no version references (a spend killed before its commit, or a removed "
                        f"commit: compare with a backup), e.g. {orphan}\n"), out
    shutil.rmtree(path)
    assert record_spend(path, owner="o", dataset="d", plan_id="p3", epsilon=Fraction(1), lifetime=LIFETIME) == 1

    # a commit cut exactly at a line break (its commitInfo kept, its add lost) parses: its spend is forgotten
    monkeypatch.setenv("FRAGRELEASE_PRIVATE_ROOT", str(tmp_path / "third-machine"))
    path = _ledger(tmp_path / "cut")
    with open(_commit(path, 2), "rb") as f:
        first_line = f.read().split(b"\n")[0]
    assert first_line.startswith(b'{"commitInfo"')
    with open(_commit(path, 2), "wb") as f:
        f.write(first_line)
    with pytest.raises(LedgerDamagedError, match="its version 2 holds no spend, but this machine recorded"):
        spent(path, "o", "d")  # the machine that spent
    monkeypatch.setenv("FRAGRELEASE_PRIVATE_ROOT", str(tmp_path / "another-machine"))
    assert spent(path, "o", "d") == [Fraction(1, 2)]


def test_validate_refuses_a_damaged_ledger_before_spark_starts(tmp_path, capsys, monkeypatch):
    """A damaged ledger needs no data: ``fragrelease validate`` and every owner step refuse it before Spark."""
    import yaml

    from fragrelease.jobs.cli import _common as cli_common

    def no_spark(master):
        raise AssertionError("a SparkSession was asked for")

    monkeypatch.setattr(cli_common, "_spark", no_spark)

    path = _ledger(tmp_path)
    conf = tmp_path / "release.yaml"
    conf.write_text(yaml.safe_dump({
        "name": "damaged-ledger", "dataset": "wine", "fragmentation": "horizontal", "epsilon": "1", "k": 50,
        "owners": [{"name": "owner-1", "rows": 500, "ledger": {"path": path, "lifetime_epsilon": "3/2"}},
                   {"name": "owner-2", "rows": 1000}, {"name": "owner-3", "rows": 4997}],
        "work_dir": str(tmp_path / "work"), "output": str(tmp_path / "release")}))
    assert run_cli(["validate", str(conf)]) == 0
    expected = _gap(path)
    before = _snapshot(path)
    capsys.readouterr()
    for argv in (["validate", str(conf)], ["validate", str(conf), "--owner", "owner-1"], ["run", str(conf)]):
        assert run_cli(argv) == 2, argv
        err = capsys.readouterr().err
        assert err == f"error: budget ledger {path!r} is damaged: {expected}{REFUSED}\n", (argv, err)
    assert run_cli(["validate", str(conf), "--owner", "owner-2"]) == 0  # another owner's ledger is not its business
    assert _snapshot(path) == before and not os.path.exists(tmp_path / "release")
