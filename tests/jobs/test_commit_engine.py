"""Which engine commits a Delta table when Delta's Spark classes are configured (issue 41, session 6).

An owner's own table (``owner_table``: its protected fragment, pseudonym set or id digests; no
description) at a local path of a ``local`` master is committed by delta-rs (about 0.1 s instead of Delta's Spark transaction's
0.3-0.4 s); a table with a description (every release: its ``fragrelease.*`` properties, which delta-rs
refuses to set) is committed by Delta's Spark API. Both are the same Delta table to every reader.
"""
from __future__ import annotations

import json

import pytest
from deltalake import DeltaTable

from fragrelease.jobs.describe import TableDescription
from fragrelease.jobs.session import delta_available
from fragrelease.jobs.storage import commit_delta, read_delta, table_provenance
from fragrelease.jobs.storage.files import committed_by_delta_rs


class _Conf:
    def __init__(self, master: str | None, fails: bool = False) -> None:
        self.master, self.fails = master, fails

    def get(self, key, default=None):
        if self.fails:
            raise RuntimeError("not shown")
        assert key == "spark.master"
        return self.master if self.master is not None else default


class _Session:
    def __init__(self, master: str | None = "local[2]", fails: bool = False) -> None:
        self.conf = _Conf(master, fails)


DESCRIBED = TableDescription("a release", {"fragrelease.k": "10"}, {"a": "a column"})


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local[4, 2]"])
def test_a_table_without_a_description_at_a_local_path_of_a_local_master_goes_to_delta_rs(tmp_path, master):
    assert committed_by_delta_rs(_Session(master), str(tmp_path / "t"), None)
    assert committed_by_delta_rs(_Session(master), (tmp_path / "t").as_uri(), None)


def test_every_other_table_keeps_deltas_own_commit(tmp_path, monkeypatch):
    local = str(tmp_path / "t")
    assert not committed_by_delta_rs(_Session(), local, DESCRIBED)  # a release: its properties
    assert not committed_by_delta_rs(_Session("spark://host:7077"), local, None)  # a cluster's executors
    assert not committed_by_delta_rs(_Session("yarn"), local, None)
    assert not committed_by_delta_rs(_Session(None), local, None)  # no master shown
    assert not committed_by_delta_rs(_Session(fails=True), local, None)  # a conf the server does not show
    assert not committed_by_delta_rs(_Session(), "s3a://bucket/t", None)  # object storage
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "16.4")
    assert not committed_by_delta_rs(_Session(), local, None)


def test_a_spark_connect_session_keeps_deltas_own_commit(tmp_path):
    connect = type("SparkSession", (), {"__module__": "pyspark.sql.connect.session"})()
    connect.conf = _Conf("local[2]")
    assert not committed_by_delta_rs(connect, str(tmp_path / "t"), None)


def _engine(path: str) -> str:
    """The engine of the table's last commit as its commitInfo names it."""
    info = DeltaTable(path).history(1)[0]
    return str(info.get("engineInfo") or info.get("clientVersion") or "")


def test_an_owners_table_is_committed_by_delta_rs_and_a_release_by_delta(spark, tmp_path):
    if not delta_available(spark):
        pytest.skip("with Delta's Spark classes only")
    df = spark.range(0, 30, 1, 1).selectExpr("id AS a")
    owner, release = str(tmp_path / "owner"), str(tmp_path / "release")
    other = str(tmp_path / "other")
    assert commit_delta(df, owner, provenance={"role": "protected-fragment", "n": 1}, owner_table=True) == 0
    assert commit_delta(df, release, provenance={"role": "release", "n": 2}, description=DESCRIBED) == 0
    assert commit_delta(df, other, provenance={"role": "release", "n": 3}) == 0  # a release without a description
    assert "delta-rs" in _engine(owner), _engine(owner)
    assert "delta-rs" not in _engine(release) and "delta-rs" not in _engine(other), (_engine(release), _engine(other))
    assert DeltaTable(release).metadata().configuration["fragrelease.k"] == "10"
    # the same table to Delta's Spark reader and to delta-rs, the provenance in the commit's userMetadata
    for path, role in ((owner, "protected-fragment"), (release, "release")):
        assert sorted(r["a"] for r in read_delta(spark, path).collect()) == list(range(30))
        assert table_provenance(path)["role"] == role
    # a new version of the owner's table: delta-rs again, the earlier version still readable
    assert commit_delta(df.where("a < 5"), owner, provenance={"role": "protected-fragment"}, if_exists="new-version",
                        owner_table=True) == 1
    assert "delta-rs" in _engine(owner)
    assert read_delta(spark, owner).count() == 5
    assert spark.read.format("delta").option("versionAsOf", 0).load(owner).count() == 30
    assert json.loads(DeltaTable(owner).history(1)[0]["userMetadata"])["role"] == "protected-fragment"
