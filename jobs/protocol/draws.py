"""Draw once: an owner's private record of what it drew for a plan, kept and re-published, never redrawn.

Why (docs/privacy.md, "Draw once"): the ε an owner spends covers one draw of its noisy output per
plan. Whoever can write the shared ``work_dir`` (the aggregator, by design) can delete a published
message or table; if the owner then decided from ``work_dir`` alone what is due, it would draw
again, and two independent draws of the same records cost 2ε where the ledger (if there is one)
records ε. So the owner decides from its **own private records**, whatever ``work_dir`` or a ledger
holds. Under its private folder (:attr:`fragrelease.jobs.protocol.context.OwnerPaths.private_dir`;
folders 0700, files 0600):

- ``draws/nonces/<nonce>``: the id of the plan that consumed this metadata nonce, written once by
  that plan's first claim; a plan carrying a consumed nonce is refused (a replayed or copied plan);
- ``draws/<plan id>/<step>.claim``: the claim, written once (exclusive create, fsynced with its folder)
  **before** the ledger records the step's spend; ``<step>`` is ``protect`` (an IR protection),
  ``round-1`` or ``round-2`` (a synthetic release's rounds);
- ``draws/<plan id>/<step>.kept``: the step's output, written once (atomically, fsynced) **before**
  anything is shared: a synthesis round's signed message, byte for byte; a protection's record of
  its kept Delta tables (``draws/<plan id>/tables-<id>/``, the very files it publishes) and its
  signed manifest (:mod:`fragrelease.jobs.protocol.publish`).

The rules (:func:`spend_once`, and the callers in :mod:`fragrelease.jobs.protocol.owner` and
:mod:`fragrelease.jobs.synthesis.owner`):

1. a kept output is re-published, never drawn again (no spend);
2. no kept output and no claim: the nonce is consumed, the claim written, the spend recorded, then
   the draw; a ledger that already records the spend without a claim here is a replayed or copied
   plan and is refused (:class:`fragrelease.errors.PlanAlreadySpentError`);
3. a claim without a kept output: an earlier attempt stopped before keeping its output, so no
   output of it ever left the owner (the private copy is written before anything is shared); the
   step draws again, which is safe, but spends again only if the ledger does not record the spend
   yet (the earlier attempt stopped between its claim and its spend).

Local private folders get ``O_EXCL``/``link(2)`` exclusivity and fsync
(:func:`fragrelease.private_files.write_once`); a remote private folder (a URI) is written through
the storage layer without exclusivity (one owner's step must not run twice at once; docs/known-limitations.md).
"""
from __future__ import annotations

import json
import logging
import posixpath
from dataclasses import dataclass
from datetime import datetime, timezone
from fractions import Fraction
from typing import Optional

from fragrelease.budget import check_lifetime
from fragrelease.errors import ManifestMismatchError, PlanAlreadySpentError, ReleaseExistsError
from fragrelease.private_files import write_once
from fragrelease.protocol.config import LedgerConfig
from fragrelease.protocol.messages import Plan

from ..storage import file_exists, read_text, register, table_location, write_text
from .context import OwnerContext
from .ledger import check_spend, record_spend, records_plan, spent
from .workspace import _local, ensure_private_dir

log = logging.getLogger(__name__)

#: The folder of the draw records under an owner's private folder.
DRAWS = "draws"


def ledger_location(spark, ledger: LedgerConfig) -> str:
    """The Delta root of an owner's ledger: its ``path``, or the location of its catalog ``table``."""
    if ledger.table is None:
        assert ledger.path is not None  # a ledger has a path or a table (configuration check)
        return ledger.path
    return table_location(spark, ledger.table)


@dataclass(frozen=True)
class DrawStep:
    """One owner's draw records of one step of one plan: ``folder`` (``draws/<plan id>``), ``step``."""

    owner: str
    plan_id: str
    folder: str
    step: str

    @property
    def claim(self) -> str:
        return posixpath.join(self.folder, f"{self.step}.claim")

    @property
    def kept(self) -> str:
        return posixpath.join(self.folder, f"{self.step}.kept")

    def claimed(self) -> bool:
        return file_exists(self.claim)

    def kept_bytes(self) -> Optional[bytes]:
        """The kept output's bytes, or None when the step has kept none."""
        if not file_exists(self.kept):
            return None
        return read_text(self.kept).encode("utf-8")

    def keep(self, data: bytes) -> bool:
        """Keep ``data`` as this step's output, once; True when this call kept it, False when an earlier
        (or concurrent) attempt had (its output stays: the caller re-publishes that one)."""
        return _write_once(self.kept, data)


def draw_step(ctx: OwnerContext, plan_id: str, step: str) -> DrawStep:
    """The draw records of ``step`` of plan ``plan_id`` in the owner's (``ctx``) private folder (nothing written)."""
    folder = posixpath.join(ctx.paths.private_dir, DRAWS, _safe(plan_id))
    return DrawStep(owner=ctx.name, plan_id=plan_id, folder=folder, step=step)


def _safe(plan_id: Optional[str], what: str = "plan id") -> str:
    """A plan id (or nonce) as one file name (UUIDs and hex nonces; anything else is refused, never used as a path)."""
    if not plan_id or "/" in plan_id or "\\" in plan_id or plan_id.startswith("."):
        raise ManifestMismatchError(f"{what} {plan_id!r} cannot name a folder; the plan was not written by fragrelease")
    return plan_id


def _write_once(path: str, data: bytes) -> bool:
    local = _local(path)
    if local is None:  # a remote private folder: the store's writes, without exclusivity
        if file_exists(path):
            return False
        write_text(path, data.decode("utf-8"))
        return True
    ensure_private_dir(posixpath.dirname(local))
    return write_once(local, data)


def _nonce_record(ctx: OwnerContext, plan: Plan) -> str:
    return posixpath.join(ctx.paths.private_dir, DRAWS, "nonces", _safe(plan.owner(ctx.name).nonce, "nonce"))


def check_nonce_free(ctx: OwnerContext, plan: Plan) -> None:
    """Refuse ``plan`` when its nonce of this owner was consumed by another plan's spend.

    Raises
    ------
    ManifestMismatchError
        ``owner 'a': plan <id> carries the metadata nonce that plan <other> consumed ...``.
    """
    path = _nonce_record(ctx, plan)
    if not file_exists(path):
        return
    used = read_text(path).strip()
    if used != plan.plan_id:
        raise ManifestMismatchError(f"owner {ctx.name!r}: plan {plan.plan_id} carries the metadata nonce that plan {used} "
                                    f"consumed (kept at {path!r}); a replayed or copied plan is refused: run the owner "
                                    "metadata step, then the aggregator plan step")


def _consume_nonce(ctx: OwnerContext, plan: Plan) -> None:
    path = _nonce_record(ctx, plan)
    if not _write_once(path, (plan.plan_id + "\n").encode("utf-8")):
        check_nonce_free(ctx, plan)  # consumed already: by this plan (another step of it), or refused


@dataclass(frozen=True)
class Spend:
    """A step's spend in the owner's ledger: its ledger plan id, ε, and the room the ledger must have first."""

    dataset: str
    ledger_plan_id: str
    epsilon: Fraction
    room_for: Fraction


def _recorded(spark, ctx: OwnerContext, spend: Spend) -> tuple[Optional[str], bool]:
    ledger = ctx.owner.ledger
    if ledger is None:
        return None, False
    where = ledger_location(spark, ledger)
    return where, records_plan(where, ctx.name, spend.dataset, spend.ledger_plan_id)


def _replayed(ctx: OwnerContext, step: DrawStep, spend: Spend, where: str) -> PlanAlreadySpentError:
    return PlanAlreadySpentError(
        f"owner {ctx.name!r} already spent on plan {spend.ledger_plan_id!r} (dataset {spend.dataset!r}, budget ledger "
        f"{where!r}) but holds no claim of it at {step.claim!r}; a plan is spent once (a replayed or copied plan, or "
        "another private folder): ask the aggregator for a new plan")


def check_spend_once(spark, ctx: OwnerContext, plan: Plan, step: DrawStep, spend: Spend) -> None:
    """Every check of :func:`spend_once` without writing anything (the local driver runs it for every
    owner before any owner spends). A kept output needs none (it is re-published, no spend).

    Raises what :func:`spend_once` raises before its spend.
    """
    if step.kept_bytes() is not None:
        return
    check_nonce_free(ctx, plan)
    where, recorded = _recorded(spark, ctx, spend)
    if where is None:
        return
    claimed = step.claimed()
    if recorded and not claimed:
        raise _replayed(ctx, step, spend, where)
    if not recorded:
        ledger = ctx.owner.ledger
        assert ledger is not None
        check_lifetime(spent(where, ctx.name, spend.dataset), spend.room_for, ledger.lifetime, owner=ctx.name,
                       dataset=spend.dataset)
        check_spend(where, owner=ctx.name, dataset=spend.dataset, plan_id=spend.ledger_plan_id,
                    epsilon=spend.epsilon, lifetime=ledger.lifetime)


def spend_once(spark, ctx: OwnerContext, plan: Plan, step: DrawStep, spend: Spend) -> bool:
    """Claim ``step`` of ``plan`` and record its spend once, before the caller draws; True when this call spent.

    No claim yet: the plan's nonce is consumed, the claim written exclusively, then the spend recorded
    (the ledger's own check and append: :func:`fragrelease.jobs.protocol.ledger.record_spend`). A claim
    of an earlier attempt: the spend that attempt recorded is reused; only a spend it did not record
    yet is recorded now. The caller draws after this returns and keeps its output before sharing it.

    Raises
    ------
    PlanAlreadySpentError
        The ledger records the spend but this owner holds no claim of the step (a replayed or copied
        plan, another private folder).
    ManifestMismatchError
        The plan's nonce was consumed by another plan (:func:`check_nonce_free`).
    ReleaseExistsError
        Another run of this owner's step claimed the step at the same time.
    BudgetExceededError, LedgerDamagedError, LedgerStorageError
        From the ledger; nothing was spent.
    """
    where, recorded = _recorded(spark, ctx, spend)
    ledger = ctx.owner.ledger
    if where is not None and not recorded:  # room first: a refused spend leaves no claim behind
        assert ledger is not None
        check_lifetime(spent(where, ctx.name, spend.dataset), spend.room_for, ledger.lifetime, owner=ctx.name,
                       dataset=spend.dataset)
    if not step.claimed():
        if where is not None and recorded:
            raise _replayed(ctx, step, spend, where)
        _consume_nonce(ctx, plan)
        claim = {"owner": ctx.name, "plan_id": plan.plan_id, "step": step.step, "ledger_plan_id": spend.ledger_plan_id,
                 "epsilon": str(spend.epsilon), "claimed_at": datetime.now(timezone.utc).isoformat()}
        if not _write_once(step.claim, json.dumps(claim, sort_keys=True).encode("utf-8")):
            raise ReleaseExistsError(f"owner {ctx.name!r}: another run of this owner's step claimed {step.step} of plan "
                                     f"{plan.plan_id} at the same time ({step.claim!r}); run the step again once it ends")
    elif recorded:
        log.info("owner %s: %s of plan %s was claimed and spent by an earlier attempt that kept no output; drawing "
                 "without spending again", ctx.name, step.step, plan.plan_id)
        return False
    if where is None:
        return False
    assert ledger is not None
    record_spend(where, owner=ctx.name, dataset=spend.dataset, plan_id=spend.ledger_plan_id, epsilon=spend.epsilon,
                 lifetime=ledger.lifetime)
    if ledger.table is not None:
        register(spark, ledger.table, where, append_only=True)
    return True


def drawn_steps(ctx: OwnerContext, plan_id: str, steps: tuple[str, ...]) -> tuple[str, ...]:
    """Which of ``steps`` of plan ``plan_id`` the owner (``ctx``) kept an output of (re-published, no spend)."""
    return tuple(s for s in steps if file_exists(draw_step(ctx, plan_id, s).kept))
