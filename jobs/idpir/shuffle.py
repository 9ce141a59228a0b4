"""Random row orders with CSPRNG keys: what owners and the aggregator apply before writing.

Owners shuffle their pseudonymized rows (and, with ``linkage: unlinked``, unlink their columns)
before writing the protected fragment the aggregator reads; the aggregator shuffles the combined
release the same way (docs/privacy.md, "Against the aggregator"; docs/specification.md §2).
Keys come from :func:`fragrelease.udfs.noise.secure_random_key_udf` (the OS CSPRNG).
"""
from __future__ import annotations

from typing import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from fragrelease.jobs.frames import aggregate_row
from fragrelease.jobs.idpir.digests import hash60
from fragrelease.jobs.idpir.ranking import global_rank, num_partitions
from fragrelease.pseudonyms import PSEUDONYM_COLUMN
from fragrelease.udfs.noise import secure_random_key_udf
from fragrelease.udfs.pseudonyms import pseudonym_udf


def shuffle_rows(df: DataFrame, anchor: str) -> DataFrame:
    """Random row order (keys from the OS CSPRNG): the output cannot be lined up with the input.

    Shapes: in and out the same columns and rows; ``anchor`` is any column (it feeds the key UDF
    one value per row). Range partitioning by the random key, then a sort within each partition:
    no step moves all rows to one partition.
    """
    return (df.withColumn("__key", secure_random_key_udf()(F.col(anchor)))
            .repartitionByRange("__key").sortWithinPartitions("__key").drop("__key"))


def line_up_columns(columns: Sequence[tuple[DataFrame, str]]) -> DataFrame:
    """Each ``(frame, column)`` in its own uniformly random order, lined up by position in one table.

    Shapes: every frame has the same number of rows n; out: n rows, one column per pair (names
    must differ). Each column is ranked by a fresh CSPRNG key with
    :func:`fragrelease.jobs.idpir.ranking.global_rank` (range partitioning, stored before counting,
    so the keys are drawn once) and the columns are joined on that rank.
    """
    out = None
    key = secure_random_key_udf()
    for df, c in columns:
        parts = num_partitions(df.sparkSession, 0)
        keyed = df.select(F.lit(0).alias("__g"), key(F.col(c)).alias("__key"), F.col(c))
        ranked = global_rank(keyed, "__g", ["__key"], parts).select(F.col("rank").alias("__row"), c)
        out = ranked if out is None else out.join(ranked, "__row")
    assert out is not None, "line_up_columns needs at least one column"
    return out.drop("__row")


def unlink_columns(df: DataFrame, columns: list[str]) -> DataFrame:
    """Shuffle every column on its own (``linkage: unlinked``; docs/specification.md §2).

    Shapes: in, any DataFrame holding ``columns``; out, the same columns with the same multiset of
    values per column, each column in its own uniformly random order (keys from the OS CSPRNG,
    :func:`fragrelease.udfs.noise.secure_random_key_udf`), lined up by position. After this the
    table is a function of the columns' multisets alone: no row links a record's values across
    attributes. Distributed: :func:`line_up_columns`.
    """
    return line_up_columns([(df, c) for c in columns])


def pseudonymize(df: DataFrame, id_column: str, key: bytes, context: str) -> DataFrame:
    """Replace ``id_column`` by the keyed pseudonym column ``pseudonym`` (first), other columns kept.

    ``pseudonym = HMAC-SHA-256(key, context + NUL + id text)`` in hex
    (:func:`fragrelease.pseudonyms.pseudonym`, through :func:`fragrelease.udfs.pseudonyms.pseudonym_udf`).
    """
    udf = pseudonym_udf(key, context)
    rest = [c for c in df.columns if c != id_column]
    return df.select(udf(F.col(id_column).cast("string")).alias(PSEUDONYM_COLUMN), *rest)


def pseudonym_set_digest(df: DataFrame, column: str = PSEUDONYM_COLUMN) -> str:
    """Order-independent digest of the set of values of ``column``: ``count:sum of 60-bit SHA-256 prefixes``.

    On pseudonyms, equal sets give equal digests; without the key nobody can test a guessed record
    id against it.
    """
    row = aggregate_row(df.agg(F.count(F.lit(1)).alias("n"), F.sum(hash60(F.col(column).cast("string"))).alias("s")))
    return f"{row['n']}:{row['s'] or 0}"
