"""The reports' Spark passes: the public report reads the committed release from its data files (Delta's
reader for tables a plain Parquet read would misread), a small owner report runs one job per pass, and the
public report's noise charts are made while its summary pass runs (docs/benchmarks.md, "Issue 41, session 4")."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fragrelease.jobs.protocol import report, report_stats
from fragrelease.jobs.protocol.report import _counted_summary_pass, _quantiles, committed_release, plain_parquet_table
from fragrelease.jobs.session import delta_available
from fragrelease.jobs.storage import commit_delta, read_delta
from fragrelease.schemas.base import Attribute

ATTRS = [Attribute(name="x", type="double", role="quasi-identifier", kind="numeric", domain=[0, 100]),
         Attribute(name="g", type="string", role="quasi-identifier", kind="categorical", categories=["a", "b", "c"])]


def _jobs(spark):
    return set(spark.sparkContext.statusTracker().getJobIdsForGroup(None))  # test only: counts Spark jobs


def _release(spark, path: str, n: int = 300) -> None:
    rng = np.random.default_rng(3)
    pdf = pd.DataFrame({"x": np.round(rng.uniform(0, 100, n), 2), "g": rng.choice(["a", "b", "c"], n)})
    commit_delta(spark.createDataFrame(pdf).repartition(3), path, provenance={"role": "test"})


def _report_numbers(df):
    stats, corr, n = _counted_summary_pass(df, ATTRS)
    return stats, n, _quantiles(df, ATTRS)


def test_the_release_is_read_from_its_files_with_the_report_numbers_of_deltas_reader(spark, tmp_path):
    from deltalake import DeltaTable

    path = str(tmp_path / "release")
    _release(spark, path)
    assert plain_parquet_table(DeltaTable(path, version=0))
    before = _jobs(spark)
    rows = committed_release(spark, path, 0)
    assert _jobs(spark) == before  # no job to rebuild Delta's state or read footers
    assert rows.columns == ["x", "g"]
    assert _report_numbers(rows) == _report_numbers(read_delta(spark, path, 0))
    before = _jobs(spark)
    _report_numbers(rows)
    assert len(_jobs(spark) - before) == 2  # the summary and the quantiles, one job each (one partition)


@pytest.mark.parametrize("feature", ["column mapping", "deletion vectors"])
def test_a_table_a_plain_read_would_misread_is_read_with_deltas_reader(spark, tmp_path, feature):
    from deltalake import DeltaTable

    if not delta_available(spark):
        pytest.skip("needs Delta Lake's Spark classes to write the table feature")
    path = str(tmp_path / "release")
    _release(spark, path)
    table = f"delta.`{path}`"
    if feature == "column mapping":  # the files keep the old physical name: a plain read sees no column "y"
        spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name', "
                  "'delta.minReaderVersion' = '2', 'delta.minWriterVersion' = '5')")
        spark.sql(f"ALTER TABLE {table} RENAME COLUMN x TO y")
    else:  # the deleted rows stay in the files, marked in a deletion vector
        spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
        spark.sql(f"DELETE FROM {table} WHERE x < 50")
    version = DeltaTable(path).version()
    try:
        assert not plain_parquet_table(DeltaTable(path, version=version))
    except Exception as exc:  # delta-rs may not open the table at all: committed_release falls back then too
        assert type(exc).__name__ == "DeltaProtocolError"
    got = committed_release(spark, path, version).toPandas()
    expected = read_delta(spark, path, version).toPandas()
    assert list(got.columns) == list(expected.columns)
    assert sorted(map(tuple, got.to_numpy().tolist())) == sorted(map(tuple, expected.to_numpy().tolist()))
    if feature == "deletion vectors":
        assert len(got) < 300 and (got["x"] >= 50).all()
    else:
        assert list(got.columns) == ["y", "g"] and got["y"].notna().all()


def test_a_small_owner_report_runs_one_job_per_pass(spark, tmp_path, monkeypatch):
    rng = np.random.default_rng(5)
    n = 200
    orig = pd.DataFrame({"rid": np.arange(n), "x": np.round(rng.uniform(0, 100, n), 1), "g": rng.choice(["a", "b", "c"], n)})
    prot = orig.assign(x=np.clip(orig["x"] + rng.normal(0, 5, n), 0, 100))
    # the protected values as the owner step holds them: checkpointed (Spark cannot size them)
    protected = spark.createDataFrame(prot).repartition(3, "rid").localCheckpoint()
    spark.createDataFrame(orig).repartition(2).write.parquet(str(tmp_path / "orig"))  # as read from a source
    original = spark.read.parquet(str(tmp_path / "orig"))
    manifest = {"owner": "a", "plan_id": "p", "n_records": n}
    pages, counts = [], []
    for limit in (report.SINGLE_TASK_VALUES, 0):  # small: one partition per side; "large": as before
        monkeypatch.setattr(report, "SINGLE_TASK_VALUES", limit)
        before = _jobs(spark)
        path = report.owner_report(original, protected, ATTRS, "rid", manifest, str(tmp_path / f"o{limit}.html"))
        counts.append(len(_jobs(spark) - before))
        text = open(path).read()
        pages.append(text[:text.index("<p><small>Generated by")])  # the time it was written differs
    assert counts[0] == 2  # both summaries in one job, MeanSSE with the quantiles in one: no shuffle stage
    assert counts[1] > counts[0]
    assert pages[0] == pages[1]  # the same report


def test_summaries_of_several_tables_in_one_job_equal_one_pass_each(spark):
    rng = np.random.default_rng(9)
    a = pd.DataFrame({"x": rng.uniform(0, 100, 120), "g": rng.choice(["a", "b", "c"], 120)})
    b = pd.DataFrame({"x": rng.integers(0, 100, 80), "g": rng.choice(["a", "c"], 80)})  # an integer column
    fa, fb = spark.createDataFrame(a).repartition(3), spark.createDataFrame(b).coalesce(1)
    fa, fb = fa.localCheckpoint(), fb.localCheckpoint()
    before = _jobs(spark)
    both = report._summary_passes([fa, fb], ATTRS)
    assert len(_jobs(spark) - before) == 1
    for got, df, pdf in zip(both, (fa, fb), (a, b)):
        stats, corr, n = got
        one = _counted_summary_pass(df, ATTRS)
        assert n == one[2] == len(pdf)
        assert stats == one[0]
        assert stats["x"]["mean"] == pytest.approx(pdf["x"].mean())
        assert stats["g"]["freq"] == {c: int((pdf["g"] == c).sum()) for c in ("a", "b", "c")}


def test_an_empty_release_is_read_as_no_rows(spark, tmp_path):
    path = str(tmp_path / "release")
    commit_delta(spark.createDataFrame(pd.DataFrame({"x": [1.0], "g": ["a"]})).limit(0), path, provenance={"role": "test"})
    rows = committed_release(spark, path, 0)
    assert rows.count() == 0 and rows.columns == ["x", "g"]


def test_a_table_deltars_cannot_open_here_is_read_with_deltas_reader(spark, tmp_path, monkeypatch):
    # the release is already committed when its report reads it: delta-rs failing to open the table (a
    # store it has no credentials for, a panic) must not fail the release, only send the read to Spark's reader
    import deltalake

    path = str(tmp_path / "release")
    _release(spark, path)

    class Unreachable:
        is_deltatable = staticmethod(lambda *a, **k: True)  # the log is there; opening it fails

        def __init__(self, *args, **kwargs):
            raise OSError("Generic S3 error: no credentials")

    monkeypatch.setattr(deltalake, "DeltaTable", Unreachable)
    read = []
    from fragrelease.jobs import storage
    monkeypatch.setattr(storage, "read_delta", lambda *a: read.append(a) or read_delta(*a))
    rows = committed_release(spark, path, 0)
    assert read == [(spark, path, 0)]
    assert rows.count() == 300


# ---- issue 41, session 4: noise charts made during the summary pass ----

PAGE_ATTRS = [Attribute(name="age", type="integer", role="quasi-identifier", kind="numeric", domain=(0, 100)),
              Attribute(name="sex", type="string", role="quasi-identifier", kind="categorical", categories=("f", "m"))]


def _provenance() -> dict:
    from fragrelease.idpir.guarantee import release_guarantee

    return {"dataset": "d", "fragmentation": "horizontal", "mechanism": "dp-ir", "k": 5, "epsilon": "3",
            "composition": "parallel", "category_order": "declared", "category_order_share": "1/10",
            "linkage": "linked", "plan_id": "p-1", "fragrelease_version": "9.9.9",
            "attributes": [a.public_spec() for a in PAGE_ATTRS],
            "guarantee": release_guarantee(mechanism="dp-ir", epsilon="3", composition="parallel", linkage="linked",
                                           category_order="declared"),
            "owners": [{"name": o, "n_records": 100, "epsilon": "3", "epsilon_per_attribute": "1",
                        "attributes": [a.name for a in PAGE_ATTRS],
                        "budgets": [{"attribute": a.name, "epsilon": "1", "epsilon_order": "0", "epsilon_centroids": "1"}
                                    for a in PAGE_ATTRS]} for o in ("a", "b")]}


def _released_df(spark):
    rng = np.random.default_rng(7)
    return spark.createDataFrame(pd.DataFrame({"age": rng.integers(18, 90, 200).astype("int32"),
                                               "sex": rng.choice(["f", "m"], 200)}))


def test_the_public_reports_noise_charts_are_drawn_while_its_summary_pass_runs(spark, tmp_path, monkeypatch):
    import threading
    from dataclasses import replace

    from fragrelease.jobs.idpir.report_sections import report_sections

    drawn, events = threading.Event(), []
    summary_pass = report._counted_summary_pass
    # the IR kind's sections (as the aggregator passes them), the noise section's draw marking when it has run
    sections = [replace(s, draw=lambda draw=s.draw: (draw(), drawn.set())[0]) if s.draw else s
                for s in report_sections(_provenance(), PAGE_ATTRS)]
    assert [s.anchor for s in sections if s.draw] == ["noise"]

    def summary_waiting_for_the_noise_charts(*args):
        # the plot thread draws the noise charts while this pass runs, so waiting for them here ends
        # (drawn after the pass, as before, this wait would time out)
        events.append(drawn.wait(30))
        return summary_pass(*args)

    monkeypatch.setattr(report, "_counted_summary_pass", summary_waiting_for_the_noise_charts)
    path = report.public_report(_released_df(spark), PAGE_ATTRS, _provenance(), str(tmp_path / "p.html"),
                                table="t", version=0, extra_sections=sections)
    assert events == [True]
    text = open(path).read()
    # the distributions in HTML (one numeric: no correlations), no image
    assert text.count('<figure class="dist') == len(PAGE_ATTRS) and "<img" not in text
    assert text.count('<figure class="bars" role="img"') == 3 and '<table class="heat">' not in text  # 3 noise charts
    assert "200 rows" in text


def test_a_failed_summary_pass_fails_the_public_report_with_its_error_and_leaves_no_plot_thread(spark, tmp_path,
                                                                                                monkeypatch):
    import threading

    def failing(*args):
        raise OSError("summary pass failed")

    monkeypatch.setattr(report, "_counted_summary_pass", failing)
    with pytest.raises(OSError, match="^summary pass failed$"):
        report.public_report(_released_df(spark), PAGE_ATTRS, _provenance(), str(tmp_path / "p.html"))
    assert not [t for t in threading.enumerate() if t.name.startswith("fragrelease-report-plots")]
    assert not (tmp_path / "p.html").exists()


def test_rank_quantiles_are_sparks_percentile_approx_below_the_exact_limit(spark):
    """Issue 41, session 6: below EXACT_QUANTILE_RECORDS records Spark's sketch keeps every value, and
    ``percentile_approx`` (the reports' accuracy) returns the value of rank ceil(p n): so does _rank_quantiles."""
    from pyspark.sql import functions as F

    rng = np.random.default_rng(11)
    accuracy = int(round(1 / report._RELATIVE_ERROR))
    assert report.EXACT_QUANTILE_RECORDS == 5000
    columns = {}
    for n in (1, 2, 3, 7, 20, 21, 99, 100, 101, 500, 999, 1000, 1001, 2500, report.EXACT_QUANTILE_RECORDS - 1):
        columns[f"normal_{n}"] = rng.normal(size=n)
        columns[f"ties_{n}"] = rng.integers(0, 5, size=n).astype(float)  # many equal values
        columns[f"tenths_{n}"] = np.round(rng.uniform(0, 100, size=n), 1)
    long = pd.concat([pd.DataFrame({"column": name, "x": x}) for name, x in columns.items()], ignore_index=True)
    # every column's sketch in one task (one job), as the reports' aggregation over one partition
    got = {r["column"]: [float(v) for v in r["q"]] for r in spark.createDataFrame(long).coalesce(1).groupBy("column")
           .agg(F.percentile_approx("x", list(report.QUANTILES), accuracy).alias("q")).collect()}
    assert got.keys() == columns.keys()
    for name, x in columns.items():
        assert got[name] == report_stats._rank_quantiles(x, report.QUANTILES), name
    assert report_stats._rank_quantiles(np.array([np.nan, 2.0, 1.0]), (0.5,)) == [1.0]  # NaN is no value
    assert report_stats._rank_quantiles(np.array([np.nan]), (0.5,)) is None


def test_summaries_with_quantiles_are_the_quantile_pass_in_the_same_job(spark):
    rng = np.random.default_rng(12)
    a = pd.DataFrame({"x": np.round(rng.uniform(0, 100, 700), 1), "g": rng.choice(["a", "b", "c"], 700)})
    b = pd.DataFrame({"x": rng.integers(0, 100, 90).astype(float), "g": rng.choice(["a", "c"], 90)})
    fa = spark.createDataFrame(a).repartition(3).localCheckpoint().coalesce(1)
    fb = spark.createDataFrame(b).coalesce(1).localCheckpoint()
    empty = fb.where("x < 0")
    before = _jobs(spark)
    got = report._summary_passes([fa, fb, empty], ATTRS, quantiles=True)
    assert len(_jobs(spark) - before) == 1
    for (stats, _corr, n), df, pdf in zip(got, (fa, fb, empty), (a, b, b.iloc[:0])):
        plain = report._summary_passes([df], ATTRS)[0][0]
        assert n == len(pdf)
        want = _quantiles(df, ATTRS)
        assert stats["x"]["quantiles"] == want.get("x", [None] * len(report.QUANTILES))
        assert {k: v for k, v in stats["x"].items() if k != "quantiles"} == \
            {k: v for k, v in plain["x"].items() if k != "quantiles"}
    with pytest.raises(RuntimeError, match="spans 3 partitions"):
        report._summary_passes([spark.createDataFrame(a).repartition(3)], ATTRS, quantiles=True)


def test_a_small_public_report_summarizes_in_one_job_with_the_same_numbers(spark, tmp_path, monkeypatch):
    seen, counts = [], []
    real_render = report.render

    def capture(template, **context):
        seen.append({k: context[k] for k in ("rows", "numeric_rows", "distributions", "correlation")})
        return real_render(template, **context)

    monkeypatch.setattr(report, "render", capture)
    df = _released_df(spark).coalesce(1).localCheckpoint()  # one partition either way: the same float sums
    for records in (200, None):  # the plan's count: one job; unknown: the summary pass and the quantiles' job
        before = _jobs(spark)
        report.public_report(df, PAGE_ATTRS, _provenance(), str(tmp_path / f"p{records}.html"), records=records)
        counts.append(len(_jobs(spark) - before))
    assert counts[0] == 1 and counts[1] >= 2, counts
    assert seen[0] == seen[1] and seen[0]["rows"] == 200
