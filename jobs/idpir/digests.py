"""Order-independent digests of tables and id sets (what manifests and the aggregator compare; docs/specification.md §3).

A digest is a row count and a sum of 60-bit SHA-256 prefixes (of each row's JSON, or of each id):
the same set of rows gives the same digest in any order and any partitioning. One aggregation
pass each; only the two numbers reach the driver.
"""
from __future__ import annotations

from typing import Optional

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F


def hash60(value: Column) -> Column:
    """The first 60 bits of SHA-256 of a string column, as decimal(38,0), for order-independent sums."""
    return F.conv(F.substring(F.sha2(value, 256), 1, 15), 16, 10).cast("decimal(38,0)")


def _row_json(df: DataFrame) -> Column:
    """Each row as JSON with its columns in sorted name order (digest independent of column order)."""
    return F.to_json(F.struct(*[F.col(c) for c in sorted(df.columns)]))


def id_digest(df: DataFrame, id_column: str) -> str:
    """Order-independent digest of a fragment's id set: count and a sum of 60-bit hash prefixes."""
    row = df.agg(F.count(F.lit(1)).alias("n"), F.sum(hash60(F.col(id_column).cast("string"))).alias("s")).collect()[0]
    return f"{row['n']}:{row['s'] or 0}"


def content_digest(df: DataFrame) -> str:
    """Order-independent digest of a table's content: row count and a sum of per-row SHA-256 prefixes.

    Columns are taken by name in sorted order, so the digest does not depend on column order either.
    """
    row = df.agg(F.count(F.lit(1)).alias("n"), F.sum(hash60(_row_json(df))).alias("s")).collect()[0]
    return f"sha256-sum60:{row['n']}:{row['s'] or 0}"


def fragment_digests(df: DataFrame, id_column: str) -> tuple[str, str]:
    """``(content_digest(df), id_digest(df, id_column))`` computed in one aggregation pass."""
    row = df.agg(F.count(F.lit(1)).alias("n"), F.sum(hash60(_row_json(df))).alias("s"),
                 F.sum(hash60(F.col(id_column).cast("string"))).alias("i")).collect()[0]
    return f"sha256-sum60:{row['n']}:{row['s'] or 0}", f"{row['n']}:{row['i'] or 0}"


#: A table of at most this many bytes of data files is read in one task (:func:`committed_rows`): its
#: digest's aggregation then needs no shuffle (one Spark job instead of two).
SINGLE_TASK_BYTES = 16 << 20


def committed_rows(spark, path: str, version: Optional[int] = None) -> DataFrame:
    """What the digests of a protected fragment or pseudonym set are computed over: the rows of the
    table version's active data files, which delta-rs lists (no Delta state rebuild), read with the
    schema of the version's Delta log (no Spark job to read the files' footers).

    Shapes: the table's columns in the log's order, one row per record. A version whose data files
    hold at most :data:`SINGLE_TASK_BYTES` is one partition (one task reads it; an aggregation over it
    needs no shuffle); a larger one is read in parallel. The tables have no deletion vectors
    (:func:`fragrelease.jobs.idpir.signatures.describe_table` refuses them) and no column mapping, so
    their data files are the table; a file whose columns differ from the log fails the read.

    Raises
    ------
    ConfigError
        ``path`` is no Delta table, or the version has no data file.
    """
    import pyarrow as pa
    from pyspark.sql.pandas.types import from_arrow_schema

    from ..storage import delta_version_files

    table, files = delta_version_files(path, version)
    schema = from_arrow_schema(pa.schema(table.schema().to_arrow()))
    rows = spark.read.schema(schema).parquet(*files)
    sizes = pa.table(table.get_add_actions(flatten=True)).column("size_bytes").to_pylist()
    return rows.coalesce(1) if sum(sizes) <= SINGLE_TASK_BYTES else rows
