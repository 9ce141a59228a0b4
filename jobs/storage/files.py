"""Reading fragments, exchanging protocol messages and committing Delta tables.

Two commit paths, chosen per session by :func:`fragrelease.jobs.session.delta_available` and, with
Delta's classes, per table by :func:`committed_by_delta_rs` (an owner's own table, a protected fragment,
pseudonym set or id digests, at a local path of a ``local`` master goes to the delta-rs path; every
release table keeps Delta's own commit):

- **Delta's Spark classes** (the embedded session once ``scripts/setup.sh`` fetched the jars,
  clusters with delta-spark, Databricks): Delta's own Spark API writes the table. A new table is
  ``df.writeTo(...).using("delta").create()`` (one ``CREATE TABLE AS SELECT`` commit that also sets
  the description, the ``fragrelease.*`` properties and the column comments); a new version is an
  overwrite, ``df.write.format("delta").mode("overwrite")`` (one ``WRITE`` commit), or, when the
  description or a property changes (another ε, k, ...), ``writeTo(...).replace()`` (one ``REPLACE
  TABLE AS SELECT`` commit; history and time travel stay). Either way one release is one table
  version, whose snapshot holds the data with its own description. Delta's optimistic
  concurrency decides between concurrent writers. If the write fails, the data files it created that
  no Delta version references are removed (:func:`fragrelease.jobs.storage.delta._remove_orphans`) and
  :class:`fragrelease.errors.DeltaWriteError` names the cause.
- **No Delta classes** (``FRAGRELEASE_DELTA=off``, or no jars and no network): Spark writes Parquet
  files **inside** the table folder and the ``deltalake`` (delta-rs) package commits them as one
  Delta transaction: the files are invisible to every Delta reader until that commit, so a failed
  write never becomes a partial release. The description and column comments go in that commit
  (a ``WRITE``; a ``CREATE OR REPLACE TABLE`` when the description changes). delta-rs refuses custom
  table properties in a commit that writes data (its kernel rejects unknown keys at create), and a
  second commit would break "one release, one version", so on this path the ``fragrelease.*``
  properties are **not** set: the same facts are in the description and the commit's ``userMetadata``.

Every commit carries the provenance (public facts only) as its ``userMetadata``, which
``DESCRIBE HISTORY``, ``DeltaTable.history()`` and Databricks show; tables that earlier fragrelease
versions committed with delta-rs kept it under the commit key ``fragrelease``, which
:func:`table_provenance` still reads.

A second write to the same table is refused (``if_exists="error"``) or becomes a new table version
(``"new-version"``: an overwrite commit; the earlier version stays readable by time travel). The
schema is checked before every write, since delta-rs accepts an append of a differing type.
Reads go through the table's active files (``spark.read.format("delta")`` or delta-rs' file list),
never ``spark.read.parquet(folder)``, which would also read files that later versions removed.
"""
from __future__ import annotations

import json
import os
import posixpath
import uuid
from typing import Any, Mapping, Optional
from urllib.parse import urlparse

from fragrelease.errors import ConfigError, ReleaseExistsError, SchemaMismatchError

from ..describe import TableDescription
from ..session import delta_available, local_cores
from .delta import _commit_with_delta_rs, commit_with_spark
from .uris import absolute, fs_path

#: The commit key under which fragrelease 0.x kept the provenance (read for old tables; now ``userMetadata``).
PROVENANCE_KEY = "fragrelease"


def write_text(uri: str, text: str) -> None:
    """Write a small text file (a manifest, a plan) atomically where the filesystem allows."""
    fs, path = fs_path(uri)
    fs.create_dir(posixpath.dirname(path), recursive=True)
    tmp = f"{path}.tmp-{uuid.uuid4().hex}"
    with fs.open_output_stream(tmp) as out:
        out.write(text.encode("utf-8"))
    fs.move(tmp, path)


def read_text(uri: str) -> str:
    fs, path = fs_path(uri)
    try:
        with fs.open_input_stream(path) as f:
            return f.read().decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"file {uri!r} does not exist") from None


def file_exists(uri: str) -> bool:
    """True when ``uri`` names a file (its metadata only; nothing is read)."""
    from pyarrow import fs as pafs

    filesystem, path = fs_path(uri)
    return filesystem.get_file_info(path).type == pafs.FileType.File


def is_delta_table(uri: str) -> bool:
    from deltalake import DeltaTable

    return DeltaTable.is_deltatable(absolute(uri))


def read_source(spark, path: str, fmt: str = "parquet", options: Optional[dict] = None, *, text: bool = False):
    """A fragment or table as a Spark DataFrame (``fmt``: parquet, csv or delta).

    ``text``: a CSV source's columns as strings, read without Spark's inference passes when its
    header can be read on the driver (:func:`fragrelease.jobs.storage.read_csv_text`; the caller
    validates and casts the values), else inferred as without it.

    Raises
    ------
    SchemaMismatchError
        A CSV file that is UTF-16 or UTF-32, not UTF-8 (:func:`fragrelease.jobs.storage.csv_source.csv_encoding_problem`),
        before Spark reads it: ``source <path>: the file is UTF-16 (byte-order mark); save it as UTF-8``.
    ConfigError
        An unknown format.
    """
    options = dict(options or {})
    if fmt == "delta":
        return read_delta(spark, path)
    if fmt == "csv":
        from .csv_source import csv_encoding_problem

        problem = csv_encoding_problem(path, options)  # a UTF-16 file would read as one column of NULs
        if problem is not None:
            raise SchemaMismatchError(f"source {path}: {problem}")
        if text and "inferSchema" not in options:
            from .csv_source import read_csv_text

            df = read_csv_text(spark, path, options)
            if df is not None:
                return df
        from .csv_source import RFC4180_OPTIONS

        options = {**RFC4180_OPTIONS, **options}  # quoted fields as RFC 4180 says (jobs/storage/csv_source.py)
        options.setdefault("header", "true")
        options.setdefault("inferSchema", "true")
        return spark.read.options(**options).csv(path)
    if fmt == "parquet":
        return spark.read.options(**options).parquet(path)
    raise ConfigError(f"format must be parquet, csv or delta, not {fmt!r}")


def read_configured(spark, source, *, text: bool = False):
    """The table a :class:`fragrelease.protocol.config.SourceConfig` names: ``spark.table(source.table)``
    for a catalog table, else :func:`read_source` on its path and format (``text``: see there)."""
    if source.table is not None:
        return spark.table(source.table)
    return read_source(spark, source.path, source.format, source.options, text=text)


def read_delta(spark, path: str, version: Optional[int] = None):
    """A Delta table's current (or given) version through its active files only."""
    if delta_available(spark):
        reader = spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        return reader.load(path)
    return read_delta_files(spark, path, version)


def read_delta_files(spark, path: str, version: Optional[int] = None):
    """The rows of a Delta table version (latest by default) read from its active data files, which
    delta-rs lists, without Delta's Spark reader.

    Delta's reader first rebuilds the table's state from its log with Spark jobs (three on the first
    read of every new table). For tables without deletion vectors or column mapping (the owners'
    protected fragments and pseudonym sets: :func:`fragrelease.jobs.protocol.signatures.describe_table`
    refuses deletion vectors) the active data files are the table. Shapes: the table's columns, one
    row per record.

    Raises
    ------
    ConfigError
        ``path`` is no Delta table, or the version has no data file.
    """
    _table, files = delta_version_files(path, version)
    return spark.read.parquet(*files)


def delta_version_files(path: str, version: Optional[int] = None):
    """``(table, files)``: delta-rs's ``DeltaTable`` at the version (latest by default) and the URIs
    of that version's active data files, read from the Delta log alone (no Spark job).

    Raises
    ------
    ConfigError
        ``path`` is no Delta table, or the version has no data file.
    """
    from deltalake import DeltaTable

    if not is_delta_table(path):
        raise ConfigError(f"{path!r} is not a Delta table")
    table = DeltaTable(absolute(path)) if version is None else DeltaTable(absolute(path), version=version)
    files = table.file_uris()
    if not files:
        raise ConfigError(f"Delta table {path!r} has no data files")
    return table, files


def _spark_schema_to_arrow(schema):
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema)


def _check_schema(path: str, df) -> None:
    import pyarrow as pa
    from deltalake import DeltaTable

    existing = pa.schema(DeltaTable(absolute(path)).schema().to_arrow())
    new = _spark_schema_to_arrow(df.schema)
    a = [(f.name, _normal(str(f.type))) for f in existing]
    b = [(f.name, _normal(str(f.type))) for f in new]
    if a != b:
        raise SchemaMismatchError(f"schema of the new data {b} differs from Delta table {path!r}: {a}")


def _normal(t: str) -> str:
    return {"large_string": "string", "string_view": "string"}.get(t, t)


def check_commit(df, path: str, if_exists: str = "error") -> bool:
    """The checks :func:`commit_delta` makes before writing, without writing; returns whether the table exists.

    Call it for every table of a multi-table release before the first commit, so that a refusal
    (existing table, other schema) leaves nothing half-written.

    Raises
    ------
    ConfigError
        ``if_exists`` is neither ``"error"`` nor ``"new-version"``.
    ReleaseExistsError
        The table exists and ``if_exists == "error"``.
    SchemaMismatchError
        ``new-version`` with a schema different from the table's.
    """
    if if_exists not in ("error", "new-version"):
        raise ConfigError(f"if_exists must be 'error' or 'new-version', not {if_exists!r}")
    path = absolute(path)
    table_exists = is_delta_table(path)
    if table_exists and if_exists == "error":
        raise ReleaseExistsError(f"a Delta table already exists at {path!r}; use if_exists='new-version' to add a version")
    if table_exists:
        _check_schema(path, df)
    return table_exists


def commit_delta(df, path: str, *, provenance: Mapping[str, Any], if_exists: str = "error",
                 description: Optional[TableDescription] = None, small: bool = False, owner_table: bool = False) -> int:
    """Write ``df`` as a new Delta table version at ``path`` and return that version.

    Parameters
    ----------
    df : the DataFrame to publish (already materialized: noise must not be redrawn here).
    path : table location.
    provenance : public facts recorded as the commit's ``userMetadata`` (ε, composition, k, mechanism,
        owners, plan id).
    if_exists : ``"error"`` (refuse a second write) or ``"new-version"``.
    description : the table's description, ``fragrelease.*`` properties and column comments
        (:func:`fragrelease.jobs.describe.release_description`); public facts only.
    small : ``df`` is read in one task without an exchange (the caller's public count says so): a new
        version is committed with fewer Spark jobs (:func:`fragrelease.jobs.storage.delta.commit_with_spark`).
    owner_table : ``df`` is an owner's own table for the protocol (a protected fragment, a pseudonym set,
        id digests; no description): committed by delta-rs when :func:`committed_by_delta_rs` allows it.

    Returns
    -------
    The new table version (one commit per call).

    Raises
    ------
    ReleaseExistsError
        The table exists and ``if_exists == "error"``.
    SchemaMismatchError
        ``new-version`` with a schema different from the table's.
    ConcurrentCommitError, TableWriteError
        (delta-rs path) another release committed to the table at the same time, or storage refused
        the write; the files this call wrote were removed (:func:`fragrelease.jobs.storage.delta._commit_with_delta_rs`).
    DeltaWriteError
        Delta's Spark write failed (a concurrent writer, a full disk, ...); its orphan files were removed.
    """
    path = absolute(path)
    table_exists = check_commit(df, path, if_exists)
    meta = json.dumps(provenance, sort_keys=True)
    if delta_available(df.sparkSession) and not (owner_table and committed_by_delta_rs(df.sparkSession, path, description)):
        return commit_with_spark(df, path, meta, table_exists=table_exists, description=description, small=small)
    return _commit_with_delta_rs(df, path, meta, table_exists, description)


def committed_by_delta_rs(spark, path: str, description: Optional[TableDescription]) -> bool:
    """Whether :func:`commit_delta` commits an owner's table (``owner_table``) through delta-rs although
    Delta's Spark classes are configured: a table without a description (an owner's protected fragment,
    pseudonym set or id digests: no ``fragrelease.*`` properties to lose, see the module docstring) on the
    local file system of a ``local`` master outside Databricks (the driver, which commits, sees every file
    the tasks wrote, and a local file system's rename refuses to replace a commit file another writer made).

    A Spark Connect session keeps Delta's commit: its server, not this process, holds the written files.

    Such a commit takes about 0.1 s where Delta's Spark transaction takes 0.3-0.4 s warm and loads
    Delta's classes on first use (docs/benchmarks.md, "Issue 41, session 6"). The table is the same
    Delta table to every reader; a release table (with its description) is still committed by Delta.
    """
    if description is not None or "DATABRICKS_RUNTIME_VERSION" in os.environ:
        return False
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        return False
    if urlparse(path).scheme not in ("", "file"):  # object storage, dbfs:/, hdfs://: Delta's own commit
        return False
    try:
        master = spark.conf.get("spark.master", "") or ""
    except Exception:  # noqa: BLE001 - a conf a Connect server does not show: keep Delta's own commit
        return False
    return local_cores(master) > 0


def table_self_description(path: str, version: Optional[int] = None) -> Mapping[str, Any]:
    """What a Delta table says about itself (latest, or ``version``), read with delta-rs (either path wrote it).

    Returns
    -------
    dict with ``description`` (str or None), ``properties`` (the ``fragrelease.*`` table properties;
    empty for tables committed by delta-rs, see the module docstring) and ``column_comments``
    (column name -> comment, for commented columns). Public facts only.
    """
    from deltalake import DeltaTable

    dt = DeltaTable(absolute(path), version=version)
    meta = dt.metadata()
    return {
        "description": meta.description,
        "properties": {k: v for k, v in sorted(meta.configuration.items()) if k.startswith("fragrelease.")},
        "column_comments": {f.name: f.metadata["comment"] for f in dt.schema().fields if f.metadata.get("comment")},
    }


def table_history(path: str) -> list[tuple[dict, dict]]:
    """Every version of the Delta table at ``path``, newest first: (history entry, provenance).

    The provenance is the commit's ``userMetadata`` (or, for tables of fragrelease 0.x, the commit
    key ``fragrelease``), ``{}`` for a commit without one. Public facts only
    (:func:`fragrelease.jobs.storage.stamp_provenance`).
    """
    from deltalake import DeltaTable

    out = []
    for entry in DeltaTable(absolute(path)).history():
        raw = entry.get("userMetadata") or entry.get(PROVENANCE_KEY)  # the old key: tables before 0.x
        out.append((entry, json.loads(raw) if raw else {}))
    return out


def table_provenance(path: str, version: Optional[int] = None) -> Mapping[str, Any]:
    """The provenance recorded with a Delta commit (latest, or ``version``); ``{}`` when there is none."""
    for entry, provenance in table_history(path):
        if version is None or entry.get("version") == version:
            return provenance
    return {}
