"""``fragrelease ledger``: verify and list an owner's budget ledger (no Spark).

    fragrelease ledger check PATH                              verify the log and every data file
    fragrelease ledger history PATH [--owner X] [--dataset Y]   one line per spend, with running totals

Registered in ``jobs/cli/__init__.py``. The reading and checking is
:mod:`fragrelease.jobs.idpir.ledger` (delta-rs and pyarrow only); this module only prints. A damaged
ledger exits with status 2 and one line naming the ledger and the damage
(:class:`fragrelease.errors.LedgerDamagedError`).
"""
from __future__ import annotations

from typing import Optional

import typer

from ._common import console

PATH = typer.Argument(..., help="The ledger's folder (a Delta table; s3a://, abfss:// or a local path).")


def check(path: str = PATH):
    """Verify a ledger (log versions contiguous, every commit and data file readable) and print one line."""
    from ..idpir.ledger import check_ledger

    summary = check_ledger(path)
    extra = (f"; {len(summary.unreferenced)} data files no version references (a spend killed before its "
             f"commit, or a removed commit: compare with a backup), e.g. {summary.unreferenced[0]}"
             if summary.unreferenced else "")
    console.print(f"budget ledger {summary.path!r}: OK, {len(summary.spends)} spends in {summary.versions} "
                  f"versions (0..{summary.version}){extra}", highlight=False, markup=False)


def history(path: str = PATH,
            owner: Optional[str] = typer.Option(None, "--owner", help="Only this owner's spends."),
            dataset: Optional[str] = typer.Option(None, "--dataset", help="Only spends on this dataset.")):
    """Print every spend of a verified ledger: version, recorded_at, owner, dataset, plan id, ε and the
    running total of its owner on its dataset."""
    from ..idpir.ledger import ledger_history

    for spend, total in ledger_history(path, owner=owner, dataset=dataset):
        console.print(f"version={spend.version}  recorded_at={spend.recorded_at}  owner={spend.owner}  "
                      f"dataset={spend.dataset}  plan={spend.plan_id}  ε={spend.epsilon}  total={total}",
                      highlight=False, markup=False)
