"""Releases through Delta Lake's Spark API, and releases that describe themselves, on both commit paths.

The session fixture (tests/conftest.py) has Delta's classes unless ``FRAGRELEASE_DELTA=off``;
:func:`test_the_same_release_runs_without_delta_classes` reruns this file's release test in a
subprocess with ``FRAGRELEASE_DELTA=off`` (delta-rs path), since one process holds one SparkSession.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest
from deltalake import DeltaTable
from noise_injection import HashedLaplace
from pyspark.sql import functions as F

from fragrelease.jobs.api import Release
from fragrelease.jobs.session import delta_available, delta_mode
from fragrelease.jobs.storage import read_delta, table_provenance
from fragrelease.schemas.adult import RELEASED, SCHEMA

N1, N2 = 300, 400


@pytest.fixture(scope="module")
def owners(spark, adult_pdf):
    df = spark.createDataFrame(adult_pdf.iloc[: N1 + N2], SCHEMA.struct_type())
    return df.where(F.col("record_id") < N1), df.where(F.col("record_id") >= N1)


@pytest.fixture(scope="module")
def database(spark, tmp_path_factory):
    spark.sql(f"CREATE DATABASE IF NOT EXISTS fr_lake LOCATION '{tmp_path_factory.mktemp('lake-warehouse')}'")
    yield "fr_lake"
    spark.sql("DROP DATABASE IF EXISTS fr_lake CASCADE")


def _observed(pdf: pd.DataFrame) -> set[str]:
    """Data-dependent numbers of the owners' original data: per-column min, max and mean as text."""
    out, public = set(), set()
    for c in ("age", "hours-per-week"):
        col = pdf[c]
        for v in (col.min(), col.max(), round(col.mean(), 2), round(col.mean(), 1)):
            out.add(str(v))
        public |= {str(b) for bound in SCHEMA.attribute(c).domain for b in (bound, int(bound), float(bound))}
    return {v for v in out - public if len(v) >= 2}  # a declared bound equal to an extreme is public


def test_session_uses_delta_unless_turned_off(spark):
    """The embedded session has Delta's extension and catalog (FRAGRELEASE_DELTA=auto|spark), not with off."""
    if delta_mode() == "off":
        assert not delta_available(spark)
        return
    assert delta_available(spark)
    assert spark.conf.get("spark.sql.catalog.spark_catalog") == "org.apache.spark.sql.delta.catalog.DeltaCatalog"


@pytest.mark.slow  # two releases end to end
def test_two_owner_release_through_the_active_path(spark, owners, database, tmp_path, adult_pdf):
    a, b = owners
    name = f"{database}.adult_release"

    def run(epsilon, if_exists):
        rel = Release("adult", epsilon=epsilon, k=20, output_table=name, work_dir=str(tmp_path / f"work{epsilon}"),
                      spark=spark, reports=False, if_exists=if_exists)
        rel.add_owner("clinic-a", a).add_owner("clinic-b", b)
        return rel.run(_noise=HashedLaplace("lake"))

    first = run("1", "error")
    assert first.version == 0
    dt = DeltaTable(first.path)
    # integer-declared attributes are integers; categorical ones strings
    types = {f.name: f.type.type for f in dt.schema().fields}
    assert (types["age"], types["hours-per-week"], types["sex"]) == ("integer", "integer", "string")
    released = dt.to_pandas()
    assert len(released) == N1 + N2 and list(released.columns) == list(RELEASED)
    # the provenance is the commit's userMetadata (not a custom key)
    hist = dt.history()[0]
    assert json.loads(hist["userMetadata"])["plan_id"] == first.plan.plan_id and "fragrelease" not in hist
    # description and column comments state the guarantee
    meta = dt.metadata()
    assert "guarantee" in meta.description and "no epsilon bound" in meta.description
    comments = {f.name: f.metadata.get("comment", "") for f in dt.schema().fields}
    assert set(comments) == set(RELEASED) and all(comments.values())
    assert comments["age"].startswith("iDP-IR, eps_attr = ") and "(clinic-a, clinic-b)" in comments["age"]
    assert "rounded to an integer" in comments["age"] and "linked rows" in comments["sex"]
    if delta_available(spark):
        props = {k: v for k, v in meta.configuration.items() if k.startswith("fragrelease.")}
        assert props["fragrelease.epsilon"] == "1" and props["fragrelease.k"] == "20"
        assert props["fragrelease.mechanism"] == "idp-ir" and props["fragrelease.linkage"] == "linked"
        assert {"fragrelease.composition", "fragrelease.postprocess", "fragrelease.category_order",
                "fragrelease.version", "fragrelease.guarantee.table"} <= set(props)
        # Delta's Spark API: path read, catalog name, DESCRIBE HISTORY, comments in DESCRIBE TABLE
        assert spark.read.format("delta").load(first.path).count() == N1 + N2
        assert spark.table(name).count() == N1 + N2
        rows = spark.sql(f"DESCRIBE HISTORY {name}").select("version", "operation", "userMetadata").collect()
        assert rows[0]["operation"] == "CREATE TABLE AS SELECT"
        assert json.loads(rows[0]["userMetadata"])["epsilon"] == "1"
        desc = {r[0]: r[2] for r in spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()}
        assert desc["age"].startswith("iDP-IR, eps_attr")
        detail = {r[0]: r[1] for r in spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()}
        assert detail["Provider"] == "delta" and "guarantee" in detail["Comment"]
        # the README's calls: delta-spark's DeltaTable by path, the schema's column comment
        from delta.tables import DeltaTable as SparkDeltaTable

        by_path = SparkDeltaTable.forPath(spark, first.path)
        assert json.loads(by_path.history().first()["userMetadata"])["plan_id"] == first.plan.plan_id
        assert by_path.detail().first()["description"] == meta.description
        assert spark.read.format("delta").load(first.path).schema["age"].metadata["comment"] == comments["age"]
    else:
        assert not [k for k in meta.configuration if k.startswith("fragrelease.")]  # delta-rs: documented limit
    # nothing data-dependent in properties, comments, description or userMetadata
    blob = json.dumps([meta.description, dict(meta.configuration), comments, hist["userMetadata"]])
    original = pd.concat([a.toPandas(), b.toPandas()])
    leaked = [v for v in _observed(original) if f" {v}" in blob or f"[{v}" in blob or f"={v}" in blob]
    assert not leaked, leaked

    second = run("1/2", "new-version")
    assert second.version == 1
    assert table_provenance(first.path)["epsilon"] == "1/2"
    assert read_delta(spark, first.path).count() == N1 + N2
    if delta_available(spark):
        v0 = spark.sql(f"SELECT * FROM {name} VERSION AS OF 0").toPandas()
        key = list(RELEASED)
        pd.testing.assert_frame_equal(v0.sort_values(key).reset_index(drop=True),
                                      released.sort_values(key).reset_index(drop=True), check_dtype=False)
        hist = spark.sql(f"DESCRIBE HISTORY {name}").select("version", "operation", "userMetadata").collect()
        assert [r["version"] for r in hist] == [1, 0]
        assert hist[0]["operation"] in ("WRITE", "REPLACE TABLE AS SELECT")  # ε changed: REPLACE
        assert json.loads(hist[0]["userMetadata"])["epsilon"] == "1/2"
        props = {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {name}").collect()}
        assert props["fragrelease.epsilon"] == "1/2"
    else:
        assert DeltaTable(first.path).history()[0]["operation"] == "WRITE"
    # the README's readers see the current version; reading the folder as Parquet sees both versions
    import polars as pl

    assert pl.read_delta(first.path).height == N1 + N2 and pl.read_delta(first.path, version=0).height == N1 + N2
    assert len(DeltaTable(first.path).to_pandas()) == N1 + N2
    assert len(pd.read_parquet(first.path)) == 2 * (N1 + N2)


@pytest.mark.slow  # starts a second Python process with its own Spark session (delta-rs path)
def test_the_same_release_runs_without_delta_classes(tmp_path):
    if delta_mode() == "off":
        pytest.skip("this process already runs the delta-rs path")
    env = {**os.environ, "FRAGRELEASE_DELTA": "off"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
                           f"--basetemp={tmp_path / 'pt'}", __file__, "-k", "through_the_active_path or session_uses"],
                          env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "2 passed" in proc.stdout


@pytest.mark.slow  # a whole release end to end (or processes of their own): CI runs it; the quick loop leaves it out
def test_a_failed_spark_delta_write_leaves_no_orphan_files(spark, tmp_path):
    """A write that fails midway (one task raises after others wrote files) commits nothing, removes the
    files it wrote and raises one line; an existing version stays intact."""
    if not delta_available(spark):
        pytest.skip("Delta's Spark write path only")
    from pyspark.sql import types as T

    from fragrelease.errors import DeltaWriteError
    from fragrelease.jobs.storage import commit_delta

    @F.udf(T.LongType())
    def fail_late(i):
        if i >= 30:
            raise OSError("No space left on device (simulated)")
        return i

    path = str(tmp_path / "t")
    bad = spark.range(0, 40, 1, 4).select(fail_late("id").alias("id"))
    with pytest.raises(DeltaWriteError, match=r"^the Delta write to .* failed and was not committed .*removed$") as e:
        commit_delta(bad, path, provenance={"role": "test"})
    assert "\n" not in str(e.value)
    left = [p for p in tmp_path.rglob("*") if p.is_file() and "_delta_log" not in p.parts]
    assert not left, left
    assert not DeltaTable.is_deltatable(path)
    commit_delta(spark.range(0, 10, 1, 2), path, provenance={"role": "test"})
    files_v0 = {p for p in tmp_path.rglob("*.parquet")}
    with pytest.raises(DeltaWriteError):
        commit_delta(bad, path, provenance={"role": "test"}, if_exists="new-version")
    assert {p for p in tmp_path.rglob("*.parquet")} == files_v0  # only the failed write's files went
    assert DeltaTable(path).version() == 0 and read_delta(spark, path).count() == 10


def _provenance() -> dict:
    return {"role": "release", "plan_id": "p-1", "dataset": "adult", "fragmentation": "horizontal",
            "mechanism": "idp-ir", "k": 20, "epsilon": "1", "composition": "parallel", "epsilon_split": None,
            "linkage": "linked", "postprocess": "isotonic", "category_order": "declared",
            "category_order_share": "1/10", "keep_id": False, "fragrelease_version": "9.9",
            "attributes": [{"name": "age", "kind": "numeric", "domain": [0, 100]}],
            "owners": [{"name": "o1", "epsilon": "1", "budgets": [{"attribute": "age", "epsilon": "1"}]}],
            "guarantee": {"table": "linked rows (the paper's release)", "per_column": "each column ..."}}


def test_inspect_and_table_self_description_read_the_new_fields(spark, tmp_path, capsys):
    """``fragrelease inspect`` prints the description, properties, column comments and each version's
    userMetadata; ``table_self_description`` returns them (either commit path)."""
    from fragrelease.jobs.cli import run_cli
    from fragrelease.jobs.describe import release_description
    from fragrelease.jobs.protocol.report_html import _description_html
    from fragrelease.jobs.storage import commit_delta, table_self_description

    prov = _provenance()
    described = release_description(prov, declared_types={"age": "integer"})
    assert described.properties["fragrelease.epsilon"] == "1" and described.properties["fragrelease.version"] == "9.9"
    assert described.column_comments["age"] == (
        "iDP-IR, eps_attr = 1 (o1) (iDP of this column as a multiset per owner's fragment); noisy cluster value "
        "clamped to the declared domain [0, 100] rounded to an integer (post-processing); linked rows: see the "
        "table's guarantee")
    path = str(tmp_path / "rel")
    commit_delta(spark.range(5).selectExpr("cast(id as int) as age"), path, provenance=prov, description=described)
    got = table_self_description(path)
    assert got["description"] == described.comment and got["column_comments"] == described.column_comments
    assert got["properties"] == (described.properties if delta_available(spark) else {})
    html = "".join(_description_html(got))
    assert "eps_attr = 1 (o1)" in html and "linked rows (the paper" in html
    assert run_cli(["inspect", path]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the console may wrap long lines
    assert "description" in out and "column age: iDP-IR, eps_attr = 1 (o1)" in out
    assert "version 0" in out and "ε 1 (parallel), k 20, plan p-1" in out


def test_provenance_under_the_old_commit_key_is_still_read(tmp_path):
    """Tables committed by earlier versions kept the provenance under the commit key ``fragrelease``."""
    import pyarrow as pa
    from deltalake import write_deltalake
    from deltalake.transaction import CommitProperties

    path = str(tmp_path / "old")
    write_deltalake(path, pa.table({"a": [1]}),
                    commit_properties=CommitProperties(custom_metadata={"fragrelease": json.dumps({"epsilon": "1/3"})}))
    assert table_provenance(path)["epsilon"] == "1/3"
