"""Digests over a Delta table's data files (no state reconstruction) equal those over Delta's own reader."""
from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from fragrelease.errors import ConfigError
from fragrelease.jobs.protocol.digests import committed_rows, content_digest, fragment_digests
from fragrelease.jobs.storage import commit_delta, read_delta


def test_committed_rows_are_the_versions_rows(spark, tmp_path):
    path = str(tmp_path / "t")
    first = spark.range(40).select(F.sha2(F.col("id").cast("string"), 256).alias("pseudonym"), (F.col("id") / 7).alias("x"))
    second = first.where(F.col("x") > 2).withColumn("x", F.col("x") + 1)
    commit_delta(first, path, provenance={"role": "test"})
    commit_delta(second, path, provenance={"role": "test"}, if_exists="new-version")
    n_second = second.count()
    digests = {}
    for version, expected in ((0, 40), (1, n_second), (None, n_second)):
        rows = committed_rows(spark, path, version)
        assert rows.count() == expected
        assert sorted(rows.columns) == ["pseudonym", "x"]
        # Delta's own reader, read once per version (each digest of a Delta read ran 3-6 jobs of its own)
        by_delta = read_delta(spark, path, version).localCheckpoint()
        digests[version] = fragment_digests(rows, "pseudonym")
        assert content_digest(rows) == content_digest(by_delta) == digests[version][0]
        assert digests[version] == fragment_digests(by_delta, "pseudonym")
    assert digests[0][0] != digests[1][0]


def test_committed_rows_refuse_a_folder_that_is_no_delta_table(spark, tmp_path):
    with pytest.raises(ConfigError, match="is not a Delta table"):
        committed_rows(spark, str(tmp_path))


def test_committed_rows_start_no_job_and_a_small_table_is_digested_in_one(spark, tmp_path, monkeypatch):
    from fragrelease.jobs.protocol import digests

    path = str(tmp_path / "t")
    rows = spark.range(300).select(F.sha2(F.col("id").cast("string"), 256).alias("pseudonym"),
                                   (F.col("id") / 7).alias("x"), F.col("id").alias("n"))
    commit_delta(rows.repartition(3), path, provenance={"role": "test"})
    tracker = spark.sparkContext.statusTracker()  # test only: counts the Spark jobs
    jobs = []
    for limit in (digests.SINGLE_TASK_BYTES, 0):  # small: one task; "large": read in parallel
        monkeypatch.setattr(digests, "SINGLE_TASK_BYTES", limit)
        before = set(tracker.getJobIdsForGroup(None))
        got = committed_rows(spark, path)
        assert set(tracker.getJobIdsForGroup(None)) == before  # no footer-reading job
        assert got.columns == ["pseudonym", "x", "n"]
        assert [f.dataType.simpleString() for f in got.schema.fields] == ["string", "double", "bigint"]
        jobs.append((fragment_digests(got, "pseudonym"), len(set(tracker.getJobIdsForGroup(None)) - before)))
    assert jobs[0][0] == jobs[1][0] == fragment_digests(read_delta(spark, path), "pseudonym")
    assert jobs[0][1] == 1 and jobs[1][1] == 2
