"""A table of bad inputs across configs, protocol messages, data and the CLI: each gets a specific
error that names the bad value, and none leaves files behind."""
import math
import os

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
from fragrelease.idpir.config import config_from_dict
from fragrelease.idpir.protocol import OwnerMetadata, check_manifest, make_plan, manifest_for
from fragrelease.jobs.cli import run_cli
from fragrelease.jobs.idpir.protect import validate_fragment
from fragrelease.schemas.adult import SCHEMA as ADULT
from fragrelease.schemas.base import schema_from_dict

BASE = dict(name="m", dataset="adult", fragmentation="horizontal", epsilon="1", k=50,
            owners=[{"name": "a", "rows": 10}, {"name": "b", "rows": 10}], work_dir="w", output="o")
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
    return make_plan(metas, **args)


CONFIG_CASES = [
    ("unknown config key", lambda: cfg(epsilonn="1"), ConfigError, "epsilonn"),
    ("epsilon NaN", lambda: cfg(epsilon="nan"), ConfigError, "nan"),
    ("epsilon zero", lambda: cfg(epsilon=0), ConfigError, "epsilon"),
    ("epsilon negative", lambda: cfg(epsilon="-0.5"), ConfigError, "-0.5"),
    ("k zero", lambda: cfg(k=0), ConfigError, "k must be >= 1, not 0"),
    ("negative owner rows", lambda: cfg(owners=[{"name": "a", "rows": -3}, {"name": "b", "rows": 1}]), ConfigError, "-3"),
    ("duplicate owner", lambda: cfg(owners=[{"name": "a", "rows": 1}, {"name": "a", "rows": 1}]), ConfigError, "'a' appears twice"),
    ("single owner", lambda: cfg(owners=[{"name": "a", "rows": 1}]), ConfigError, "at least 2 owners"),
    ("vertical owner without attributes", lambda: cfg(fragmentation="vertical", owners=[{"name": "a"}, {"name": "b"}]),
     ConfigError, "'a'"),
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
     SchemaMismatchError, "'age' has type string"),
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
]


@pytest.mark.parametrize("name,rows,ddl,error,text", DATA_CASES, ids=[c[0] for c in DATA_CASES])
def test_bad_data(spark, name, rows, ddl, error, text):
    df = spark.createDataFrame([tuple(r.get(c.split()[0]) for c in ddl.split(", ")) for r in rows], ddl)
    with pytest.raises(error) as info:
        validate_fragment(df, [ADULT.attribute("age"), ADULT.attribute("sex")], "record_id")
    assert text in str(info.value), str(info.value)


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


def test_matrix_size():
    assert len(CONFIG_CASES) + len(PROTOCOL_CASES) + len(DATA_CASES) + 2 >= 20
