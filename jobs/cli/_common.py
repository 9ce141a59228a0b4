"""What every ``fragrelease`` command module shares: one console and one ``--master`` option."""
from __future__ import annotations

import typer
from rich.console import Console

#: Standard output of every command (tables, summaries, progress).
console = Console(stderr=False)
#: Standard error: the one-line message of an expected error.
err = Console(stderr=True)

#: ``--master``: the Spark master of the session a command embeds (``None``: the session's default).
MASTER = typer.Option(None, "--master", help="Spark master for an embedded session, e.g. local[2].")
