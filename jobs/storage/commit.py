"""One commit and provenance contract for every system's release (issue 25 step 4).

Every release fragrelease writes (iDP-IR, independent publications and their audit, tiers, DiffGen)
goes through :func:`commit_release`: one function that commits a materialized DataFrame to a path
or a catalog table, one table version per call, with a provenance stamped by
:func:`stamp_provenance`: the ``system`` that wrote it, the ``fragrelease_version`` and the
``guarantee`` it carries (plain sentences; ``"none"`` for what is not a protected release). Before
any work, :func:`refuse_existing` refuses a target that exists when ``if_exists`` is ``"error"``.
:func:`fragrelease.jobs.storage.table_history` reads every version's provenance back (``fragrelease inspect``).

Everything stamped is public: the system's name, the package version and the guarantee text, which
is computed from public parameters only (ε, k, the mechanism, ...). Source: docs/specification.md
§3 (provenance) and the Delta commit paths of :mod:`fragrelease.jobs.storage`.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional, Union

from fragrelease.errors import ConfigError, OutputConflictError, ReleaseExistsError
from fragrelease.version import __version__

from ..describe import TableDescription
from .catalog import commit_table, release_exists
from .files import absolute, commit_delta, is_delta_table

#: The systems that commit releases (the ``system`` of every provenance).
SYSTEMS = ("idpir", "publications", "tiers", "diffgen")
#: What a second write to an existing release does: refuse, or add a new table version.
IF_EXISTS = ("error", "new-version")

Guarantee = Union[str, Mapping[str, object]]


def stamp_provenance(provenance: Mapping[str, object], *, system: str, guarantee: Guarantee) -> Mapping[str, Any]:
    """``provenance`` plus ``system``, ``fragrelease_version`` and ``guarantee`` (public facts only).

    Raises
    ------
    ConfigError
        ``system`` is not one of :data:`SYSTEMS`, or ``guarantee`` is empty.
    """
    if system not in SYSTEMS:
        raise ConfigError(f"system must be one of {SYSTEMS}, not {system!r}")
    if not guarantee:
        raise ConfigError(f"a {system} release must state its guarantee")
    return {**provenance, "system": system, "fragrelease_version": __version__,
            "guarantee": guarantee if isinstance(guarantee, str) else dict(guarantee)}


def _target(path: Optional[str], table: Optional[str]) -> None:
    if (path is None) == (table is None):
        raise ConfigError("a release is committed to a path or to a catalog table: give exactly one")


def refuse_existing(*, path: Optional[str] = None, table: Optional[str] = None, if_exists: str = "error",
                    spark=None) -> None:
    """Fail before any work when the release target exists and may not get a new version.

    ``path``: a Delta folder (local or URI); ``table``: a catalog name (``spark`` is then the session,
    the active one when None). Raises ConfigError for an ``if_exists`` not in :data:`IF_EXISTS` or
    not exactly one target, OutputConflictError (a ConfigError) when ``path`` is a file,
    ReleaseExistsError naming the target when it exists and ``if_exists`` is ``"error"``.
    """
    _target(path, table)
    if if_exists not in IF_EXISTS:
        raise ConfigError(f"if_exists must be 'error' or 'new-version', not {if_exists!r}")
    if path is not None:
        import pyarrow.fs as pafs

        from .uris import fs_path

        fs, local = fs_path(absolute(path))
        if fs.get_file_info(local).type == pafs.FileType.File:
            raise OutputConflictError(f"output {absolute(path)!r} is a file, not a release folder; nothing was "
                                      "written: choose an output path that does not exist")
    if if_exists != "error":
        return
    if table is not None:
        if spark is None:
            from ..session import get_spark

            spark = get_spark()
        if release_exists(spark, None, table):
            raise ReleaseExistsError(f"catalog table {table!r} already exists and if_exists is 'error'")
    elif path is not None and is_delta_table(path):
        raise ReleaseExistsError(f"a Delta table already exists at {absolute(path)!r}; use --if-exists new-version")


def commit_release(df, *, system: str, provenance: Mapping[str, object], guarantee: Guarantee,
                   path: Optional[str] = None, table: Optional[str] = None, if_exists: str = "error",
                   description: Optional[TableDescription] = None, small: bool = False) -> tuple[str, int]:
    """Commit ``df`` as one new version of a release; return (its location, the version).

    The location is ``path`` as given, or the catalog table's location.

    Parameters
    ----------
    df : the rows to publish, already materialized (noise is never redrawn by a commit).
    system : one of :data:`SYSTEMS`.
    provenance : the system's public facts; stamped by :func:`stamp_provenance`.
    guarantee : the release's guarantee, as a sentence or a dict of sentences.
    path, table : the target: a Delta folder or a catalog table name (exactly one).
    if_exists : ``"error"`` or ``"new-version"``.
    description : the table's description, properties and column comments (public facts only).
    small : ``df`` is read in one task without an exchange (a public count says so): a new version is
        committed in fewer Spark jobs (:func:`fragrelease.jobs.storage.delta.commit_with_spark`).

    Raises
    ------
    ConfigError
        A bad system, an empty guarantee, not exactly one target, a bad ``if_exists``.
    ReleaseExistsError, SchemaMismatchError, DeltaWriteError, TableWriteError, ConcurrentCommitError
        As :func:`fragrelease.jobs.storage.commit_delta` and :func:`fragrelease.jobs.storage.catalog.commit_table`.
    """
    _target(path, table)
    if if_exists not in IF_EXISTS:
        raise ConfigError(f"if_exists must be 'error' or 'new-version', not {if_exists!r}")
    stamped = stamp_provenance(provenance, system=system, guarantee=guarantee)
    if table is not None:
        return commit_table(df, table, provenance=stamped, if_exists=if_exists, description=description, small=small)
    assert path is not None  # checked by _target
    return path, commit_delta(df, path, provenance=stamped, if_exists=if_exists, description=description, small=small)
