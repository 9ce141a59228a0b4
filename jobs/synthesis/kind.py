"""The synthetic release kind's Spark half (``linkage: synthetic``; docs/specification.md §10): two rounds
per owner (noisy 1-way marginals and tree edges, then clique marginals); the aggregator verifies both
rounds, fits the model and draws the rows. Registered in :data:`fragrelease.kinds.KINDS`.
"""
from __future__ import annotations

from fragrelease.jobs.protocol.kind import Combined, KindJobs, Round, RoundResult

#: What each round measures, for the progress lines.
_DOING = {1: "measuring noisy 1-way marginals and tree edges", 2: "measuring noisy clique marginals"}


class SynthesisJobs(KindJobs):
    """A marginal-synthesis release on Spark (module docstring)."""

    name = "synthetic"
    evaluates = False
    rounds_per_owner = 2
    combining = "verifying measurements, fitting the model and committing"

    def rounds(self, ctx, plan):
        from .owner import ROUND_STEPS, plan_synthesis_spec, round_spend

        spec = plan_synthesis_spec(ctx.schema, plan, ctx.name)
        return tuple(Round(n, ROUND_STEPS[n], round_spend(plan, spec, n), f"round {n}", _DOING[n]) for n in (1, 2))

    def check_before_spend(self, spark, ctx, number=None):
        from .owner import check_round_before_spend

        return check_round_before_spend(spark, ctx, number)

    def play_round(self, spark, ctx, number=None, *, noise=None):
        from .owner import measure_owner_round

        return measure_owner_round(spark, ctx, noise=noise, number=number), RoundResult()

    def check_written(self, ctx, plan):
        from .aggregator import check_rounds_written

        check_rounds_written(ctx, plan)

    def combine(self, spark, ctx, plan, keys):
        from .aggregator import synthesize

        released, terms = synthesize(spark, ctx, plan, keys)
        return Combined(rows=released, count=int(terms["rows"]), provenance={"synthesis": terms})  # the count: from noised values only

    def report_sections(self, provenance, attributes):
        from .report_sections import report_sections

        return report_sections(provenance, attributes)


#: ``linkage: synthetic``.
SYNTHETIC_JOBS = SynthesisJobs()
