"""The embedded session's persistent catalog (``get_spark(..., catalog=True)``): a Derby metastore and a
warehouse in one folder (:func:`catalog_dir`) that outlive the process."""
from __future__ import annotations

import os
import re
from pathlib import Path

from fragrelease.errors import ConfigError

#: The environment variable naming the embedded session's persistent catalog folder (:func:`catalog_dir`).
CATALOG_DIR_ENV = "FRAGRELEASE_CATALOG_DIR"


def catalog_dir() -> str:
    """The embedded session's persistent catalog folder: ``$FRAGRELEASE_CATALOG_DIR``, else
    ``~/.fragrelease/catalog`` (absolute). It holds ``warehouse/`` (managed tables, one folder per
    database ``<db>.db``), ``metastore_db/`` (Spark's Derby metastore) and ``derby.log``."""
    given = os.environ.get(CATALOG_DIR_ENV)
    return os.path.abspath(os.path.expanduser(given or os.path.join("~", ".fragrelease", "catalog")))


def catalog_warehouse(folder: str | None = None) -> str:
    """The warehouse (``spark.sql.warehouse.dir``) of the persistent catalog in ``folder`` (default
    :func:`catalog_dir`); database ``db`` lives in ``<warehouse>/db.db``, ``default`` in the warehouse itself."""
    return os.path.join(folder or catalog_dir(), "warehouse")


def check_catalog_dir() -> str:
    """:func:`catalog_dir`, checked before any JVM starts; created (0700) when missing.

    Raises
    ------
    ConfigError
        A folder whose path cannot travel in a JDBC URL and a JVM option, or that cannot be created.
    """
    folder = catalog_dir()
    if re.search(r"[\s;'\"\\]", folder):
        raise ConfigError(f"{CATALOG_DIR_ENV}: the catalog folder {folder!r} must not contain spaces, ';', quotes "
                          "or backslashes (it travels in a JDBC URL and a JVM option); choose another folder")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{CATALOG_DIR_ENV}: cannot create the catalog folder {folder!r}: "
                          f"{exc.strerror or type(exc).__name__}") from None
    return folder


def _with_catalog(builder):
    """``builder`` with a catalog that outlives the process: Spark's Hive catalog (the Hive classes ship
    with pyspark) over a Derby metastore and a warehouse in :func:`catalog_dir`."""
    folder = catalog_dir()
    return (builder.config("spark.sql.catalogImplementation", "hive")
            .config("spark.sql.warehouse.dir", Path(catalog_warehouse(folder)).as_uri())
            .config("spark.hadoop.javax.jdo.option.ConnectionURL",
                    f"jdbc:derby:;databaseName={os.path.join(folder, 'metastore_db')};create=true"))
