"""The synthetic release kind's Spark half (``linkage: synthetic``; docs/specification.md §10): three rounds
per owner (a key-agreement key; masked 1-way and pair marginals; masked clique marginals); the aggregator
verifies every round, decodes the sums, fits the model and draws the rows. Registered in
:data:`fragrelease.kinds.KINDS`.
"""
from __future__ import annotations

from fragrelease.jobs.protocol.kind import Combined, KindJobs, Round, RoundResult

#: What each round measures, for the progress lines.
_DOING = {1: "publishing a key-agreement key", 2: "measuring masked 1-way and pair marginals",
          3: "measuring masked clique marginals"}


class SynthesisJobs(KindJobs):
    """A marginal-synthesis release on Spark (module docstring)."""

    name = "synthetic"
    evaluates = False
    rounds_per_owner = 3
    combining = "verifying measurements, fitting the model and committing"

    def rounds(self, ctx, plan):
        from .messages import plan_synthesis_spec
        from .owner import ROUND_STEPS, round_spend

        spec = plan_synthesis_spec(ctx.schema, plan, ctx.name)
        return tuple(Round(n, ROUND_STEPS[n], round_spend(plan, spec, n), f"round {n}", _DOING[n]) for n in (1, 2, 3))

    def check_before_spend(self, spark, ctx, number=None):
        from .owner import check_round_before_spend

        return check_round_before_spend(spark, ctx, number)

    def play_round(self, spark, ctx, number=None, *, noise=None):
        from .owner import measure_owner_round

        return measure_owner_round(spark, ctx, number=number), RoundResult()  # shares: exact, from the OS CSPRNG

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
