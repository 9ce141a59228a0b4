"""``fragrelease inspect``: a committed release's description, properties and every version's provenance,
whatever its kind (read from the Delta table; no data is read), registered in ``jobs/cli/__init__.py``.

    fragrelease inspect TABLE|--table NAME      versions and provenance of a release (folder or catalog name)
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

import typer

from fragrelease.errors import FragReleaseError

from . import _common
from ._common import MASTER, console
from .machine import JSON_HELP, begin, emit

#: A synthetic release's own terms in its provenance's ``synthesis`` record (written by its aggregator:
#: the owners m, the collusion bound t, the target, the numeric bins, the drawn (noised) row count and
#: the cliques), in the order ``inspect`` prints them.
_SYNTHESIS_TERMS = ("owners", "collusion", "target", "bins", "rows", "cliques")


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


def version_terms(prov: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The release's own terms beyond ε, by name, as its provenance records them (public): ``k`` of an IR
    release, the synthesis terms of a synthetic one (:data:`_SYNTHESIS_TERMS`); absent ones left out."""
    terms: list[tuple[str, Any]] = [("k", prov["k"])] if "k" in prov else []
    synthesis = prov.get("synthesis")
    if isinstance(synthesis, Mapping):
        terms += [(key, synthesis[key]) for key in _SYNTHESIS_TERMS if key in synthesis]
    return terms


def _term_text(key: str, value: Any) -> str:
    """A term as ``inspect`` prints it (``k 20``, ``collusion bound t = 1``, ``rows 6,058``, ``cliques a×b, c×d``)."""
    if key == "cliques":
        return "cliques " + ", ".join("×".join(c) for c in value)
    if key == "collusion":
        return f"collusion bound t = {value}"
    if key == "rows" and isinstance(value, int):
        return f"rows {value:,}"
    return f"{key} {'none' if value is None else value}"


def version_line(entry: Mapping[str, Any], prov: Mapping[str, Any]) -> str:
    """One version of a release: its operation, fragmentation and mechanism (a synthetic release: its
    linkage), ε and composition, the kind's terms (:func:`version_terms`), the plan and the owners' ε_j."""
    owners = ", ".join(f"{o['name']} (ε_j {o['epsilon']})" for o in prov.get("owners", []))
    terms = "".join(f", {_term_text(key, value)}" for key, value in version_terms(prov))
    what = prov.get("mechanism") or prov.get("linkage") or "?"
    return (f"[bold]version {entry.get('version')}[/bold] {entry.get('operation')}: "
            f"{prov.get('fragmentation', '?')} {what}, ε {prov.get('epsilon', '?')} "
            f"({prov.get('composition', '?')}){terms}, plan {prov.get('plan_id', '?')}; owners: {owners}")


def _version_data(entry: Mapping[str, Any], prov: Mapping[str, Any], full: bool) -> Mapping[str, Any]:
    """One version for ``inspect --json``: what :func:`version_line` prints (and the provenance with ``--full``)."""
    data = {"version": entry.get("version"), "operation": entry.get("operation"), "kind": prov.get("linkage"),
            "fragmentation": prov.get("fragmentation"), "mechanism": prov.get("mechanism"),
            "epsilon": prov.get("epsilon"), "composition": prov.get("composition"), "plan_id": prov.get("plan_id"),
            "terms": dict(version_terms(prov)),
            "owners": [{"name": o["name"], "epsilon": o["epsilon"]} for o in prov.get("owners", [])]}
    return {**data, "provenance": prov} if full else data


def inspect(table: Optional[str] = typer.Argument(None, help="A release: its Delta folder, or a catalog table name "
                                                                "(db.name)."),
            table_name: Optional[str] = typer.Option(None, "--table", help="The release's catalog table name."),
            full: bool = typer.Option(False, "--full", help="Print the whole provenance as JSON."),
            master: Optional[str] = MASTER, json_out: bool = typer.Option(False, "--json", help=JSON_HELP)):
    """Show a release's description, properties and column comments, and every version with its provenance
    (the commit's userMetadata; the custom key ``fragrelease`` for tables written by earlier versions); with
    ``--json``, one JSON document of the same on standard output."""
    import json

    from ..storage import table_history, table_self_description

    begin(json_out)
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
    history = table_history(location)
    for entry, prov in history:
        console.print(version_line(entry, prov))
        if full and prov:
            console.print_json(json.dumps(prov))
    if json_out:
        latest = history[0][1] if history else {}
        emit({"command": "inspect", "location": location, "kind": latest.get("linkage"),
              "description": described["description"], "properties": described["properties"],
              "column_comments": described["column_comments"],
              "versions": [_version_data(entry, prov, full) for entry, prov in history]})
