"""A release deletes only what it wrote under work_dir (issue 22 item 1; jobs/protocol/workspace.py).

At 13383f1 ``fragrelease run``, ``Release.run()`` and ``scripts/run-parties.sh`` deleted the whole
work_dir: an owner's sources, the output, a ledger or a private root placed there were lost, and
``Release.run()`` without a work_dir left ``fragrelease-work-*`` folders holding protected
fragments in the system temp folder. Each placement below is now refused before Spark starts and
the user's file survives.
"""
import json
import os
import stat
import subprocess
import tempfile

import pytest
import yaml

from fragrelease.errors import ConfigError, DomainError
from fragrelease.jobs.cli import run_cli
from fragrelease.jobs.protocol.preflight import preflight
from fragrelease.jobs.protocol.workspace import (
    MARKER,
    claim_work_dir,
    clear_work_dir,
    ensure_private_dir,
    user_paths,
    write_private_text,
)
from fragrelease.protocol.config import config_from_dict, load_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


class SparkStarted(AssertionError):
    pass


@pytest.fixture
def no_spark(monkeypatch):
    import fragrelease.jobs.session as session

    def refuse(*a, **k):
        raise SparkStarted("a SparkSession was requested before the work_dir was checked")

    monkeypatch.setattr(session, "get_spark", refuse)


def _csv(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("record_id,age,sex\n1,40,Male\n")
    return path


def _base(tmp, **kw):
    """A horizontal release of two CSV owners; sources and output outside work_dir unless kw says so."""
    d = dict(name="safe", dataset="adult", fragmentation="horizontal", epsilon="1", k=3,
             owners=[{"name": "a", "source": {"path": _csv(str(tmp / "src" / "a.csv")), "format": "csv"}},
                     {"name": "b", "source": {"path": _csv(str(tmp / "src" / "b.csv")), "format": "csv"}}],
             work_dir=str(tmp / "work"), output=str(tmp / "release"))
    d.update(kw)
    return d


def _owner(name, path, **kw):
    return {"name": name, "source": {"path": path, "format": "csv"}, **kw}


def _placements(tmp):
    """(case, config dict, the user's file that must survive, texts of the one-line error)."""
    work = tmp / "work"
    src_in = str(work / "a.csv")
    schema_in = str(work / "schema.yaml")
    return [
        ("planted foreign file", _base(tmp), str(work / "notes.txt"), ["work_dir:", "'notes.txt'", "which no release wrote"]),
        ("owner CSV source inside", _base(tmp, owners=[_owner("a", src_in), _owner("b", str(tmp / "src" / "b.csv"))]),
         src_in, ["owners[0].source.path:", repr(src_in), "lies inside work_dir"]),
        ("source equal to work_dir", _base(tmp, work_dir=str(tmp / "src")), str(tmp / "src" / "a.csv"),
         ["owners[0].source.path:", "lies inside work_dir"]),
        ("ledger inside", _base(tmp, owners=[_owner("a", str(tmp / "src" / "a.csv"),
                                                    ledger={"path": str(work / "ledger"), "lifetime_epsilon": "5"}),
                                             _owner("b", str(tmp / "src" / "b.csv"))]),
         str(work / "ledger" / "_delta_log" / "00000000000000000000.json"),
         ["owners[0].ledger.path:", repr(str(work / "ledger")), "lies inside work_dir"]),
        ("output inside", _base(tmp, output=str(work / "release")),
         str(work / "release" / "_delta_log" / "00000000000000000000.json"),
         ["output:", repr(str(work / "release")), "lies inside work_dir"]),
        ("schema file inside", _base(tmp, dataset=schema_in), schema_in, ["dataset:", repr(schema_in), "lies inside work_dir"]),
        ("config file inside", _base(tmp), str(work / "c.yaml"), ["config:", "c.yaml", "lies inside work_dir"]),
    ]


def _plant(path, text="user data\n"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write(text)


def _write_schema(path):
    from fragrelease.schemas.adult import SCHEMA

    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        yaml.safe_dump(SCHEMA.model_dump(mode="json", exclude_none=True), f)


def _setup(tmp, case):
    name, data, keep, texts = next(c for c in _placements(tmp) if c[0] == case)
    if data["dataset"].endswith(".yaml"):
        _write_schema(data["dataset"])
    for o in data["owners"]:
        _plant(o["source"]["path"], "record_id,age,sex\n1,40,Male\n")
    _plant(keep)
    config = str(tmp / "work" / "c.yaml") if case == "config file inside" else str(tmp / "c.yaml")
    os.makedirs(os.path.dirname(config), exist_ok=True)
    with open(config, "w") as f:
        yaml.safe_dump(data, f)
    return data, keep, texts, config


CASES = ["planted foreign file", "owner CSV source inside", "source equal to work_dir", "ledger inside",
         "output inside", "schema file inside", "config file inside"]


def _snapshot(path):
    with open(path) as f:
        return f.read()


@pytest.mark.parametrize("case", CASES)
def test_preflight_refuses_each_placement_and_the_file_survives(case, tmp_path):
    data, keep, texts, config = _setup(tmp_path, case)
    before = _snapshot(keep)
    with pytest.raises(ConfigError) as info:
        preflight(load_config(config), party="run", config_path=config)
    msg = str(info.value)
    assert "\n" not in msg
    for t in texts:
        assert t in msg, msg
    assert _snapshot(keep) == before


@pytest.mark.parametrize("case", CASES)
def test_fragrelease_run_refuses_before_spark_and_the_file_survives(case, tmp_path, monkeypatch, capsys, no_spark):
    data, keep, texts, config = _setup(tmp_path, case)
    before = _snapshot(keep)
    assert run_cli(["run", config]) == 2
    err = " ".join(capsys.readouterr().err.split())
    for t in texts:
        assert t in err, err
    assert _snapshot(keep) == before
    assert not os.path.exists(tmp_path / "work" / MARKER)  # nothing claimed, nothing written


@pytest.mark.parametrize("case", CASES)
def test_release_api_refuses_before_spark_and_the_file_survives(case, tmp_path, no_spark):
    from fragrelease.jobs.api import Release

    data, keep, texts, config = _setup(tmp_path, case)
    before = _snapshot(keep)
    with pytest.raises(ConfigError) as info:
        Release.from_config(config).run(config_path=config)
    for t in texts:
        assert t in str(info.value), str(info.value)
    assert _snapshot(keep) == before


@pytest.mark.parametrize("how", ["private_dir", "private root"])
def test_private_folder_or_root_inside_work_dir_is_refused(how, tmp_path, monkeypatch):
    """An explicit private_dir was checked at 13383f1; the default root ($FRAGRELEASE_PRIVATE_ROOT) was not."""
    data = _base(tmp_path)
    if how == "private_dir":
        data["owners"][0]["private_dir"] = str(tmp_path / "work" / "a-private")
        text = "owners[0].private_dir: owner 'a': private_dir"
    else:
        monkeypatch.setenv("FRAGRELEASE_PRIVATE_ROOT", str(tmp_path / "work" / "private"))
        text = (f"FRAGRELEASE_PRIVATE_ROOT: the default private root {str(tmp_path / 'work' / 'private')!r} of owners "
                "['a', 'b'] lies under the shared work_dir")
    with pytest.raises(ConfigError) as info:
        config_from_dict(data)
    assert text in str(info.value) and "lies under the shared work_dir" in str(info.value), str(info.value)
    assert "\n" not in str(info.value)


def test_private_root_under_the_output_is_refused(tmp_path, monkeypatch):
    """And a default private folder under work_dir whose root is not (work_dir inside the root) too."""
    monkeypatch.setenv("FRAGRELEASE_PRIVATE_ROOT", str(tmp_path / "priv"))
    with pytest.raises(ConfigError, match="owners\\[0\\].private_dir: owner 'a': default private folder"):
        config_from_dict(_base(tmp_path, work_dir=str(tmp_path / "priv" / "safe")))
    monkeypatch.setenv("FRAGRELEASE_PRIVATE_ROOT", str(tmp_path / "release" / "p"))
    with pytest.raises(ConfigError, match="default private root .* lies under the shared output"):
        config_from_dict(_base(tmp_path))


def test_user_paths_lists_every_user_file(tmp_path, monkeypatch):
    monkeypatch.setenv("FRAGRELEASE_PRIVATE_ROOT", str(tmp_path / "priv"))
    data = _base(tmp_path, dataset=str(tmp_path / "s.yaml"))
    data["owners"][0]["ledger"] = {"path": str(tmp_path / "ledger-a"), "lifetime_epsilon": "3"}
    data["owners"][1]["private_dir"] = str(tmp_path / "b-private")
    pairs = user_paths(config_from_dict(data), config_path="c.yaml")
    assert pairs == [
        ("config", "c.yaml"), ("dataset", str(tmp_path / "s.yaml")), ("output", str(tmp_path / "release")),
        ("owners[0].source.path", str(tmp_path / "src" / "a.csv")),
        ("owners[0].ledger.path", str(tmp_path / "ledger-a")),
        ("owners[0].private_dir", str(tmp_path / "priv" / "safe" / "a")),
        ("owners[0].private_dir: FRAGRELEASE_PRIVATE_ROOT", str(tmp_path / "priv")),
        ("owners[1].source.path", str(tmp_path / "src" / "b.csv")),
        ("owners[1].private_dir", str(tmp_path / "b-private")),
        ("aggregator's private folder (FRAGRELEASE_PRIVATE_ROOT)", str(tmp_path / "priv" / "safe" / "_aggregator")),
    ]


def test_marker_of_another_release_is_refused(tmp_path):
    cfg = config_from_dict(_base(tmp_path))
    claim_work_dir(cfg)
    other = config_from_dict(_base(tmp_path, name="other"))
    with pytest.raises(ConfigError) as info:
        preflight(other, party="run")
    assert str(info.value) == (f"work_dir: {str(tmp_path / 'work')!r} belongs to release 'safe' (marker {MARKER}), "
                               "not to 'other': choose another work_dir")
    with pytest.raises(ConfigError):
        clear_work_dir(other)
    assert json.loads((tmp_path / "work" / MARKER).read_text())["name"] == "safe"


def test_entries_without_marker_are_not_taken_for_ours(tmp_path):
    (tmp_path / "work" / "owners").mkdir(parents=True)
    (tmp_path / "work" / "owners" / "keep.txt").write_text("x")
    with pytest.raises(ConfigError, match="holds 'owners' but no marker"):
        clear_work_dir(config_from_dict(_base(tmp_path)))
    assert (tmp_path / "work" / "owners" / "keep.txt").exists()


def test_rerun_of_the_same_release_clears_only_its_own_entries(tmp_path):
    cfg = config_from_dict(_base(tmp_path))
    assert clear_work_dir(cfg) == []  # a new folder: claimed, nothing to remove
    work = tmp_path / "work"
    (work / "metadata").mkdir()
    (work / "metadata" / "a.json").write_text("{}")
    (work / "plan.json").write_text("{}")
    (work / "owners" / "a" / "protected").mkdir(parents=True)
    assert clear_work_dir(cfg) == ["metadata", "plan.json", "owners"]
    assert sorted(os.listdir(work)) == [MARKER]
    # a file planted between runs is not removed: the clearing is refused as a whole
    (work / "plan.json").write_text("{}")
    (work / "mine.csv").write_text("keep")
    with pytest.raises(ConfigError, match="'mine.csv', which no release wrote"):
        clear_work_dir(cfg)
    assert (work / "mine.csv").read_text() == "keep" and (work / "plan.json").exists()


def test_work_clear_command(tmp_path, capsys, no_spark):
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(_base(tmp_path)))
    assert run_cli(["work", "clear", str(config)]) == 0
    (tmp_path / "work" / "plan.json").write_text("{}")
    assert run_cli(["work", "clear", str(config)]) == 0
    assert sorted(os.listdir(tmp_path / "work")) == [MARKER]
    (tmp_path / "work" / "x").write_text("keep")
    capsys.readouterr()
    assert run_cli(["work", "clear", str(config)]) == 2
    assert "'x', which no release wrote" in capsys.readouterr().err
    assert (tmp_path / "work" / "x").read_text() == "keep"


def test_run_parties_script_keeps_a_planted_file(tmp_path):
    """scripts/run-parties.sh no longer runs ``rm -rf`` on work_dir: it asks ``fragrelease work clear``."""
    data, keep, texts, config = _setup(tmp_path, "planted foreign file")
    before = _snapshot(keep)
    script = os.path.join(ROOT, "scripts", "run-parties.sh")
    if not os.path.exists(os.path.join(ROOT, ".venv", "bin", "fragrelease")):
        pytest.skip("the script runs the worktree's .venv")
    proc = subprocess.run(["bash", script, config], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "which no release wrote" in proc.stderr
    assert _snapshot(keep) == before
    with open(script) as f:
        script = f.read()
        assert not [line for line in script.splitlines() if "rm " in line and "work_dir" in line]


def test_owner_and_aggregator_steps_claim_the_work_dir(tmp_path, no_spark):
    """The separate party commands refuse another release's work_dir before Spark too."""
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(_base(tmp_path)))
    other = config_from_dict(_base(tmp_path, name="other"))
    claim_work_dir(other)
    for argv in (["owner", "metadata", "--config", str(config), "--owner", "a"],
                 ["aggregator", "plan", "--config", str(config)]):
        assert run_cli(argv) == 2


def test_private_files_are_0600_in_0700_folders_whatever_the_umask(tmp_path):
    old = os.umask(0o000)
    try:
        d = str(tmp_path / "root" / "release" / "owner")
        ensure_private_dir(d)
        write_private_text(os.path.join(d, "report.html"), "<p>private</p>")
    finally:
        os.umask(old)
    for p in (tmp_path / "root", tmp_path / "root" / "release", tmp_path / "root" / "release" / "owner"):
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o700, p
    assert stat.S_IMODE(os.stat(os.path.join(d, "report.html")).st_mode) == 0o600


# ---------------------------------------------------------------- with Spark
def _tmp_folders(root):
    return sorted(n for n in os.listdir(root) if n.startswith("fragrelease-work-"))


@pytest.fixture
def own_tempdir(tmp_path, monkeypatch):
    root = tmp_path / "systemtmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def test_api_temp_work_dir_removed_after_a_failure(spark, own_tempdir, tmp_path):
    """At 13383f1 every Release.run() without work_dir left a fragrelease-work-* folder behind."""
    from fragrelease.jobs.api import Release

    bad = spark.createDataFrame([(i, 200, "Male") for i in range(5)], "record_id long, age int, sex string")
    good = spark.createDataFrame([(i + 10, 40, "Male") for i in range(5)], "record_id long, age int, sex string")
    from fragrelease.schemas.base import schema_from_dict

    schema = schema_from_dict({"name": "s", "attributes": [
        {"name": "record_id", "type": "long", "role": "id"},
        {"name": "age", "type": "integer", "role": "quasi-identifier", "kind": "numeric", "domain": [0, 100]},
        {"name": "sex", "type": "string", "role": "sensitive", "kind": "categorical", "categories": ["Female", "Male"]}]})
    rel = Release(schema, epsilon="1", k=3, output=str(tmp_path / "out"), spark=spark, reports=False)
    rel.add_owner("a", bad).add_owner("b", good)
    assert _tmp_folders(own_tempdir) == []
    with pytest.raises(DomainError):
        rel.run()
    assert _tmp_folders(own_tempdir) == []


@pytest.mark.slow
def test_api_temp_work_dir_removed_after_success_and_rerun_keeps_user_files(spark, own_tempdir, tmp_path, adult_pdf):
    from fragrelease.jobs.api import Release
    from fragrelease.schemas.adult import SCHEMA

    df = spark.createDataFrame(adult_pdf.head(60), SCHEMA.struct_type())
    a, b = df.where("record_id % 2 = 0"), df.where("record_id % 2 = 1")
    rel = Release("adult", epsilon="1", k=5, output=str(tmp_path / "out"), spark=spark, reports=False)
    rel.add_owner("a", a).add_owner("b", b)
    rel.run()
    assert _tmp_folders(own_tempdir) == []
    # a named work_dir: two runs of the same release; the second (a new plan: the first is committed) clears only
    # the release's entries
    work = tmp_path / "work"
    for version in (0, 1):
        r = Release("adult", epsilon="1", k=5, output=str(tmp_path / "out2"), work_dir=str(work), spark=spark,
                    reports=False, if_exists="new-version", name="same")
        r.add_owner("a", a).add_owner("b", b)
        assert r.run(new_plan=version == 1).version == version
        assert sorted(os.listdir(work)) == [MARKER, "metadata", "owners", "plan.json"]


def test_simulated_fragments_are_private_whatever_the_umask(spark, tmp_path, monkeypatch, wine_pdf):
    """At 13383f1 the simulated raw fragment was 0755/0644 (Spark's files under the process umask)."""
    from fragrelease.jobs.protocol import simulate
    from fragrelease.jobs.protocol.layout import fragment_source, owner_private_dir
    from fragrelease.schemas.datasets import resolve_schema
    from fragrelease.schemas.wine import SCHEMA

    monkeypatch.setenv("FRAGRELEASE_PRIVATE_ROOT", str(tmp_path / "priv"))
    src = str(tmp_path / "wine")
    spark.createDataFrame(wine_pdf.head(60), SCHEMA.struct_type()).write.parquet(src)
    cfg = config_from_dict(dict(name="sim", dataset="wine", fragmentation="horizontal", epsilon="1", k=5,
                                source={"path": src}, owners=[{"name": "a", "rows": 20}, {"name": "b", "rows": 40}],
                                work_dir=str(tmp_path / "work"), output=str(tmp_path / "out")))
    old = os.umask(0o022)
    try:
        schema = resolve_schema(cfg.dataset)
        simulate.split_fragments(spark, cfg, schema, simulate.load_dataset(spark, cfg, schema))
    finally:
        os.umask(old)
    for o in cfg.owners:
        assert stat.S_IMODE(os.stat(owner_private_dir(cfg.name, o)).st_mode) == 0o700
        for root, _dirs, files in os.walk(fragment_source(cfg.name, o).path):
            assert stat.S_IMODE(os.stat(root).st_mode) == 0o700, root
            for f in files:
                assert stat.S_IMODE(os.stat(os.path.join(root, f)).st_mode) == 0o600, f


def test_a_simulation_never_overwrites_a_fragment_folder_it_did_not_write(tmp_path):
    """``<private_dir>/fragment`` is replaced only when an earlier simulation wrote it (its marker)."""
    from fragrelease.errors import ConfigError
    from fragrelease.jobs.protocol.context import owner_paths
    from fragrelease.jobs.protocol.simulate import _write_private
    from fragrelease.protocol.config import config_from_dict

    cfg = config_from_dict(dict(name="sim", dataset="wine", fragmentation="horizontal", epsilon="1", k=10,
                                owners=[{"name": "a", "rows": 20, "private_dir": str(tmp_path / "pa")},
                                        {"name": "b", "rows": 20, "private_dir": str(tmp_path / "pb")}],
                                work_dir=str(tmp_path / "work"), output=str(tmp_path / "release")))
    mine = tmp_path / "pa" / "fragment" / "notes.parquet"
    mine.parent.mkdir(parents=True)
    mine.write_bytes(b"the user's own file")
    (tmp_path / "pa").chmod(0o700)  # an existing private folder must be the owner's alone (else refused first)
    with pytest.raises(ConfigError, match=r"^owner 'a': '.*fragment' exists and was not written by a fragrelease "
                                          r"simulation"):
        _write_private(None, owner_paths(cfg, cfg.owners[0]))  # refused before any write: no DataFrame needed
    assert mine.read_bytes() == b"the user's own file"
