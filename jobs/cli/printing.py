"""What the commands print of a release kind: its blocks of text (:class:`fragrelease.protocol.kind.Line`,
:class:`~fragrelease.protocol.kind.TextTable`) as the kind wrote them, and the run's summary.

The texts are the kind's (:class:`fragrelease.protocol.kind.ReleaseKind`); this module only renders
them with rich, so the command line imports no kind and never asks which kind it prints.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from rich.table import Table

from fragrelease.protocol.config import ReleaseConfig
from fragrelease.protocol.kind import Block, TextTable, release_kind

from ._common import console

if TYPE_CHECKING:  # the Spark side is imported only when a command needs it
    from ..api_common import ReleaseResult


def _print_wide(table: Table) -> None:
    """Print ``table`` never squeezed below its natural width (a narrow terminal or a log file would cut the figures)."""
    from rich.console import Console
    from rich.measure import Measurement

    need = Measurement.get(console, console.options.update(width=10_000), table).maximum
    Console(file=console.file, width=max(console.width, need), quiet=console.quiet, highlight=False,
            force_terminal=console.is_terminal).print(table)


def _print_table(t: TextTable) -> None:
    """A preview's table (a light rule, never squeezed) or a summary's titled table (rich's default box)."""
    if t.style == "summary":
        table = Table(title=t.title)
        for h in t.header:
            table.add_column(h, justify="left" if h in t.left else "right")
        for row in t.rows:
            table.add_row(*row)
        console.print(table)
        return
    from rich import box

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for h in t.header:
        table.add_column(h, justify="left" if h in t.left else "right", no_wrap=True)
    for row in t.rows:
        table.add_row(*row)
    _print_wide(table)


def print_blocks(blocks: Sequence[Block]) -> None:
    """Print a kind's blocks in order: each line as the kind marked it up, each table as its style says."""
    for block in blocks:
        if isinstance(block, TextTable):
            _print_table(block)
        else:
            console.print(block.text, highlight=block.highlight, soft_wrap=block.soft_wrap)


def print_summary(cfg: ReleaseConfig, result: ReleaseResult) -> None:
    """The run summary: where the release went, then the kind's summary (IR: each owner's ε_j, the guarantee
    and the noise table; synthetic: the ε split, the cliques and the guarantee).

    Public parameters only, except MeanSSE (``evaluate``), which is computed from the owners' original
    data and is marked private wherever it is printed."""
    console.print(f"[bold]Release written[/bold] to Delta table {result.path} (version {result.version})")
    if result.report:
        console.print(f"public report: {shown_path(result.report)}", highlight=False)
    print_blocks(release_kind(cfg.linkage).summary_blocks(cfg, result, owner_reports=owner_reports(cfg)))


def owner_reports(cfg: ReleaseConfig) -> list[tuple[str, str]]:
    """(owner, path) of each owner's private report (its own data against its protected copy, in its own
    folder) when the configuration writes them, else none."""
    if not cfg.reports:
        return []
    from ..protocol.layout import owner_report_path

    return [(party.name, shown_path(str(owner_report_path(cfg.name, party)))) for party in cfg.owners]


def shown_path(path: str) -> str:
    """``path`` as the summary prints it: a local path made absolute (as the table's path is), a URI
    (``s3a://``, ``dbfs:/``, ``file:``) as written."""
    import os

    from ..protocol.preflight import is_local_path

    return os.path.abspath(path) if is_local_path(path) and not path.startswith("file:") else path
