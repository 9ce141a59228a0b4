"""Catalog table names in configurations and the Python API, checked without Spark.

A name is one to three dot-separated identifiers, ``table``, ``database.table`` or
``catalog.database.table`` (Spark's multi-part identifiers; Unity Catalog's three levels), each a
letter or underscore followed by letters, digits or underscores. Back-quoted names are not accepted:
a configuration names tables the way ``spark.table`` reads them without quoting, so a name never
needs escaping inside the SQL that registers it (:mod:`fragrelease.jobs.catalog`).
"""
from __future__ import annotations

import re

from .errors import InvalidParameterError

_PART = r"[A-Za-z_][A-Za-z0-9_]*"
_NAME = re.compile(rf"^{_PART}(\.{_PART}){{0,2}}$")


def check_table_name(name: object, *, what: str = "table") -> str:
    """``name`` if it is a valid catalog table name (see the module docstring), else an error.

    Parameters
    ----------
    name : the candidate, e.g. ``"clinics.visits"``.
    what : which setting holds it, for the message (``"owners.0.source.table"``).

    Raises
    ------
    InvalidParameterError
        Not a string, or not 1-3 dot-separated identifiers; the message names the value.
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidParameterError(
            f"{what} must be a catalog table name: 1-3 dot-separated identifiers of letters, digits and "
            f"underscores, not starting with a digit (e.g. 'db.table'), not {name!r}")
    return name


def split_table_name(name: str) -> tuple[str | None, str | None, str]:
    """``(catalog, database, table)`` of a checked name; absent parts are None.

    Raises
    ------
    InvalidParameterError
        From :func:`check_table_name`.
    """
    parts = check_table_name(name).split(".")
    while len(parts) < 3:
        parts.insert(0, None)  # type: ignore[arg-type]
    return parts[0], parts[1], parts[2]
