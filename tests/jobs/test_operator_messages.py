"""Operator cases of a reliability run on 0.16.0 (issue 49, item 6, part B): each one is refused with one
line (exit status 2 through the CLI) that names the owner, the file or key and the bad value, before any
spend and before Spark starts. Spark-free: the CLI's Spark start is replaced by a failure."""
from __future__ import annotations

import os

import pytest
import yaml

from fragrelease.errors import SchemaMismatchError
from fragrelease.jobs.cli import main
from fragrelease.jobs.protocol.context import owner_context
from fragrelease.jobs.protocol.owner import read_fragment
from fragrelease.jobs.storage import csv_encoding_problem, read_source

HEADER = "record_id,fixed_acidity,alcohol,quality\n1,7.0,10.0,5\n"


@pytest.fixture
def no_spark(monkeypatch):
    """A CLI step that would start Spark fails the test instead."""
    import fragrelease.jobs.cli._common as cli

    def _refuse(*_a, **_k):
        raise AssertionError("Spark was started")

    monkeypatch.setattr(cli, "_spark", _refuse)


def _wine_config(tmp_path, both=None, **owner_a):
    """conf/wine-horizontal.yaml with two owners reading CSV files under ``tmp_path`` (``both``: keys of both)."""
    conf = yaml.safe_load(open(os.path.join(os.path.dirname(__file__), "..", "..", "conf", "wine-horizontal.yaml")))
    conf["owners"] = [{"name": "bank-a", "source": {"path": str(tmp_path / "a.csv"), "format": "csv"}, **owner_a},
                      {"name": "bank-b", "source": {"path": str(tmp_path / "b.csv"), "format": "csv"}}]
    for o in conf["owners"]:
        o.update(both or {})
    conf.update(work_dir=str(tmp_path / "work"), output=str(tmp_path / "release"))
    (tmp_path / "b.csv").write_text(HEADER)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(conf))
    return path


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


# --- 1. a UTF-16 CSV source -------------------------------------------------------------------------

@pytest.mark.parametrize("encoding, said", [("utf-16", "is UTF-16 (byte-order mark)"),
                                            ("utf-16-be", "holds NUL bytes in its first line"),
                                            ("utf-32", "is UTF-32 (byte-order mark)")])
def test_a_utf16_csv_source_is_named_not_read_as_a_column_of_nuls(tmp_path, capsys, no_spark, encoding, said):
    (tmp_path / "a.csv").write_bytes(HEADER.encode(encoding))
    conf = _wine_config(tmp_path)
    assert main(["owner", "metadata", "--config", str(conf), "--owner", "bank-a"]) == 2
    line = _one_error_line(capsys)
    assert line.startswith(f"error: owner 'bank-a' (source {tmp_path / 'a.csv'}): the file {said}"), line
    assert "save it as UTF-8" in line and "\\x00" not in line
    assert not os.path.exists(tmp_path / "work" / "owners")  # nothing written for the owner


def test_utf16_detection_and_what_passes(tmp_path):
    folder = tmp_path / "parts"
    folder.mkdir()
    (folder / "_SUCCESS").write_bytes(b"")
    (folder / "part-0.csv").write_bytes(HEADER.encode("utf-16"))
    assert csv_encoding_problem(str(folder), {}) == "its file 'part-0.csv' is UTF-16 (byte-order mark); save it as UTF-8"
    assert csv_encoding_problem(str(folder), {"encoding": "UTF-16"}) is None  # the owner named its encoding
    for ok in (HEADER.encode("utf-8"), b"\xef\xbb\xbf" + HEADER.encode("utf-8"), "ville,prénom\n".encode()):
        (tmp_path / "ok.csv").write_bytes(ok)
        assert csv_encoding_problem(str(tmp_path / "ok.csv"), {}) is None
    (tmp_path / "x.csv.gz").write_bytes(b"\x1f\x8b\x08\x00\x00\x00")  # compressed: Spark decompresses it
    assert csv_encoding_problem(str(tmp_path / "x.csv.gz"), {}) is None
    assert csv_encoding_problem(str(tmp_path / "missing.csv"), {}) is None  # Spark's read says why
    (tmp_path / "u.csv").write_bytes(HEADER.encode("utf-16"))
    with pytest.raises(SchemaMismatchError, match=r"^source .*u\.csv: the file is UTF-16 \(byte-order mark\)"):
        read_source(None, str(tmp_path / "u.csv"), "csv")  # every reader of a CSV path, before Spark reads it


def test_the_owner_steps_read_refuses_before_spark(tmp_path):
    """read_fragment (metadata, protect and both synthesis rounds) checks before it touches Spark."""
    from fragrelease.protocol.config import config_from_dict

    (tmp_path / "a.csv").write_bytes(HEADER.encode("utf-16"))
    cfg = config_from_dict(yaml.safe_load(_wine_config(tmp_path).read_text()))
    with pytest.raises(SchemaMismatchError, match=r"^owner 'bank-a' \(source .*a\.csv\): the file is UTF-16"):
        read_fragment(None, owner_context(cfg, "bank-a"))


# --- 2. empty or garbage key files -----------------------------------------------------------------

@pytest.mark.parametrize("content, said", [
    (b"", "is empty (0 bytes)"),
    (b"\n  \n", "holds only blanks (4 bytes)"),
    (b"0123456789abcdef" * 4 + b"\n", "is not a PEM file (it holds no -----BEGIN PRIVATE KEY----- line)"),
    (b"-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n", "is encrypted"),
    (b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n", "holds a public key, not the private key"),
    (b"public key line", "holds a public key, not the private key"),  # the configuration's line, pasted
])
def test_an_empty_or_garbage_signing_key_says_what_it_holds(tmp_path, capsys, no_spark, content, said):
    key = tmp_path / "keys" / "bank-a.key"
    key.parent.mkdir(mode=0o700)
    if content == b"public key line":
        from fragrelease.signing import generate_private_key, public_key_text

        content = public_key_text(generate_private_key()).encode() + b"\n"
    key.write_bytes(content)
    key.chmod(0o600)
    (tmp_path / "a.csv").write_text(HEADER)
    conf = _wine_config(tmp_path, signing_key=str(key))
    assert main(["validate", str(conf)]) == 2
    line = _one_error_line(capsys)
    assert line.startswith(f"error: owner 'bank-a': signing_key {str(key)!r} {said}"), line
    assert line.endswith("; create a key with 'fragrelease keys generate --owner bank-a --out DIR'"), line
    assert "PEM file. See" not in line and "MalformedFraming" not in line


@pytest.mark.parametrize("content, said", [
    (b"", "is empty (0 bytes)"),
    (b" \n", "holds only blanks (2 bytes)"),
    (b"-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n", "holds a PEM key"),
])
def test_an_empty_or_garbage_pseudonym_key_file_says_what_it_holds(tmp_path, capsys, no_spark, content, said):
    key = tmp_path / "pseudonym.key"
    key.write_bytes(content)
    key.chmod(0o600)
    (tmp_path / "a.csv").write_text(HEADER)
    conf = _wine_config(tmp_path, both={"pseudonym_key": {"file": str(key)}})
    assert main(["validate", str(conf), "--owner", "bank-a"]) == 2
    line = _one_error_line(capsys)
    assert line.startswith(f"error: owner 'bank-a': pseudonym key file {str(key)!r} {said}"), line
    assert line.endswith(f"write a random secret: openssl rand -hex 32 > {key} && chmod 600 {key}"), line


def test_an_empty_pseudonym_key_variable_is_called_empty():
    from fragrelease.errors import PseudonymKeyError
    from fragrelease.pseudonyms import read_key_env

    with pytest.raises(PseudonymKeyError, match=r"^owner 'a': pseudonym key environment variable 'K' is empty; "):
        read_key_env("K", owner="a", environ={"K": ""})


# --- 6. a schema declaring 200,000 categories ------------------------------------------------------

def _schema(tmp_path, n):
    attrs = [{"name": "rid", "type": "long", "role": "id"},
             {"name": "age", "type": "integer", "role": "quasi-identifier", "kind": "numeric", "domain": [0, 120]},
             {"name": "city", "type": "string", "role": "quasi-identifier", "kind": "categorical",
              "categories": [f"c{i}" for i in range(n)]},
             {"name": "notes", "type": "string", "role": "not-released", "kind": "categorical",
              "categories": [f"n{i}" for i in range(n + 5)]}]  # not released: not counted
    path = tmp_path / f"schema-{n}.yaml"
    path.write_text(yaml.safe_dump({"name": "big", "attributes": attrs}))
    return path


@pytest.mark.parametrize("linkage", ["linked", "synthetic"])
def test_a_declared_domain_above_the_limit_is_refused_before_spark(tmp_path, capsys, no_spark, linkage):
    from fragrelease.protocol.categories import MAX_CATEGORIES

    (tmp_path / "a.csv").write_text("rid,age,city\n1,30,c0\n")
    conf = yaml.safe_load(_wine_config(tmp_path).read_text())
    for n, code in ((MAX_CATEGORIES, 0), (MAX_CATEGORIES + 1, 2)):
        schema = _schema(tmp_path, n)
        conf.update(dataset=str(schema), linkage=linkage, **({"synthesis_target": "city"} if linkage == "synthetic" else {}))
        if linkage == "synthetic":
            conf.pop("k", None)  # microaggregation's term: a synthetic configuration refuses it
        path = tmp_path / "big.yaml"
        path.write_text(yaml.safe_dump(conf))
        for command in (["validate", str(path)], *([["run", str(path)]] if code else [])):  # run: no Spark
            assert main(command) == code, capsys.readouterr()
            if code:
                assert _one_error_line(capsys) == (
                    f"error: dataset {str(schema)!r}: attribute 'city' declares {n:,} categories; a release allows "
                    f"at most {MAX_CATEGORIES:,} per categorical attribute (docs/known-limitations.md #20): group "
                    "rare categories or generalize them (e.g. a ZIP code's first digits), or make the column "
                    "not-released")
            capsys.readouterr()
    assert not os.path.exists(tmp_path / "work") and not os.path.exists(tmp_path / "release")


def test_a_schema_is_parsed_by_libyaml_and_read_once_per_process(tmp_path):
    import yaml as pyyaml

    from fragrelease import validation
    from fragrelease.schemas.base import load_schema

    assert not pyyaml.__with_libyaml__ or validation._SAFE_LOADER is pyyaml.CSafeLoader
    path = _schema(tmp_path, 20)
    first = load_schema(path)
    assert load_schema(path) is first  # unchanged file: the schema read then
    text = path.read_text().replace("c19", "c_19")
    path.write_text(text)
    os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + 1_000_000))
    again = load_schema(path)
    assert again is not first and "c_19" in again.attribute("city").categories


@pytest.mark.spark
def test_a_utf16_source_in_a_whole_run_is_one_line_and_nothing_is_spent(tmp_path, capsys, spark):
    """The user's case: ``fragrelease run`` with one owner's CSV saved as UTF-16 (Spark running)."""
    rows = "".join(f"{i},7.{i % 10},10.{i % 7},{5 + i % 3}\n" for i in range(1, 121))
    (tmp_path / "a.csv").write_bytes(("record_id,fixed_acidity,alcohol,quality\n" + rows).encode("utf-16"))
    conf = yaml.safe_load(_wine_config(tmp_path).read_text())
    (tmp_path / "b.csv").write_text("record_id,fixed_acidity,alcohol,quality\n"
                                    + "".join(f"{i},7.{i % 10},10.{i % 7},{5 + i % 3}\n" for i in range(201, 321)))
    conf["owners"][0]["ledger"] = {"path": str(tmp_path / "ledger-a"), "lifetime_epsilon": "5"}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(conf))
    assert main(["run", str(path)]) == 2
    line = _one_error_line(capsys)
    assert line == (f"error: owner 'bank-a' (source {tmp_path / 'a.csv'}): the file is UTF-16 (byte-order mark); "
                    "save it as UTF-8"), line
    assert not os.path.exists(tmp_path / "ledger-a")  # nothing spent
    assert not os.path.exists(tmp_path / "release")
