"""Resume, don't respend: what a single-command run does with the plan an earlier attempt left in ``work_dir``.

``fragrelease run`` and ``Release.run()`` (:func:`fragrelease.jobs.protocol.release.play_release`)
first ask :func:`run_decision` whether the work folder holds a plan to resume:

- ``plan.json`` is there, is the plan this aggregator issued into this ``work_dir`` (its private
  pin, :func:`fragrelease.jobs.protocol.aggregator.check_pinned_plan`), its terms still match the
  configuration (the aggregator's check and every owner's,
  :func:`fragrelease.protocol.plan_check.verified_spec`), and it carries every owner's latest
  metadata nonce (the owner's private copy): the run **resumes** it. Each owner's step then
  re-publishes what it kept privately (no spend), or draws what it has not drawn (spending ε_j
  once: an earlier attempt's spend is reused, :mod:`fragrelease.jobs.protocol.draws`), and the
  aggregator commits. A resumed plan is verified exactly as a new one: every owner checks its terms
  and its nonce again in its own step.
- that plan was **committed** already (a version of the output records its plan id): the run is
  refused (:class:`fragrelease.errors.ReleaseExistsError`, one line naming the version) unless a new
  plan is asked for (``--new-plan``, ``Release.run(new_plan=True)``);
- otherwise (no plan, a plan this aggregator did not pin, a changed configuration, a new metadata
  round, or ``new_plan``) the run makes a **new plan**, which spends ε_j again.

:func:`cost_line` says which, before anything is spent: ``resuming plan <id>: owner 'a' re-publishes
(no spend); owner 'b' draws (ε 1)`` or ``new plan <id> (<why>): owner 'a' spends ε_j = 1; ...``.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Mapping, Optional

from fragrelease.budget import format_epsilon
from fragrelease.errors import ConfigError, ManifestMismatchError, ProtocolError, ReleaseExistsError
from fragrelease.protocol.messages import Plan
from fragrelease.protocol.plan_check import verified_spec

from ..storage import file_exists, is_delta_table, read_text, table_exists, table_history
from .aggregator import check_pinned_plan, check_plan_against_config
from .context import AggregatorContext, OwnerContext
from .draws import draw_step, ledger_location
from .kind import kind_jobs
from .layout import read_message
from .ledger import records_plan


@dataclass(frozen=True)
class RunDecision:
    """What a run does: resume ``plan``, or make a new plan (``plan`` None) for the reason ``why``."""

    plan: Optional[Plan]
    why: str


def run_decision(spark, agg: AggregatorContext, owners: Mapping[str, OwnerContext], *,
                 new_plan: bool = False) -> RunDecision:
    """Resume the plan in ``work_dir`` or make a new one (module docstring); no data is read, nothing written.

    Raises
    ------
    ReleaseExistsError
        The plan in ``work_dir`` was committed already and ``new_plan`` is False: ``release '<name>'
        is already released (version N of <output>, plan <id>); ...``.
    """
    if new_plan:
        return RunDecision(None, "--new-plan")
    if not file_exists(agg.plan):
        return RunDecision(None, "no earlier attempt to resume")
    try:
        plan = read_message(Plan, agg.plan, party="aggregator", what="plan.json")
    except (ConfigError, ProtocolError):
        return RunDecision(None, "the plan.json in work_dir cannot be read")
    try:
        check_pinned_plan(agg, plan)
    except ManifestMismatchError:
        return RunDecision(None, f"plan {plan.plan_id} in work_dir was not issued by this aggregator")
    try:
        check_plan_against_config(plan, agg)
        for o in owners.values():
            verified_spec(plan, agg.config, agg.schema, o.name)
    except (ManifestMismatchError, ProtocolError):
        return RunDecision(None, f"the configuration changed since plan {plan.plan_id}")
    for o in owners.values():
        try:
            mine = read_text(o.paths.nonce).strip()
        except ConfigError:
            mine = None
        if plan.owner(o.name).nonce != mine:
            return RunDecision(None, f"owner {o.name!r} ran a new metadata round since plan {plan.plan_id}")
    version = committed_version(spark, agg, plan.plan_id)
    if version is not None:
        where = agg.config.output_table or agg.config.output
        raise ReleaseExistsError(f"release {agg.config.name!r} is already released (version {version} of {where}, plan "
                                 f"{plan.plan_id}); running it again publishes nothing new: use --new-plan "
                                 "(Release.run(new_plan=True)) to spend ε again on a new release")
    return RunDecision(plan, "")


def committed_version(spark, agg: AggregatorContext, plan_id: str) -> Optional[int]:
    """The version of the release output whose commit records plan ``plan_id``, or None."""
    cfg = agg.config
    if cfg.output_table is not None:
        from ..storage import table_location

        if not table_exists(spark, cfg.output_table):
            return None
        location = table_location(spark, cfg.output_table)
    else:
        assert cfg.output is not None  # a release has an output path or table (configuration check)
        location = cfg.output
    if not is_delta_table(location):
        return None
    for entry, provenance in table_history(location):
        if provenance.get("plan_id") == plan_id:
            return int(entry["version"])
    return None


def _owner_steps(spark, ctx: OwnerContext, plan: Plan) -> tuple[list[str], list[str], Fraction]:
    """What ``ctx``'s owner does on a resumed ``plan``: the steps it re-publishes, the steps it draws, and
    what those draws cost it (the ε its ledger does not record yet; without a ledger, its claims stand for it)."""
    steps = [(r.label, r.step, r.spend) for r in kind_jobs(plan.linkage).rounds(ctx, plan)]
    kept, drawn, cost = [], [], Fraction(0)
    for label, name, spend in steps:
        step = draw_step(ctx, plan.plan_id, name)
        if file_exists(step.kept):
            kept.append(label)
            continue
        drawn.append(label)
        if spend is None:  # a round that spends nothing
            continue
        if not step.claimed() or ctx.ledger is not None and not records_plan(
                ledger_location(spark, ctx.ledger), ctx.name, plan.dataset, spend.ledger_plan_id):
            cost += spend.epsilon  # not claimed yet, or claimed by an attempt that stopped before its spend
    return kept, drawn, cost


def cost_line(spark, decision: RunDecision, plan: Plan, owners: Mapping[str, OwnerContext]) -> str:
    """The one line a run prints before anything is spent: what the run costs each owner (module docstring)."""
    if decision.plan is None:
        each = "; ".join(f"owner {o.name!r} spends ε_j = {format_epsilon(Fraction(o.epsilon))}" for o in plan.owners)
        return f"new plan {plan.plan_id} ({decision.why}): {each}"
    parts = []
    for o in plan.owners:
        kept, drawn, cost = _owner_steps(spark, owners[o.name], plan)
        does = [f"re-publishes {' and '.join(kept)} (no spend)"] if kept else []
        if drawn:
            does.append(f"draws {' and '.join(drawn)} " + (f"(ε {format_epsilon(cost)})" if cost else
                                                          "(no spend: its earlier attempt's spend stands)"))
        parts.append(f"owner {o.name!r} " + ", ".join(does))
    return f"resuming plan {plan.plan_id}: " + "; ".join(parts)
