"""Reading fragments, exchanging protocol messages and committing Delta tables.

Two commit paths, chosen per session by :func:`fragrelease.jobs.session.delta_available`:

- **Delta's Spark classes** (the embedded session once ``scripts/setup.sh`` fetched the jars,
  clusters with delta-spark, Databricks): Delta's own Spark API writes the table. A new table is
  ``df.writeTo(...).using("delta").create()`` (one ``CREATE TABLE AS SELECT`` commit that also sets
  the description, the ``fragrelease.*`` properties and the column comments); a new version is an
  overwrite, ``df.write.format("delta").mode("overwrite")`` (one ``WRITE`` commit), or, when the
  description or a property changes (another ε, k, ...), ``writeTo(...).replace()`` (one ``REPLACE
  TABLE AS SELECT`` commit; history and time travel stay). Either way one release is one table
  version, whose snapshot holds the data with its own description. Delta's optimistic
  concurrency decides between concurrent writers. If the write fails, the data files it created that
  no Delta version references are removed (:func:`_remove_orphans`) and
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
import re
import time
import uuid
from typing import Optional
from urllib.parse import urlparse

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from fragrelease.errors import ConfigError, DeltaWriteError, ReleaseExistsError, SchemaMismatchError

from .describe import TableDescription
from .session import delta_available

#: The commit key under which fragrelease 0.x kept the provenance (read for old tables; now ``userMetadata``).
PROVENANCE_KEY = "fragrelease"
#: Spark conf Delta reads a commit's userMetadata from (``DataFrameWriterV2`` and SQL commands).
_USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"


def _fs_path(uri: str) -> tuple[pafs.FileSystem, str]:
    if urlparse(uri).scheme in ("", "file") and not uri.startswith("file:"):
        return pafs.LocalFileSystem(), os.path.abspath(uri)
    return pafs.FileSystem.from_uri(uri)


def absolute(uri: str) -> str:
    """Local paths made absolute; URIs (s3a://, dbfs:/, file:/) unchanged."""
    return os.path.abspath(uri) if urlparse(uri).scheme == "" else uri


def write_text(uri: str, text: str) -> None:
    """Write a small text file (a manifest, a plan) atomically where the filesystem allows."""
    fs, path = _fs_path(uri)
    fs.create_dir(posixpath.dirname(path), recursive=True)
    tmp = f"{path}.tmp-{uuid.uuid4().hex}"
    with fs.open_output_stream(tmp) as out:
        out.write(text.encode("utf-8"))
    fs.move(tmp, path)


def read_text(uri: str) -> str:
    fs, path = _fs_path(uri)
    try:
        with fs.open_input_stream(path) as f:
            return f.read().decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"file {uri!r} does not exist") from None


def is_delta_table(uri: str) -> bool:
    from deltalake import DeltaTable

    return DeltaTable.is_deltatable(absolute(uri))


def read_source(spark, path: str, fmt: str = "parquet", options: Optional[dict] = None):
    """A fragment or table as a Spark DataFrame (``fmt``: parquet, csv or delta)."""
    options = dict(options or {})
    if fmt == "delta":
        return read_delta(spark, path)
    if fmt == "csv":
        options.setdefault("header", "true")
        options.setdefault("inferSchema", "true")
        return spark.read.options(**options).csv(path)
    if fmt == "parquet":
        return spark.read.options(**options).parquet(path)
    raise ConfigError(f"format must be parquet, csv or delta, not {fmt!r}")


def read_configured(spark, source):
    """The table a :class:`fragrelease.idpir.config.SourceConfig` names: ``spark.table(source.table)``
    for a catalog table, else :func:`read_source` on its path and format."""
    if source.table is not None:
        return spark.table(source.table)
    return read_source(spark, source.path, source.format, source.options)


def read_delta(spark, path: str, version: Optional[int] = None):
    """A Delta table's current (or given) version through its active files only."""
    if delta_available(spark):
        reader = spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        return reader.load(path)
    from deltalake import DeltaTable

    if not is_delta_table(path):
        raise ConfigError(f"{path!r} is not a Delta table")
    files = DeltaTable(absolute(path), version=version).file_uris()
    if not files:
        raise ConfigError(f"Delta table {path!r} has no data files")
    return spark.read.parquet(*files)


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


def commit_delta(df, path: str, *, provenance: dict, if_exists: str = "error",
                 description: Optional[TableDescription] = None) -> int:
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
        the write; the files this call wrote were removed (:func:`_commit_with_delta_rs`).
    DeltaWriteError
        Delta's Spark write failed (a concurrent writer, a full disk, ...); its orphan files were removed.
    """
    path = absolute(path)
    table_exists = check_commit(df, path, if_exists)
    meta = json.dumps(provenance, sort_keys=True)
    if delta_available(df.sparkSession):
        return commit_with_spark(df, path, meta, table_exists=table_exists, description=description)
    return _commit_with_delta_rs(df, path, meta, table_exists, description)


def _with_comments(df, description: Optional[TableDescription]):
    """``df`` whose columns carry their comments as Spark field metadata (what Delta stores in the schema)."""
    if description is None:
        return df
    for name, text in description.column_comments.items():
        if name in df.columns:
            df = df.withMetadata(name, {**df.schema[name].metadata, "comment": text})
    return df


class _UserMetadata:
    """Sets Delta's session conf for a commit's ``userMetadata`` (``writeTo`` and SQL commands ignore the
    writer option) and restores the previous value. The session conf is shared: concurrent commits
    from other threads of the same session would pick it up, so fragrelease commits one at a time."""

    def __init__(self, spark, meta: str):
        self.spark, self.meta = spark, meta

    def __enter__(self):
        self.before = self.spark.conf.get(_USER_METADATA_CONF, None)
        self.spark.conf.set(_USER_METADATA_CONF, self.meta)

    def __exit__(self, *exc):
        if self.before is None:
            self.spark.conf.unset(_USER_METADATA_CONF)
        else:
            self.spark.conf.set(_USER_METADATA_CONF, self.before)


def commit_with_spark(df, path: str, meta: str, *, table_exists: bool, description: Optional[TableDescription] = None,
                      name: Optional[str] = None) -> int:
    """Commit ``df`` through Delta's Spark API (module docstring); return the new version.

    ``name`` (a catalog table name) creates a catalog table whose location is ``path`` (its
    database's default location for the table); without it the table is path-based. The caller has
    run :func:`check_commit`. Raises :class:`DeltaWriteError` (files removed) when Delta's write fails.
    """
    spark = df.sparkSession
    ident = name or f"delta.`{path}`"
    df = _with_comments(df, description)
    before = _listing(path)
    try:
        with _UserMetadata(spark, meta):
            if not table_exists:
                writer = df.writeTo(ident).using("delta")
                if description is not None:
                    writer = writer.tableProperty("comment", description.comment)
                    for key, value in description.properties.items():
                        writer = writer.tableProperty(key, value)
                writer.create()
            elif description is not None and _description_changed(path, description):
                # new properties or description: one atomic "REPLACE TABLE AS SELECT" commit (history stays)
                writer = df.writeTo(ident).using("delta").tableProperty("comment", description.comment)
                for key, value in description.properties.items():
                    writer = writer.tableProperty(key, value)
                writer.replace()
            else:  # one "WRITE" commit (mode overwrite); the new schema carries the column comments
                (df.write.format("delta").mode("overwrite").option("overwriteSchema", "true")
                 .option("userMetadata", meta).save(path))
    except Exception as exc:  # noqa: BLE001 - any failure: clean up what this write created, then one line
        removed = _remove_orphans(path, before)
        cause = _cause(exc)
        raise DeltaWriteError(f"the Delta write to {path!r} failed and was not committed ({cause}); "
                              f"{removed} file(s) it had written were removed") from exc
    from deltalake import DeltaTable

    return DeltaTable(path).version()


def _commit_with_delta_rs(df, path: str, meta: str, table_exists: bool,
                          description: Optional[TableDescription] = None) -> int:
    """Spark writes ``df`` as Parquet into a new ``part-<uuid>`` folder of the table; delta-rs commits it.

    A failure at any step (Spark's write, reading the written files, the commit) removes that
    ``part-<uuid>`` folder, which this call created, unless the commit is in the table's log; nothing
    else is touched (a table folder this call created is removed only when empty). A new table is
    created with no commit retries: of two releases creating it at once, one commits version 0 and
    the other fails (delta-rs would otherwise retry the loser as an append, both releases' rows
    visible).

    Raises
    ------
    ConcurrentCommitError
        Another writer created or committed to the table at the same time.
    TableWriteError
        Storage refused the write or the commit (disk full, read-only, permission); one line with the
        OS cause.
    """
    from deltalake import DeltaTable

    from fragrelease.errors import FragReleaseError, TableWriteError

    from .storage_errors import path_cause

    sub = f"part-{uuid.uuid4().hex}"
    fs, root = _fs_path(path)
    try:
        if fs.get_file_info(posixpath.join(root, sub)).type != pafs.FileType.NotFound:
            raise TableWriteError(f"writing Delta table {path!r} failed: folder {sub!r} already exists")
        new_folder = fs.get_file_info(root).type == pafs.FileType.NotFound
        before = DeltaTable(path).version() if table_exists else None
    except FragReleaseError:
        raise
    except BaseException as exc:
        if not _write_failure(exc):
            raise
        raise TableWriteError(f"writing Delta table {path!r} failed: {path_cause(path, exc)}; nothing was "
                              "written") from None
    try:
        return _write_and_commit(df, path, sub, meta, table_exists, description)
    except BaseException as exc:
        removed = _discard_uncommitted(path, sub, new_folder)
        if isinstance(exc, (FragReleaseError, KeyboardInterrupt, SystemExit)) or not _write_failure(exc):
            raise
        if removed == _COMMITTED:
            raise TableWriteError(f"Delta table {path!r} was committed, but reading it back failed: "
                                  f"{path_cause(path, exc)}") from None
        raise _commit_error(path, before, exc, removed) from None


_COMMITTED = "its files are committed"


def _write_failure(exc: BaseException) -> bool:
    from .storage_errors import is_write_failure

    return is_write_failure(exc)


def _discard_uncommitted(path: str, sub: str, new_folder: bool) -> str:
    """Remove folder ``sub`` of table ``path`` (this call's own) unless a commit references it; say what was done."""
    from deltalake import DeltaTable

    from .storage_errors import os_cause

    fs, root = _fs_path(path)
    try:
        if DeltaTable.is_deltatable(path) and any(f"/{sub}/" in u for u in DeltaTable(path).file_uris()):
            return _COMMITTED
        fs.delete_dir(posixpath.join(root, sub))
    except (FileNotFoundError, NotADirectoryError):
        pass  # nothing was written
    except BaseException as exc:
        if not _write_failure(exc):
            raise
        return f"its files under {posixpath.join(path, sub)!r} could not be removed ({os_cause(exc)})"
    if new_folder and fs.type_name == "local":
        try:
            os.rmdir(root)  # only if empty: the folder this call created, with nothing left in it
        except OSError:
            pass
    return "the files it wrote were removed"


def _commit_error(path: str, before: Optional[int], exc: BaseException, removed: str) -> Exception:
    from deltalake import DeltaTable

    from fragrelease.errors import ConcurrentCommitError, TableWriteError

    from .storage_errors import path_cause

    try:
        now = DeltaTable(path).version() if DeltaTable.is_deltatable(path) else None
    except BaseException as again:
        if not _write_failure(again):
            raise
        now = None
    if now is not None and (before is None or now > before):
        verb = "created" if before is None else f"committed version {now} of"
        return ConcurrentCommitError(f"another release {verb} Delta table {path!r} at the same time; this release "
                                     f"was not committed and {removed}")
    return TableWriteError(f"writing Delta table {path!r} failed: {path_cause(path, exc)}; nothing was committed "
                           f"and {removed}")


def _cause(exc: BaseException) -> str:
    """One line naming why a Spark write failed: the last ``SomeError: ...`` line of its message (a Python
    worker's traceback ends with it), else the message's first line."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    named = [ln for ln in lines if re.match(r"^[\w.]+(Error|Exception): ", ln)]
    return ((named[-1] if named else lines[0]) if lines else type(exc).__name__)[:300]


def _description_changed(path: str, description: TableDescription) -> bool:
    """True when the table's description or one of its ``fragrelease.*`` properties differs from ``description``."""
    from deltalake import DeltaTable

    meta = DeltaTable(path).metadata()
    current = dict(meta.configuration)
    return ((meta.description or "") != description.comment
            or any(current.get(k) != v for k, v in description.properties.items()))


def _listing(path: str) -> set[str]:
    """Every file and folder under ``path`` (recursive; folders end with ``/``), or the empty set."""
    fs, root = _fs_path(path)
    if fs.get_file_info(root).type == pafs.FileType.NotFound:
        return set()
    return {i.path + ("/" if i.type == pafs.FileType.Directory else "")
            for i in fs.get_file_info(pafs.FileSelector(root, recursive=True))}


def _referenced(path: str) -> set[str]:
    """Data files some commit in ``path``'s Delta log adds (all versions, checkpoints aside), as local paths."""
    fs, root = _fs_path(path)
    log_dir = posixpath.join(root, "_delta_log")
    if fs.get_file_info(log_dir).type == pafs.FileType.NotFound:
        return set()
    out = set()
    for info in fs.get_file_info(pafs.FileSelector(log_dir)):
        if not info.base_name.endswith(".json"):
            continue
        with fs.open_input_stream(info.path) as f:
            for line in f.read().decode("utf-8").splitlines():
                add = json.loads(line).get("add") if line.strip() else None
                if add:
                    from urllib.parse import unquote

                    out.add(posixpath.join(root, unquote(add["path"])))
    return out


def _remove_orphans(path: str, before: set[str]) -> int:
    """Remove what a failed write created under ``path`` since the listing ``before``: data files no
    Delta commit references, then the folders it created that are left empty.

    Delta's commit files (``_delta_log/*.json``, checkpoints) and every file a commit adds stay.
    Residual risk: another writer's not-yet-committed files written into the same table folder during
    this write would be removed too (its commit would then fail or reference missing files);
    fragrelease writes each table from one process at a time (docs/known-limitations.md).
    Returns the number of files removed.
    """
    fs, root = _fs_path(path)
    try:
        new = _listing(path) - before
        referenced = _referenced(path)
    except OSError:
        return 0
    removed = 0
    for f in sorted(p for p in new if not p.endswith("/")):
        rel = posixpath.relpath(f, root)
        if f in referenced or (rel.startswith("_delta_log/") and not rel.startswith("_delta_log/_staged_commits/")):
            continue
        try:
            fs.delete_file(f)
            removed += 1
        except OSError:
            pass
    for d in sorted((p.rstrip("/") for p in new if p.endswith("/")), key=len, reverse=True):
        try:
            if not fs.get_file_info(pafs.FileSelector(d)):
                fs.delete_dir(d)
        except OSError:
            pass
    if not before:  # the write created the folder: remove it too when nothing is left
        try:
            if not fs.get_file_info(pafs.FileSelector(root)):
                fs.delete_dir(root)
        except OSError:
            pass
    return removed


def _write_and_commit(df, path: str, sub: str, meta: str, table_exists: bool,
                      description: Optional[TableDescription] = None) -> int:
    from deltalake import DeltaTable
    from deltalake.schema import Schema
    from deltalake.transaction import AddAction, CommitProperties, create_table_with_add_actions

    df.write.mode("error").parquet(posixpath.join(path, sub))
    fs, root = _fs_path(path)
    infos = fs.get_file_info(pafs.FileSelector(posixpath.join(root, sub)))
    files = sorted((i for i in infos if i.base_name.endswith(".parquet")), key=lambda i: i.path)
    if not files:
        raise SchemaMismatchError(f"Spark wrote no data files for {path!r}")
    actions = []
    for info in files:
        md = pq.read_metadata(info.path, filesystem=fs)
        actions.append(AddAction(
            path=f"{sub}/{info.base_name}", size=info.size, partition_values={},
            modification_time=int((info.mtime.timestamp() if info.mtime else time.time()) * 1000),
            data_change=True, stats=json.dumps({"numRecords": md.num_rows}),
        ))
    arrow_schema = pq.read_schema(files[0].path, filesystem=fs)
    arrow_schema = _arrow_with_comments(arrow_schema.remove_metadata(), description)
    props = CommitProperties(custom_metadata={"userMetadata": meta})
    if table_exists and description is not None and (DeltaTable(path).metadata().description or "") != description.comment:
        # a new description: delta-rs' replace (one "CREATE OR REPLACE TABLE" commit; history stays)
        create_table_with_add_actions(path, Schema.from_arrow(arrow_schema), actions, mode="overwrite",
                                      description=description.comment, commit_properties=props)
    elif table_exists:
        DeltaTable(path).create_write_transaction([*actions], mode="overwrite", schema=Schema.from_arrow(arrow_schema),
                                                  commit_properties=props)
    else:
        # no retries: a create that lost a race must fail, not be retried as an append
        create_table_with_add_actions(path, Schema.from_arrow(arrow_schema), actions, mode="error",
                                      description=description.comment if description else None,
                                      commit_properties=CommitProperties(custom_metadata={"userMetadata": meta},
                                                                         max_commit_retries=0))
    return DeltaTable(path).version()


def _arrow_with_comments(schema, description: Optional[TableDescription]):
    """An Arrow schema whose fields carry the column comments (delta-rs stores field metadata in the schema)."""
    if description is None:
        return schema
    import pyarrow as pa

    return pa.schema([f.with_metadata({"comment": description.column_comments[f.name]})
                      if f.name in description.column_comments else f for f in schema])


def table_self_description(path: str, version: Optional[int] = None) -> dict:
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


def table_provenance(path: str, version: Optional[int] = None) -> dict:
    """The provenance recorded with a Delta commit (latest, or ``version``)."""
    from deltalake import DeltaTable

    dt = DeltaTable(absolute(path))
    for entry in dt.history():
        if version is None or entry.get("version") == version:
            raw = entry.get("userMetadata") or entry.get(PROVENANCE_KEY)  # the old key: tables before 0.x
            return json.loads(raw) if raw else {}
    return {}
