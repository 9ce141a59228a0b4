"""The IR release kinds' Spark half (``linkage: linked`` and ``unlinked``): one round per owner, a protected
fragment (:mod:`.owner_round`); the aggregator verifies every fragment against its signed manifest and
combines them (:mod:`.combine`; docs/specification.md §1-§3). Registered in :data:`fragrelease.kinds.KINDS`.
"""
from __future__ import annotations

from fractions import Fraction

from fragrelease.jobs.protocol.draws import Spend
from fragrelease.jobs.protocol.kind import KindJobs, Round, RoundResult


class IRJobs(KindJobs):
    """An IR release on Spark: each owner protects its fragment once (round 1); the aggregator verifies
    and assembles the fragments (a union for horizontal owners, a join by pseudonym for vertical ones)."""

    evaluates = True
    combining = "verifying fragments and committing the release"

    def __init__(self, name: str) -> None:
        self.name = name

    def rounds(self, ctx, plan):
        from .owner_round import PROTECT_STEP

        eps = Fraction(plan.owner(ctx.name).epsilon)
        return (Round(1, PROTECT_STEP, Spend(plan.dataset, plan.plan_id, eps, eps), "its fragment",
                      f"protecting {len(plan.owner(ctx.name).attributes)} attributes"),)

    def check_before_spend(self, spark, ctx, number=None):
        from . import owner_round

        owner_round.check_before_spend(spark, ctx)
        return 1

    def play_round(self, spark, ctx, number=None, *, noise=None):
        from . import owner_round

        manifest, protected = owner_round.protect_and_write(spark, ctx, noise=noise)
        return 1, RoundResult(manifest=manifest, protected=protected)

    def held_out(self, ctx, df, key):
        """With ``risk_check``: the owner's keyed control share (:func:`.risk_check.split_control`)."""
        rc = ctx.config.risk_check
        if rc is None:
            return None
        from .risk_check import split_control

        return split_control(df, ctx.schema.id_column, key, ctx.config.name, rc.control_share)

    def mean_sse(self, spark, plan, owners, protected):
        from . import evaluate

        return evaluate.owners_mean_sse(spark, plan, owners, protected)

    def combine(self, spark, ctx, plan, keys):
        from . import combine

        return combine.verified_combination(spark, ctx, plan, keys)

    def report_sections(self, provenance, attributes):
        from .report_sections import report_sections

        return report_sections(provenance, attributes)

    def owner_report_parts(self, attributes, id_column, manifest, **options):
        from .report_sections import owner_report_parts

        return owner_report_parts(attributes, id_column, manifest, **options)


#: ``linkage: linked``: the paper's rows, one per record.
LINKED_JOBS = IRJobs("linked")
#: ``linkage: unlinked``: every column in its own random order.
UNLINKED_JOBS = IRJobs("unlinked")
