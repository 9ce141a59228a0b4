"""A table of bad inputs across configs, protocol messages, data and the CLI: each gets a specific
error that names the bad value, and none leaves files behind. Everything that needs no data is
refused before a SparkSession exists (PRE_SPARK_CLI_CASES)."""
import logging
import math
import os
import resource
import subprocess
import sys
import time

import pytest
import yaml

from fragrelease.errors import (
    ConfigError,
    DomainError,
    IdentifierError,
    InvalidParameterError,
    ManifestMismatchError,
    ProtocolError,
    SchemaMismatchError,
)
from fragrelease.jobs.cli import run_cli
from fragrelease.jobs.protocol.fragment import validate_fragment
from fragrelease.protocol.config import config_from_dict
from fragrelease.protocol.messages import OwnerMetadata, check_manifest, make_plan, manifest_for
from fragrelease.protocol.options import OPTION_NAMES, ReleaseOptions
from fragrelease.schemas.adult import SCHEMA as ADULT
from fragrelease.schemas.base import schema_from_dict

BASE = dict(name="m", dataset="adult", fragmentation="horizontal", epsilon="1", k=50,
            owners=[{"name": "a", "rows": 100}, {"name": "b", "rows": 100}], work_dir="w", output="o")
AGE = {"name": "age", "kind": "numeric", "domain": [0.0, 100.0]}
SEX = {"name": "sex", "kind": "categorical", "categories": ["Female", "Male"]}


def cfg(**kw):
    d = dict(BASE)
    d.update(kw)
    return config_from_dict(d)


def meta(owner, attrs, n=100, frag="horizontal", digest="x"):
    return OwnerMetadata(owner=owner, dataset="d", fragmentation=frag, attributes=tuple(attrs), n_records=n,
                         id_column="record_id", id_digest=digest)


def plan(**kw):
    args = dict(fragmentation="horizontal", mechanism="idp-ir", k=5, epsilon="1")
    args.update(kw)
    metas = args.pop("metas", [meta("a", [AGE, SEX]), meta("b", [AGE, SEX])])
    options = ReleaseOptions.of(**{name: args.pop(name) for name in OPTION_NAMES if name in args})
    return make_plan(metas, options=options, **args)


CONFIG_CASES = [
    ("unknown config key", lambda: cfg(epsilonn="1"), ConfigError, "epsilonn"),
    ("epsilon NaN", lambda: cfg(epsilon="nan"), ConfigError, "nan"),
    ("epsilon zero", lambda: cfg(epsilon=0), ConfigError, "epsilon"),
    ("epsilon negative", lambda: cfg(epsilon="-0.5"), ConfigError, "-0.5"),
    ("k zero", lambda: cfg(k=0), ConfigError, "k: must be >= 3 for mechanism 'idp-ir', not 0"),
    ("k two", lambda: cfg(k=2), ConfigError, "k: must be >= 3 for mechanism 'idp-ir', not 2"),
    ("k above an owner's declared rows", lambda: cfg(owners=[{"name": "a", "rows": 40}, {"name": "b", "rows": 100}]),
     ConfigError, "owners[0].rows: 40 rows are fewer than k = 50 (owner 'a')"),
    ("negative owner rows", lambda: cfg(owners=[{"name": "a", "rows": -3}, {"name": "b", "rows": 1}]), ConfigError, "-3"),
    ("duplicate owner", lambda: cfg(owners=[{"name": "a", "rows": 1}, {"name": "a", "rows": 1}]), ConfigError, "'a' appears twice"),
    ("single owner", lambda: cfg(owners=[{"name": "a", "rows": 1}]), ConfigError, "at least 2 owners"),
    ("vertical owner without attributes", lambda: cfg(fragmentation="vertical", owners=[{"name": "a"}, {"name": "b"}]),
     ConfigError, "owners[0].attributes: required for a vertical owner (owner 'a')"),
    ("unknown mechanism", lambda: cfg(mechanism="laplace"), ConfigError, "laplace"),
    ("schema lo >= hi", lambda: schema_from_dict({"name": "s", "attributes": [
        {"name": "x", "type": "double", "role": "sensitive", "kind": "numeric", "domain": [5, 5]}]}), ConfigError, "[5"),
    ("schema column name Delta forbids", lambda: schema_from_dict({"name": "s", "attributes": [
        {"name": "bad name", "type": "double", "role": "sensitive", "kind": "numeric", "domain": [0, 1]}]}),
     ConfigError, "'bad name'"),
]

PLAN = plan()
PROTOCOL_CASES = [
    ("k < 3", lambda: plan(k=2), InvalidParameterError, "k must be >= 3, not 2"),
    ("k > n", lambda: plan(k=101), InvalidParameterError, "k = 101 exceeds the 100 records of owner 'a'"),
    ("plan epsilon <= 0", lambda: plan(epsilon="0"), InvalidParameterError, "epsilon"),
    ("plan epsilon NaN", lambda: plan(epsilon=float("nan")), InvalidParameterError, "nan"),
    ("mismatched horizontal attributes", lambda: plan(metas=[meta("a", [AGE, SEX]), meta("b", [AGE])]), ProtocolError, "'sex'"),
    ("overlapping vertical attributes", lambda: plan(fragmentation="vertical", metas=[
        meta("a", [AGE], frag="vertical"), meta("b", [AGE, SEX], frag="vertical")]), ProtocolError, "'age'"),
    ("vertical id sets differ", lambda: plan(fragmentation="vertical", metas=[
        meta("a", [AGE], frag="vertical", digest="1"), meta("b", [SEX], frag="vertical", digest="2")]),
     IdentifierError, "different sets of record ids"),
    ("vertical ids missing", lambda: plan(fragmentation="vertical", metas=[
        meta("a", [AGE], frag="vertical"), meta("b", [SEX], frag="vertical", digest=None)]), IdentifierError, "'b'"),
    ("tampered manifest", lambda: check_manifest(manifest_for(PLAN, "a", 100, "d").model_copy(update={"epsilon": "5"}),
                                                 PLAN), ManifestMismatchError, "epsilon is '5'"),
    ("plan id mismatch", lambda: check_manifest(manifest_for(plan(), "a", 100, "d"), plan()), ManifestMismatchError,
     "plan_id"),
]


@pytest.mark.parametrize("name,call,error,text", CONFIG_CASES + PROTOCOL_CASES, ids=[c[0] for c in CONFIG_CASES + PROTOCOL_CASES])
def test_bad_config_and_protocol_inputs(name, call, error, text, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(error) as info:
        call()
    assert text in str(info.value), str(info.value)
    assert os.listdir(tmp_path) == []  # nothing written


def _rows(**override):
    row = {"record_id": 1, "age": 40, "sex": "Male"}
    row.update(override)
    return [row, {"record_id": 2, "age": 50, "sex": "Female"}]


DATA_CASES = [
    ("string in numeric column", [{"record_id": 1, "age": "forty", "sex": "Male"}], "record_id long, age string, sex string",
     DomainError, "column 'age' value 'forty' (record id 1) is not a number"),
    ("missing column", [{"record_id": 1, "age": 3}], "record_id long, age int", SchemaMismatchError, "no column 'sex'"),
    ("null attribute", _rows(age=None), "record_id long, age int, sex string", DomainError, "'age' has 1 null"),
    ("NaN attribute", [{"record_id": 1, "age": math.nan, "sex": "Male"}], "record_id long, age double, sex string", DomainError, "'NaN'"),
    ("inf attribute", [{"record_id": 1, "age": math.inf, "sex": "Male"}], "record_id long, age double, sex string", DomainError, "'Infinity'"),
    ("value outside domain", _rows(age=101), "record_id long, age int, sex string", DomainError, "'101'"),
    ("negative value", _rows(age=-1), "record_id long, age int, sex string", DomainError, "'-1'"),
    ("unknown category", _rows(sex="M"), "record_id long, age int, sex string", DomainError, "'M'"),
    ("null category", _rows(sex=None), "record_id long, age int, sex string", DomainError, "'sex' has 1 null"),
    ("duplicate id", _rows(record_id=2), "record_id long, age int, sex string", IdentifierError, "id 2 appears 2 times"),
    ("null id", _rows(record_id=None), "record_id long, age int, sex string", IdentifierError, "'record_id' has 1 null"),
    ("empty fragment", [], "record_id long, age int, sex string", DomainError, "empty"),
    # an empty CSV with a header reads as string columns: "empty", not a type error
    ("empty CSV fragment", [], "record_id string, age string, sex string", DomainError, "the fragment is empty"),
]


@pytest.mark.parametrize("name,rows,ddl,error,text", DATA_CASES, ids=[c[0] for c in DATA_CASES])
def test_bad_data(spark, name, rows, ddl, error, text):
    df = spark.createDataFrame([tuple(r.get(c.split()[0]) for c in ddl.split(", ")) for r in rows], ddl)
    with pytest.raises(error) as info:
        validate_fragment(df, [ADULT.attribute("age"), ADULT.attribute("sex")], "record_id")
    assert text in str(info.value), str(info.value)


def test_a_failed_check_whose_rows_are_gone_when_the_example_is_fetched_says_the_fragment_changed(spark):
    # the example comes from a second query on the error path; a fragment rewritten in between has none
    from pyspark.sql import functions as F

    from fragrelease.jobs.protocol.fragment import _raise_first

    df = spark.createDataFrame([(1, 30, "Male")], "record_id long, age int, sex string")
    attrs = [ADULT.attribute("age")]
    with pytest.raises(SchemaMismatchError, match="the fragment changed while it was read"):
        _raise_first(df, ("bad", 0, F.lit(False), F.col("age")), 1, F.col("record_id"), attrs,
                     {f.name: f.dataType for f in df.schema.fields}, "record_id", None, None, "owner 'a'")


@pytest.mark.spark  # the CLI starts a SparkSession for the data errors
def test_cli_bad_inputs_exit_2_and_write_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    data = dict(BASE, dataset="no-such-dataset")
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(data))
    assert run_cli(["owner", "metadata", "--config", "c.yaml", "--owner", "a"]) == 2
    assert "'no-such-dataset'" in capsys.readouterr().err
    (tmp_path / "d.yaml").write_text("epsilon: [unclosed")
    assert run_cli(["run", "d.yaml"]) == 2
    assert "d.yaml" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["c.yaml", "d.yaml"]


def test_empty_csv_file_says_empty(spark, tmp_path):
    """A CSV with only a header, and a 0-byte CSV, as an owner's source: "empty", not a type error."""
    from fragrelease.jobs.storage import read_source

    (tmp_path / "header.csv").write_text("record_id,age,sex\n")
    (tmp_path / "zero.csv").write_text("")
    for name in ("header.csv", "zero.csv"):
        df = read_source(spark, str(tmp_path / name), "csv")
        with pytest.raises(DomainError, match="the fragment is empty"):
            validate_fragment(df, [ADULT.attribute("age"), ADULT.attribute("sex")], "record_id")


# ---------------------------------------------------------------- refused before Spark starts
ADULT_ROWS = 45_222
H = dict(name="pre", dataset="adult", fragmentation="horizontal", epsilon="1", k=50,
         owners=[{"name": "a", "rows": 20_000}, {"name": "b", "rows": ADULT_ROWS - 20_000}],
         work_dir="w", output="o")
V = dict(name="prev", dataset="wine", fragmentation="vertical", epsilon="1", k=50,
         owners=[{"name": "acid", "attributes": ["fixed_acidity", "pH"]},
                 {"name": "insurer", "attributes": ["alcohol"]}], work_dir="w", output="o")


def _with(base, **kw):
    d = {k: (list(v) if isinstance(v, list) else v) for k, v in base.items()}
    d.update(kw)
    return d


#: (case, config written to c.yaml or None, argv, texts the one error must contain)
PRE_SPARK_CLI_CASES = [
    ("run: k = 2", H, ["run", "c.yaml", "--k", "2"], ["k: must be >= 3", "not 2"]),
    ("run: k above an owner's declared rows", _with(H, owners=[{"name": "a", "rows": 30}, {"name": "b", "rows": ADULT_ROWS - 30}]),
     ["run", "c.yaml"], ["owners[0].rows: 30 rows are fewer than k = 50 (owner 'a')"]),
    ("run: k above a built-in table's records", _with(V, k=7000), ["run", "c.yaml"],
     ["k: 7000 exceeds the 6497 records", "'wine'"]),
    ("run: vertical owner without attributes", _with(V, owners=[{"name": "acid", "attributes": ["pH"]}, {"name": "insurer"}]),
     ["run", "c.yaml"], ["owners[1].attributes: required for a vertical owner (owner 'insurer')"]),
    ("run: vertical attribute not in the schema", _with(V, owners=[{"name": "acid", "attributes": ["pH"]},
                                                                    {"name": "insurer", "attributes": ["salary"]}]),
     ["run", "c.yaml"], ["owners[1].attributes: 'salary' is not an attribute", "(owner 'insurer')"]),
    ("run: vertical attribute held twice", _with(V, owners=[{"name": "acid", "attributes": ["pH"]},
                                                             {"name": "insurer", "attributes": ["alcohol", "pH"]}]),
     ["run", "c.yaml"], ["owners[1].attributes: 'pH' is also held by owner 'acid'"]),
    ("run: simulated rows do not add up", _with(H, owners=[{"name": "a", "rows": 100}, {"name": "b", "rows": 100}]),
     ["run", "c.yaml"], ["add up to 200", "45222 records"]),
    ("run: epsilon negative", H, ["run", "c.yaml", "--epsilon", "-0.5"], ["epsilon", "-0.5"]),
    ("run: epsilon not a number", H, ["run", "c.yaml", "--epsilon", "lots"], ["epsilon", "'lots'"]),
    ("run: unknown mechanism", H, ["run", "c.yaml", "--mechanism", "laplace"], ["mechanism", "'laplace'"]),
    ("run: unknown dataset", _with(H, dataset="no-such-dataset"), ["run", "c.yaml"], ["'no-such-dataset'"]),
    ("run: missing local source", _with(H, owners=[{"name": "a", "source": {"path": "/nonexistent/a.parquet"}},
                                                   {"name": "b", "source": {"path": "/nonexistent/b.parquet"}}]),
     ["run", "c.yaml"], ["owners[0].source.path: no such file or folder '/nonexistent/a.parquet'"]),
    ("run: empty configuration file", "", ["run", "c.yaml"], ["c.yaml", "is empty"]),
    ("owner metadata: owner not in the configuration", H,
     ["owner", "metadata", "--config", "c.yaml", "--owner", "zed"], ["--owner: 'zed' is not an owner", "['a', 'b']"]),
    ("owner metadata: bad configuration", _with(H, k=2), ["owner", "metadata", "--config", "c.yaml", "--owner", "a"],
     ["k: must be >= 3", "not 2"]),
    ("owner protect: its own source missing", _with(H, owners=[{"name": "a", "source": {"path": "/nonexistent/a"}},
                                                               {"name": "b", "source": {"path": "s3a://bucket/b"}}]),
     ["owner", "protect", "--config", "c.yaml", "--owner", "a"], ["owners[0].source.path", "'/nonexistent/a'"]),
    ("evaluate: epsilon zero", None, ["evaluate", "--epsilon", "0", "--out", "ev"], ["--epsilon", "0"]),
    ("evaluate: unknown dataset", None, ["evaluate", "--dataset", "iris", "--out", "ev"], ["--dataset", "'iris'"]),
    ("evaluate: unknown mechanism", None, ["evaluate", "--mechanism", "dp", "--out", "ev"], ["mechanism", "'dp'"]),
    ("publications anonymize: k zero", None, ["publications", "anonymize", "/nonexistent/src", "--output", "o",
                                              "--qi", "age", "--sensitive", "occupation", "--k", "0"], ["k", "0"]),
    ("publications anonymize: missing source", None, ["publications", "anonymize", "/nonexistent/src", "--output",
                                                      "o", "--qi", "age", "--sensitive", "occupation"],
     ["SOURCE: no such file or folder '/nonexistent/src'"]),
    ("publications audit: missing release", None, ["publications", "audit", "/nonexistent/r1", "/nonexistent/r2",
                                                   "--output", "o", "--person", "pid", "--sensitive", "s"],
     ["RELEASES[0]: no such file or folder '/nonexistent/r1'"]),
    ("tiers run: missing table path", None, ["tiers", "run", "--dataset", "/nonexistent/t", "--delta", "0.05",
                                             "--hops", "2", "--output", "o", "--qi", "a", "--sensitive", "s"],
     ["--dataset: no such file or folder '/nonexistent/t'"]),
    ("diffgen run: epsilon negative", None, ["diffgen", "run", "--epsilon", "-1", "--output", "o"], ["--epsilon", "-1"]),
]


class SparkStarted(AssertionError):
    """Raised by the patched get_spark: the command reached Spark before refusing its input."""


def _no_spark(monkeypatch):
    import fragrelease.jobs.session as session

    def refuse(*args, **kwargs):
        raise SparkStarted("a SparkSession was requested before the bad input was refused")

    monkeypatch.setattr(session, "get_spark", refuse)


@pytest.mark.parametrize("name,config,argv,texts", PRE_SPARK_CLI_CASES, ids=[c[0] for c in PRE_SPARK_CLI_CASES])
def test_refused_before_spark_starts_naming_the_value(name, config, argv, texts, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _no_spark(monkeypatch)
    if config is not None:
        (tmp_path / "c.yaml").write_text(config if isinstance(config, str) else yaml.safe_dump(config))
    before = sorted(os.listdir(tmp_path))
    start = time.process_time()  # CPU time: a loaded CI machine does not stretch it (wall time did, up to 2.1 s)
    assert run_cli(argv) == 2
    seconds = time.process_time() - start
    err = capsys.readouterr().err
    for text in texts:
        assert text in " ".join(err.split()), err  # rich may wrap long lines
    assert "{" not in err, err  # no document dump
    assert seconds < 5, seconds
    assert sorted(os.listdir(tmp_path)) == before  # nothing written


def test_large_epsilon_warns_before_spark_starts(tmp_path, monkeypatch, caplog):
    """ε = 20 is valid: the command warns, naming it, and only then asks for Spark."""
    monkeypatch.chdir(tmp_path)
    _no_spark(monkeypatch)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(H))
    with caplog.at_level(logging.WARNING), pytest.raises(SparkStarted):
        run_cli(["run", "c.yaml", "--epsilon", "20"])
    assert any(r.levelno == logging.WARNING and "epsilon = 20 is above 10 per release" in r.getMessage()
               for r in caplog.records), caplog.records
    caplog.clear()
    with caplog.at_level(logging.WARNING), pytest.raises(SparkStarted):
        run_cli(["run", "c.yaml", "--epsilon", "10"])
    assert not [r for r in caplog.records if "per release" in r.getMessage()]


def test_cli_process_refuses_k2_in_seconds_with_one_line(tmp_path):
    """The installed command line as a user runs it: k = 2 refused without starting Spark (was ~17 s).

    Without a Java runtime (``JAVA_HOME`` points nowhere, no ``java`` on ``PATH``) a command that starts
    Spark ends with the one line "error: no Java runtime found: ..." instead of the k error, whatever the
    time it took; the command's own CPU time (not wall time, which a loaded CI machine stretches) stays
    that of an interpreter start and imports (0.8 s here).
    """
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(H))
    env = {**os.environ, "COLUMNS": "200", "JAVA_HOME": str(tmp_path / "no-java"), "PATH": os.path.dirname(sys.executable)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, "-m", "fragrelease.jobs.cli", "run", "c.yaml", "--k", "2"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error: invalid configuration c.yaml: k: must be >= 3 for mechanism 'idp-ir', not 2"], proc.stderr
    assert seconds < 10, seconds  # interpreter start and imports only
    assert sorted(os.listdir(tmp_path)) == ["c.yaml"]
    # the control: the same environment makes a command that does start Spark fail with the Java line
    valid = subprocess.run([sys.executable, "-m", "fragrelease.jobs.cli", "run", "c.yaml"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120, env=env)
    assert valid.returncode == 2 and valid.stderr.startswith("error: no Java runtime found"), valid.stderr


def test_matrix_size():
    assert len(CONFIG_CASES) + len(PROTOCOL_CASES) + len(DATA_CASES) + len(PRE_SPARK_CLI_CASES) + 2 >= 45
