"""Marginal synthesis over horizontal fragments on Adult, measured like the downstream table (evaluation only).

The release kind of docs/specification.md §10, run through its own Spark-free code
(:mod:`fragrelease.synthesis.mechanism`) with ``owners`` horizontal owners (a uniform random split of
``adult.data``'s 30,162 cleaned rows), the 10 released attributes and income (the declared target),
numeric attributes coded on the same public cuts that OpenDP's MST and AIM get
(:data:`fragrelease.experiments.downstream.NUMERIC_CUTS`, also the bins of the TVD). Noise from
:class:`~fragrelease.rng.laplace.FastLaplace` and numpy draws (evaluation only: a release draws from the
OS CSPRNG). Each run is scored with :func:`fragrelease.experiments.downstream.classifier_accuracies`
and :func:`~fragrelease.experiments.downstream.marginal_tvds`, the downstream table's own code.

Run: ``python -m fragrelease.experiments.synthesis --epsilons 1 4 --runs 5 --out docs/evaluation``
writes ``synthesis.csv`` (one row per run).
"""
from __future__ import annotations

import argparse
import itertools
import os
import time
from fractions import Fraction
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from fragrelease.rng.diffgen import SeededDiffGenRandomness
from fragrelease.rng.laplace import FastLaplace, evaluation_generator
from fragrelease.synthesis.domain import DEFAULT_BINS, CodedAttribute, SynthesisDomain, contingency
from fragrelease.synthesis.mechanism import (
    DEFAULT_ONE_WAY_SHARE,
    DEFAULT_SELECTION_SHARE,
    SynthesisBudget,
    add_owners,
    choose_tree,
    cliques_to_measure,
    features_of,
    fit_model,
    measure_cliques,
    measure_round_one,
    noisy_total,
    sample_codes,
)
from fragrelease.synthesis.protocol import synthesis_spec

from . import downstream as ds
from .evaluation import AttributeSpec

#: Public cuts of the numeric attributes: the ones MST and AIM are given.
CUTS = ds.NUMERIC_CUTS


def release_domain(bins: int = DEFAULT_BINS) -> SynthesisDomain:
    """The domain a ``linkage: synthetic`` release of ``dataset: adult-income`` codes (the release's own
    :func:`fragrelease.synthesis.protocol.synthesis_spec`: ``bins`` equal-width bins of each numeric
    attribute's declared domain)."""
    from fragrelease.schemas.datasets import resolve_schema

    return synthesis_spec(resolve_schema("adult-income").protected, Fraction(1), target=ds.TARGET, bins=bins).domain


def coded_domain(specs: Sequence[AttributeSpec]) -> SynthesisDomain:
    """The specs as a :class:`SynthesisDomain` (numeric attributes: whole numbers on :data:`CUTS`)."""
    return SynthesisDomain(tuple(
        CodedAttribute(s.name, tuple(s.categories)) if s.categorical
        else CodedAttribute.numeric(s.name, s.lo, s.hi, integer=True, cuts=CUTS.get(s.name)) for s in specs))


def synthesize_fragments(train: pd.DataFrame, specs: Sequence[AttributeSpec], *, epsilon: Fraction, owners: int,
                         target: Optional[str], gen: np.random.Generator, iters: int = 1000,
                         per_owner: bool = False, joint: bool = False, domain: Optional[SynthesisDomain] = None,
                         shares: tuple[Fraction, Fraction] = (DEFAULT_ONE_WAY_SHARE, DEFAULT_SELECTION_SHARE)
                         ) -> pd.DataFrame:
    """One release of the marginal-synthesis kind over ``owners`` random horizontal fragments of ``train``.

    ``per_owner``: one round; each owner measures the cliques of its own tree and the aggregator fits
    one model per owner and unions their rows (instead of a shared tree and one model).
    """
    dom = coded_domain(specs)
    codes = dom.encode(train)
    owner = gen.integers(0, owners, len(codes))
    frags = [codes[owner == o] for o in range(owners)]
    budget = SynthesisBudget(Fraction(epsilon), *shares)
    randomness = SeededDiffGenRandomness(int(gen.integers(2**62)))
    noise = FastLaplace()
    sizes = dom.sizes
    feats = features_of(dom, target)
    if per_owner:
        parts = []
        for f in frags:
            one = {a: contingency(f, (a,), sizes) for a in dom.names}
            pairs = {p: contingency(f, p, sizes) for p in itertools.combinations(feats, 2)}
            first = measure_round_one(dom, one, pairs, budget, target=target, randomness=randomness, noise=noise)
            cl = cliques_to_measure(dom, first.edges, target=target, joint=joint)
            second = measure_cliques(dom, {c: contingency(f, c, sizes) for c in cl}, cl, budget, noise=noise)
            one_sums, clique_sums = add_owners([first], [second])
            plan = fit_model(dom, one_sums, budget.one_way_noise(dom), clique_sums, budget.clique_noise(dom, cl),
                             owners=1, iters=iters)
            parts.append(pd.DataFrame(sample_codes(plan, noisy_total(one_sums, budget.one_way_noise(dom)), gen.random)))
        return dom.decode(pd.concat(parts, ignore_index=True)[list(dom.names)], gen.random)
    rounds = []
    for f in frags:
        one = {a: contingency(f, (a,), sizes) for a in dom.names}
        pairs = {p: contingency(f, p, sizes) for p in itertools.combinations(feats, 2)}
        rounds.append(measure_round_one(dom, one, pairs, budget, target=target, randomness=randomness, noise=noise))
    tree = choose_tree(dom, [r.edges for r in rounds], target=target)
    cliques = cliques_to_measure(dom, tree, target=target, joint=joint)
    measured = [measure_cliques(dom, {c: contingency(f, c, sizes) for c in cliques}, cliques, budget, noise=noise)
                for f in frags]
    one_sums, clique_sums = add_owners(rounds, measured)
    plan = fit_model(dom, one_sums, budget.one_way_noise(dom), clique_sums, budget.clique_noise(dom, cliques),
                     owners=owners, iters=iters)
    rows = noisy_total(one_sums, budget.one_way_noise(dom))
    out = pd.DataFrame(sample_codes(plan, rows, gen.random))
    return dom.decode(out[list(dom.names)], gen.random)


def main(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epsilons", nargs="+", default=["1", "4"])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--owners", type=int, default=4)
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--no-target", action="store_true", help="no declared target (plain tree)")
    ap.add_argument("--per-owner", action="store_true", help="one round: one model per owner (its own tree)")
    ap.add_argument("--joint", action="store_true", help="3-way (target, a, b) cliques per tree edge")
    ap.add_argument("--shares", nargs=2, default=[str(DEFAULT_ONE_WAY_SHARE), str(DEFAULT_SELECTION_SHARE)],
                    help="ε shares of the 1-ways and the selection")
    ap.add_argument("--cuts", action="store_true",
                    help="numeric attributes on the public cuts MST and AIM get (default: the release's own coding, "
                         "--bins equal-width bins of the declared domain)")
    ap.add_argument("--bins", type=int, default=DEFAULT_BINS, help="the release's synthesis_bins (default 10)")
    ap.add_argument("--out", default="docs/evaluation")
    ap.add_argument("--name", default="synthesis")
    ap.add_argument("--save", default=None, help="folder to keep every synthetic table in (parquet), e.g. for the risk runs")
    a = ap.parse_args(argv)
    from fragrelease.schemas.datasets import load_adult_train_test

    train, test = load_adult_train_test()
    specs = ds.adult_specs()
    gen = evaluation_generator()
    orig_codes = ds.encode_table(train, specs)
    sizes = ds.code_sizes(specs)
    rows = []
    os.makedirs(a.out, exist_ok=True)
    for eps in a.epsilons:
        for run in range(a.runs):
            t0 = time.perf_counter()
            table = synthesize_fragments(train, specs, epsilon=Fraction(eps), owners=a.owners,
                                         target=None if a.no_target else ds.TARGET, gen=gen, iters=a.iters,
                                         per_owner=a.per_owner, joint=a.joint,
                                         domain=None if a.cuts else release_domain(a.bins),
                                         shares=(Fraction(a.shares[0]), Fraction(a.shares[1])))
            sec = time.perf_counter() - t0
            if a.save:
                os.makedirs(a.save, exist_ok=True)
                table.to_parquet(os.path.join(a.save, f"{a.name}-eps{eps}-run{run}.parquet"))
            tvd1, tvd2 = ds.marginal_tvds(orig_codes, ds.encode_table(table, specs), sizes)
            method = (("fragments-tan" if not a.no_target else "fragments-tree") + ("-joint" if a.joint else "")
                      + ("-per-owner" if a.per_owner else "") + ("-cuts" if a.cuts else f"-bins{a.bins}")
                      + f"-shares-{a.shares[0]}-{a.shares[1]}")
            rows.append({"method": method, "epsilon": eps,
                         "owners": a.owners, "run": run, "rows": len(table),
                         **ds.classifier_accuracies(table, test, specs, seed=run), "tvd1": tvd1, "tvd2": tvd2,
                         "release_seconds": sec,
                         "guarantee": f"whole table ε = {eps}-DP (substitution; docs/specification.md §10)"})
            print(rows[-1], flush=True)
            pd.DataFrame(rows).to_csv(os.path.join(a.out, f"{a.name}.csv"), index=False)


if __name__ == "__main__":
    main()
