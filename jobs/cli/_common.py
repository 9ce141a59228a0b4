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
