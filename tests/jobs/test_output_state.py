"""What is at a release's output is checked before any owner spends, without Spark (issue 36 items 1, 2).

Every refusal is one line naming the output, what is there and what to do, and removes nothing.
Tables are written with delta-rs here (no Spark); the end-to-end crash and disk-full recoveries are
in tests/jobs/test_output_recovery.py.
"""
import json
import os

import pyarrow as pa
import pytest
import yaml
from deltalake import CommitProperties, write_deltalake

from fragrelease.errors import OutputConflictError, ReleaseExistsError, SchemaMismatchError
from fragrelease.jobs.protocol.ledger import LEDGER_SCHEMA
from fragrelease.jobs.storage import (
    LEDGER_COLUMNS,
    ReleaseTarget,
    check_output,
    finish_output,
    marker_path,
    marker_text,
    prepare_output,
)

COLUMNS = ["fixed_acidity", "quality"]


def _target(tmp_path, name="cfg-a", dataset="wine") -> ReleaseTarget:
    return ReleaseTarget(output=str(tmp_path / "release"), config=name, dataset=dataset)


def _table(path, provenance, columns=COLUMNS):
    data = pa.table({c: pa.array([1.0, 2.0]) for c in columns})
    props = CommitProperties(custom_metadata={"userMetadata": json.dumps(provenance)}) if provenance else None
    write_deltalake(str(path), data, commit_properties=props)


def _tree(path) -> dict:
    """Every file under ``path`` with its bytes."""
    out = {}
    for root, _, files in os.walk(path):
        for f in files:
            full = os.path.join(root, f)
            out[os.path.relpath(full, path)] = open(full, "rb").read()
    return out


def _release_prov(dataset="wine", system="idpir"):
    return {"role": "release", "system": system, "dataset": dataset, "plan_id": "p-1"}


def test_absent_and_empty_outputs_are_fine(tmp_path):
    target = _target(tmp_path)
    assert check_output(target, if_exists="error") == "absent"
    os.mkdir(target.output)
    assert check_output(target, if_exists="error") == "empty"


def test_a_file_is_refused_in_one_line_and_kept(tmp_path):
    target = _target(tmp_path)
    open(target.output, "w").write("mine")
    with pytest.raises(OutputConflictError) as info:
        check_output(target, if_exists="new-version")
    assert str(info.value) == (f"output {target.output!r} is a file, not a release folder; nothing was written: "
                               "choose an output path that does not exist")
    assert open(target.output).read() == "mine"


def test_a_folder_with_other_files_is_refused_and_kept(tmp_path):
    target = _target(tmp_path)
    os.makedirs(os.path.join(target.output, "sub"))
    open(os.path.join(target.output, "notes.txt"), "w").write("keep")
    with pytest.raises(OutputConflictError) as info:
        check_output(target, if_exists="new-version")
    assert str(info.value) == (f"output {target.output!r} is a folder with other files ('notes.txt') and no Delta "
                               "table; nothing was written: choose an output path that does not exist or is empty")
    assert _tree(target.output) == {"notes.txt": b"keep"}


@pytest.mark.parametrize("columns", ["chained", "0.16.0"])
def test_an_owners_ledger_is_refused(tmp_path, columns):
    target = _target(tmp_path)
    schema = LEDGER_SCHEMA if columns == "chained" else pa.schema([LEDGER_SCHEMA.field(c) for c in LEDGER_COLUMNS[:5]])
    write_deltalake(target.output, pa.Table.from_pylist([{c: 1 if c == "commit_version" else "x" for c in schema.names}],
                                                        schema=schema))
    assert tuple(LEDGER_SCHEMA.names) == LEDGER_COLUMNS
    before = _tree(target.output)
    with pytest.raises(OutputConflictError) as info:
        check_output(target, if_exists="new-version")
    assert str(info.value) == (f"output {target.output!r} is a budget ledger (columns owner, dataset, plan_id, "
                               "epsilon, recorded_at), not a release; nothing was written: choose another output path")
    assert _tree(target.output) == before


@pytest.mark.parametrize("prov,what", [
    (_release_prov(dataset="adult"), "is a release of system 'idpir' and dataset 'adult', not of system 'idpir' "
                                     "and dataset 'wine'"),
    (_release_prov(system="publications"), "is a release of system 'publications' and dataset 'wine', not of "
                                           "system 'idpir' and dataset 'wine'"),
])
def test_another_datasets_or_systems_table_is_refused(tmp_path, prov, what):
    target = _target(tmp_path)
    _table(target.output, prov)
    with pytest.raises(OutputConflictError) as info:
        check_output(target, if_exists="new-version")
    assert str(info.value) == f"output {target.output!r} {what}; nothing was written: choose another output path"


@pytest.mark.parametrize("prov", [None, {"role": "protected-fragment", "system": "idpir", "dataset": "wine"}])
def test_a_table_fragrelease_did_not_release_is_refused(tmp_path, prov):
    target = _target(tmp_path)
    _table(target.output, prov)
    with pytest.raises(OutputConflictError, match=r"is a Delta table that is not a fragrelease release \(role "):
        check_output(target, if_exists="new-version")


@pytest.mark.parametrize("prov", [_release_prov(), {"role": "release", "dataset": "wine", "plan_id": "p-0"}],
                         ids=["stamped", "before-the-system-stamp"])
def test_this_releases_table_gets_a_new_version_or_is_refused(tmp_path, prov):
    target = _target(tmp_path)
    _table(target.output, prov)
    assert check_output(target, if_exists="new-version", columns=COLUMNS) == "table"
    with pytest.raises(ReleaseExistsError) as info:
        check_output(target, if_exists="error")
    assert str(info.value) == (f"a release already exists at {target.output!r} and if_exists is 'error'; set "
                               "if_exists: new-version to add a version, or choose another output")
    with pytest.raises(SchemaMismatchError, match=r"is a release with columns \['fixed_acidity', 'quality'\], this "
                                                  r"release writes \['quality'\]; nothing was written"):
        check_output(target, if_exists="new-version", columns=["quality"])


def _wedge(output, marker=None):
    """What a SIGKILL during the Spark Delta commit left (issue 36): a 0-byte part file, its checksum, a
    ``_delta_log/`` with a ``.tmp`` commit file and no committed version."""
    os.makedirs(os.path.join(output, "_delta_log"))
    open(os.path.join(output, "part-00000-1b2c-c000.snappy.parquet"), "wb").close()
    open(os.path.join(output, ".part-00000-1b2c-c000.snappy.parquet.crc"), "wb").write(b"crc")
    open(os.path.join(output, "_delta_log", ".00000000000000000000.json.5f1e.tmp"), "wb").write(b'{"add"')
    if marker is not None:
        open(marker_path(output), "w").write(json.dumps(marker))


def test_an_uncommitted_write_without_marker_is_refused_and_nothing_removed(tmp_path):
    target = _target(tmp_path)
    _wedge(target.output)
    before = _tree(target.output)
    with pytest.raises(OutputConflictError) as info:
        prepare_output(target, "plan-2", if_exists="error")
    assert str(info.value) == (f"output {target.output!r} holds an uncommitted write (no committed Delta version) "
                               "with no marker of a fragrelease release; nothing was removed: remove the folder by "
                               "hand if it is not needed, or choose another output")
    assert _tree(target.output) == before


def test_another_releases_uncommitted_write_is_refused(tmp_path):
    target = _target(tmp_path)
    other = {"system": "idpir", "config": "cfg-b", "dataset": "wine", "output": target.output, "plan_id": "p"}
    _wedge(target.output, other)
    before = _tree(target.output)
    with pytest.raises(OutputConflictError, match=r"with the marker of release 'cfg-b' \(dataset 'wine'\); nothing "
                                                  r"was removed"):
        prepare_output(target, "plan-2", if_exists="error")
    assert _tree(target.output) == before
    open(marker_path(target.output), "w").write("{not json")
    with pytest.raises(OutputConflictError) as info:
        check_output(target, if_exists="error")
    assert str(info.value) == (f"output {target.output!r}: {target.output + '_fragrelease_pending.json'!r} is not a "
                               "fragrelease marker; nothing was removed: move that file away or choose another output")
    assert open(marker_path(target.output)).read() == "{not json"


def test_this_releases_crashed_write_is_cleared_and_marked_again(tmp_path):
    target = _target(tmp_path)
    ours = {"system": "idpir", "config": "cfg-a", "dataset": "wine", "output": target.output, "plan_id": "plan-1"}
    _wedge(target.output, ours)
    beside = tmp_path / "beside.txt"
    beside.write_text("user file")
    assert check_output(target, if_exists="error") == "pending"
    assert prepare_output(target, "plan-2", if_exists="error") == "pending"
    assert os.listdir(target.output) == []  # exactly the leftovers went; the folder stays, empty
    assert marker_text(target.output) == {**ours, "plan_id": "plan-2"}
    assert beside.read_text() == "user file"
    finish_output(target)
    assert not os.path.exists(marker_path(target.output)) and os.listdir(target.output) == []


def test_a_user_file_in_a_crashed_write_blocks_the_clearing(tmp_path):
    target = _target(tmp_path)
    ours = {"system": "idpir", "config": "cfg-a", "dataset": "wine", "output": target.output, "plan_id": "plan-1"}
    _wedge(target.output, ours)
    open(os.path.join(target.output, "README"), "w").write("keep")
    before = _tree(target.output)
    with pytest.raises(OutputConflictError, match=r"is a folder with other files \('README'\) and no Delta table"):
        prepare_output(target, "plan-2", if_exists="error")
    assert _tree(target.output) == before


def test_a_damaged_log_is_refused_not_read_as_empty(tmp_path):
    target = _target(tmp_path)
    ours = {"system": "idpir", "config": "cfg-a", "dataset": "wine", "output": target.output, "plan_id": "plan-1"}
    _wedge(target.output, ours)
    open(os.path.join(target.output, "_delta_log", "00000000000000000000.json"), "w").write("garbage\n")
    before = _tree(target.output)
    with pytest.raises(OutputConflictError, match=r"holds a Delta log whose commits cannot be read \(damaged\)"):
        prepare_output(target, "plan-2", if_exists="error")
    assert _tree(target.output) == before


def test_an_empty_version_0_commit_file_left_by_a_crash_counts_as_no_version(tmp_path):
    target = _target(tmp_path)
    ours = {"system": "idpir", "config": "cfg-a", "dataset": "wine", "output": target.output, "plan_id": "plan-1"}
    _wedge(target.output, ours)
    open(os.path.join(target.output, "_delta_log", "00000000000000000000.json"), "w").close()
    assert prepare_output(target, "plan-2", if_exists="error") == "pending"
    assert os.listdir(target.output) == []


def test_another_release_about_to_write_an_absent_output_is_refused(tmp_path):
    target = _target(tmp_path)
    other = {"system": "idpir", "config": "cfg-b", "dataset": "wine", "output": target.output, "plan_id": "p"}
    open(marker_path(target.output), "w").write(json.dumps(other))
    with pytest.raises(OutputConflictError, match=r"is being written by release 'cfg-b' \(dataset 'wine', marker "):
        prepare_output(target, "plan-2", if_exists="error")
    assert json.loads(open(marker_path(target.output)).read()) == other
    ours = {**other, "config": "cfg-a"}
    open(marker_path(target.output), "w").write(json.dumps(ours))  # a crash before the first file was written
    assert prepare_output(target, "plan-2", if_exists="error") == "absent"
    assert marker_text(target.output) == {**ours, "plan_id": "plan-2"}


def test_a_committed_table_is_never_cleared_and_keeps_its_leftovers(tmp_path):
    """With a committed version, Delta ignores files its log does not list: nothing is removed or marked."""
    target = _target(tmp_path)
    _table(target.output, _release_prov())
    stray = os.path.join(target.output, "part-99999-stray.snappy.parquet")
    open(stray, "wb").write(b"x")
    before = _tree(target.output)
    assert prepare_output(target, "plan-2", if_exists="new-version") == "table"
    assert _tree(target.output) == before


def test_validate_refuses_a_bad_output_before_spark(tmp_path, capsys):
    """``fragrelease validate`` (no Spark) runs the same check for a local output."""
    from fragrelease.jobs.cli import run_cli

    source = tmp_path / "wine"
    source.mkdir()
    output = tmp_path / "release"
    output.write_text("not a folder")
    conf = tmp_path / "release.yaml"
    conf.write_text(yaml.safe_dump({
        "name": "cli-output", "dataset": "wine", "fragmentation": "horizontal", "epsilon": "1", "k": 10,
        "source": {"path": str(source), "format": "parquet"}, "reports": False,
        "owners": [{"name": "a", "rows": 100}, {"name": "b", "rows": 100}],
        "work_dir": str(tmp_path / "work"), "output": str(output)}))
    for argv in (["validate", str(conf)], ["validate", "--aggregator", str(conf)]):
        assert run_cli(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err == (f"error: output {str(output)!r} is a file, not a release folder; nothing was written: choose "
                       "an output path that does not exist"), err
    assert output.read_text() == "not a folder"
    output.unlink()
    assert run_cli(["validate", str(conf)]) == 0
