"""Digests over a Delta table's data files (no state reconstruction) equal those over Delta's own reader."""
from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from fragrelease.errors import ConfigError
from fragrelease.jobs.idpir.digests import committed_rows, content_digest, fragment_digests
from fragrelease.jobs.storage import commit_delta, read_delta


def test_committed_rows_are_the_versions_rows(spark, tmp_path):
    path = str(tmp_path / "t")
    first = spark.range(40).select(F.sha2(F.col("id").cast("string"), 256).alias("pseudonym"), (F.col("id") / 7).alias("x"))
    second = first.where(F.col("x") > 2).withColumn("x", F.col("x") + 1)
    commit_delta(first, path, provenance={"role": "test"})
    commit_delta(second, path, provenance={"role": "test"}, if_exists="new-version")
    for version, expected in ((0, 40), (1, second.count()), (None, second.count())):
        rows = committed_rows(spark, path, version)
        assert rows.count() == expected
        assert sorted(rows.columns) == ["pseudonym", "x"]
        assert content_digest(rows) == content_digest(read_delta(spark, path, version))
        assert fragment_digests(rows, "pseudonym") == fragment_digests(read_delta(spark, path, version), "pseudonym")
    assert content_digest(committed_rows(spark, path, 0)) != content_digest(committed_rows(spark, path, 1))


def test_committed_rows_refuse_a_folder_that_is_no_delta_table(spark, tmp_path):
    with pytest.raises(ConfigError, match="is not a Delta table"):
        committed_rows(spark, str(tmp_path))
