"""``fragrelease inspect``: a committed release's description, properties and every version's provenance,
whatever its kind (read from the Delta table; no data is read), registered in ``jobs/cli/__init__.py``.

    fragrelease inspect TABLE|--table NAME      versions and provenance of a release (folder or catalog name)
"""
from __future__ import annotations

from typing import Optional

import typer

from fragrelease.errors import FragReleaseError

from . import _common
from ._common import MASTER, console


def _release_location(table: str, catalog_name: Optional[str], master: Optional[str]) -> str:
    """The Delta folder of a release given as a path or a catalog table name (one-line errors).

    A folder (or URI) is used as it is; ``catalog_name``, or an argument that is no existing path
    and reads as ``db.name`` / ``catalog.db.name``, is looked up in the session's catalog.

    Raises
    ------
    FragReleaseError
        No such folder or table, or not a Delta table.
    """
    import os

    from fragrelease.validation import parse_table_name

    from ..storage import absolute, is_delta_table

    name = catalog_name
    if name is None and table and "/" not in table and "\\" not in table and not os.path.exists(table):
        try:
            parse_table_name(table)
            name = table if "." in table else None
        except FragReleaseError:
            name = None
    if name is not None:
        from ..storage import table_exists, table_location

        spark = _common._spark(master, catalog=True)
        if not table_exists(spark, name):
            raise FragReleaseError(f"inspect: table {name!r} is not in the catalog (give a release folder, or the "
                                   f"name of a table in this session's catalog)")
        location = table_location(spark, name)
    else:
        if not table:
            raise FragReleaseError("inspect: give a release folder or --table NAME")
        location = absolute(table)
        if "://" not in table and not os.path.exists(location):
            raise FragReleaseError(f"inspect: {table!r} does not exist (give a release folder or a catalog table name)")
    try:
        ok = is_delta_table(location)
    except Exception as exc:  # an unreachable URI: pyarrow's message, on one line
        raise FragReleaseError(f"inspect: cannot read {location!r}: {str(exc).splitlines()[0]}") from None
    if not ok:
        raise FragReleaseError(f"inspect: {location!r} is not a Delta table (no _delta_log): give a release folder "
                               f"or a catalog table name")
    return location


def inspect(table: Optional[str] = typer.Argument(None, help="A release: its Delta folder, or a catalog table name "
                                                                "(db.name)."),
            table_name: Optional[str] = typer.Option(None, "--table", help="The release's catalog table name."),
            full: bool = typer.Option(False, "--full", help="Print the whole provenance as JSON."),
            master: Optional[str] = MASTER):
    """Show a release's description, properties and column comments, and every version with its provenance
    (the commit's userMetadata; the custom key ``fragrelease`` for tables written by earlier versions)."""
    import json

    from ..storage import table_history, table_self_description

    if table is not None and table_name is not None:
        raise FragReleaseError("inspect: give a release folder or --table NAME, not both")
    location = _release_location(table or "", table_name, master)
    described = table_self_description(location)
    if described["description"]:
        console.print(f"[bold]description[/bold]: {described['description']}", highlight=False)
    for key, value in described["properties"].items():
        console.print(f"  {key} = {value}", highlight=False)
    for column, comment in described["column_comments"].items():
        console.print(f"  column {column}: {comment}", highlight=False)
    for entry, prov in table_history(location):
        owners = ", ".join(f"{o['name']} (ε_j {o['epsilon']})" for o in prov.get("owners", []))
        console.print(
            f"[bold]version {entry.get('version')}[/bold] {entry.get('operation')}: "
            f"{prov.get('fragmentation', '?')} {prov.get('mechanism', '?')}, ε {prov.get('epsilon', '?')} "
            f"({prov.get('composition', '?')}), k {prov.get('k', '?')}, plan {prov.get('plan_id', '?')}; owners: {owners}"
        )
        if full and prov:
            console.print_json(json.dumps(prov))
