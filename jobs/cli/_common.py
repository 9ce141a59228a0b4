"""What every ``fragrelease`` command module shares: one console and one ``--master`` option."""
from __future__ import annotations

import typer
from rich.console import Console

#: Standard output of every command (tables, summaries, progress). ``soft_wrap``: long lines are
#: left to the terminal, never broken inside a path or a table name that a user copies.
console = Console(stderr=False, soft_wrap=True)
#: Standard error: the one-line message of an expected error (one line, whatever its length).
err = Console(stderr=True, soft_wrap=True)

#: ``--master``: the Spark master of the session a command embeds (``None``: the session's default).
MASTER = typer.Option(None, "--master", help="Spark master for an embedded session, e.g. local[2].")


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
