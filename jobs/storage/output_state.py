"""What is at a release's output path, checked before any owner spends; recovery of a crashed first commit.

:func:`check_output` classifies the output folder without Spark (pyarrow's file systems and
delta-rs) and refuses, in one line naming the path, what is there and what to do, every state a
release must not write into: a file, a folder with other files, (local) a dangling symbolic link or a
file on the way to it or a folder this user cannot write (:mod:`.output_place`), an owner's budget ledger, a Delta
table of another system or dataset (or without fragrelease provenance), an existing release when
``if_exists`` is ``"error"``, a release with other columns, a damaged Delta log, and an uncommitted
Delta write (no committed version) that is not this release's. It runs in
:func:`fragrelease.jobs.protocol.aggregator.issue_plan` (before any owner spends) and in ``fragrelease
validate`` (local paths).

Recovery (issue 36 item 2): before the aggregator writes into an output that has no committed
version, :func:`prepare_output` writes the marker ``<output>_fragrelease_pending.json``
(:func:`marker_path`: system, configuration name, dataset, output and plan id) **beside** the output
folder, as the public report goes to ``<output>_reports/``: Delta's path-based ``CREATE TABLE``
(the Spark Delta path's first commit) refuses a folder that holds any file, ``_``-prefixed or inside
``_delta_log/`` included, with ``[TABLE_OR_VIEW_ALREADY_EXISTS]``. A run killed during the commit,
or a commit that failed on a full disk, leaves that marker and its partial files in the folder
(``part-*`` data files, ``.crc`` files, a ``_delta_log/`` without a committed version, ``.tmp``
commit files). The next run of the same configuration finds its own marker, removes exactly those
leftovers (the folder stays, empty) and commits version 0; an uncommitted folder without the marker,
with another release's marker, or with any other file is refused and nothing is removed.
:func:`finish_output` removes the marker after the commit. A table with committed versions is never cleared: Delta ignores files its
log does not list, so a failed attempt's leftovers do not block the next version.

Source: issue 36 (items 1, 2 and 4); Delta's log protocol (a version exists once its commit file
``_delta_log/<version, 20 digits>.json`` is in place).
"""
from __future__ import annotations

import posixpath
import re
import uuid
from dataclasses import dataclass
from typing import Any, Literal, Mapping, Optional, Sequence

import pyarrow.fs as pafs
from pydantic import BaseModel, ConfigDict, ValidationError

from fragrelease.errors import OutputConflictError, ReleaseExistsError, SchemaMismatchError

from .output_place import check_output_way, check_output_writable
from .uris import absolute, fs_path

#: The suffix of the marker a release writes beside an output folder that has no committed version yet.
MARKER = "_fragrelease_pending.json"
#: An owner's budget ledger's columns (:data:`fragrelease.jobs.protocol.ledger.LEDGER_SCHEMA`); a ledger
#: written by 0.16.0 or earlier has the first five only (:data:`LEDGER_LEGACY_COLUMNS`).
LEDGER_COLUMNS = ("owner", "dataset", "plan_id", "epsilon", "recorded_at", "commit_version", "total", "prev_chain",
                  "chain")
LEDGER_LEGACY_COLUMNS = LEDGER_COLUMNS[:5]
_COMMIT = re.compile(r"^\d{20}\.(json|checkpoint(\.\d+\.\d+)?\.parquet)$")
#: What a crashed write leaves at the top of a table folder (Spark's and delta-rs' data files and their
#: checksums, Spark's job files, the Delta log); anything else is not a leftover and is never removed.
_LEFTOVER = re.compile(r"^(part-.*|\.part-.*\.crc|_delta_log|_SUCCESS|\._SUCCESS\.crc|_temporary|"
                       r"_started_\d+|_committed_\d+)$")

State = Literal["absent", "empty", "pending", "table"]


class PendingRelease(BaseModel):
    """The marker's content: which release is writing the output's first version (public facts only)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    system: str
    config: str
    dataset: str
    output: str
    plan_id: str


@dataclass(frozen=True)
class ReleaseTarget:
    """The release that wants to write ``output``: its system, configuration name and dataset.

    ``dataset`` is None where the dataset's schema cannot be read (an aggregator's ``validate`` when the
    schema file lies at the owners only): the dataset is then not compared; the plan step, which knows
    it from the plan, compares it and writes it into the marker.
    """

    output: str
    config: str
    dataset: Optional[str]
    system: str = "idpir"

    def owns(self, marker: PendingRelease) -> bool:
        """Whether ``marker`` names this release (any plan id: a rerun issues a new plan)."""
        return (marker.system, marker.config, marker.output.rstrip("/")) == (
            self.system, self.config, absolute(self.output).rstrip("/")) and self.dataset in (None, marker.dataset)


def _entries(fs, root: str) -> list:
    return fs.get_file_info(pafs.FileSelector(root))


def marker_path(output: str) -> str:
    """Where the marker of a release to ``output`` goes: ``<output>_fragrelease_pending.json``, beside it."""
    return absolute(output).rstrip("/") + MARKER


def _read_marker(fs, root: str, path: str) -> Optional[PendingRelease]:
    """The marker of output ``root``, None without one. Raises OutputConflictError for a file there that is not one."""
    marker = root.rstrip("/") + MARKER
    if fs.get_file_info(marker).type == pafs.FileType.NotFound:
        return None
    try:
        with fs.open_input_stream(marker) as f:
            return PendingRelease.model_validate_json(f.read())
    except (ValidationError, ValueError, OSError):
        raise OutputConflictError(f"output {path!r}: {marker_path(path)!r} is not a fragrelease marker; nothing was "
                                  "removed: move that file away or choose another output") from None


def _commit_files(fs, root: str) -> list:
    log_dir = posixpath.join(root, "_delta_log")
    if fs.get_file_info(log_dir).type != pafs.FileType.Directory:
        return []
    return [i for i in _entries(fs, log_dir) if _COMMIT.match(i.base_name)]


def _committed(path: str, fs, root: str) -> Optional[bool]:
    """True: a committed version; False: none (no commit file, or only an empty version-0 commit file a crash
    left); None: commit files that do not load (damaged)."""
    commits = _commit_files(fs, root)
    if not commits:
        return False
    if all(i.size == 0 for i in commits) and [i.base_name for i in commits] == ["0" * 20 + ".json"]:
        return False
    from deltalake import DeltaTable

    try:
        DeltaTable(path).version()
    except Exception:  # noqa: BLE001 - delta-rs' errors and panics: the log does not load
        return None
    return True


def _describe_table(path: str) -> tuple[list[str], Mapping[str, Any]]:
    from deltalake import DeltaTable

    from .files import table_provenance

    columns = [f.name for f in DeltaTable(path).schema().fields]
    return columns, table_provenance(path)


def check_output(target: ReleaseTarget, *, if_exists: str, columns: Optional[Sequence[str]] = None) -> State:
    """Refuse an output this release must not write into; return what is there.

    Returns ``"absent"``, ``"empty"`` (an empty folder), ``"pending"`` (no committed version, only
    this release's marker and a crashed write's leftovers: :func:`prepare_output` clears them) or
    ``"table"`` (a release of this system and dataset that gets a new version).

    ``columns``: the release's columns, when known (after the plan): an existing table with other
    columns is refused.

    A local output is also refused when it cannot be created or written
    (:mod:`fragrelease.jobs.storage.output_place`: a dangling symbolic link or a file on the way, a
    folder this user cannot write).

    Raises
    ------
    OutputConflictError
        A dangling symbolic link or a file on the way; a folder this user cannot write; a file; a
        folder with other files; a budget ledger; a Delta table of another system or
        dataset or without fragrelease provenance; a damaged Delta log; an uncommitted write
        without this release's marker. One line naming the output, what is there and what to do.
    ReleaseExistsError
        A release exists and ``if_exists`` is ``"error"``.
    SchemaMismatchError
        The existing release has other columns than ``columns``.
    """
    path = absolute(target.output)
    fs, root = fs_path(path)
    local = isinstance(fs, pafs.LocalFileSystem)
    if local:  # a dangling link or a file on the way: Delta's commit would fail after the spends
        check_output_way(path, root)
    state = _output_state(path, target, fs, root, if_exists, columns)
    if local:
        check_output_writable(path, root, committed=state == "table")
    return state


def _output_state(path: str, target: ReleaseTarget, fs, root: str, if_exists: str,
                  columns: Optional[Sequence[str]]) -> State:
    info = fs.get_file_info(root)
    if info.type == pafs.FileType.File:
        raise OutputConflictError(f"output {path!r} is a file, not a release folder; nothing was written: choose an "
                                  "output path that does not exist")
    entries = _entries(fs, root) if info.type == pafs.FileType.Directory else []
    committed = _committed(path, fs, root) if entries else False
    if committed is None:
        raise OutputConflictError(f"output {path!r} holds a Delta log whose commits cannot be read (damaged); "
                                  "nothing was written: repair or remove it, or choose another output")
    if committed:
        return _check_table(path, target, if_exists, columns)
    marker = _read_marker(fs, root, path)
    if not entries:
        if marker is not None and not target.owns(marker):
            raise OutputConflictError(f"output {path!r} is being written by release {marker.config!r} (dataset "
                                      f"{marker.dataset!r}, marker {marker_path(path)!r}); nothing was written: "
                                      "choose another output")
        return "absent" if info.type == pafs.FileType.NotFound else "empty"
    names = sorted(i.base_name for i in entries)
    others = [n for n in names if not _LEFTOVER.match(n)]
    if others:
        raise OutputConflictError(f"output {path!r} is a folder with other files ({others[0]!r}) and no Delta "
                                  "table; nothing was written: choose an output path that does not exist or is empty")
    if marker is None or not target.owns(marker):
        whose = ("no marker of a fragrelease release" if marker is None
                 else f"the marker of release {marker.config!r} (dataset {marker.dataset!r})")
        raise OutputConflictError(f"output {path!r} holds an uncommitted write (no committed Delta version) with "
                                  f"{whose}; nothing was removed: remove the folder by hand if it is not needed, "
                                  "or choose another output")
    return "pending"


def _check_table(path: str, target: ReleaseTarget, if_exists: str, columns: Optional[Sequence[str]]) -> State:
    existing, prov = _describe_table(path)
    if set(LEDGER_LEGACY_COLUMNS) <= set(existing) <= set(LEDGER_COLUMNS):
        raise OutputConflictError(f"output {path!r} is a budget ledger (columns {', '.join(LEDGER_LEGACY_COLUMNS)}), not "
                                  "a release; nothing was written: choose another output path")
    dataset = prov.get("dataset")
    # iDP-IR releases committed before the system stamp (issue 25) say only role "release"
    system = prov.get("system") or ("idpir" if prov.get("role") == "release" else None)
    if not prov or prov.get("role") not in (None, "release") or system is None:
        raise OutputConflictError(f"output {path!r} is a Delta table that is not a fragrelease release (role "
                                  f"{prov.get('role')!r}); nothing was written: choose another output path")
    if system != target.system or (target.dataset is not None and dataset != target.dataset):
        raise OutputConflictError(f"output {path!r} is a release of system {system!r} and dataset {dataset!r}, not "
                                  f"of system {target.system!r} and dataset {target.dataset!r}; nothing was "
                                  "written: choose another output path")
    if if_exists == "error":
        raise ReleaseExistsError(f"a release already exists at {path!r} and if_exists is 'error'; set if_exists: "
                                 "new-version to add a version, or choose another output")
    if columns is not None and sorted(existing) != sorted(columns):
        raise SchemaMismatchError(f"output {path!r} is a release with columns {existing}, this release writes "
                                  f"{list(columns)}; nothing was written: choose another output path")
    return "table"


def prepare_output(target: ReleaseTarget, plan_id: str, *, if_exists: str,
                   columns: Optional[Sequence[str]] = None) -> State:
    """Check the output again and, when it has no committed version, clear this release's leftovers and
    write the marker (:func:`marker_path`) naming ``plan_id``; return the state found (as :func:`check_output`).

    Only what :func:`check_output` accepted as a crashed write of this release is removed (entries
    matching Spark's, delta-rs' and Delta's file names under a folder that holds this release's
    marker and no committed version); the marker is written to a temporary name and then moved, so a
    crash leaves the old one or the new one.

    Raises
    ------
    OutputConflictError, ReleaseExistsError, SchemaMismatchError
        As :func:`check_output` (``columns`` as there).
    TableWriteError
        Storage refused a removal or the marker's write (read-only, permission, disk full): one line
        with the operating system's cause.
    """
    state = check_output(target, if_exists=if_exists, columns=columns)
    if state == "table":
        return state
    try:
        _clear_and_mark(target, plan_id, state)
    except OSError as exc:
        from fragrelease.errors import TableWriteError

        from .errors import path_cause

        path = absolute(target.output)
        raise TableWriteError(f"output {path!r} cannot be prepared for the release (its marker "
                              f"{marker_path(path)!r}): {path_cause(marker_path(path), exc)}; nothing was "
                              "committed") from None
    return state


def _clear_and_mark(target: ReleaseTarget, plan_id: str, state: State) -> None:
    path = absolute(target.output)
    fs, root = fs_path(path)
    if state == "pending":
        for info in _entries(fs, root):
            if info.type == pafs.FileType.Directory:
                fs.delete_dir(info.path)
            else:
                fs.delete_file(info.path)
    assert target.dataset is not None  # the plan step and the release step know the dataset from the plan
    marker = PendingRelease(system=target.system, config=target.config, dataset=target.dataset,
                            output=path.rstrip("/"), plan_id=plan_id)
    if _read_marker(fs, root, path) != marker:  # the plan step wrote it already: the release step leaves it
        _write_atomically(fs, root.rstrip("/") + MARKER, marker.model_dump_json())


def _write_atomically(fs, dest: str, text: str) -> None:
    """Write ``dest`` through a temporary file of its own, moved into place; on failure that file is removed."""
    fs.create_dir(posixpath.dirname(dest), recursive=True)
    tmp = f"{dest}.tmp-{uuid.uuid4().hex}"
    try:
        with fs.open_output_stream(tmp) as out:
            out.write(text.encode("utf-8"))
        fs.move(tmp, dest)
    except BaseException:
        try:
            fs.delete_file(tmp)
        except OSError:
            pass
        raise


def finish_output(target: ReleaseTarget) -> None:
    """Remove this release's marker (:func:`marker_path`) after its commit (a marker of another release stays)."""
    path = absolute(target.output)
    fs, root = fs_path(path)
    try:
        marker = _read_marker(fs, root, path)
    except OutputConflictError:
        return
    if marker is not None and target.owns(marker):
        try:
            fs.delete_file(root.rstrip("/") + MARKER)
        except FileNotFoundError:
            pass


def marker_text(path: str) -> Optional[Mapping[str, Any]]:
    """The marker of output ``path`` as a dict (tests), None without one (:func:`_read_marker`)."""
    path = absolute(path)
    fs, root = fs_path(path)
    marker = _read_marker(fs, root, path)
    return None if marker is None else marker.model_dump()


def release_target(cfg, dataset: Optional[str] = None) -> Optional[ReleaseTarget]:
    """The :class:`ReleaseTarget` of an iDP-IR configuration with an ``output`` path (None for a catalog table).

    ``dataset``: the dataset's name as the plan gives it; without it, the name of the configuration's
    schema (``cfg.dataset`` may be a schema file's path), or None when that file cannot be read here.
    """
    if cfg.output_table is not None or cfg.output is None:
        return None
    if dataset is None:
        from fragrelease.errors import ConfigError
        from fragrelease.schemas.datasets import resolve_schema

        try:  # the dataset's name, as the release's provenance records it
            dataset = resolve_schema(cfg.dataset).name
        except ConfigError:
            dataset = None  # the schema lies at the owners only: the dataset is compared at the plan
    return ReleaseTarget(output=cfg.output, config=cfg.name, dataset=dataset)


__all__ = ["MARKER", "LEDGER_COLUMNS", "marker_path", "PendingRelease", "ReleaseTarget", "check_output", "finish_output",
           "marker_text", "prepare_output", "release_target"]
