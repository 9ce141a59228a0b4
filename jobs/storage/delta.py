"""The two ways a Delta table version is written (see :mod:`fragrelease.jobs.storage` for when each runs).

- :func:`commit_with_spark`: Delta's Spark API (``writeTo(...).create()``/``replace()`` or an
  overwrite ``WRITE``), with the provenance as the commit's ``userMetadata``; on failure the data
  files no Delta version references are removed (:func:`_remove_orphans`).
- :func:`_commit_with_delta_rs`: Spark writes Parquet into a new ``part-<uuid>`` folder of the table
  and delta-rs commits it as one transaction; on failure that folder is removed unless committed.

Callers go through :func:`fragrelease.jobs.storage.commit_delta` (or
:func:`fragrelease.jobs.storage.catalog.commit_table`), which check the target first.
"""
from __future__ import annotations

import json
import os
import posixpath
import re
import threading
import time
import uuid
from typing import Mapping, Optional

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from fragrelease.errors import DeltaWriteError, SchemaMismatchError

from ..describe import TableDescription
from .uris import fs_path

#: Spark conf Delta reads a commit's userMetadata from (``DataFrameWriterV2`` and SQL commands).
_USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"


def _with_comments(df, description: Optional[TableDescription]):
    """``df`` whose columns carry their comments as Spark field metadata (what Delta stores in the schema)."""
    if description is None:
        return df
    for name, text in description.column_comments.items():
        if name in df.columns:
            df = df.withMetadata(name, {**df.schema[name].metadata, "comment": text})
    return df


def _plain_strings(df):
    """``df`` with its string columns cast to ``string`` under Spark Connect (names and metadata kept).

    Through Connect, a pandas UDF's string result reaches the server as an explicitly collated string type,
    which Delta writes into the table's schema as ``string collate UTF8_BINARY``; delta-rs (which reads every
    table fragrelease writes: manifests, checks, the ledger) refuses that type. The cast gives Spark's plain
    ``string``, the same values. Classic sessions are returned unchanged.
    """
    if not type(df).__module__.startswith("pyspark.sql.connect"):
        return df
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    fields = df.schema.fields
    if not any(isinstance(f.dataType, StringType) for f in fields):
        return df
    quoted = [F.col("`" + f.name.replace("`", "``") + "`") for f in fields]
    return df.select(*[c.cast("string").alias(f.name, metadata=f.metadata) if isinstance(f.dataType, StringType) else c
                       for c, f in zip(quoted, fields)])


#: Held by every commit of this process through Delta's Spark API (:class:`_UserMetadata`).
_COMMIT_LOCK = threading.Lock()


class _UserMetadata:
    """Sets Delta's session conf for a commit's ``userMetadata`` (``writeTo`` and SQL commands ignore the
    writer option) and restores the previous value. The session conf is shared: concurrent commits
    from other threads of the same session would pick it up, so fragrelease commits one at a time: a
    process-wide lock is held from setting the conf to restoring it (a notebook or application may
    run releases from several threads of one session)."""

    def __init__(self, spark, meta: str):
        self.spark, self.meta = spark, meta

    def __enter__(self):
        _COMMIT_LOCK.acquire()
        try:
            self.before = self.spark.conf.get(_USER_METADATA_CONF, None)
            self.spark.conf.set(_USER_METADATA_CONF, self.meta)
        except BaseException:
            _COMMIT_LOCK.release()
            raise

    def __exit__(self, *exc):
        try:
            if self.before is None:
                self.spark.conf.unset(_USER_METADATA_CONF)
            else:
                self.spark.conf.set(_USER_METADATA_CONF, self.before)
        finally:
            _COMMIT_LOCK.release()


#: Session settings while a small release (rows needing no exchange) is committed as a new version of an
#: existing table: Delta's own queries over the table's log (the state rebuild a new version needs, the
#: listing of the files it replaces) run without adaptive execution, each one Spark job instead of one
#: per shuffle stage (5 jobs to 3; docs/benchmarks.md, "Issue 41, session 5"). The rows written and
#: every check are the same; a large release keeps adaptive execution for its own exchange.
SMALL_NEW_VERSION_SETTINGS = {"spark.sql.adaptive.enabled": "false"}


class _Settings:
    """Sets session confs for one commit and restores each one's previous value (unset if it had none).

    A setting the platform refuses (e.g. a serverless workspace that allows few confs) is skipped: the
    commit runs as without it. The session conf is shared: as :class:`_UserMetadata`, commits run one
    at a time."""

    def __init__(self, spark, settings: Mapping[str, str]):
        self.spark, self.settings = spark, dict(settings)
        self.before: dict[str, Optional[str]] = {}

    def __enter__(self):
        for key, value in self.settings.items():
            try:
                before = self.spark.conf.get(key, None)
                self.spark.conf.set(key, value)
            except Exception:  # noqa: BLE001 - refused by the platform: leave it as it is
                continue
            self.before[key] = before

    def __exit__(self, *exc):
        for key, before in self.before.items():
            if before is None:
                self.spark.conf.unset(key)
            else:
                self.spark.conf.set(key, before)


def commit_with_spark(df, path: str, meta: str, *, table_exists: bool, description: Optional[TableDescription] = None,
                      name: Optional[str] = None, small: bool = False) -> int:
    """Commit ``df`` through Delta's Spark API (module docstring); return the new version.

    ``name`` (a catalog table name) creates a catalog table whose location is ``path`` (its
    database's default location for the table); without it the table is path-based. ``small``: the
    caller's public count says ``df`` is read in one task without an exchange; a new version of an
    existing table is then committed with :data:`SMALL_NEW_VERSION_SETTINGS`. The caller has
    run :func:`fragrelease.jobs.storage.check_commit`. Raises :class:`DeltaWriteError` (files removed) when Delta's write fails.
    """
    spark = df.sparkSession
    ident = name or f"delta.`{path}`"
    df = _with_comments(_plain_strings(df), description)
    before = _listing(path)
    version_before = _version_or_none(path)
    settings = SMALL_NEW_VERSION_SETTINGS if small and table_exists else {}
    try:
        with _UserMetadata(spark, meta), _Settings(spark, settings):
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
        raise _spark_commit_error(path, exc, version_before, removed) from exc
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

    from .errors import path_cause

    sub = f"part-{uuid.uuid4().hex}"
    fs, root = fs_path(path)
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
    from .errors import is_write_failure

    return is_write_failure(exc)


def _discard_uncommitted(path: str, sub: str, new_folder: bool) -> str:
    """Remove folder ``sub`` of table ``path`` (this call's own) unless a commit references it; say what was done."""
    from deltalake import DeltaTable

    from .errors import os_cause

    fs, root = fs_path(path)
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

    from .errors import path_cause

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


#: Delta's and Spark's names for losing a race on the same table (a concurrent create or commit).
_CONCURRENT = re.compile(r"TABLE_OR_VIEW_ALREADY_EXISTS|DELTA_TABLE_ALREADY_EXISTS|DELTA_CONCURRENT|"
                         r"Concurrent(Append|Write|DeleteRead|DeleteDelete|Transaction)Exception|"
                         r"ProtocolChangedException|MetadataChangedException|FileAlreadyExistsException")


def _version_or_none(path: str) -> Optional[int]:
    """The latest committed version of the Delta table at ``path``, None when there is none or it cannot be read."""
    from deltalake import DeltaTable

    try:
        return DeltaTable(path).version() if DeltaTable.is_deltatable(path) else None
    except Exception:  # noqa: BLE001 - delta-rs errors and panics: no readable version
        return None


def _spark_commit_error(path: str, exc: BaseException, version_before: Optional[int], removed: int) -> Exception:
    """The one-line error of a failed commit through Delta's Spark API (Java stack traces stay in ``__cause__``).

    Another writer's commit (a version appeared since the write began, or Delta names a concurrent
    create or commit) is a :class:`fragrelease.errors.ConcurrentCommitError`; anything else a
    :class:`DeltaWriteError` whose cause is the operating system's (``No space left on device
    (ENOSPC)``, ``Permission denied (EACCES)``, ...) when the Java message names one, else Spark's own
    (:func:`_cause`).
    """
    from fragrelease.errors import ConcurrentCommitError

    now = _version_or_none(path)
    raced = now is not None and (version_before is None or now > version_before)
    if raced or (_CONCURRENT.search(str(exc)) and now is not None):
        return ConcurrentCommitError(f"another release committed to {path!r} at the same time; run again for a new "
                                     f"version (this write was not committed; {removed} file(s) it had written were "
                                     "removed)")
    return DeltaWriteError(f"the Delta write to {path!r} failed and was not committed ({_cause(exc)}); "
                           f"{removed} file(s) it had written were removed")


def _cause(exc: BaseException) -> str:
    """One line naming why a Spark write failed: the operating system's cause when the (Java) message
    names one (:func:`fragrelease.jobs.storage.errors.os_cause`), else Spark's error class or the last
    ``SomeError: ...`` line of a Python worker's traceback
    (:func:`fragrelease.jobs.storage.spark_failure_cause`), else the message's first line."""
    from .errors import known_os_cause, spark_failure_cause

    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    cause = known_os_cause(exc)
    if cause is not None:
        return cause
    spark = spark_failure_cause(exc)
    if spark is not None:
        return spark
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
    fs, root = fs_path(path)
    if fs.get_file_info(root).type == pafs.FileType.NotFound:
        return set()
    return {i.path + ("/" if i.type == pafs.FileType.Directory else "")
            for i in fs.get_file_info(pafs.FileSelector(root, recursive=True))}


def _referenced(path: str) -> set[str]:
    """Data files some commit in ``path``'s Delta log adds (all versions, checkpoints aside), as local paths."""
    fs, root = fs_path(path)
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
    fs, root = fs_path(path)
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
    fs, root = fs_path(path)
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
