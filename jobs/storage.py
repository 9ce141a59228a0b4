"""Reading fragments, exchanging protocol messages and committing Delta tables.

Delta tables are written with Spark's ``delta`` format when Delta Lake's classes are on the
classpath (clusters with delta-spark, Databricks). Otherwise (the embedded local default, where
Maven is unreachable), Spark writes Parquet files **inside** the table folder and the ``deltalake``
(delta-rs) package commits them as one Delta transaction: the files are invisible to every Delta
reader until that commit, so a failed write never becomes a partial release.

A second write to the same table is refused (``if_exists="error"``) or becomes a new table version
(``"new-version"``: an overwrite commit; the earlier version stays readable by time travel). The
schema is checked before every write, since delta-rs accepts an append of a differing type.
Reads go through the table's active files, never ``spark.read.parquet(folder)``, which would also
read files that later versions removed.
"""
from __future__ import annotations

import json
import os
import posixpath
import time
import uuid
from typing import Optional
from urllib.parse import urlparse

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from fragrelease.errors import ConfigError, ReleaseExistsError, SchemaMismatchError

from .session import delta_available

PROVENANCE_KEY = "fragrelease"


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


def commit_delta(df, path: str, *, provenance: dict, if_exists: str = "error") -> int:
    """Write ``df`` as one Delta commit at ``path`` and return the new table version.

    Parameters
    ----------
    df : the DataFrame to publish (already materialized: noise must not be redrawn here).
    path : table location.
    provenance : public facts recorded in the commit (ε, composition, k, mechanism, owners, plan id).
    if_exists : ``"error"`` (refuse a second write) or ``"new-version"``.

    Raises
    ------
    ReleaseExistsError
        The table exists and ``if_exists == "error"``.
    SchemaMismatchError
        ``new-version`` with a schema different from the table's.
    ConcurrentCommitError, TableWriteError
        (delta-rs path) another release committed to the table at the same time, or storage refused
        the write; the files this call wrote were removed (:func:`_commit_with_delta_rs`).
    """
    path = absolute(path)
    table_exists = check_commit(df, path, if_exists)
    meta = json.dumps(provenance, sort_keys=True)
    spark = df.sparkSession
    if delta_available(spark):
        (df.write.format("delta").mode("overwrite" if table_exists else "error")
         .option("userMetadata", meta).save(path))
        from deltalake import DeltaTable

        return DeltaTable(path).version()
    return _commit_with_delta_rs(df, path, meta, table_exists)


def _commit_with_delta_rs(df, path: str, meta: str, table_exists: bool) -> int:
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
        return _write_and_commit(df, path, sub, meta, table_exists)
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


def _write_and_commit(df, path: str, sub: str, meta: str, table_exists: bool) -> int:
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
    arrow_schema = arrow_schema.remove_metadata()
    props = CommitProperties(custom_metadata={PROVENANCE_KEY: meta})
    if table_exists:
        DeltaTable(path).create_write_transaction(actions, mode="overwrite", schema=Schema.from_arrow(arrow_schema),
                                                  commit_properties=props)
    else:
        # no retries: a create that lost a race must fail, not be retried as an append
        create_table_with_add_actions(path, Schema.from_arrow(arrow_schema), actions, mode="error",
                                      commit_properties=CommitProperties(custom_metadata={PROVENANCE_KEY: meta},
                                                                         max_commit_retries=0))
    return DeltaTable(path).version()


def table_provenance(path: str, version: Optional[int] = None) -> dict:
    """The provenance recorded with a Delta commit (latest, or ``version``)."""
    from deltalake import DeltaTable

    dt = DeltaTable(absolute(path))
    for entry in dt.history():
        if version is None or entry.get("version") == version:
            raw = entry.get(PROVENANCE_KEY) or entry.get("userMetadata")
            return json.loads(raw) if raw else {}
    return {}
