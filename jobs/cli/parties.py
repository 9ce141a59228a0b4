"""``fragrelease`` commands of one party's step (docs/specification.md §3), whatever the release's kind,
registered in ``jobs/cli/__init__.py``.

    fragrelease owner metadata|protect|preview --config CONFIG --owner NAME
    fragrelease aggregator plan|release --config CONFIG

What an owner does in a round and how the aggregator combines is the kind's Spark half
(:func:`fragrelease.jobs.protocol.kind.kind_jobs`); an owner's preview of its own fragment is a step the
kind offers (:attr:`fragrelease.protocol.kind.ReleaseKind.owner_preview`, the IR kinds' noise
simulated on the owner's data) or refuses with its reason.
"""
from __future__ import annotations

from typing import Optional

import typer

from fragrelease.protocol.config import load_config

from . import _common
from ._common import MASTER, OUTPUT_TABLE, SOURCE_TABLE, console
from .printing import print_blocks


def owner_metadata(config: str = typer.Option(..., "--config"), owner: str = typer.Option(..., "--owner"),
                   master: Optional[str] = MASTER, source_table: Optional[str] = SOURCE_TABLE):
    """Validate the owner's fragment and write its public metadata for the aggregator."""
    from ..protocol.context import owner_context
    from ..protocol.fragment import FragmentContext, describe_source
    from ..protocol.owner import describe_fragment
    from ..storage import check_source_encoding

    cfg = _common._config(config, "owner", owner, source_table=source_table)
    ctx = owner_context(cfg, owner)  # no data: before Spark starts
    source = ctx.paths.fragment  # a UTF-16 CSV: said so from its first bytes, before Spark starts
    check_source_encoding(source, FragmentContext(ctx.name, describe_source(source)).where())
    meta = describe_fragment(_common._spark(master, cfg, inputs=[ctx.paths.fragment]), ctx)
    console.print(f"owner {meta.owner}: {meta.n_records:,} records, {len(meta.attributes)} attributes offered")


def owner_protect(config: str = typer.Option(..., "--config"), owner: str = typer.Option(..., "--owner"),
                  master: Optional[str] = MASTER, source_table: Optional[str] = SOURCE_TABLE):
    """Protect the owner's fragment under the aggregator's plan; write the table and manifest."""
    from ..protocol.context import owner_context
    from ..protocol.kind import kind_jobs
    from ..protocol.owner import read_verified_plan
    from ..protocol.preflight import find_owner
    from ..protocol.signatures import owner_signing_key

    cfg = _common._config(config, "owner", owner, source_table=source_table)
    ctx = owner_context(cfg, find_owner(cfg, owner)[1].name)
    owner_signing_key(ctx)  # signed manifests: no key, no Spark
    plan, _ = read_verified_plan(ctx)  # a damaged or foreign plan.json: no Spark
    kind = kind_jobs(plan.linkage)
    if kind.rounds_per_owner > 1:  # several rounds: each run of this step does the one that is due
        number, _ = kind.play_round(_common._spark(master, cfg), ctx)
        then = (f"run this step again once every owner has written round {number}" if number < kind.rounds_per_owner
                else "the aggregator's release step is next once every owner has written its last round")
        console.print(f"owner {owner}: round {number} of plan {plan.plan_id} written; {then}", highlight=False)
        return
    _, result = kind.play_round(_common._spark(master, cfg, inputs=[ctx.paths.fragment]), ctx)
    m = result.manifest
    if m is None:  # a one-round kind whose round publishes a message, not a protected table with its manifest
        console.print(f"owner {owner}: round 1 of plan {plan.plan_id} written; the aggregator's release step is next "
                      "once every owner has written its round", highlight=False)
        return
    console.print(f"owner {m.owner}: protected {m.n_records:,} records with ε_j = {m.epsilon}, k = {m.k} (plan {m.plan_id})")
    if cfg.risk_check is not None:  # the same line whatever was measured: the numbers and flags are private
        console.print(f"owner {m.owner}: fragment handed over; its measured risk (advisory, flags included) is in "
                      f"its private report {ctx.paths.report}", highlight=False, soft_wrap=True)


def owner_preview(config: str = typer.Option(..., "--config"), owner: str = typer.Option(..., "--owner"),
                  runs: int = typer.Option(32, "--runs", help="Simulated releases per attribute (>= 1)."),
                  master: Optional[str] = MASTER, source_table: Optional[str] = SOURCE_TABLE):
    """Private preview of this owner's own fragment: per attribute, its local Laplace scale and the released error
    it can expect after post-processing (by simulation on its own data), beside the error of releasing its own
    mean or most frequent category. Printed here only: nothing is written, no budget is spent."""
    from fragrelease.errors import ConfigError
    from fragrelease.kinds import resolve
    from fragrelease.protocol.kind import release_kind
    from fragrelease.schemas.datasets import resolve_schema

    from ..protocol.context import owner_context
    from ..protocol.preflight import check_source_exists, find_owner
    from ..storage import with_table_names

    if runs < 1:
        raise ConfigError(f"--runs: must be >= 1, not {runs}")
    cfg = with_table_names(load_config(config), owner=owner, source_table=source_table)
    kind = release_kind(cfg.linkage)
    if kind.owner_preview is None:  # the kind offers none: its reason, and where to look instead
        raise ConfigError(f"{config}: {kind.owner_preview_refusal()}: see fragrelease plan {config}")
    i, party = find_owner(cfg, owner)  # no data needed: before Spark starts
    resolve_schema(cfg.dataset)
    ctx = owner_context(cfg, owner)
    source = ctx.paths.fragment
    if source.path is not None:
        key = f"owners[{i}].source.path" if party.source is not None else \
            f"owner {owner!r}: its simulated fragment (run fragrelease split {config} first)"
        check_source_exists(source.path, key=key)
    pv = resolve(kind.owner_preview)(_common._spark(master, cfg), ctx, runs=runs)
    print_blocks(kind.owner_preview_blocks(pv, cfg, runs))


def aggregator_plan(config: str = typer.Option(..., "--config"), output_table: Optional[str] = OUTPUT_TABLE):
    """Validate the owners' metadata and issue the plan."""
    from ..protocol.aggregator import issue_plan
    from ..protocol.context import aggregator_context

    plan = issue_plan(aggregator_context(_common._config(config, "aggregator", output_table=output_table)))
    console.print(f"plan {plan.plan_id} issued (pinned; 'aggregator release' accepts only this plan)", highlight=False)
    for o in plan.owners:
        k = "" if plan.k is None else f", k = {plan.k}"  # a synthetic plan has no k
        console.print(f"{o.name}: ε_j = {o.epsilon}, per attribute {o.epsilon_per_attribute}{k}", highlight=False)


def aggregator_release(config: str = typer.Option(..., "--config"), master: Optional[str] = MASTER,
                       output_table: Optional[str] = OUTPUT_TABLE,
                       plan_id: Optional[str] = typer.Option(
                           None, "--plan-id", help="The plan id 'aggregator plan' printed; any other plan.json is "
                                                   "refused. Needed when this step cannot read the plan step's "
                                                   "pin (another machine or FRAGRELEASE_PRIVATE_ROOT).")):
    """Verify the protected fragments, combine them and commit the release."""
    from ..protocol.aggregator import pinned_plan, release
    from ..protocol.context import aggregator_context
    from ..protocol.kind import kind_jobs

    cfg = _common._config(config, "aggregator", output_table=output_table)
    ctx = aggregator_context(cfg)
    plan = pinned_plan(ctx, plan_id)  # no Spark yet: a plan.json this aggregator did not issue is refused first
    kind_jobs(plan.linkage).check_written(ctx, plan)  # no Spark either for an owner's message not written yet
    result = release(_common._spark(master, cfg, commits=True), ctx, plan=plan)
    console.print(f"release committed: {result.table or result.path} version {result.version}, {result.rows:,} rows; "
                  f"report {result.report}")
