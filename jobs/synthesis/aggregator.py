"""The aggregator's side of a synthetic release (``linkage: synthetic``; docs/specification.md §10).

:func:`synthesize` verifies both rounds of every owner (signatures under the configured public keys,
the plan's terms, ε, shapes, the cliques round one selects), adds the owners' noisy marginals, fits
Private-PGM on the driver and draws the rows on the executors
(:func:`fragrelease.udfs.synthesis.synthetic_rows`). Everything it computes is post-processing of
the owners' noisy marginals; :func:`fragrelease.jobs.protocol.aggregator.release` commits the rows
with the release's provenance, as it commits every release kind.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Mapping, Optional

from fragrelease.errors import ConfigError, ManifestMismatchError
from fragrelease.protocol.messages import Plan
from fragrelease.signing import verify_manifest_fields
from fragrelease.synthesis.mechanism import add_owners, fit_model, noisy_total
from fragrelease.synthesis.protocol import RoundTwoMessage, check_round_two, cliques_from_round_one
from fragrelease.udfs.synthesis import synthetic_rows

from ..protocol.context import AggregatorContext
from ..protocol.layout import read_message
from ..protocol.signatures import public_keys
from ..storage import file_exists
from .owner import plan_synthesis_spec, read_round_one, round_path
from .rounds import missing_round

#: Rows each sampling task draws (a task holds one batch of codes at a time: about 100 bytes per row).
ROWS_PER_TASK = 1_000_000


def check_rounds_written(ctx: AggregatorContext, plan: Plan) -> None:
    """Refuse, before Spark starts, a synthetic release whose owners have not written both rounds.

    Looks at the files only (their existence under ``work_dir``; nothing is read or verified here):
    every owner's round one in plan order, then every owner's round two.

    Raises
    ------
    ConfigError
        One line naming the first owner whose round is missing, the round, the plan, the path and the
        command that owner runs next (:func:`.rounds.missing_round`).
    """
    for number in (1, 2):
        for o in plan.owners:
            path = round_path(ctx.owners[o.name], number)
            if not file_exists(path):
                raise missing_round("aggregator", o.name, number, plan.plan_id, path)


def synthesize(spark, ctx: AggregatorContext, plan: Plan, keys: Optional[Mapping] = None, *, iters: int = 1000):
    """Verify every owner's two rounds, fit the model and draw the rows; return ``(rows, terms)``.

    ``ctx``: the aggregator's context (:func:`fragrelease.jobs.protocol.context.aggregator_context`).

    ``rows``: a DataFrame with the plan's attributes (categorical as declared labels, numeric drawn
    uniformly inside the model's bin: whole numbers for integer attributes), N rows, N the
    inverse-variance mean of the owners' summed noisy 1-way totals; its draws are fresh on every
    evaluation, so the caller commits it once and reads the committed table. ``terms``: the public
    synthesis terms for the provenance (the ε split, the cliques, N): computed from noised values only.

    Raises
    ------
    ConfigError
        An owner's round one or two is missing (its protect step has not run twice;
        :func:`check_rounds_written`).
    ManifestMismatchError, SignatureError, ProtocolError
        A message that is damaged, unsigned, signed with another key, for another plan or owner, or
        measuring other marginals than the plan and round one fix; owners with different ε_j.
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
    rounds = read_round_one(ctx.owners, plan, spec, keys, party="aggregator")
    cliques = cliques_from_round_one(spec, rounds)
    measured = []
    for o in plan.owners:
        msg = read_message(RoundTwoMessage, round_path(ctx.owners[o.name], 2), party="aggregator",
                           what=f"synthesis round two of owner {o.name!r}")
        verify_manifest_fields(keys[o.name], msg.signed_fields(), msg.signature, owner=o.name)
        if msg.plan_id != plan.plan_id:  # an older plan's message: this plan's round two is not there yet
            raise ConfigError(f"aggregator: owner {o.name!r} has not written its synthesis round two of plan "
                              f"{plan.plan_id} yet (it holds plan {msg.plan_id}'s); run its protect step first")
        measured.append(check_round_two(msg, spec, cliques, plan_id=plan.plan_id, owner=o.name,
                                        n_records=o.n_records))
    one_sums, clique_sums = add_owners(rounds, measured)
    one_noise, clique_noise = spec.budget.one_way_noise(spec.domain), spec.budget.clique_noise(spec.domain, cliques)
    model = fit_model(spec.domain, one_sums, one_noise, clique_sums, clique_noise, owners=len(plan.owners), iters=iters)
    n = noisy_total(one_sums, one_noise)  # from noised values only
    rows = synthetic_rows(spark, model, spec.domain, n, partitions=max(1, math.ceil(n / ROWS_PER_TASK)))
    terms = {
        "epsilon_one_way": str(spec.budget.one_way), "epsilon_selection": str(spec.round_one_epsilon - spec.budget.one_way),
        "epsilon_cliques": str(spec.budget.cliques), "target": spec.target, "bins": plan.synthesis_bins,
        "cliques": [list(c) for c in cliques], "rows": n, "fit_iterations": iters,
    }
    return rows, terms
