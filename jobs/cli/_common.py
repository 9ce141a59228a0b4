"""What every ``fragrelease`` command module shares: one console, the ``--master``, ``--source-table`` and
``--output-table`` options, the configuration checked for a party before Spark (:func:`_config`) and the
session (:func:`_spark`). Commands call ``_common._config`` and ``_common._spark`` through this module,
so that a test replaces them in one place."""
from __future__ import annotations

from typing import Optional, Sequence

import typer
from rich.console import Console

from fragrelease.protocol.config import ReleaseConfig, SourceConfig, load_config

#: Standard output of every command (tables, summaries, progress). ``soft_wrap``: long lines are
#: left to the terminal, never broken inside a path or a table name that a user copies.
console = Console(stderr=False, soft_wrap=True)
#: Standard error: the one-line message of an expected error (one line, whatever its length).
err = Console(stderr=True, soft_wrap=True)

#: ``--master``: the Spark master of the session a command embeds (``None``: the session's default).
MASTER = typer.Option(None, "--master", help="Spark master for an embedded session, e.g. local[2].")
SOURCE_TABLE = typer.Option(None, "--source-table", help="Read this owner's fragment from this catalog table (db.name).")
OUTPUT_TABLE = typer.Option(None, "--output-table", help="Commit the release to this catalog table (db.name).")


#: The global ``--verbose`` (1) / ``--quiet`` (-1) setting of the running command (0: neither).
_verbosity = 0


def set_verbosity(value: int) -> None:
    global _verbosity
    _verbosity = value


def verbosity() -> int:
    return _verbosity


def progress_display():
    """How a long command shows its progress: a context manager giving a ``progress=`` callback.

    On a terminal (and not ``--quiet``): rich's live status line, updated as each step starts. Else
    (job logs, notebooks, redirected output): None, so the steps go to the logger
    ``fragrelease.progress``, one line per finished step with its elapsed time.
    """
    from contextlib import contextmanager

    @contextmanager
    def display():
        if _verbosity < 0 or not console.is_terminal:
            yield None
            return
        with console.status("starting") as status:
            yield lambda event: status.update(str(event))

    return display()


def _config(path: str, party: str = "run", owner: Optional[str] = None, *, source_table: Optional[str] = None,
            output_table: Optional[str] = None, checks: Optional[list[str]] = None, **overrides) -> ReleaseConfig:
    """The validated configuration, checked for ``party`` before any SparkSession exists.

    ``source_table`` (this owner's fragment) and ``output_table`` (the release) replace the
    configuration's paths with catalog table names (:func:`fragrelease.jobs.storage.with_table_names`).
    ``checks``: each check that passed is appended to it by name (``validate --json``): ``configuration``
    (the file, its keys and values), ``preflight`` (the party's checks before Spark:
    :func:`fragrelease.jobs.protocol.preflight.preflight`), ``local_catalog`` (``run``, ``aggregator``: the
    catalog table's database), ``work_dir`` (``owner``, ``aggregator``: work_dir is this release's).

    Raises ConfigError naming the key and value (see :mod:`fragrelease.jobs.protocol.preflight`).
    """
    from ..protocol.preflight import preflight
    from ..storage import with_table_names

    done = checks if checks is not None else []
    cfg = with_table_names(load_config(path, overrides), owner=owner, source_table=source_table,
                           output_table=output_table)
    done.append("configuration")
    preflight(cfg, party=party, owner=owner, config_path=path)  # type: ignore[arg-type]
    done.append("preflight")
    if party in ("run", "aggregator"):  # the release's catalog table: its database, before Spark starts
        from ..storage import check_local_catalog

        check_local_catalog(cfg, path)
        done.append("local_catalog")
    if party in ("owner", "aggregator"):  # these steps write into work_dir: it must be this release's
        from ..protocol.workspace import claim_work_dir

        claim_work_dir(cfg, path)
        done.append("work_dir")
    return cfg


def _declared_inputs(cfg: ReleaseConfig) -> list[SourceConfig]:
    """The fragments ``fragrelease run`` reads: every owner's source, or the one table a simulation cuts."""
    if cfg.simulated:
        return [cfg.source] if cfg.source is not None else []
    return [o.source for o in cfg.owners if o.source is not None]


def _spark(master: Optional[str], cfg: Optional[ReleaseConfig] = None, *, catalog: bool = False,
           commits: bool = False, inputs: Sequence[SourceConfig] = ()):
    """The session; with a persistent catalog when ``catalog`` or ``cfg`` names a catalog table. ``commits``
    (the steps that commit the release): the database of ``cfg``'s ``output_table`` is made sure of before any
    data is read (:func:`fragrelease.jobs.storage.ensure_database`). ``inputs``: the fragments the step reads
    (``run``: :func:`_declared_inputs`; an owner's steps: its own); when they are small local files or folders,
    a new embedded session gets the small-input JVM options (:func:`fragrelease.jobs.session.inputs_are_small`,
    file sizes only, never written anywhere)."""
    from ..session import get_spark, inputs_are_small
    from ..storage import ensure_database, uses_catalog

    small = bool(inputs) and inputs_are_small([s.path if s.table is None else None for s in inputs])
    spark = get_spark("fragrelease", master, catalog=catalog or (cfg is not None and uses_catalog(cfg)),
                      small_inputs=small)
    if cfg is not None and commits:
        ensure_database(spark, cfg)
    return spark
