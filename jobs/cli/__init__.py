"""The ``fragrelease`` command line (typer + rich): every command is registered here.

This module is the table of contents. The commands live in one module per system; the party entry
points that spark-submit, Databricks ``python_wheel_task`` and the console scripts call are at the
bottom. Expected errors (bad configuration, refused fragments, an existing release) and a failed
Spark job (a lost executor, a task error: Spark's own cause) print one line and exit with status 2.
``python -m fragrelease.jobs.cli ARGS`` runs the same command line.

    fragrelease [--verbose|--quiet] [--version] COMMAND ...    global options (before the command)
    fragrelease run CONFIG                          every party in this driver, any kind   (cli.release)
    fragrelease validate CONFIG                     every check that needs no data (no Spark)
    fragrelease plan CONFIG                         the kind's preview, before any data is read
    fragrelease split CONFIG                        simulate the owners' fragments
    fragrelease owner metadata|protect|preview --config C --owner O   one data owner's step (cli.parties)
    fragrelease aggregator plan|release --config C                  the aggregator's step
    fragrelease work clear CONFIG                   remove only what an earlier run left in work_dir
    fragrelease inspect TABLE|--table NAME          versions and provenance of a release (cli.history)
    fragrelease keys generate --owner O --out DIR   an owner's manifest signing key pair  (cli.keys)
    fragrelease ledger check|history PATH           verify / list an owner's budget ledger (cli.ledger)
    fragrelease evaluate ...                        experiment: the paper's (ε, k) grid   (cli.experiments)
    fragrelease audit ...                           experiment: empirical privacy audit
    fragrelease publications simulate|anonymize|audit ...           (cli.publications)
    fragrelease diffgen run|two-party|experiment ...                (cli.diffgen)
    fragrelease tiers run|experiment ...                            (cli.tiers)

``--json`` after ``plan``, ``validate``, ``run``, ``inspect`` and ``ledger check|history``: one JSON document on
standard output, the human text on standard error; a failure's document names its class (:mod:`.machine`).

Logging: warnings and errors go to standard error; the progress of ``run`` goes to the logger
``fragrelease.progress`` (INFO) when standard output is not a terminal (job logs, notebooks,
redirection), and to rich's live status line on a terminal. ``--verbose`` adds fragrelease's INFO
and DEBUG records, ``--quiet`` leaves errors only. Spark's own log (its Java stack traces of a failed
job) is off below ``FATAL`` unless ``--verbose`` (``WARN``) or ``FRAGRELEASE_SPARK_LOG_LEVEL`` asks for it.

Experiment commands import :mod:`fragrelease.experiments` inside the command, so no release path
imports it.
"""
from __future__ import annotations

import logging
import sys
from typing import Any, Optional

import typer
from rich.markup import escape

from fragrelease.errors import FragReleaseError

from . import diffgen, experiments, history, keys, ledger, machine, parties, publications, release, tiers
from ._common import console, err, set_verbosity


def _click_class(name: str) -> Any:
    """Click's exception class ``name`` (``ClickException``, ``UsageError``): from the click package up to
    typer 0.25, from typer's own copy of click since 0.26, which no longer depends on click. Found among
    the bases of typer's public ``BadParameter``, so that nothing here imports click (issue 37)."""
    return next(c for c in typer.BadParameter.__mro__ if c.__name__ == name)


#: The base of typer's usage errors (missing option, bad value), and the usage error raised here.
_CLICK_EXCEPTION, _USAGE_ERROR = _click_class("ClickException"), _click_class("UsageError")

#: What ``fragrelease --help`` says the command line does: both release kinds.
HELP = ("Privacy-preserving releases of fragmented data on Spark: iDP-IR microaggregation (linkage linked or "
        "unlinked) or a whole-table synthetic release (linkage synthetic).")

app = typer.Typer(add_completion=False, no_args_is_help=True, help=HELP)

#: Log line format of the command line (standard error): time, level, logger, message.
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: The handler the command line puts on the root logger when the process has none (standard error).
_HANDLER = logging.StreamHandler(sys.stderr)
_HANDLER.setFormatter(logging.Formatter(LOG_FORMAT))


def _configure_output(verbosity: int) -> None:
    """Set logging and the console for ``verbosity``: -1 quiet (errors only), 0 default, 1 verbose.

    Default: WARNING for every logger, INFO for ``fragrelease.progress`` (one line per finished
    step, shown when stdout is not a terminal). Verbose: INFO for everything and DEBUG for
    fragrelease's own loggers. Quiet: ERROR for everything, and the console prints nothing (errors
    go to standard error through ``err``). The root logger's handler and level are set only when
    the process has no logging set up (a console run); a program embedding the CLI keeps its own.
    """
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(_HANDLER)
    if _HANDLER in root.handlers:  # the root logger is ours (a console run), not an embedding program's
        root.setLevel(logging.ERROR if verbosity < 0 else logging.INFO if verbosity > 0 else logging.WARNING)
    logging.getLogger("fragrelease").setLevel(
        logging.ERROR if verbosity < 0 else logging.DEBUG if verbosity > 0 else logging.NOTSET)
    logging.getLogger("fragrelease.progress").setLevel(logging.ERROR if verbosity < 0 else logging.DEBUG
                                                       if verbosity > 0 else logging.INFO)
    console.quiet = verbosity < 0
    set_verbosity(verbosity)
    from ..session import set_default_log_level

    # a failed Spark job prints one line; its Java stack traces only with --verbose
    set_default_log_level("WARN" if verbosity > 0 else "FATAL")


def _version(value: bool) -> None:
    if value:
        from fragrelease.version import __version__

        console.print(f"fragrelease {__version__}", highlight=False)
        raise typer.Exit(0)


@app.callback()
def _global_options(
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Also log fragrelease's INFO and DEBUG records."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print errors only (no progress, no summary)."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print 'fragrelease <version>' and exit."),
) -> None:
    """Privacy-preserving releases of fragmented data on Spark: iDP-IR microaggregation (linkage linked or
    unlinked) or a whole-table synthetic release (linkage synthetic)."""
    if verbose and quiet:
        raise _USAGE_ERROR("--verbose and --quiet exclude each other")
    _configure_output(1 if verbose else -1 if quiet else 0)


# releases over fragmented data, any kind (docs/specification.md §1-§4, §10)
app.command("run")(release.run)
app.command("split")(release.split)
owner_app = typer.Typer(no_args_is_help=True, help="Steps a data owner runs on its own fragment.")
owner_app.command("metadata")(parties.owner_metadata)
owner_app.command("protect")(parties.owner_protect)
owner_app.command("preview")(parties.owner_preview)
app.add_typer(owner_app, name="owner")
aggregator_app = typer.Typer(no_args_is_help=True, help="Steps the aggregator runs.")
aggregator_app.command("plan")(parties.aggregator_plan)
aggregator_app.command("release")(parties.aggregator_release)
app.add_typer(aggregator_app, name="aggregator")
work_app = typer.Typer(no_args_is_help=True, help="The release's shared work folder.")
work_app.command("clear")(release.work_clear)
app.add_typer(work_app, name="work")
app.command("inspect")(history.inspect)
app.command("validate")(release.validate)
app.command("plan")(release.plan)
app.command("evaluate")(experiments.evaluate)
app.command("audit")(experiments.audit)
# the owners' manifest signing keys (docs/known-limitations.md #7)
keys_app = typer.Typer(no_args_is_help=True, help="Data owners' Ed25519 keys that sign their manifests.")
keys_app.command("generate")(keys.generate)
app.add_typer(keys_app, name="keys")
# the owners' budget ledgers (docs/known-limitations.md, "Budget ledger scope")
ledger_app = typer.Typer(no_args_is_help=True, help="An owner's budget ledger: verify it, list its spends.")
ledger_app.command("check")(ledger.check)
ledger_app.command("history")(ledger.history)
app.add_typer(ledger_app, name="ledger")

# independent publications: cloning and the composition-attack audit (docs/specification.md §5)
publications_app = typer.Typer(no_args_is_help=True, help="Independent publications: cloning and the composition-attack audit (docs/specification.md §5).")
publications_app.command("simulate")(publications.simulate)
publications_app.command("anonymize")(publications.anonymize)
publications_app.command("audit")(publications.audit)
app.add_typer(publications_app, name="publications")

# DiffGen and two-party DistDiffGen (docs/specification.md §7)
diffgen_app = typer.Typer(no_args_is_help=True, help="DiffGen / two-party DistDiffGen releases (docs/specification.md §7).")
diffgen_app.command("run")(diffgen.run)
diffgen_app.command("two-party")(diffgen.two_party)
diffgen_app.command("experiment")(diffgen.experiment)
app.add_typer(diffgen_app, name="diffgen")

# tiered releases with increasing privacy (docs/specification.md §6)
tiers_app = typer.Typer(no_args_is_help=True, help="Tiered releases: a chain of tables with increasing privacy.")
tiers_app.command("run")(tiers.run)
tiers_app.command("experiment")(tiers.experiment)
app.add_typer(tiers_app, name="tiers")


def run_cli(argv: list[str], *, prog_name: Optional[str] = None) -> int:
    """Run the CLI with ``argv``; return the exit status (2 for expected errors). ``prog_name``: the program
    name usage lines print (the party entry points give ``fragrelease``, so that a usage line typed as shown
    runs: ``fragrelease owner protect [OPTIONS]``).

    With ``--json`` among the options, the human text goes to standard error and a failure also writes its
    JSON document on standard output (:mod:`.machine`); the exit status and the one ``error:`` line are the same.
    """
    as_json = machine.wants_json(argv)
    with machine.json_output(as_json):
        status, exc, message, cls = _run_app(argv, prog_name)
    if as_json and status != 0:
        machine.emit_error(exc, message or f"exit status {status}", cls=cls)
    return status


def _fail(message: str) -> None:
    err.print(f"[red]error:[/red] {escape(message)}", highlight=False)


def _run_app(argv: list[str], prog_name: Optional[str] = None
             ) -> tuple[int, Optional[BaseException], Optional[str], Optional[str]]:
    """Run the app: (exit status, the error, its one line without ``error: ``, its class when the error does
    not tell it) of :func:`run_cli`; prints the error line."""
    _configure_output(0)  # the global options (app's callback) change it before the command runs
    try:
        app(args=argv, standalone_mode=False, prog_name=prog_name)
    except FragReleaseError as exc:
        logging.getLogger(__name__).debug("the error's cause", exc_info=True)  # with -v: the traceback
        _fail(str(exc))
        return 2, exc, str(exc), None
    except ModuleNotFoundError as exc:  # pyspark is not a wheel dependency (fragrelease.jobs.require_pyspark)
        if (exc.name or "").split(".")[0] != "pyspark":
            raise
        from .. import MISSING_PYSPARK

        _fail(MISSING_PYSPARK)
        return 2, exc, MISSING_PYSPARK, "configuration"
    except typer.Exit as exc:
        return exc.exit_code, exc, None, "configuration"
    except SystemExit as exc:  # click usage errors
        return int(exc.code or 0), exc, None, "configuration"
    except _CLICK_EXCEPTION as exc:  # usage errors (missing option, bad value), raised by typer's click
        exc.show()
        return int(exc.exit_code or 2), exc, exc.format_message(), "configuration"
    except Exception as exc:  # noqa: BLE001 - a failed Spark job (lost executor, storage, out of memory): one line
        from ..storage import spark_failure_cause

        cause = spark_failure_cause(exc)
        if cause is None:
            raise
        logging.getLogger(__name__).debug("the failed Spark job", exc_info=True)  # with -v: the traceback
        message = f"a Spark job failed: {cause}"
        _fail(message)
        return 2, exc, message, "storage"
    return 0, None, None, None


def _argv(argv: Optional[list[str]]) -> list[str]:
    return sys.argv[1:] if argv is None else list(argv)


def main(argv: Optional[list[str]] = None) -> int:
    """Console script ``fragrelease`` and spark-submit's application (``scripts/spark_entry.py``)."""
    return run_cli(_argv(argv))


# ---------------------------------------------------------------- party entry points
def owner_main(argv: Optional[list[str]] = None) -> int:
    """A data owner's step for spark-submit: ``metadata|protect --config C --owner O``."""
    return run_cli(["owner", *_argv(argv)], prog_name="fragrelease")


def metadata_main(argv: Optional[list[str]] = None) -> int:
    """Databricks ``python_wheel_task`` entry point ``fragrelease-owner-metadata``: ``--config=C --owner=O``."""
    return owner_main(["metadata", *_argv(argv)])


def protect_main(argv: Optional[list[str]] = None) -> int:
    """Databricks ``python_wheel_task`` entry point ``fragrelease-owner-protect``: ``--config=C --owner=O``."""
    return owner_main(["protect", *_argv(argv)])


def aggregator_main(argv: Optional[list[str]] = None) -> int:
    """The aggregator's step for spark-submit: ``plan|release --config C``."""
    return run_cli(["aggregator", *_argv(argv)], prog_name="fragrelease")


def plan_main(argv: Optional[list[str]] = None) -> int:
    """Databricks ``python_wheel_task`` entry point ``fragrelease-aggregator-plan``: ``--config=C``."""
    return aggregator_main(["plan", *_argv(argv)])


def release_main(argv: Optional[list[str]] = None) -> int:
    """Databricks ``python_wheel_task`` entry point ``fragrelease-aggregator-release``: ``--config=C``."""
    return aggregator_main(["release", *_argv(argv)])
