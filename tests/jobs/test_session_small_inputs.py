"""The embedded session's JIT for small declared inputs (fragrelease.jobs.session.inputs_are_small, C1 only)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from fragrelease.jobs import session

C1 = "-XX:TieredStopAtLevel=1"


def _file(path, size: int):
    with open(path, "wb") as f:
        f.truncate(size)  # sparse: the size is what counts, never the contents
    return str(path)


def test_small_local_files_and_folders_are_small(tmp_path):
    a = _file(tmp_path / "a.csv", 1000)
    folder = tmp_path / "t"
    (folder / "_delta_log").mkdir(parents=True)
    _file(folder / "part-0.parquet", 2000)
    _file(folder / "_delta_log" / "00000000000000000000.json", 500)
    assert session.inputs_are_small([a, str(folder)])
    assert session.inputs_are_small([a, (tmp_path / "a.csv").as_uri()])  # a file: URI is a local path
    assert session.inputs_are_small([a, str(folder)], limit=3500)
    assert not session.inputs_are_small([a, str(folder)], limit=3499)  # the bytes of all inputs together


def test_the_default_limit(tmp_path):
    assert session.SMALL_INPUT_BYTES == 16 << 20
    assert session.inputs_are_small([_file(tmp_path / "a.csv", session.SMALL_INPUT_BYTES)])
    # a 1M-row fragment is far larger: it keeps the JVM's C2 compiler
    assert not session.inputs_are_small([_file(tmp_path / "b.csv", session.SMALL_INPUT_BYTES + 1)])
    big = tmp_path / "big"
    big.mkdir()
    for i in range(3):
        _file(big / f"part-{i}.parquet", session.SMALL_INPUT_BYTES // 2)
    assert not session.inputs_are_small([str(big)])


@pytest.mark.parametrize("path", [None, "s3a://bucket/f.csv", "dbfs:/f.csv", "/data/part-*.csv", "missing.csv"])
def test_what_cannot_be_sized_locally_is_not_small(tmp_path, path):
    small = _file(tmp_path / "a.csv", 10)
    assert not session.inputs_are_small([small, path if path != "missing.csv" else str(tmp_path / path)])


def test_no_inputs_are_not_small():
    assert not session.inputs_are_small([])


def test_a_symbolic_link_in_a_folder_is_not_followed(tmp_path):
    big = _file(tmp_path / "big.bin", session.SMALL_INPUT_BYTES * 2)
    folder = tmp_path / "t"
    folder.mkdir()
    _file(folder / "part-0.parquet", 10)
    os.symlink(big, folder / "link.parquet")
    assert session.inputs_are_small([str(folder)])


class _Recorder:
    """A stand-in for ``SparkSession.builder``: records the configuration, starts nothing."""

    def __init__(self):
        self.conf: dict[str, str] = {}
        self.master_url = None

    def appName(self, name):
        return self

    def master(self, url):
        self.master_url = url
        return self

    def config(self, key, value):
        self.conf[key] = value
        return self

    def getOrCreate(self):
        return self


def _built(monkeypatch, **kwargs) -> _Recorder:
    from pyspark.sql import SparkSession

    for var in ("PYSPARK_GATEWAY_PORT", "SPARK_REMOTE", "DATABRICKS_RUNTIME_VERSION", "FRAGRELEASE_SPARK_MASTER"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("FRAGRELEASE_DELTA", "off")
    monkeypatch.setattr(SparkSession, "getActiveSession", classmethod(lambda cls: None))
    monkeypatch.setattr(SparkSession, "builder", _Recorder())
    monkeypatch.setattr(session, "_stopped_at_exit", lambda s: s)
    monkeypatch.setattr(session, "_warmed", lambda s, small=False: s)
    return session.get_spark("t", **kwargs)


def test_small_inputs_give_a_local_driver_jvm_c1_only(monkeypatch):
    options = _built(monkeypatch, master="local[2]", small_inputs=True).conf["spark.driver.defaultJavaOptions"]
    assert options.endswith(" " + session.SMALL_INPUT_JAVA_OPTIONS)
    assert session.SMALL_INPUT_JAVA_OPTIONS == f"{C1} -XX:ReservedCodeCacheSize=256m"


@pytest.mark.parametrize("master,small", [("local[2]", False), ("spark://host:7077", True), (None, False)])
def test_other_sessions_keep_the_jvms_compilers(monkeypatch, master, small):
    conf = _built(monkeypatch, master=master, small_inputs=small).conf
    assert C1 not in conf.get("spark.driver.defaultJavaOptions", "")


def test_the_cli_sizes_the_fragments_a_step_reads_before_spark_starts(tmp_path, monkeypatch):
    from fragrelease.jobs.cli import _common
    from fragrelease.protocol.config import SourceConfig

    seen = []
    monkeypatch.setattr(session, "get_spark", lambda *a, **k: seen.append(k["small_inputs"]) or "spark")
    monkeypatch.setattr("fragrelease.jobs.storage.uses_catalog", lambda cfg: False)
    small = SourceConfig(path=_file(tmp_path / "a.csv", 100), format="csv")
    large = SourceConfig(path=_file(tmp_path / "b.csv", session.SMALL_INPUT_BYTES + 1), format="csv")
    table = SourceConfig(table="db.fragment")
    for inputs, expected in [
        ([small, small], True),
        ([small, large], False),  # `fragrelease run` reads both
        ([small], True),  # an owner's own steps read only its fragment
        ([small, table], False),  # a catalog table: not sized, not small
        ([], False),  # the steps that read no fragment
    ]:
        _common._spark(None, None, inputs=inputs)
        assert seen.pop() is expected, inputs


def test_run_sizes_every_owners_source_or_the_simulated_table():
    from fragrelease.jobs.cli import _common
    from fragrelease.protocol.config import SourceConfig

    a, b = SourceConfig(path="a.csv", format="csv"), SourceConfig(path="b.csv", format="csv")
    owners = (SimpleNamespace(source=a), SimpleNamespace(source=b))
    declared = SimpleNamespace(simulated=False, owners=owners, source=None)
    assert _common._declared_inputs(declared) == [a, b]  # type: ignore[arg-type]
    simulated = SimpleNamespace(simulated=True, owners=(SimpleNamespace(source=None),), source=a)
    assert _common._declared_inputs(simulated) == [a]  # type: ignore[arg-type]


@pytest.mark.slow
def test_the_option_reaches_the_driver_jvm(tmp_path):
    """A new embedded session started with small inputs runs a JVM whose arguments hold C1-only; one without
    them does not (two JVMs in subprocesses)."""
    code = (
        "import json, sys\n"
        "from fragrelease.jobs.session import get_spark\n"
        "s = get_spark('t', 'local[1]', small_inputs=sys.argv[1] == 'small')\n"
        "bean = s.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()\n"
        "print(json.dumps(list(bean.getInputArguments())))\n"
    )
    env = {**os.environ, "FRAGRELEASE_DELTA": "off", "FRAGRELEASE_CLASS_ARCHIVE": "off"}
    env.pop("JAVA_TOOL_OPTIONS", None)
    for kind, expected in (("small", True), ("large", False)):
        out = subprocess.run([sys.executable, "-c", code, kind], capture_output=True, text=True, timeout=300,
                             cwd=tmp_path, env=env)
        assert out.returncode == 0, out.stderr
        args = json.loads(out.stdout.strip().splitlines()[-1])
        assert (C1 in args) is expected, args
