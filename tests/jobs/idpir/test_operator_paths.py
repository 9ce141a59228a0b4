"""Operator mistakes with paths and storage, refused in one line before any spend (issue 49 item 6, part A).

A reliability run on 0.16.0 found five placements that ``fragrelease validate`` passed and a release
met only later: an output that is a dangling symbolic link (the commit failed after both ledgers
recorded ε 1, leaving a pending marker), an output in or around an owner's ledger, a pseudonym key
path that is a FIFO (``validate`` and every step hung for ever), a ``work_dir`` inside the output
(its metadata landed in the release's folder) and a group-readable private folder (refused only
after a new signing key was written into it). Each is now refused by ``validate`` and by ``run``
before Spark starts (exit 2, one line), nothing on disk changes and every ledger holds nothing; the
Python API's path refuses them before any spend too (the last tests).
"""
import os
import pathlib
import signal
import socket
import stat
import tempfile

import pytest
import yaml

from fragrelease.errors import ConfigError, OutputConflictError, PseudonymKeyError, SigningKeyError
from fragrelease.jobs.cli import run_cli
from fragrelease.jobs.protocol.ledger import ensure_ledger, spent
from fragrelease.private_files import read_private_file
from fragrelease.protocol.config import config_from_dict

OWNERS = ("a", "b")


class SparkStarted(AssertionError):
    pass


@pytest.fixture
def no_spark(monkeypatch):
    import fragrelease.jobs.session as session

    def refuse(*a, **k):
        raise SparkStarted("a SparkSession was requested before the paths were checked")

    monkeypatch.setattr(session, "get_spark", refuse)


@pytest.fixture(autouse=True)
def private_root(tmp_path, monkeypatch):
    """The default private root (the aggregator's folder) under the test's folder, not the user's home."""
    monkeypatch.setenv("FRAGRELEASE_PRIVATE_ROOT", str(tmp_path / "root"))


@pytest.fixture
def deadline():
    """Fail (instead of hanging the suite) when a step blocks for more than 60 s, e.g. on a FIFO."""
    def expired(*_):
        raise TimeoutError("blocked for 60 s (a FIFO opened for reading waits for a writer)")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def _config(tmp, *, ledgers=True, **kw) -> dict:
    """Two horizontal CSV owners of 120 records each with ledgers under ``tmp/ledgers`` and private folders
    under ``tmp/private`` (0700); ``kw`` replaces top-level keys."""
    schema = {"name": "clinic", "attributes": [
        {"name": "record_id", "type": "long", "role": "id"},
        {"name": "age", "type": "integer", "role": "quasi-identifier", "kind": "numeric", "domain": [0, 100]},
        {"name": "sex", "type": "string", "role": "quasi-identifier", "kind": "categorical",
         "categories": ["Female", "Male"]},
    ]}
    (tmp / "schema.yaml").write_text(yaml.safe_dump(schema))
    (tmp / "src").mkdir(exist_ok=True)
    for name, first in (("a", 1000), ("b", 5000)):
        (tmp / "src" / f"{name}.csv").write_text("record_id,age,sex\n" + "".join(
            f"{first + n},{20 + (n * 7) % 60},{'Male' if n % 3 else 'Female'}\n" for n in range(120)))
    (tmp / "private").mkdir(mode=0o700, exist_ok=True)
    owners = []
    for n in OWNERS:
        o = {"name": n, "source": {"path": str(tmp / "src" / f"{n}.csv"), "format": "csv"},
             "private_dir": str(tmp / "private" / n)}
        if ledgers:
            o["ledger"] = {"path": str(tmp / "ledgers" / n), "lifetime_epsilon": "3"}
        owners.append(o)
    d = dict(name="paths", dataset=str(tmp / "schema.yaml"), fragmentation="horizontal", mechanism="idp-ir",
             epsilon="1", k=5, owners=owners, work_dir=str(tmp / "work"), output=str(tmp / "release"),
             if_exists="new-version", reports=False)
    d.update(kw)
    return d


def _write(tmp, d: dict) -> str:
    conf = tmp / "release.yaml"
    conf.write_text(yaml.safe_dump(d))
    return str(conf)


def _tree(tmp) -> dict:
    """Every path under ``tmp`` (links not followed) with its type, mode and size: what is on disk."""
    out = {}
    for root, dirs, files in os.walk(tmp):
        for name in dirs + files:
            p = os.path.join(root, name)
            st = os.lstat(p)
            out[os.path.relpath(p, tmp)] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode),
                                            0 if stat.S_ISDIR(st.st_mode) else st.st_size)
    return out


def _refused(tmp, d: dict, argv: list, capsys, text: str) -> None:
    """``fragrelease <argv> <config>`` exits 2 with the one line ``error: <text>``; nothing on disk changes."""
    conf = _write(tmp, d)
    capsys.readouterr()
    before = _tree(tmp)
    assert run_cli(argv[:1] + [conf] + argv[1:]) == 2
    out, err = capsys.readouterr()
    assert err.strip().splitlines() == [f"error: {text}"], err
    assert out == ""
    assert _tree(tmp) == before


def _ledgers_empty(tmp) -> None:
    for n in OWNERS:
        assert spent(str(tmp / "ledgers" / n), n, "clinic") == []


# ------------------------------------------------------------------ 1. dangling symbolic links
DANGLING = [
    ("the output", "release", "release"),
    ("a folder on the way", "releases/current", "releases"),
]


@pytest.mark.parametrize("argv", [["validate"], ["validate", "--aggregator"], ["run"]], ids=" ".join)
@pytest.mark.parametrize("what,output,link", DANGLING, ids=[c[0] for c in DANGLING])
def test_a_dangling_link_on_the_way_to_the_output_is_refused(tmp_path, capsys, no_spark, argv, what, output, link):
    """``validate`` said OK and the commit failed after both ledgers recorded ε 1: now refused before Spark."""
    for n in OWNERS:
        ensure_ledger(str(tmp_path / "ledgers" / n))
    os.symlink(str(tmp_path / "gone"), str(tmp_path / link))
    out = str(tmp_path / output)
    _refused(tmp_path, _config(tmp_path, output=out), argv, capsys,
             f"output {out!r}: {str(tmp_path / link)!r} is a symbolic link to {str(tmp_path / 'gone')!r}, which "
             "does not resolve to an existing folder; nothing was written: create its target, remove the link or "
             "choose another output")
    _ledgers_empty(tmp_path)
    assert not os.path.lexists(out + "_fragrelease_pending.json")


def test_a_link_loop_and_a_file_on_the_way_are_refused(tmp_path, capsys, no_spark):
    os.symlink(str(tmp_path / "loop"), str(tmp_path / "loop"))
    _refused(tmp_path, _config(tmp_path, output=str(tmp_path / "loop" / "r")), ["validate"], capsys,
             f"output {str(tmp_path / 'loop' / 'r')!r}: {str(tmp_path / 'loop')!r} is a symbolic link to "
             f"{str(tmp_path / 'loop')!r}, which does not resolve to an existing folder; nothing was written: create "
             "its target, remove the link or choose another output")
    (tmp_path / "notes.txt").write_text("mine")
    out = str(tmp_path / "notes.txt" / "release")
    _refused(tmp_path, _config(tmp_path, output=out), ["validate"], capsys,
             f"output {out!r}: {str(tmp_path / 'notes.txt')!r} is a file, not a folder, so the output cannot be "
             "created under it; nothing was written: choose another output")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into any folder")
def test_an_output_folder_this_user_cannot_write_is_refused(tmp_path, capsys, no_spark):
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o500)
    out = str(ro / "release")
    try:
        _refused(tmp_path, _config(tmp_path, output=out), ["validate"], capsys,
                 f"output {out!r}: folder {str(ro)!r} is not writable by this user (its mode or a read-only disk); "
                 "nothing was written: fix its permissions or choose another output")
    finally:
        ro.chmod(0o700)


@pytest.mark.parametrize("committed", [False, True], ids=["new output", "existing release"])
def test_a_folder_the_release_writes_into_must_be_writable(tmp_path, capsys, no_spark, monkeypatch, committed):
    """As root too: ``os.access`` says no for the folder the commit writes into (the output's parent for a
    new output and its marker, the table's ``_delta_log`` for a new version of an existing release)."""
    import json

    import pyarrow as pa
    from deltalake import CommitProperties, write_deltalake

    from fragrelease.jobs.storage import ReleaseTarget, check_output

    out = tmp_path / "release"
    target = ReleaseTarget(output=str(out), config="paths", dataset="clinic")
    if committed:
        write_deltalake(str(out), pa.table({"age": pa.array([1.0, 2.0])}), commit_properties=CommitProperties(
            custom_metadata={"userMetadata": json.dumps({"role": "release", "system": "idpir", "dataset": "clinic"})}))
    denied = str(out / "_delta_log") if committed else str(tmp_path)
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: p != denied and real(p, mode, **kw))
    with pytest.raises(OutputConflictError) as e:
        check_output(target, if_exists="new-version")
    assert str(e.value) == (f"output {str(out)!r}: folder {denied!r} is not writable by this user (its mode or a "
                            "read-only disk); nothing was written: fix its permissions or choose another output")
    if not committed:
        _refused(tmp_path, _config(tmp_path), ["validate"], capsys, str(e.value))
    monkeypatch.setattr(os, "access", real)
    assert check_output(target, if_exists="new-version") == ("table" if committed else "absent")  # control


def test_a_link_to_an_existing_folder_is_followed(tmp_path, capsys, no_spark):
    """Control: the check refuses broken ways only; a link to a folder that exists is a valid output."""
    (tmp_path / "elsewhere").mkdir()
    os.symlink(str(tmp_path / "elsewhere"), str(tmp_path / "releases"))
    conf = _write(tmp_path, _config(tmp_path, output=str(tmp_path / "releases" / "r")))
    assert run_cli(["validate", conf]) == 0, capsys.readouterr().err


def test_the_plan_refuses_a_dangling_output_before_any_owner_spends(spark, tmp_path):
    """The Python API's path (no preflight): the plan's output check refuses the link before any ledger
    records a spend, and no pending marker is written (before: both ledgers recorded ε 1, then the
    commit failed with DELTA_CANNOT_CREATE_LOG_PATH and the marker stayed)."""
    from signing_keys import with_keys  # tests/helpers

    from fragrelease.jobs.protocol.release import run_local_release

    os.symlink(str(tmp_path / "gone"), str(tmp_path / "release"))
    cfg = with_keys(config_from_dict(_config(tmp_path)), tmp_path / "signing")
    with pytest.raises(OutputConflictError) as e:
        run_local_release(spark, cfg)
    assert str(e.value).startswith(f"output {str(tmp_path / 'release')!r}: {str(tmp_path / 'release')!r} is a "
                                   "symbolic link to ")
    _ledgers_empty(tmp_path)
    assert not os.path.lexists(str(tmp_path / "release") + "_fragrelease_pending.json")
    assert os.readlink(str(tmp_path / "release")) == str(tmp_path / "gone")
    assert not os.path.lexists(str(tmp_path / "gone"))


# ------------------------------------------------------------------ 2. output, work_dir, ledgers, private folders
def _placements(tmp):
    led = str(tmp / "ledgers" / "a")
    why = ("a release and the budget ledger of owner 'a' are separate Delta tables: choose another output or "
           "ledger path")
    return [
        ("output is a ledger", {"output": led}, f"output: {led!r} is also owners[0].ledger.path; {why}"),
        ("output inside a ledger", {"output": led + "/r"},
         f"output: {led + '/r'!r} lies inside owners[0].ledger.path {led!r}; {why}"),
        ("ledger inside the output", {"output": str(tmp / "ledgers")},
         f"owners[0].ledger.path: {led!r} lies inside output {str(tmp / 'ledgers')!r}; {why}"),
        ("work_dir inside the output", {"work_dir": str(tmp / "release" / "work")},
         f"work_dir: {str(tmp / 'release' / 'work')!r} lies inside output {str(tmp / 'release')!r}; the release's "
         "folder holds only the release (the plan would refuse the work files): choose a work_dir outside the output"),
        ("output inside work_dir", {"output": str(tmp / "work" / "release")},
         f"output: {str(tmp / 'work' / 'release')!r} lies inside work_dir {str(tmp / 'work')!r}, whose content the "
         "release rewrites; move it out of work_dir or choose another work_dir"),
        ("work_dir inside a ledger", {"work_dir": led + "/work"},
         f"work_dir: {led + '/work'!r} lies inside owners[0].ledger.path {led!r}; the budget ledger of owner 'a' "
         "holds only its Delta table: choose a work_dir outside it"),
    ]


@pytest.mark.parametrize("argv", [["validate"], ["run"]], ids=" ".join)
@pytest.mark.parametrize("case", range(6), ids=[c[0] for c in _placements(pathlib.Path("/t"))])
def test_an_output_or_work_dir_in_the_wrong_place_is_refused(tmp_path, capsys, no_spark, argv, case):
    _, kw, text = _placements(tmp_path)[case]
    _refused(tmp_path, _config(tmp_path, **kw), argv, capsys, text)
    _ledgers_empty(tmp_path)


def test_an_existing_ledger_as_output_is_refused_with_the_same_line(tmp_path, capsys, no_spark):
    """The ledger's table exists already (an earlier release spent): the placement is named, not its content."""
    for n in OWNERS:
        ensure_ledger(str(tmp_path / "ledgers" / n))
    _, kw, text = _placements(tmp_path)[0]
    _refused(tmp_path, _config(tmp_path, **kw), ["run"], capsys, text)
    _ledgers_empty(tmp_path)


def _owners_with(tmp, ledgers: dict, private: dict) -> list:
    d = _config(tmp)
    for o in d["owners"]:
        o["ledger"]["path"] = ledgers.get(o["name"], o["ledger"]["path"])
        o["private_dir"] = private.get(o["name"], o["private_dir"])
    return d["owners"]


def test_nested_ledgers_and_a_private_folder_inside_a_ledger_are_refused(tmp_path, capsys, no_spark):
    la, lb = str(tmp_path / "ledgers" / "a"), str(tmp_path / "ledgers" / "a" / "b")
    _refused(tmp_path, _config(tmp_path, owners=_owners_with(tmp_path, {"b": lb}, {})), ["validate"], capsys,
             f"owners[1].ledger.path: {lb!r} lies inside owners[0].ledger.path {la!r}; the budget ledger of owner "
             "'a' holds only its Delta table: give each ledger its own folder (or the same path)")
    pa = la + "/private"
    _refused(tmp_path, _config(tmp_path, owners=_owners_with(tmp_path, {}, {"a": pa})), ["validate"], capsys,
             f"owners[0].private_dir: {pa!r} lies inside owners[0].ledger.path {la!r}; the budget ledger of owner "
             "'a' holds only its Delta table: keep private folders out of it")


def test_a_shared_ledger_and_a_ledger_in_a_private_folder_are_fine(tmp_path, capsys, no_spark):
    """Controls: one ledger path for both owners (its rows name the owner) and a ledger inside the owner's
    own private folder are valid placements."""
    shared = str(tmp_path / "ledgers" / "shared")
    conf = _write(tmp_path, _config(tmp_path, owners=_owners_with(tmp_path, {"a": shared, "b": shared}, {})))
    assert run_cli(["validate", conf]) == 0, capsys.readouterr().err
    inside = str(tmp_path / "private" / "a" / "ledger")
    conf = _write(tmp_path, _config(tmp_path, owners=_owners_with(tmp_path, {"a": inside}, {})))
    assert run_cli(["validate", conf]) == 0, capsys.readouterr().err


# ------------------------------------------------------------------ 3. FIFOs where a key file should be
def _keyed(tmp, key: str) -> dict:
    d = _config(tmp)
    for o in d["owners"]:
        o["pseudonym_key"] = {"file": key}
    return d


@pytest.mark.parametrize("argv", [["validate"], ["validate", "--owner", "a"], ["run"]], ids=" ".join)
def test_a_pseudonym_key_that_is_a_fifo_is_refused_without_waiting(tmp_path, capsys, no_spark, deadline, argv):
    """Before: ``validate`` and every step blocked for ever in open(2), waiting for a writer."""
    fifo = str(tmp_path / "key-fifo")
    os.mkfifo(fifo, 0o600)
    _refused(tmp_path, _keyed(tmp_path, fifo), argv, capsys,
             f"owner 'a': pseudonym key file {fifo!r} is not a regular file (a FIFO (named pipe))")
    _ledgers_empty(tmp_path)


def test_a_signing_key_that_is_a_fifo_is_refused_without_waiting(tmp_path, capsys, no_spark, deadline):
    fifo = str(tmp_path / "signing-fifo")
    os.mkfifo(fifo, 0o600)
    d = _config(tmp_path)
    d["owners"][0]["signing_key"] = fifo
    _refused(tmp_path, d, ["validate"], capsys,
             f"owner 'a': signing_key {fifo!r} is not a regular file (a FIFO (named pipe))")


def test_a_source_that_is_a_fifo_is_refused(tmp_path, capsys, no_spark, deadline):
    fifo = str(tmp_path / "src-fifo.csv")
    os.mkfifo(fifo, 0o600)
    d = _config(tmp_path)
    d["owners"][1]["source"]["path"] = fifo
    _refused(tmp_path, d, ["validate"], capsys, f"owners[1].source.path: {fifo!r} is a FIFO (named pipe), not a "
                                                "file or folder")


def test_read_private_file_refuses_every_non_regular_file_without_blocking(tmp_path, deadline):
    """The reader behind both key files: a FIFO (even one swapped in after a check by name), a socket, a
    device and a folder are refused on the open descriptor; a 0600 regular file is read whole."""
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo, 0o600)
    short = tempfile.mkdtemp(prefix="h6a")  # a socket's path has at most 107 bytes
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(os.path.join(short, "sock"))
    (tmp_path / "dir").mkdir(mode=0o700)
    cases = [(fifo, "a FIFO (named pipe)"), ("/dev/null", "a device"), (str(tmp_path / "dir"), "a folder")]
    for path, kind in cases:
        with pytest.raises(PseudonymKeyError) as e:
            read_private_file(path, who="owner 'a'", what="pseudonym key file", error=PseudonymKeyError)
        assert str(e.value) == f"owner 'a': pseudonym key file {path!r} is not a regular file ({kind})"
    with pytest.raises(SigningKeyError) as e:  # a socket cannot be opened: the OS's cause, still one line
        read_private_file(os.path.join(short, "sock"), who="owner 'a'", what="signing_key", error=SigningKeyError)
    assert str(e.value).startswith(f"owner 'a': signing_key {os.path.join(short, 'sock')!r} cannot be read: ")
    sock.close()
    os.unlink(os.path.join(short, "sock"))
    os.rmdir(short)
    key = tmp_path / "key"
    key.write_bytes(b"x" * 100_000)
    key.chmod(0o600)
    assert read_private_file(str(key), who="owner 'a'", what="pseudonym key file") == b"x" * 100_000
    key.chmod(0o640)
    with pytest.raises(ConfigError, match="is readable or writable by group or others"):
        read_private_file(str(key), who="owner 'a'", what="pseudonym key file")


# ------------------------------------------------------------------ 5. a private folder open to others
@pytest.mark.parametrize("argv", [["validate"], ["validate", "--owner", "b"], ["run"]], ids=" ".join)
def test_a_group_readable_private_folder_is_refused_before_anything_is_written(tmp_path, capsys, no_spark, argv):
    private = tmp_path / "private" / "b"
    private.mkdir(parents=True, mode=0o700)
    private.chmod(0o750)
    _refused(tmp_path, _config(tmp_path), argv, capsys,
             f"owner 'b': private folder {str(private)!r} is readable or writable by group or others (mode 0750); "
             f"run 'chmod 700 {private}'")
    assert os.listdir(private) == []
    _ledgers_empty(tmp_path)


def test_the_aggregator_checks_its_own_private_folder(tmp_path, capsys, no_spark):
    agg = tmp_path / "root" / "paths" / "_aggregator"
    agg.mkdir(parents=True)
    agg.chmod(0o755)
    _refused(tmp_path, _config(tmp_path), ["validate", "--aggregator"], capsys,
             f"aggregator: private folder {str(agg)!r} is readable or writable by group or others (mode 0755); "
             f"run 'chmod 700 {agg}'")


def test_the_api_writes_no_signing_key_into_an_open_private_folder(tmp_path):
    """``Release.run()`` has no preflight: :func:`play_release` generates the owners' signing keys first, and
    now checks each private folder before writing one (before: the key was written, then the folder refused).
    Refused before any Spark work (``spark`` is never touched here)."""
    from fragrelease.jobs.protocol.release import play_release

    private = tmp_path / "private" / "a"
    private.mkdir(parents=True, mode=0o700)
    private.chmod(0o770)
    with pytest.raises(ConfigError) as e:
        play_release(None, config_from_dict(_config(tmp_path)))
    assert str(e.value) == (f"owner 'a': private folder {str(private)!r} is readable or writable by group or "
                            f"others (mode 0770); run 'chmod 700 {private}'")
    assert os.listdir(private) == []
    assert os.listdir(tmp_path / "private") == ["a"]  # owner b's folder was not created either
