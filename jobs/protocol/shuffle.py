"""Random row orders with CSPRNG keys: what owners and the aggregator apply before writing.

Owners shuffle their pseudonymized rows (with ``linkage: unlinked``, their pseudonym sets; the
columns are unlinked by :mod:`fragrelease.jobs.idpir.unlink`) before writing what the aggregator
reads; the aggregator shuffles the combined release the same way (docs/privacy.md, "Against the aggregator"; docs/specification.md §2).
Keys come from :func:`fragrelease.udfs.noise.secure_random_key_udf` (the OS CSPRNG).
"""
from __future__ import annotations

from typing import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from fragrelease.pseudonyms import PSEUDONYM_COLUMN
from fragrelease.udfs.noise import secure_random_key_udf
from fragrelease.udfs.pseudonyms import pseudonym_udf

from ..frames import aggregate_row
from .digests import hash60

#: Up to this many values (rows × columns, a count that is public or the owner's own: a plan's or a
#: spec's record count), :func:`shuffle_rows` may sort in one task (:func:`one_task`): the same
#: random order without the range partitioner's sample job and the shuffle's stage job.
ONE_TASK_VALUES = 1_000_000


def one_task(rows: int, columns: int) -> bool:
    """Whether ``rows`` × ``columns`` values are few enough for one task (:data:`ONE_TASK_VALUES`).

    ``rows`` must be public or the caller's own count (a plan's or a spec's record count), never
    a count of someone else's data; the answer is never written anywhere."""
    return rows * max(columns, 1) <= ONE_TASK_VALUES


def shuffle_rows(df: DataFrame, anchor: str, *, single_task: bool = False) -> DataFrame:
    """Random row order (keys from the OS CSPRNG): the output cannot be lined up with the input.

    Shapes: in and out the same columns and rows; ``anchor`` is any column (it feeds the key UDF
    one value per row). Range partitioning by the random key, then a sort within each partition:
    no step moves all rows to one partition. ``single_task`` (a small table, :func:`one_task`):
    the rows are read in one partition instead (``coalesce(1)``: no exchange, so no sample job and
    no stage job) and sorted there by the same random key; the same uniformly random order,
    written as one file.
    """
    keyed = df.withColumn("__key", secure_random_key_udf()(F.col(anchor)))
    if single_task:
        return keyed.coalesce(1).sortWithinPartitions("__key").drop("__key")
    return keyed.repartitionByRange("__key").sortWithinPartitions("__key").drop("__key")


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
    return pseudonym_set_digests([df], column)[0]


def pseudonym_set_digests(frames: Sequence[DataFrame], column: str = PSEUDONYM_COLUMN) -> list[str]:
    """:func:`pseudonym_set_digest` of each frame in ``frames``, in their order, from one global aggregation
    over their union (each row tagged with its frame's index): one pass instead of one per frame.

    Shapes: in, frames that each hold ``column``; out, one ``count:sum`` digest per frame, each equal
    to :func:`pseudonym_set_digest` of that frame alone (``0:0`` for an empty one).
    """
    if not frames:
        return []
    tagged = [f.select(F.lit(i).alias("__frame"), F.col(column).cast("string").alias("__v")) for i, f in enumerate(frames)]
    u = tagged[0]
    for t in tagged[1:]:
        u = u.unionByName(t)
    h = hash60(F.col("__v"))
    aggs = []
    for i in range(len(frames)):
        mine = F.col("__frame") == F.lit(i)
        aggs += [F.count_if(mine).alias(f"n{i}"), F.sum(F.when(mine, h)).alias(f"s{i}")]
    row = aggregate_row(u.agg(*aggs))
    return [f"{row[f'n{i}']}:{row[f's{i}'] or 0}" for i in range(len(frames))]
