"""Checks of a release configuration that need no data, run before a SparkSession exists.

:func:`fragrelease.protocol.config.config_from_dict` already refuses what the configuration alone
shows (ε, the mechanism, k ≥ 3 and k ≤ every owner's declared ``rows``, owner keys). This module
adds what needs the dataset schema, the vendored tables' sizes or the local file system, but still
no data: the dataset resolves, the schema has an id column, vertical owners list released attributes
of the schema and no attribute twice, simulated row counts add up to the built-in table, k is at
most a built-in table's size, the owner named on a command line is in the configuration, the
owners' pseudonym keys can be read (:mod:`fragrelease.jobs.protocol.keys`), every local source path
exists (URIs such as ``s3a://``, ``abfss://`` or ``dbfs:/`` are not checked: that needs the cluster's
credentials) and is a file or a folder (not a FIFO), that ``work_dir`` holds no user file and belongs
to this release (:mod:`fragrelease.jobs.protocol.workspace`), that the output, ``work_dir``, the ledgers
and the private folders are not placed inside one another and that the party's existing private
folders are its alone (:mod:`fragrelease.jobs.protocol.placement`). It also warns, without refusing, when ε exceeds 10 per release
(:func:`fragrelease.validation.warn_if_large_epsilon`).

Which paths are checked depends on the party: ``run`` and ``split`` play every owner on this machine
and check every source; an owner's step checks only its own source (another owner's path is not
on this machine); the aggregator reads no source and no schema, and gets only the ε warning here
(the configuration itself was validated when it was loaded). ``run`` and the aggregator also check
a local ``output`` (:func:`check_output_path`: a file, other files, a ledger, another dataset's or
system's table, another release's uncommitted write, an existing release with ``if_exists: error``).

Source: docs/specification.md §3 (owners, fragments and the plan's checks, moved before Spark where
no data is needed).
"""
from __future__ import annotations

import os
from typing import Any, Literal, Optional

from fragrelease.errors import ConfigError
from fragrelease.protocol.config import OwnerConfig, ReleaseConfig
from fragrelease.protocol.fragmentation import fragmentation_of
from fragrelease.protocol.kind import release_kind
from fragrelease.validation import warn_if_large_epsilon

#: Records of each built-in table after cleaning (data/README.md; checked against the loaders in tests).
BUILTIN_ROWS: dict[str, int] = {"adult": 45_222, "adult-income": 45_222, "adult-income-train": 30_162, "wine": 6_497,
                                "wine-2max": 6_497}

Party = Literal["run", "split", "owner", "aggregator"]


def is_local_path(path: str) -> bool:
    """True for a path on this machine (``/data/x``, ``rel/x``, ``file:/x``); False for URIs (``s3a://``, ``dbfs:/``)."""
    if path.startswith("file:"):
        return True
    return "://" not in path and not path.startswith("dbfs:")


def _local(path: str) -> str:
    if path.startswith("file://"):
        return path[len("file://"):]
    if path.startswith("file:"):
        return path[len("file:"):]
    return os.path.expanduser(path)


def check_source_exists(path: str, *, key: str) -> None:
    """Refuse a local source path that does not exist or is neither a file nor a folder; URIs pass unchecked.

    Raises
    ------
    ConfigError
        The local path is missing, or is a FIFO, a socket or a device (reading it could wait for
        ever); the message names ``key`` and the path.
    """
    import stat

    from fragrelease.private_files import file_kind

    if not is_local_path(path):
        return
    try:
        mode = os.stat(_local(path)).st_mode
    except OSError:
        raise ConfigError(f"{key}: no such file or folder {path!r}") from None
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise ConfigError(f"{key}: {path!r} is {file_kind(mode)}, not a file or folder")


def check_output_path(cfg: ReleaseConfig) -> None:
    """Refuse a local ``output`` this release must not write into (no Spark; URIs and catalog tables are
    checked when the plan is issued): :func:`fragrelease.jobs.storage.check_output`.

    Raises
    ------
    OutputConflictError, ReleaseExistsError
        A file, a folder with other files, a ledger, another system's or dataset's table, a damaged
        log or another release's uncommitted write; an existing release with ``if_exists: error``.
    """
    from ..storage import check_output, release_target

    target = release_target(cfg)
    if target is not None and is_local_path(target.output):
        check_output(target, if_exists=cfg.if_exists)


def find_owner(cfg: ReleaseConfig, name: str) -> tuple[int, OwnerConfig]:
    """The index and configuration of owner ``name``.

    Raises
    ------
    ConfigError
        ``name`` is not an owner of ``cfg``; the message names it and lists the owners.
    """
    for i, o in enumerate(cfg.owners):
        if o.name == name:
            return i, o
    raise ConfigError(f"--owner: {name!r} is not an owner of configuration {cfg.name!r}; "
                      f"owners: {[o.name for o in cfg.owners]}")


def preflight(cfg: ReleaseConfig, *, party: Party = "run", owner: Optional[str] = None,
              config_path: Optional[str] = None) -> None:
    """Check ``cfg`` for ``party`` before any SparkSession exists; warn when ε > 10.

    Parameters
    ----------
    cfg : a validated configuration.
    party : ``run`` (every party on this machine), ``split`` (simulate fragments), ``owner`` (one
        owner's step, with ``owner``) or ``aggregator``.
    owner : the owner's name for ``party="owner"``.
    config_path : the configuration file, when the configuration was read from one: it must not lie
        inside ``work_dir`` either.

    Raises
    ------
    ConfigError
        An unknown dataset, a schema without id column, an owner not in the configuration, a
        vertical owner listing an unknown, unreleased or already assigned attribute, simulated
        rows that do not add up to the built-in table, k above a built-in table's size, or a
        missing local source; a user path (source, output, ledger, private folder or root, the
        configuration or schema file) inside ``work_dir``, an entry of ``work_dir`` that no release
        wrote, or a ``work_dir`` claimed by another release
        (:func:`fragrelease.jobs.protocol.workspace.check_work_dir`), ``work_dir`` inside the output or a
        ledger, the output and a ledger one inside the other
        (:func:`fragrelease.jobs.protocol.placement.check_placement`), an existing private folder of
        the party's that is a file or open to group or others
        (:func:`fragrelease.jobs.protocol.placement.check_private_dirs`); each message names the key and the value.
        (``OutputConflictError``, a ConfigError, and ``ReleaseExistsError``: for ``run`` and
        ``aggregator``, a local output this release must not write into, :func:`check_output_path`.) (``SigningKeyError``,
        a ConfigError: a configured ``signing_key`` that is unsafe, unreadable or does not match
        the owner's ``public_key``; ``run`` checks every owner's, ``owner`` its own.)
    PseudonymKeyError
        An owner's pseudonym key that cannot be read, is too short or, for an owner step alone, is
        neither configured nor generated (:func:`fragrelease.jobs.protocol.keys.check_pseudonym_key`).
    LedgerDamagedError, LedgerStorageError
        ``run`` (every owner's) or ``owner`` (its own): a ledger ``path`` that is damaged or cannot be
        read (:func:`fragrelease.jobs.protocol.ledger.check_intact`); a missing ledger is fine.
    """
    from fragrelease.schemas.datasets import BUILTIN_SCHEMAS, resolve_schema

    from .placement import check_private_dirs
    from .workspace import check_work_dir

    warn_if_large_epsilon(cfg.epsilon)
    check_work_dir(cfg, config_path)
    # an existing private folder open to group or others: refused before a key is written into it
    check_private_dirs(cfg, None if party in ("run", "split") else [owner] if party == "owner" and owner else [],
                       aggregator=party == "aggregator")
    if party in ("run", "owner") and cfg.risk_check is not None:
        from fragrelease.risk import anonymeter_evaluators

        anonymeter_evaluators()  # a configured risk check needs anonymeter: refused before Spark and any spend
    if party in ("run", "aggregator"):
        check_output_path(cfg)
    kind = release_kind(cfg.linkage)
    kind.check_party(cfg, party)  # what the kind needs on this party's machine (synthetic: mbi), before Spark
    if party == "aggregator":  # it reads only protocol messages: no schema file or source needed here
        return
    schema = resolve_schema(cfg.dataset)  # its error names the dataset
    kind.check_schema(cfg, schema.protected)  # the kind's checks of the released attributes (category counts, ...)
    if schema.id_column is None:
        raise ConfigError(f"dataset: schema {schema.name!r} declares no id column (role: id); fragments need a "
                          "unique record id to order ties and, for vertical releases, to join")
    if owner is not None:
        find_owner(cfg, owner)
    if fragmentation_of(cfg.fragmentation).by_attributes:
        seen: dict[str, str] = {}
        for i, o in enumerate(cfg.owners):
            for a in o.attributes or ():
                try:
                    attr = schema.attribute(a)
                except ConfigError:
                    raise ConfigError(f"owners[{i}].attributes: {a!r} is not an attribute of dataset {schema.name!r} "
                                      f"(owner {o.name!r}); attributes: {[x.name for x in schema.protected]}") from None
                if not attr.protected:
                    raise ConfigError(f"owners[{i}].attributes: {a!r} has role {attr.role!r}, which is not released "
                                      f"(owner {o.name!r})")
                if a in seen:
                    raise ConfigError(f"owners[{i}].attributes: {a!r} is also held by owner {seen[a]!r} "
                                      f"(owner {o.name!r}); vertical fragments must not overlap")
                seen[a] = o.name
    builtin_rows = builtin_size(cfg)
    if cfg.simulated and cfg.source is None and cfg.dataset not in BUILTIN_SCHEMAS and party in ("run", "split"):
        raise ConfigError(f"dataset: {cfg.dataset!r} is not built in: give 'source' (the table to simulate owners "
                          "from) or each owner's 'source'")
    if builtin_rows is not None:
        if not fragmentation_of(cfg.fragmentation).by_attributes:
            total = sum(o.rows or 0 for o in cfg.owners)
            if total != builtin_rows:
                raise ConfigError(f"owners[*].rows: add up to {total}, but the built-in dataset {cfg.dataset!r} has "
                                  f"{builtin_rows} records")
        kind.check_table_size(cfg, builtin_rows)  # IR: k at most the table's size
    from .context import owner_context
    from .keys import check_pseudonym_key

    if party == "run":  # the run generates the release key itself; configured keys must be readable
        for o in cfg.owners:
            check_pseudonym_key(owner_context(cfg, o.name, schema=schema), generated=True)
    elif party == "owner" and owner is not None:
        check_pseudonym_key(owner_context(cfg, find_owner(cfg, owner)[1].name, schema=schema),
                            generated=False)
    if party in ("run", "split"):
        if cfg.simulated and cfg.source is not None and cfg.source.path is not None:  # a catalog table: no path
            check_source_exists(cfg.source.path, key="source.path")
        for i, o in enumerate(cfg.owners):
            if o.source is not None and o.source.path is not None:
                check_source_exists(o.source.path, key=f"owners[{i}].source.path")
    elif party == "owner" and owner is not None:
        i, o = find_owner(cfg, owner)
        if o.source is not None and o.source.path is not None:
            check_source_exists(o.source.path, key=f"owners[{i}].source.path")
    # signed manifests: a configured private key file must be safe (mode, place) before Spark starts
    if party in ("run", "owner"):
        from .signatures import check_signing_keys

        check_signing_keys(cfg, None if party == "run" else [owner] if owner is not None else [])
        # a damaged budget ledger (a path; a catalog ledger's location needs Spark) before Spark starts
        from .ledger import check_intact

        for o in cfg.owners if party == "run" else [find_owner(cfg, owner)[1]] if owner is not None else []:
            if o.ledger is not None and o.ledger.path is not None:
                check_intact(o.ledger.path)


def builtin_size(cfg: ReleaseConfig) -> Optional[int]:
    """The public size of the built-in table a simulation of ``cfg`` cuts (:data:`BUILTIN_ROWS`), or None
    (owners' own sources, a configured ``source`` or a dataset that is not built in)."""
    return BUILTIN_ROWS.get(cfg.dataset) if cfg.simulated and cfg.source is None else None


def kind_preview(cfg: ReleaseConfig, *, rows: Optional[int] = None, threshold: float = 0.5,
                 suggestions: bool = True) -> Any:
    """The preview of ``cfg`` by its release kind (:meth:`fragrelease.protocol.kind.ReleaseKind.preview`), before
    Spark starts: the IR kinds' accuracy preview (:func:`fragrelease.idpir.preview.preview`, a
    :class:`~fragrelease.idpir.preview.ReleasePreview`), the synthetic kind's measurement noise
    (:func:`fragrelease.synthesis.preview.synthesis_preview`).

    Reads the configuration's schema (never data). ``rows`` is the record count of owners that declare
    none; a simulation of a built-in table without ``source`` uses the table's public size
    (:data:`BUILTIN_ROWS`). ``suggestions=False`` skips the search for what would fit. Raises ConfigError
    for an unknown dataset or what the kind refuses, and InvalidParameterError for a bad threshold or ``rows``.
    """
    from fragrelease.errors import InvalidParameterError
    from fragrelease.schemas.datasets import resolve_schema

    if rows is not None and rows < 1:
        raise InvalidParameterError(f"rows must be >= 1, not {rows}")
    return release_kind(cfg.linkage).preview(cfg, resolve_schema(cfg.dataset).protected, rows=rows,
                                             builtin_rows=builtin_size(cfg), threshold=threshold,
                                             suggestions=suggestions)


def run_warning(cfg: ReleaseConfig) -> Optional[str]:
    """The warning ``fragrelease run`` logs before any data is read
    (:meth:`fragrelease.protocol.kind.ReleaseKind.run_warning`; public quantities only), or None."""
    from fragrelease.schemas.datasets import resolve_schema

    return release_kind(cfg.linkage).run_warning(cfg, resolve_schema(cfg.dataset).protected,
                                                 builtin_rows=builtin_size(cfg))
