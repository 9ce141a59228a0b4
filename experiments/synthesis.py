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

from fragrelease.rng.laplace import evaluation_generator
from fragrelease.synthesis.domain import DEFAULT_BINS, CodedAttribute, SynthesisDomain, contingency
from fragrelease.synthesis.mechanism import (
    DEFAULT_ONE_WAY_SHARE,
    DEFAULT_SELECTION_SHARE,
    SynthesisBudget,
    _Forest,
    add_vectors,
    choose_tree,
    cliques_to_measure,
    default_collusion_bound,
    feature_pairs,
    honest_parts,
)
from fragrelease.synthesis.model import Measured, fit_model, noisy_total, sample_codes
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


def owner_of_rows(train: pd.DataFrame, owners: int, gen: np.random.Generator, *, age_bands: bool = False) -> np.ndarray:
    """Each training row's owner: uniform at random, or (``age_bands``) contiguous age bands of equal size."""
    if not age_bands:
        return gen.integers(0, owners, len(train))
    ranks = train["age"].rank(method="first").to_numpy() - 1
    return np.minimum((ranks * owners // len(train)).astype(int), owners - 1)


def owner_share(noise, size: int, gen: np.random.Generator) -> np.ndarray:
    """One owner's share NB(1/k, α) − NB(1/k, α) with numpy (evaluation only; a release draws it exactly
    from the OS CSPRNG, :mod:`fragrelease.rng.polya`)."""
    r, p = 1.0 / noise.parts, 1.0 - float(noise.alpha)
    return gen.negative_binomial(r, p, size) - gen.negative_binomial(r, p, size)


def synthesize_fragments(train: pd.DataFrame, specs: Sequence[AttributeSpec], *, epsilon: Fraction, owners: int,
                         target: Optional[str], gen: np.random.Generator, iters: int = 1000, joint: bool = False,
                         domain: Optional[SynthesisDomain] = None, collusion: Optional[int] = None,
                         shares: tuple[Fraction, Fraction] = (DEFAULT_ONE_WAY_SHARE, DEFAULT_SELECTION_SHARE),
                         age_bands: bool = False, trees: Optional[list] = None, oracle_tree: bool = False) -> pd.DataFrame:
    """One release of the marginal-synthesis kind over ``owners`` horizontal owners of ``train``.

    Every owner counts its own fragment and adds its noise share (:func:`owner_share`); the harness adds
    the owners' vectors (:func:`~fragrelease.synthesis.mechanism.add_vectors`), which is exactly what
    secure aggregation decodes (the masks cancel; tests/fragrelease/test_secagg.py). ``collusion``: t
    (default :func:`~fragrelease.synthesis.mechanism.default_collusion_bound`). ``trees``: a list the
    chosen tree is appended to (for the structure's statistics). ``oracle_tree``: an upper bound, not a
    release: the tree is the maximum spanning tree of the exact L1 distances from independence of the
    union's pairs (what MST's selection approximates; no noise, no budget), the selection's ε unspent.
    """
    dom = domain if domain is not None else coded_domain(specs)
    codes = dom.encode(train)
    owner = owner_of_rows(train, owners, gen, age_bands=age_bands)
    frags = [codes[owner == o] for o in range(owners)]
    t = default_collusion_bound(owners) if collusion is None else collusion
    parts = honest_parts(owners, t)
    budget = SynthesisBudget(Fraction(epsilon), *shares)
    sizes = dom.sizes

    def decoded(noises):
        vectors = [{c: contingency(f, c, sizes).ravel().astype(np.int64) + owner_share(n, int(np.prod(
            [sizes[a] for a in c])), gen) for c, n in noises.items()} for f in frags]
        return add_vectors(vectors)

    pairs = feature_pairs(dom, target)
    first = {**budget.one_way_noise(dom, parts), **budget.selection_noise(pairs, parts)}
    sums = decoded(first)
    variances = {c: n.variance_of_sum(owners) for c, n in first.items()}
    tree = exact_l1_tree(dom, codes, target) if oracle_tree else choose_tree(dom, sums, variances, target=target)
    if trees is not None:
        trees.append(tree)
    cliques = cliques_to_measure(dom, tree, target=target, joint=joint)
    second = budget.clique_noise(cliques, parts)
    sums2 = decoded(second)
    one = [Measured((a,), sums[(a,)], float(np.sqrt(variances[(a,)]))) for a in dom.names]
    measured = one + [Measured(tuple(e), sums[tuple(e)], float(np.sqrt(variances[tuple(e)]))) for e in tree]
    measured += [Measured(c, sums2[c], float(np.sqrt(n.variance_of_sum(owners)))) for c, n in second.items()]
    plan = fit_model(dom, measured, iters=iters)
    rows = noisy_total(one)
    out = pd.DataFrame(sample_codes(plan, rows, gen.random))
    return dom.decode(out[list(dom.names)], gen.random)


def exact_l1_tree(dom: SynthesisDomain, codes: pd.DataFrame, target: Optional[str]) -> tuple[tuple[str, str], ...]:
    """The maximum spanning tree (Kruskal, ties in domain order) of the features' exact L1 distances
    ``Σ |x − x_a x_b / n|`` from independence on ``codes`` (every record; evaluation only, not private)."""
    sizes = dom.sizes
    pairs = feature_pairs(dom, target)
    score = {}
    for a, b in pairs:
        x = contingency(codes, (a, b), sizes).astype(float)
        score[(a, b)] = float(np.abs(x - np.outer(x.sum(1), x.sum(0)) / max(x.sum(), 1.0)).sum())
    forest = _Forest(dom.names)  # the release's own union-find (fragrelease.synthesis.mechanism)
    tree = []
    for e in sorted(pairs, key=lambda p: -score[p]):  # sorted() is stable: ties keep domain order
        if forest.joins(e):
            forest.add(e)
            tree.append(e)
    return tuple(tree)


def pair_tvds(original: np.ndarray, released: np.ndarray, sizes: Sequence[int], names: Sequence[str]
              ) -> dict[tuple[str, str], float]:
    """The 2-way TVD of every pair of columns (the downstream table's definition), by pair of names."""
    out = {}
    for i, j in itertools.combinations(range(len(names)), 2):
        cells = sizes[i] * sizes[j]
        p = np.bincount(original[:, i] * sizes[j] + original[:, j], minlength=cells) / len(original)
        q = np.bincount(released[:, i] * sizes[j] + released[:, j], minlength=cells) / len(released)
        out[(names[i], names[j])] = 0.5 * float(np.abs(p - q).sum())
    return out


def main(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epsilons", nargs="+", default=["1", "4"])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--owners", type=int, default=4)
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--no-target", action="store_true", help="no declared target (plain tree)")
    ap.add_argument("--collusion", type=int, default=None,
                    help="t, the owners that may collude with the aggregator (default: the release's default)")
    ap.add_argument("--baseline", choices=("mst", "aim"), default=None,
                    help="run centralized OpenDP MST or AIM on the union instead (fragrelease.experiments.downstream."
                         "synthesize, the downstream table's own call), measured the same way")
    ap.add_argument("--score-z", type=float, default=None,
                    help="the structure score's z (fragrelease.synthesis.mechanism.SCORE_Z; default: the release's)")
    ap.add_argument("--age-bands", action="store_true",
                    help="owners hold contiguous age bands (label only: the decoded sums do not depend on the split)")
    ap.add_argument("--joint", action="store_true", help="3-way (target, a, b) cliques per tree edge")
    ap.add_argument("--oracle-tree", action="store_true",
                    help="an upper bound, not a release: the exact L1 tree of the union (no noise), the selection's ε unspent")
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
    if a.score_z is not None:  # an evaluation knob: the release always uses the module's constant
        from fragrelease.synthesis import mechanism

        mechanism.SCORE_Z = a.score_z
    from fragrelease.schemas.datasets import load_adult_train_test

    train, test = load_adult_train_test()
    specs = ds.adult_specs()
    gen = evaluation_generator()
    orig_codes = ds.encode_table(train, specs)
    sizes = ds.code_sizes(specs)
    rows = []
    os.makedirs(a.out, exist_ok=True)
    names = [sp.name for sp in specs]
    for eps in a.epsilons:
        for run in range(a.runs):
            t0 = time.perf_counter()
            trees: list = []
            if a.baseline is not None:
                table = ds.synthesize(train, specs, algorithm=a.baseline, epsilon=str(eps), iters=a.iters, rng=gen)
                trees.append(())
            else:
                table = synthesize_fragments(train, specs, epsilon=Fraction(eps), owners=a.owners,
                                             target=None if a.no_target else ds.TARGET, gen=gen, iters=a.iters,
                                             joint=a.joint, domain=None if a.cuts else release_domain(a.bins),
                                             collusion=a.collusion, age_bands=a.age_bands, trees=trees,
                                             shares=(Fraction(a.shares[0]), Fraction(a.shares[1])),
                                             oracle_tree=a.oracle_tree)
            sec = time.perf_counter() - t0
            if a.save:
                os.makedirs(a.save, exist_ok=True)
                table.to_parquet(os.path.join(a.save, f"{a.name}-eps{eps}-run{run}.parquet"))
            released = ds.encode_table(table, specs)
            tvd1, tvd2 = ds.marginal_tvds(orig_codes, released, sizes)
            pairs = pair_tvds(orig_codes, released, sizes, names)
            other = [v for (x, y), v in pairs.items() if ds.TARGET not in (x, y)]
            t = 0 if a.baseline else default_collusion_bound(a.owners) if a.collusion is None else a.collusion
            method = a.baseline or (
                ("fragments-tan" if not a.no_target else "fragments-tree") + ("-joint" if a.joint else "")
                + ("-age-bands" if a.age_bands else "") + ("-cuts" if a.cuts else f"-bins{a.bins}")
                + f"-shares-{a.shares[0]}-{a.shares[1]}" + (f"-z{a.score_z:g}" if a.score_z is not None else "")
                + ("-oracle-tree" if a.oracle_tree else ""))
            rows.append({"method": method, "epsilon": eps, "owners": a.owners, "collusion": t, "run": run,
                         "rows": len(table), **ds.classifier_accuracies(table, test, specs, seed=run),
                         "tvd1": tvd1, "tvd2": tvd2, "tvd2_non_target": float(np.mean(other)),
                         "tree": ";".join(f"{x}~{y}" for x, y in trees[0]),
                         "native_country_edges": sum("native-country" in e for e in trees[0]) if trees[0] else None,
                         "release_seconds": sec,
                         "guarantee": ("none: an upper bound, the tree read from the exact data" if a.oracle_tree else
                                       f"whole table ε = {eps}-DP (substitution), centralized" if a.baseline else
                                       f"whole table ε = {eps}-DP (substitution) against the recipients, the "
                                       f"aggregator and any {t} owners (docs/specification.md §10)")})
            print({k: v for k, v in rows[-1].items() if k != "guarantee"}, flush=True)
            pd.DataFrame(rows).to_csv(os.path.join(a.out, f"{a.name}.csv"), index=False)


if __name__ == "__main__":
    main()
