"""Machine-readable output of the command line (``--json``; docs/usage.md, "Machine-readable output").

With ``--json``, ``plan``, ``validate``, ``run``, ``inspect``, ``ledger check`` and ``ledger history`` write
exactly one JSON document on standard output and their human text on standard error. A failure still exits
with status 2 and prints its one ``error: ...`` line on standard error; standard output then holds
``{"ok": false, "error": {"class": ..., "type": ..., "message": ...}}`` (:func:`emit_error`), its class
from :data:`ERROR_CLASSES` (:func:`error_class`).

Every document holds ``fragrelease_version`` and ``ok``; what else it holds is the command's own (public
terms only: what the human output prints, as data).
"""
from __future__ import annotations

import dataclasses
import json
import sys
from contextlib import contextmanager
from fractions import Fraction
from typing import Any, Iterator, Mapping, Optional, Sequence

from rich.text import Text

from fragrelease import errors as E

from ._common import console

#: The help of ``--json``, the option every command with a machine-readable form takes (each command writes
#: ``typer.Option(False, "--json", help=JSON_HELP)`` itself: tests/test_signatures.py recognizes a command by it).
JSON_HELP = ("Print one JSON document on standard output (the human text goes to standard error); docs/usage.md, "
             "\"Machine-readable output\".")

#: The class of every error fragrelease raises on purpose, for scripts (``error.class`` of ``--json``):
#: ``configuration`` (the configuration, a parameter, a key or the environment: fix the input), ``data`` (an
#: owner's data does not match its declared schema, domain or ids), ``budget`` (an owner's ledger refuses the
#: spend), ``storage`` (storage or a Spark job failed), ``tamper`` (a message, manifest, signature or ledger
#: does not verify: someone or something changed it), ``exists`` (the release exists and may not get a new
#: version). A subclass not listed here takes its nearest listed base's class (:func:`error_class`);
#: tests/jobs/test_cli_json.py checks that every class of :mod:`fragrelease.errors` is listed.
ERROR_CLASSES: Mapping[type, str] = {
    E.FragReleaseError: "configuration",  # the command line's own usage errors (inspect: no such folder, ...)
    E.InvalidParameterError: "configuration",
    E.ThresholdTooLooseError: "configuration",
    E.ConfigError: "configuration",
    E.OutputConflictError: "configuration",  # the output path holds something else: choose another output
    E.SigningKeyError: "configuration",
    E.PseudonymKeyError: "configuration",
    E.MissingDependencyError: "configuration",
    E.DeltaUnavailableError: "configuration",
    E.SchemaMismatchError: "data",
    E.DomainError: "data",
    E.IdentifierError: "data",
    E.BudgetExceededError: "budget",
    E.PlanAlreadySpentError: "budget",
    E.StorageError: "storage",
    E.LedgerStorageError: "storage",
    E.TableWriteError: "storage",
    E.ConcurrentCommitError: "storage",
    E.DeltaWriteError: "storage",
    E.ProtocolError: "tamper",
    E.ManifestMismatchError: "tamper",
    E.SignatureError: "tamper",
    E.LedgerDamagedError: "tamper",
    E.ReleaseExistsError: "exists",
}
#: The classes, in the order docs/usage.md lists them.
CLASSES = ("configuration", "data", "budget", "storage", "tamper", "exists")


def error_class(exc: BaseException) -> str:
    """The class of ``exc`` for scripts: its nearest base in :data:`ERROR_CLASSES`; an error that is no
    FragReleaseError is a usage error (``configuration``: a missing option, a bad value, pyspark missing)."""
    for cls in type(exc).__mro__:
        if cls in ERROR_CLASSES:
            return ERROR_CLASSES[cls]
    return "configuration"


def wants_json(argv: Sequence[str]) -> bool:
    """``--json`` is among the options of ``argv`` (before a ``--``)."""
    args = list(argv)
    return "--json" in (args[:args.index("--")] if "--" in args else args)


@contextmanager
def json_output(on: bool) -> Iterator[None]:
    """While ``on``: the console (the human text) writes to standard error, so that standard output holds
    only the document; restored afterwards."""
    before = console.stderr
    console.stderr = before or on
    try:
        yield
    finally:
        console.stderr = before


def begin(on: bool) -> None:
    """A command given ``--json``: its human text goes to standard error from here on (a command called
    without :func:`fragrelease.jobs.cli.run_cli` too; ``run_cli`` restores the console)."""
    if on:
        console.stderr = True


def _plain(value: Any) -> Any:
    """``value`` as JSON data: exact fractions as their text, tuples as lists, dataclasses as objects."""
    if isinstance(value, Fraction):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def emit(document: Mapping[str, Any]) -> None:
    """Write ``document`` (with ``fragrelease_version`` first and ``ok`` true unless it says otherwise) as one
    JSON line on standard output."""
    from fragrelease.version import __version__

    out = {"fragrelease_version": __version__, "ok": True, **document}
    sys.stdout.write(json.dumps(_plain(out), ensure_ascii=False) + "\n")
    sys.stdout.flush()


def emit_error(exc: Optional[BaseException], message: str, *, cls: Optional[str] = None,
               type_name: Optional[str] = None) -> None:
    """The document of a failure: ``{"ok": false, "error": {"class", "type", "message"}}``; ``message`` is the
    text of the ``error:`` line (without ``error: ``)."""
    kind = cls or (error_class(exc) if exc is not None else "configuration")
    name = type_name or (type(exc).__name__ if exc is not None else "UsageError")
    emit({"ok": False, "error": {"class": kind, "type": name, "message": message}})


def blocks_data(blocks: Sequence[Any]) -> list[Any]:
    """A kind's printed blocks (:class:`fragrelease.protocol.kind.Line`, ``TextTable``) as data: a line as its
    text (rich markup removed), a table as ``{"title", "rows": [{header: cell}]}``."""
    out: list[Any] = []
    for block in blocks:
        if hasattr(block, "header"):
            out.append({"title": block.title, "rows": [dict(zip(block.header, row)) for row in block.rows]})
        else:
            out.append(Text.from_markup(block.text).plain)
    return out


def preview_data(pv: Any) -> Any:
    """A kind's preview object as data: its ``to_dict()`` when it has one, else its dataclass fields."""
    if hasattr(pv, "to_dict"):
        return pv.to_dict()
    return _plain(pv)
