"""The IR release kinds' Spark half (``linkage: linked`` and ``unlinked``): one round per owner, a protected
fragment; the aggregator verifies every fragment against its signed manifest and combines them
(docs/specification.md §1-§3). Registered in :data:`fragrelease.kinds.KINDS`.
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
        eps = Fraction(plan.owner(ctx.name).epsilon)
        from fragrelease.jobs.protocol.owner import PROTECT_STEP

        return (Round(1, PROTECT_STEP, Spend(plan.dataset, plan.plan_id, eps, eps), "its fragment",
                      f"protecting {len(plan.owner(ctx.name).attributes)} attributes"),)

    def check_before_spend(self, spark, ctx, number=None):
        from fragrelease.jobs.protocol.owner import check_before_spend

        check_before_spend(spark, ctx)
        return 1

    def play_round(self, spark, ctx, number=None, *, noise=None):
        from fragrelease.jobs.protocol.owner import protect_and_write

        manifest, protected = protect_and_write(spark, ctx, noise=noise)
        return 1, RoundResult(manifest=manifest, protected=protected)

    def combine(self, spark, ctx, plan, keys):
        from fragrelease.jobs.protocol.aggregator import verified_combination

        return verified_combination(spark, ctx, plan, keys)

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
