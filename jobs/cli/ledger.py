"""``fragrelease ledger``: verify and list an owner's budget ledger (no Spark).

    fragrelease ledger check PATH                              verify the log, every data file, the hash
                                                               chain and this machine's anchor
    fragrelease ledger history PATH [--owner X] [--dataset Y]   one line per spend, with running totals

Registered in ``jobs/cli/__init__.py``. The reading and checking is
:mod:`fragrelease.jobs.protocol.ledger` (delta-rs and pyarrow only); this module only prints. A damaged
ledger exits with status 2 and one line naming the ledger and the damage
(:class:`fragrelease.errors.LedgerDamagedError`), a ledger rolled back behind this machine's anchor
too (its last commit removed: the line names the owner and the missing version).
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

import typer

from ._common import console
from .machine import JSON_HELP, begin, emit

PATH = typer.Argument(..., help="The ledger's folder (a Delta table; s3a://, abfss:// or a local path).")


def check(path: str = PATH, json_out: bool = typer.Option(False, "--json", help=JSON_HELP)):
    """Verify a ledger (log versions contiguous, every commit and data file readable, the hash chain and
    running totals, this machine's anchor) and print one line (``--json``: one JSON document)."""
    from ..protocol.ledger import check_ledger

    begin(json_out)
    summary = check_ledger(path)
    extra = (f"; {len(summary.unreferenced)} data files no version references (a spend killed before its "
             f"commit, or a removed commit: compare with a backup), e.g. {summary.unreferenced[0]}"
             if summary.unreferenced else "")
    console.print(f"budget ledger {summary.path!r}: OK, {len(summary.spends)} spends in {summary.versions} "
                  f"versions (0..{summary.version}); {chain_state(summary)}{extra}", highlight=False, markup=False)
    if json_out:
        emit(_check_document(summary))


def _spend_data(spend, total=None) -> Mapping[str, Any]:
    """One spend as data; ``total``: the running total to show (default: the one the chain records, if any)."""
    shown = spend.total if total is None else total
    return {"version": spend.version, "recorded_at": spend.recorded_at, "owner": spend.owner,
            "dataset": spend.dataset, "plan_id": spend.plan_id, "epsilon": str(spend.epsilon),
            "total": None if shown is None else str(shown)}


def _check_document(summary) -> Mapping[str, Any]:
    """``ledger check --json``: the verdict ``OK``, the versions, every spend and the chain and anchor."""
    chain = summary.chain
    anchor = chain.anchor if chain is not None else None
    return {"command": "ledger check", "path": summary.path, "verdict": "OK", "version": summary.version,
            "versions": summary.versions, "spends": [_spend_data(s) for s in summary.spends],
            "chain": None if chain is None else {
                "chained": len(chain.chained), "legacy": chain.legacy, "head": chain.head,
                "head_version": chain.chained[-1].version if chain.chained else None},
            "anchor": None if anchor is None else {"version": anchor.version, "chain": anchor.chain},
            "unreferenced": list(summary.unreferenced), "text": chain_state(summary)}


def chain_state(summary) -> str:
    """The hash chain and this machine's anchor of a checked ledger, in words."""
    chain = summary.chain
    chained = chain.chained
    if chained:
        state = (f"hash chain intact over {len(chained)} spends, head version {chained[-1].version} "
                 f"({chain.head[:12]})")
    else:
        state = "no spend chained yet"
    if chain.legacy:
        state += f"; {chain.legacy} spends from before the chain (0.16.0 or earlier)" + (
            f", covered from version {chained[0].version} on" if chained else ", not covered until the next spend")
    anchor = chain.anchor
    if anchor is None:
        return f"{state}; no anchor on this machine (it recorded no spend here: a removed last commit is not detected here)"
    later = sum(1 for s in chained if s.version > anchor.version)
    where = "at the head" if later == 0 else f"{later} spends behind the head (recorded elsewhere since)"
    return f"{state}; this machine's anchor: version {anchor.version}, in the chain, {where}"


def history(path: str = PATH,
            owner: Optional[str] = typer.Option(None, "--owner", help="Only this owner's spends."),
            dataset: Optional[str] = typer.Option(None, "--dataset", help="Only spends on this dataset."),
            json_out: bool = typer.Option(False, "--json", help=JSON_HELP)):
    """Print every spend of a verified ledger: version, recorded_at, owner, dataset, plan id, ε and the
    running total of its owner on its dataset (``--json``: one JSON document, ``entries``)."""
    from ..protocol.ledger import ledger_history

    begin(json_out)
    entries = ledger_history(path, owner=owner, dataset=dataset)
    if json_out:
        emit({"command": "ledger history", "path": path, "owner": owner, "dataset": dataset,
              "entries": [_spend_data(spend, total) for spend, total in entries]})
    for spend, total in entries:
        console.print(f"version={spend.version}  recorded_at={spend.recorded_at}  owner={spend.owner}  "
                      f"dataset={spend.dataset}  plan={spend.plan_id}  ε={spend.epsilon}  total={total}",
                      highlight=False, markup=False)
