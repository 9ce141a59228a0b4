"""Order-independent digests of tables and id sets (what manifests and the aggregator compare; docs/specification.md §3).

A digest is a row count and a sum of 60-bit SHA-256 prefixes (of each row's JSON, or of each id):
the same set of rows gives the same digest in any order and any partitioning. One aggregation
pass each; only the two numbers reach the driver.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from fragrelease.errors import IdentifierError


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
    (:func:`fragrelease.jobs.protocol.signatures.describe_table` refuses them) and no column mapping, so
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


@dataclass(frozen=True)
class SetChecks:
    """What :func:`set_checks` computes in one pass over several owners' tables.

    ``pseudonyms``: each table's pseudonym-set digest (``count:sum``, as
    :func:`fragrelease.jobs.protocol.shuffle.pseudonym_set_digest`), in the tables' order; ``contents``:
    each table's content digest (as :func:`content_digest`), or None when not asked for; ``shared``:
    ``(a, b, count)`` of the pair of owners holding the most pseudonyms more than once (ties: by
    name; ``b`` None when ``a`` repeats its own), as
    :func:`fragrelease.jobs.idpir.combine.check_disjoint_pseudonyms` picks it, or None when no
    pseudonym is held twice or no overlap was asked for. The counts are data-dependent: they go to
    the error line for the parties of the release only, never to a log, a plan or a table.
    """

    pseudonyms: tuple[str, ...]
    contents: Optional[tuple[str, ...]]
    shared: Optional[tuple[str, Optional[str], int]]


def set_checks(frames: Mapping[str, DataFrame], column: str, *, contents: bool = False, overlaps: bool = False,
               single_task: bool = False) -> SetChecks:
    """Every owner's pseudonym-set digest (and content digest), and the owners that share pseudonyms, in one pass.

    ``frames``: owner name → its table (each holds ``column``; ``contents``: every column of the
    table is hashed, as :func:`content_digest`). Each table's values are read once: its rows, tagged
    by owner, are grouped by pseudonym (``overlaps``; at most one row per pair of owners that share
    a pseudonym, plus one, reaches the driver: partial sums and counts, never a pseudonym), or
    aggregated globally (one row). ``single_task`` (the tables' public or own record counts are
    small: :func:`fragrelease.jobs.protocol.shuffle.one_task`): the union is read in one partition, so
    the groupings plan no exchange and the whole check is one Spark job.

    The digests equal :func:`content_digest` and :func:`fragrelease.jobs.protocol.shuffle.pseudonym_set_digest`
    of each table alone (exact integer sums); ``shared`` equals what
    :func:`fragrelease.jobs.idpir.combine.check_disjoint_pseudonyms` reports on the same tables.
    Raises what Spark raises when a table cannot be read (the callers name the owner by checking each
    table alone).
    """
    names = list(frames)
    tagged = []
    for name, df in frames.items():
        cols = [F.lit(name).alias("__owner"), F.col(column).cast("string").alias("__v")]
        cols.append(hash60(_row_json(df)).alias("__row") if contents else F.lit(None).cast("decimal(38,0)").alias("__row"))
        tagged.append(df.select(*cols))
    u = tagged[0]
    for t in tagged[1:]:
        u = u.unionByName(t)
    if single_task:
        u = u.coalesce(1)
    mine = [F.col("__owner") == F.lit(name) for name in names]
    if not overlaps:
        aggs = []
        for i, m in enumerate(mine):
            aggs += [F.count_if(m).alias(f"n{i}"), F.sum(F.when(m, hash60(F.col("__v")))).alias(f"s{i}"),
                     F.sum(F.when(m, F.col("__row"))).alias(f"r{i}")]
        rows = u.agg(*aggs).collect()
    else:
        per_value = []
        for i, m in enumerate(mine):
            per_value += [F.count_if(m).alias(f"n{i}"), F.sum(F.when(m, F.col("__row"))).alias(f"r{i}")]
        grouped = u.groupBy("__v").agg(F.count(F.lit(1)).alias("__n"),
                                       F.array_sort(F.collect_set("__owner")).alias("__owners"), *per_value)
        twice = F.col("__n") > 1
        h = hash60(F.col("__v"))
        keyed = grouped.select(F.when(twice, F.col("__owners")[0]).alias("a"),
                               F.when(twice & (F.size("__owners") > 1), F.col("__owners")[1]).alias("b"),
                               *[F.col(f"n{i}") for i in range(len(names))],
                               *[(h * F.col(f"n{i}")).alias(f"s{i}") for i in range(len(names))],
                               *[F.col(f"r{i}") for i in range(len(names))])
        aggs = [F.count(F.lit(1)).alias("count")]
        for i in range(len(names)):
            aggs += [F.sum(f"n{i}").alias(f"n{i}"), F.sum(f"s{i}").alias(f"s{i}"), F.sum(f"r{i}").alias(f"r{i}")]
        rows = keyed.groupBy("a", "b").agg(*aggs).collect()

    def total(key: str) -> int:
        return sum(int(r[key]) for r in rows if r[key] is not None)

    pseudonyms = tuple(f"{total(f'n{i}')}:{total(f's{i}')}" for i in range(len(names)))
    digests = tuple(f"sha256-sum60:{total(f'n{i}')}:{total(f'r{i}')}" for i in range(len(names))) if contents else None
    shared = None
    pairs = [(r["a"], r["b"], int(r["count"])) for r in rows if overlaps and r["a"] is not None]
    if pairs:  # as check_disjoint_pseudonyms orders them: most shared first, then by name (no second owner first)
        shared = min(pairs, key=lambda p: (-p[2], p[0], p[1] is not None, p[1] or ""))
    return SetChecks(pseudonyms=pseudonyms, contents=digests, shared=shared)


def shared_records(a: str, b: Optional[str], count: int, *, stage: str) -> IdentifierError:
    """The error for ``count`` pseudonyms (or keyed id digests) held by horizontal owners ``a`` and ``b``
    (None: ``a`` twice). ``stage``: ``"plan"`` (the metadata round's id digests,
    :func:`fragrelease.jobs.protocol.aggregator.check_disjoint_ids`) or ``"release"`` (a kind's check of
    its owners' messages, :func:`fragrelease.jobs.idpir.combine.check_disjoint_pseudonyms`). Returns,
    does not raise. The count is data-dependent: it goes to the error line for the parties only."""
    if stage == "plan":
        if b is None:
            return IdentifierError(f"the id digests of owner {a!r} hold {count} id{'s' if count > 1 else ''} more "
                                   "than once; no plan was issued")
        return IdentifierError(f"owners {a!r} and {b!r} share {count} record{'s' if count > 1 else ''} (their keyed "
                               "id digests match); horizontal owners must hold disjoint records; no plan was issued "
                               "and no budget was spent")
    if b is None:
        return IdentifierError(f"the protected fragment of {a!r} holds {count} pseudonym{'s' if count > 1 else ''} "
                               "more than once; "
                               "a horizontal owner holds each record once")
    return IdentifierError(f"owners {a!r} and {b!r} hold {count} records with the same pseudonym; horizontal "
                           "owners must hold disjoint records (a record held twice would be released twice under "
                           "parallel composition)")
