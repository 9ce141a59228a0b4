"""The aggregator's side of a synthetic release (``linkage: synthetic``; docs/specification.md §10).

:func:`synthesize` verifies the three rounds of every owner (signatures under the configured public
keys, the plan's terms, ε, t, shapes, the participants every owner masked against, the cliques round 2
selects), decodes the sums of the owners' masked measurements (only sums: no owner's own counts), fits
Private-PGM on the driver and draws the rows on the executors
(:func:`fragrelease.udfs.synthesis.synthetic_rows`). Everything it computes is post-processing of the
decoded noisy sums; :func:`fragrelease.jobs.protocol.aggregator.release` commits the rows with the
release's provenance, as it commits every release kind.
"""
from __future__ import annotations

import math
import time
from fractions import Fraction
from typing import Mapping, Optional

import numpy as np

from fragrelease.errors import ManifestMismatchError
from fragrelease.protocol.messages import Plan
from fragrelease.synthesis.model import Measured, fit_model, noisy_total
from fragrelease.udfs.synthesis import synthetic_rows

from ..progress import LOGGER as PROGRESS
from ..protocol.context import AggregatorContext
from ..protocol.signatures import public_keys
from ..storage import file_exists
from .messages import decoded_sums, plan_synthesis_spec, read_participants, round_path, structure
from .rounds import missing_round

#: Rows each sampling task draws (a task holds one batch of codes at a time: about 100 bytes per row).
ROWS_PER_TASK = 1_000_000


def check_rounds_written(ctx: AggregatorContext, plan: Plan) -> None:
    """Refuse, before Spark starts, a synthetic release whose owners have not written every round.

    Looks at the files only (their existence under ``work_dir``; nothing is read or verified here):
    every owner's round 1 in plan order, then round 2, then round 3.

    Raises
    ------
    ConfigError
        One line naming the first owner whose round is missing, the round, the plan, the path and the
        command that owner runs next (:func:`.rounds.missing_round`).
    """
    for number in (1, 2, 3):
        for o in plan.owners:
            path = round_path(ctx.owners[o.name], number)
            if not file_exists(path):
                raise missing_round("aggregator", o.name, number, plan.plan_id, path)


def synthesize(spark, ctx: AggregatorContext, plan: Plan, keys: Optional[Mapping] = None, *, iters: int = 1000):
    """Verify every owner's three rounds, decode the sums, fit the model and draw the rows; return ``(rows, terms)``.

    ``ctx``: the aggregator's context (:func:`fragrelease.jobs.protocol.context.aggregator_context`).

    ``rows``: a DataFrame with the plan's attributes (categorical as declared labels, numeric drawn
    uniformly inside the model's bin: whole numbers for integer attributes), N rows, N the
    inverse-variance mean of the decoded 1-way totals; its draws are fresh on every evaluation, so the
    caller commits it once and reads the committed table. ``terms``: the public synthesis terms for the
    provenance (the ε split, t, the cliques, N): public or computed from noised values only.

    Raises
    ------
    ConfigError
        An owner's round is missing (its protect step has not run three times; :func:`check_rounds_written`).
    ManifestMismatchError, SignatureError, ProtocolError
        A message that is damaged, unsigned, signed with another key, for another plan or owner, masked
        against other participants, masks that do not cancel, or measuring other marginals than the
        plan and round 2 fix; owners with different ε_j.
    MissingDependencyError
        mbi (the ``synthesis`` extra) is not installed.
    """
    check_rounds_written(ctx, plan)
    keys = public_keys(ctx.config) if keys is None else keys
    epsilons = {Fraction(o.epsilon) for o in plan.owners}
    if len(epsilons) != 1:
        raise ManifestMismatchError("the aggregator refuses plan.json: the owners of a synthetic release spend the "
                                    f"same ε_j (horizontal, parallel composition), not {sorted(map(str, epsilons))}")
    spec = plan_synthesis_spec(ctx.schema, plan, plan.owners[0].name)
    participants = read_participants(ctx.owners, plan, spec, keys, party="aggregator")
    sums, cliques = structure(ctx.owners, plan, spec, participants, keys, party="aggregator")
    clique_sums = decoded_sums(ctx.owners, plan, spec, 3, cliques, participants, keys, party="aggregator")
    m = len(plan.owners)
    first, second = spec.round_noise(2), spec.round_noise(3, cliques)
    one = [Measured((a,), sums[(a,)], float(np.sqrt(first[(a,)].variance_of_sum(m)))) for a in spec.domain.names]
    tree = [c for c in cliques if c in first]  # the tree's edges: measured in round 2 too
    measured = one + [Measured(c, sums[c], float(np.sqrt(first[c].variance_of_sum(m)))) for c in tree]
    measured += [Measured(c, clique_sums[c], float(np.sqrt(second[c].variance_of_sum(m)))) for c in cliques]
    # progress inside the step (public facts only: counts of marginals, iterations, the noised row count)
    PROGRESS.info("aggregator: fitting the model to %d decoded marginals (Private-PGM, %d iterations) …",
                  len(measured), iters)
    started = time.perf_counter()
    model = fit_model(spec.domain, measured, iters=iters)
    n = noisy_total(one)  # from noised values only
    PROGRESS.info("aggregator: model fitted in %.1f s; %s rows to draw on the executors", time.perf_counter() - started,
                  f"{n:,}")
    rows = synthetic_rows(spark, model, spec.domain, n, partitions=max(1, math.ceil(n / ROWS_PER_TASK)))
    terms = {
        "epsilon_one_way": str(spec.budget.one_way), "epsilon_selection": str(spec.round_epsilon(2) - spec.budget.one_way),
        "epsilon_cliques": str(spec.budget.cliques), "target": spec.target, "bins": plan.synthesis_bins,
        "owners": m, "collusion": spec.collusion, "noise": "discrete Laplace, shares of k = m − t owners",
        "cliques": [list(c) for c in cliques], "rows": n, "fit_iterations": iters,
    }
    return rows, terms
