"""Tables given by catalog name: owners' sources, the release output and the budget ledger.

Reads go through ``spark.table(name)``. Writes depend on what the session has:

- **Delta's Spark classes configured** (the embedded session once ``scripts/setup.sh`` fetched
  Delta's jars; delta-spark clusters; Databricks): the catalog entry is a real Delta table. A new
  release table is created through Delta's catalog, ``df.writeTo(name).using("delta").create()``
  (its location is the database's location + the table name), with the description,
  ``fragrelease.*`` properties and column comments; a new version is a Delta overwrite of that
  location (:func:`fragrelease.jobs.storage.delta.commit_with_spark`). Every commit carries the provenance
  as ``userMetadata``, so ``DESCRIBE HISTORY name``, ``SELECT ... FROM name VERSION AS OF n`` and
  ``spark.read.option("versionAsOf", n).table(name)`` work. A ledger (committed by delta-rs, which
  gives the pinned-version check-and-append it needs) is registered as ``CREATE TABLE name USING
  delta LOCATION ...``. A Delta table left at the default location by an earlier session (Spark's
  in-memory catalog forgets its entries) is registered again before the next version is written.
- **No Delta classes** (``FRAGRELEASE_DELTA=off``, or no jars): Spark cannot read or register a
  Delta table at all. The table is written path-based (Parquet files committed by delta-rs as one
  Delta transaction, :func:`fragrelease.jobs.storage.commit_delta`) and registered in Spark's
  catalog as an **external Parquet table over exactly the files of the current Delta version**:
  every release commit puts its files in a folder of its own, and the catalog entry's ``LOCATION``
  is that folder (moved with ``ALTER TABLE ... SET LOCATION`` on every new version).
  ``spark.table(name)`` therefore reads the current version and nothing else; the Delta root and
  version are kept in the table properties ``fragrelease.delta_location`` and
  ``fragrelease.delta_version``, and earlier versions are read by path with delta-rs
  (:func:`read_table` with ``version``). Before registering, the folder's Parquet files are compared
  with the version's active files and a mismatch is refused, so the entry never shows removed rows.
  A ledger (append-only: rows are only ever added) is registered over its root folder, with the same
  check; a ledger that was compacted outside fragrelease is refused rather than misread.

Limits without Delta classes: the catalog entry is a Parquet table, so Spark SQL's Delta features
(``DESCRIBE HISTORY``, ``VERSION AS OF``) are unavailable through the name; and with Spark's
in-memory catalog the entry lasts for the session (the Delta table itself stays on disk and is
re-registered by the next write). Name syntax: :func:`fragrelease.validation.parse_table_name`.
"""
from __future__ import annotations

import json
import logging
import posixpath
import re
from typing import Any, Mapping, Optional
from urllib.parse import unquote, urlparse

import pyarrow.fs as pafs

from fragrelease.errors import ConfigError, ReleaseExistsError
from fragrelease.validation import check_table_name, parse_table_name

from ..describe import TableDescription
from ..session import delta_available
from .delta import commit_with_spark
from .files import check_commit, commit_delta, is_delta_table, read_delta
from .uris import absolute, fs_path

log = logging.getLogger(__name__)

#: Table properties of an entry registered without Delta classes.
PROP_LOCATION = "fragrelease.delta_location"
_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PROP_VERSION = "fragrelease.delta_version"


def _local(uri: str) -> str:
    """``file:`` URIs as local paths (what delta-rs and pyarrow expect); other URIs unchanged."""
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return unquote(parsed.path)
    return absolute(uri)


def _sql_string(value: str) -> str:
    if "'" in value or "\\" in value:
        raise ConfigError(f"table location {value!r} contains a quote or backslash; choose another folder")
    return f"'{value}'"


def table_exists(spark, name: str) -> bool:
    """True if ``name`` is registered in the session's catalog (temporary views included)."""
    return bool(spark.catalog.tableExists(check_table_name(name)))


def _details(spark, name: str) -> Mapping[str, str]:
    """The catalog's description of a table (Provider, Type, Location, ...): catalog metadata, no data."""
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()
    return {r[0]: r[1] for r in rows if r[0]}


def _properties(spark, name: str) -> Mapping[str, str]:
    return {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {name}").collect()}


def split_table_name(name: str) -> tuple[str | None, str | None, str]:
    """``(catalog, database, table)`` of a name; absent parts are None. Names whose location this
    module derives must be plain identifiers (no backticks), since the table part becomes a folder.

    Raises
    ------
    ConfigError
        Not a table name, or a quoted part.
    """
    parts = list(parse_table_name(name))
    if any(not _PLAIN.match(p) for p in parts):
        raise ConfigError(f"table {name!r}: fragrelease creates tables with plain names only (letters, digits, _)")
    full: list[str | None] = [*([None] * (3 - len(parts))), *parts]
    return full[0], full[1], full[2]  # type: ignore[return-value]


def default_location(spark, name: str) -> str:
    """Where a new table ``name`` goes: ``<its database's location>/<table>``."""
    catalog, database, table = split_table_name(name)
    db = database or spark.catalog.currentDatabase()
    info = spark.catalog.getDatabase(f"{catalog}.{db}" if catalog else db)
    return posixpath.join(_local(info.locationUri), table)


def table_location(spark, name: str) -> str:
    """The Delta root of table ``name``: the registered one, or :func:`default_location` for a new table.

    Raises
    ------
    InvalidParameterError
        ``name`` is not a table name.
    ConfigError
        ``name`` is registered but is neither a Delta table nor an entry this module registered.
    """
    check_table_name(name)
    if not table_exists(spark, name):
        return default_location(spark, name)
    props = _properties(spark, name)
    if PROP_LOCATION in props:
        return props[PROP_LOCATION]
    details = _details(spark, name)
    if (details.get("Provider") or "").lower() != "delta" or not details.get("Location"):
        raise ConfigError(f"table {name!r} exists and is not a Delta table (provider {details.get('Provider')!r}); "
                          "fragrelease writes releases and ledgers as Delta tables only")
    return _local(details["Location"])


def read_table(spark, name: str, version: Optional[int] = None):
    """Table ``name`` as a DataFrame: ``spark.table(name)``, or a given Delta ``version`` read by path.

    Raises
    ------
    ConfigError
        ``version`` given for a table that is not a Delta table.
    """
    if version is None:
        return spark.table(check_table_name(name))
    return read_delta(spark, table_location(spark, name), version)


def _listed_parquet(folder: str) -> set[str]:
    fs, root = fs_path(folder)
    infos = fs.get_file_info(pafs.FileSelector(root, recursive=False))
    return {posixpath.join(folder, i.base_name) for i in infos
            if i.type == pafs.FileType.File and i.base_name.endswith(".parquet")
            and not i.base_name.startswith(("_", "."))}


def _current_folder(location: str, *, root_only: bool) -> tuple[str, int]:
    """The one folder whose Parquet files are exactly the current version's active files, and the version.

    Raises
    ------
    ConfigError
        The active files lie in several folders, or the folder holds files the version removed.
    """
    from deltalake import DeltaTable

    dt = DeltaTable(location)
    active = {_local(u) for u in dt.file_uris()}
    folders = {posixpath.dirname(f) for f in active}
    if len(folders) != 1 or (root_only and folders != {location.rstrip("/")}):
        raise ConfigError(f"the current version of Delta table {location!r} spans {sorted(folders)}: without Delta's "
                          "Spark classes it cannot be registered as one catalog table")
    folder = folders.pop()
    if _listed_parquet(folder) != active:
        raise ConfigError(f"folder {folder!r} of Delta table {location!r} holds Parquet files outside its current "
                          "version (compacted or rewritten outside fragrelease); without Delta's Spark classes it "
                          "cannot be registered as a catalog table without showing removed rows")
    return folder, dt.version()


def register(spark, name: str, location: str, *, append_only: bool = False) -> None:
    """Register (or re-point) catalog table ``name`` at the Delta table at ``location``.

    With Delta classes: ``CREATE TABLE IF NOT EXISTS name USING delta LOCATION location``. Without:
    an external Parquet table over the current version's files (module docstring); ``append_only``
    tables (the ledger) keep all their files in the root folder.

    Raises
    ------
    ConfigError
        See :func:`_current_folder`; or ``name`` exists and is registered elsewhere.
    """
    check_table_name(name)
    location = _local(location)
    if delta_available(spark):
        if table_exists(spark, name):
            if table_location(spark, name).rstrip("/") != location.rstrip("/"):
                raise ConfigError(f"table {name!r} is registered at {table_location(spark, name)!r}, not {location!r}")
            return
        spark.sql(f"CREATE TABLE {name} USING delta LOCATION {_sql_string(location)}")
        return
    folder, version = _current_folder(location, root_only=append_only)
    props = f"'{PROP_LOCATION}'={_sql_string(location)}, '{PROP_VERSION}'='{version}'"
    if table_exists(spark, name):
        registered = _properties(spark, name).get(PROP_LOCATION)
        if registered is None or registered.rstrip("/") != location.rstrip("/"):
            raise ConfigError(f"table {name!r} exists and is not the Delta table at {location!r} "
                              f"(registered: {registered or _details(spark, name).get('Location')!r})")
        spark.sql(f"ALTER TABLE {name} SET LOCATION {_sql_string(folder)}")
        spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ({props})")
        spark.catalog.refreshTable(name)
    else:
        spark.sql(f"CREATE TABLE {name} USING parquet LOCATION {_sql_string(folder)} TBLPROPERTIES ({props})")
    log.info("registered %s (Delta version %d) as a catalog table", name, version)


def commit_table(df, name: str, *, provenance: Mapping[str, Any], if_exists: str = "error",
                 description: Optional[TableDescription] = None, small: bool = False) -> tuple[str, int]:
    """Commit ``df`` as a new version of catalog table ``name``; return its location and version.

    Parameters
    ----------
    df : the DataFrame to publish (already materialized: noise must not be redrawn here).
    name : ``db.table`` (:func:`fragrelease.validation.parse_table_name`).
    provenance : public facts recorded with the commit (as :func:`fragrelease.jobs.storage.commit_delta`).
    if_exists : ``"error"`` or ``"new-version"``.
    description : description, properties and column comments (as :func:`fragrelease.jobs.storage.commit_delta`).
    small : as :func:`fragrelease.jobs.storage.commit_delta`.

    Raises
    ------
    ReleaseExistsError
        The table exists and ``if_exists == "error"``.
    SchemaMismatchError
        ``new-version`` with another schema than the table's.
    ConfigError
        ``name`` is registered as something other than a Delta table (or this module's entry).
    DeltaWriteError
        Delta's Spark write failed; the files it had written were removed.
    """
    spark = df.sparkSession
    location = table_location(spark, name)
    if delta_available(spark):
        registered = table_exists(spark, name)
        if not registered and is_delta_table(location):  # left by an earlier session's in-memory catalog
            register(spark, name, location)
            registered = True
        if registered and if_exists == "error":
            raise ReleaseExistsError(f"catalog table {name!r} already exists and if_exists is 'error'")
        if registered:
            check_commit(df, location, if_exists)
        version = commit_with_spark(df, absolute(location), json.dumps(provenance, sort_keys=True),
                                    table_exists=registered, description=description, name=name, small=small)
        return table_location(spark, name), version
    version = commit_delta(df, location, provenance=provenance, if_exists=if_exists, description=description,
                           small=small)
    register(spark, name, location)
    return location, version


def output_location(spark, output: Optional[str], output_table: Optional[str]) -> str:
    """Where a release is (or will be) committed: the ``output`` path or the table's location."""
    if output_table is not None:
        return table_location(spark, output_table)
    if output is None:
        raise ConfigError("a release needs 'output' (a path) or 'output_table' (a catalog table name)")
    return output


def release_exists(spark, output: Optional[str], output_table: Optional[str]) -> bool:
    """True if the release target already holds a Delta table (or the name is registered)."""
    if output_table is not None and table_exists(spark, output_table):
        return True
    return is_delta_table(output_location(spark, output, output_table))


def with_table_names(cfg, *, owner: Optional[str] = None, source_table: Optional[str] = None,
                     output_table: Optional[str] = None):
    """``cfg`` (a :class:`fragrelease.protocol.config.ReleaseConfig`) with table names given as job parameters.

    ``source_table`` replaces ``owner``'s source with ``{table: source_table}``; ``output_table``
    replaces the release target (``output`` is dropped). Empty strings mean "not given" (Databricks
    passes unset job parameters as ``""``). The result is validated again.

    Raises
    ------
    ConfigError
        An invalid name, an unknown owner, or ``source_table`` without ``owner``.
    """
    from fragrelease.protocol.config import config_from_dict

    source_table, output_table = source_table or None, output_table or None
    if source_table is None and output_table is None:
        return cfg
    data = cfg.model_dump(mode="json", exclude_none=True)
    if output_table is not None:
        data.pop("output", None)
        data["output_table"] = output_table
    if source_table is not None:
        names = [o["name"] for o in data["owners"]]
        if owner not in names:
            raise ConfigError(f"source table {source_table!r} given for owner {owner!r}, who is not in {names}")
        for o in data["owners"]:
            if o["name"] == owner:
                o.pop("rows", None)
                o["source"] = {"table": source_table}
    return config_from_dict(data, source="configuration with job parameters")


def uses_catalog(cfg) -> bool:
    """True if ``cfg`` (a :class:`fragrelease.protocol.config.ReleaseConfig`) names a catalog table: the
    release's ``output_table``, or an owner's ``source`` or ``ledger`` given as a ``table``."""
    if cfg.output_table is not None or (cfg.source is not None and cfg.source.table is not None):
        return True
    return any((o.source is not None and o.source.table is not None) or (o.ledger is not None and o.ledger.table)
               for o in cfg.owners)


def _database_of(name: str) -> tuple[Optional[str], Optional[str]]:
    """``(catalog, database)`` of a table name (None when the name does not give it)."""
    parts = list(parse_table_name(name))
    full: list[Optional[str]] = [*([None] * (3 - len(parts))), *parts]
    return full[0], full[1]


def check_local_catalog(cfg, config_path: Optional[str] = None) -> None:
    """Before Spark starts, for a release to ``output_table`` through the embedded session
    (:func:`fragrelease.jobs.session.get_spark` with ``catalog=True``): the catalog folder is usable and
    outside ``work_dir``, and ``output_table``'s database exists in it (its folder ``<warehouse>/<db>.db``)
    unless ``create_schema: true``. Nothing is checked when the session comes from the environment
    (spark-submit, Spark Connect, Databricks) or is already active in this process (a notebook, a
    program embedding the CLI), whose catalog only Spark can read; the run checks the database again in
    Spark's catalog (:func:`ensure_database`).

    Raises
    ------
    ConfigError
        The catalog folder inside ``work_dir`` or unusable, or a database that does not exist and
        ``create_schema`` is false; each message names the table, the database and the folder.
    """
    import os

    from fragrelease.protocol.config import _within

    from ..session import (
        CATALOG_DIR_ENV,
        _managed_environment,
        active_session_exists,
        catalog_dir,
        catalog_warehouse,
    )

    if not uses_catalog(cfg) or _managed_environment() or active_session_exists():
        return
    folder = catalog_dir()
    if _within(folder, cfg.work_dir):
        raise ConfigError(f"{CATALOG_DIR_ENV}: the catalog folder {folder!r} lies under work_dir {cfg.work_dir!r}; "
                          "choose a folder outside it")
    if cfg.output_table is None:
        return
    catalog, database = _database_of(cfg.output_table)
    if catalog not in (None, "spark_catalog"):
        raise ConfigError(f"output_table {cfg.output_table!r}: the local session has one catalog, spark_catalog, "
                          f"not {catalog!r}")
    if database in (None, "default") or cfg.create_schema:
        return
    if not os.path.isdir(os.path.join(catalog_warehouse(folder), f"{database}.db")):
        raise ConfigError(f"output_table {cfg.output_table!r}: database {database!r} does not exist in the local "
                          f"catalog {folder!r} ({CATALOG_DIR_ENV}); set create_schema: true in the configuration "
                          f"to create it, or create it first")


def ensure_database(spark, cfg) -> None:
    """Once the session exists and before any data is read: ``output_table``'s database exists in the
    session's catalog, or is created (``CREATE DATABASE``) when ``create_schema: true``.

    Raises
    ------
    ConfigError
        The database does not exist and ``create_schema`` is false.
    """
    if cfg.output_table is None:
        return
    catalog, database = _database_of(cfg.output_table)
    if database is None:
        return
    qualified = f"{catalog}.{database}" if catalog else database
    if spark.catalog.databaseExists(qualified):
        return
    if not cfg.create_schema:
        raise ConfigError(f"output_table {cfg.output_table!r}: database {qualified!r} does not exist in the "
                          f"session's catalog; set create_schema: true in the configuration to create it, or "
                          f"create it first")
    if not all(_PLAIN.match(p) for p in qualified.split(".")):
        raise ConfigError(f"output_table {cfg.output_table!r}: fragrelease creates databases with plain names only "
                          "(letters, digits, _)")
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {qualified}")
    log.info("created database %s for output_table %s", qualified, cfg.output_table)
