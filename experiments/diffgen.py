"""DiffGen's classification experiment on Adult (docs/specification.md §7; Mohammed et al. (KDD 2011) §6).

Train on the first 30,162 cleaned rows (adult.data), test on the 15,060 rows of adult.test. For each
(score, h, ε) cell and repetition: run DiffGen on the training rows, generate the synthetic records
from the noisy leaf counts in two ways from the same noisy counts (``rounded``: every cell with a
positive rounded count; ``filtered``: only cells reaching :func:`fragrelease.diffgen.release.sparse_min_count`,
the release's default), train a scikit-learn decision tree on each and test it on adult.test
generalized with the same cut. BA = the same tree trained on the raw training rows; LA = the share of
the majority class in the test rows.

The tree (CART, Gini) has one hyperparameter, the minimum share of the training weight per leaf; it is
chosen once per experiment by 5-fold cross-validation on the raw training rows (never on adult.test)
from :data:`MIN_LEAF_FRACTIONS` and then used for BA and every DiffGen run. A share (not a number of
rows) keeps the tree the same whether records are expanded or given as weighted distinct rows.

This module runs the pure-python DiffGen core on pandas/numpy (not Spark) for speed, and its
randomness is :class:`fragrelease.rng.diffgen.FastDiffGenRandomness` (evaluation only). Synthetic records
are generated exactly as from a full release but without enumerating every empty leaf: a leaf with
true count 0 yields ``k = max(0, floor(Lap(2/ε) + 0.5))`` records, and ``k >= t`` (t ≥ 1 the
expansion's threshold) with probability ``p = exp(-(t - 1/2)/b)/2`` (b = 2/ε), and then
``k = t + floor(Exp(b))`` (the Laplace tail is memoryless). So the number of expanded empty leaves is
Binomial(E, p), they are uniform among the E empty leaves, and their counts are iid
``t + floor(Exp(b))``: the same distribution of synthetic data, at a cost proportional to the records
produced.

A decision tree trained with each distinct generalized record weighted by its count is the same tree
as one trained on the expanded records (scikit-learn's criteria and ``min_weight_fraction_leaf`` use
weights).
"""
from __future__ import annotations

import math
import time
from fractions import Fraction
from typing import Sequence

import numpy as np
import pandas as pd

from fragrelease.diffgen.engine import specialize_cut
from fragrelease.diffgen.predictors import marginal_counts
from fragrelease.diffgen.release import leaf_count_scale, leaf_shape, sparse_min_count
from fragrelease.rng.diffgen import FastDiffGenRandomness
from fragrelease.schemas.taxonomies import ADULT_CLASS, ADULT_CLASS_VALUES, ADULT_PREDICTORS, adult_predictors

N_TRAIN = 30_162
HS = (4, 7, 10, 13, 16)
EPSILONS = ("0.1", "0.25", "0.5", "1")
#: Skip (record as NaN) a run whose synthetic data would come from more leaves than this.
MAX_SYNTHETIC_LEAVES = 3_000_000
#: Candidate minimum leaf weight shares of the decision tree (chosen by cross-validation on raw training rows).
MIN_LEAF_FRACTIONS = (1e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2)
#: The two expansions of noisy counts into synthetic records compared by the experiment.
EXPANSIONS = ("filtered", "rounded")


def _tree(min_leaf_fraction: float):
    from sklearn.tree import DecisionTreeClassifier

    return DecisionTreeClassifier(random_state=0, min_weight_fraction_leaf=min_leaf_fraction)


def _raw_features(train: pd.DataFrame, test: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    X_tr, X_te = [], []
    for a in ADULT_PREDICTORS:
        if train[a].dtype.kind in "iuf":
            X_tr.append(train[a].to_numpy(float))
            X_te.append(test[a].to_numpy(float))
        else:
            cats = {v: i for i, v in enumerate(sorted(set(train[a]) | set(test[a])))}
            X_tr.append(train[a].map(cats).to_numpy(float))
            X_te.append(test[a].map(cats).to_numpy(float))
    return np.column_stack(X_tr), np.column_stack(X_te)


def choose_min_leaf_fraction(train: pd.DataFrame) -> float:
    """The tree's minimum leaf weight share with the best 5-fold cross-validated accuracy on the raw training rows."""
    from sklearn.model_selection import cross_val_score

    X, _ = _raw_features(train, train.iloc[:0])
    y = train[ADULT_CLASS].to_numpy()
    scores = [float(cross_val_score(_tree(f), X, y, cv=5).mean()) for f in MIN_LEAF_FRACTIONS]
    return MIN_LEAF_FRACTIONS[int(np.argmax(scores))]


def baseline_accuracy(train: pd.DataFrame, test: pd.DataFrame, min_leaf_fraction: float) -> tuple[float, float]:
    """(BA, LA): tree on raw data (categories as ordinal codes), and majority-class accuracy on test."""
    X_tr, X_te = _raw_features(train, test)
    tree = _tree(min_leaf_fraction).fit(X_tr, train[ADULT_CLASS].to_numpy())
    ba = float((tree.predict(X_te) == test[ADULT_CLASS].to_numpy()).mean())
    majority = train[ADULT_CLASS].value_counts().idxmax()
    la = float((test[ADULT_CLASS] == majority).mean())
    return ba, la


def synthetic_leaf_counts(true_flat_codes: np.ndarray, n_leaves: int, epsilon: Fraction, gen: np.random.Generator,
                          randomness, min_count: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(leaf indices, record counts >= min_count) of the synthetic data, distributed as from the full release.

    ``true_flat_codes``: flat leaf × class index of every training record; ``n_leaves``: number of
    leaf × class cells; ``min_count``: the expansion's threshold t ≥ 1 (module docstring).

    Raises
    ------
    OverflowError
        More than :data:`MAX_SYNTHETIC_LEAVES` leaves would yield records.
    """
    b = leaf_count_scale(epsilon)
    t = int(min_count)
    leaves, true = np.unique(true_flat_codes, return_counts=True)
    noisy = randomness.laplace(true.astype(float), b)
    k = np.maximum(np.floor(noisy + 0.5), 0).astype(np.int64)
    k[k < t] = 0
    empty = n_leaves - leaves.size
    p = 0.5 * math.exp(-(t - 0.5) / b)
    n_pos = int(gen.binomial(empty, p)) if empty > 0 else 0
    if n_pos + leaves.size > MAX_SYNTHETIC_LEAVES:
        raise OverflowError(f"{n_pos} empty leaves would produce records (limit {MAX_SYNTHETIC_LEAVES} leaves)")
    picked = np.empty(0, dtype=np.int64)
    while picked.size < n_pos:
        cand = gen.integers(0, n_leaves, size=int((n_pos - picked.size) * 1.2) + 16)
        cand = np.unique(cand[~np.isin(cand, leaves)])
        picked = np.unique(np.concatenate([picked, cand]))
    if picked.size > n_pos:
        picked = gen.choice(picked, size=n_pos, replace=False)
    extra = t + np.floor(gen.exponential(b, size=n_pos)).astype(np.int64)
    idx = np.concatenate([leaves, picked])
    cnt = np.concatenate([k, extra])
    keep = cnt > 0
    return idx[keep], cnt[keep]


def _accuracy(idx: np.ndarray, cnt: np.ndarray, shape: tuple, X_te: np.ndarray, y_te: np.ndarray,
              min_leaf_fraction: float) -> float:
    parts = np.unravel_index(idx, shape)
    X = np.column_stack(parts[:-1]).astype(float)
    ys = np.asarray(ADULT_CLASS_VALUES)[parts[-1]]
    tree = _tree(min_leaf_fraction).fit(X, ys, sample_weight=cnt.astype(float))
    return float((tree.predict(X_te) == y_te).mean())


def run_cell(train: pd.DataFrame, test: pd.DataFrame, *, epsilon: Fraction, h: int, score: str,
             randomness, gen: np.random.Generator, min_leaf_fraction: float) -> list[dict]:
    """One DiffGen run, evaluated with both expansions (:data:`EXPANSIONS`) of the same noisy counts.

    Returns one row per expansion: score, h, ε, leaves (leaf × class cells), expansion, min_count,
    accuracy, synthetic_records, seconds, spent (NaN accuracy if the expansion exceeds
    :data:`MAX_SYNTHETIC_LEAVES` leaves).
    """
    t0 = time.perf_counter()
    preds = adult_predictors()
    y = train[ADULT_CLASS].to_numpy()
    counts = {p.attribute: marginal_counts(p, train[p.attribute].to_numpy(), y, ADULT_CLASS_VALUES) for p in preds}
    cut, ledger = specialize_cut(preds, counts, epsilon=epsilon, specializations=h, score=score,
                                 randomness=randomness)
    shape = leaf_shape(cut, len(ADULT_CLASS_VALUES))
    n_leaves = math.prod(shape)
    cidx = {c: i for i, c in enumerate(ADULT_CLASS_VALUES)}
    codes_tr = [cut.cell_codes(a, train[a].to_numpy()) for a in cut.attributes]
    codes_tr.append(np.array([cidx[c] for c in y]))
    flat = np.ravel_multi_index(codes_tr, shape)
    X_te = np.column_stack([cut.cell_codes(a, test[a].to_numpy()) for a in cut.attributes]).astype(float)
    y_te = test[ADULT_CLASS].to_numpy()
    spent = str(sum((s.epsilon for s in ledger), Fraction(0)) + Fraction(epsilon) / 2)
    t_auto = sparse_min_count(n_leaves, epsilon)
    expanded: dict[str, tuple[int, tuple[np.ndarray, np.ndarray] | None]]  # (min count, (cells, counts) or None)
    try:  # one draw of the noisy counts; the filtered expansion keeps its cells with k >= t_auto
        plain = synthetic_leaf_counts(flat, n_leaves, epsilon, gen, randomness, min_count=1)
        keep = plain[1] >= t_auto
        expanded = {"rounded": (1, plain), "filtered": (t_auto, (plain[0][keep], plain[1][keep]))}
    except OverflowError:
        expanded = {"rounded": (1, None),
                    "filtered": (t_auto, synthetic_leaf_counts(flat, n_leaves, epsilon, gen, randomness,
                                                               min_count=t_auto))}
    rows = []
    for name in EXPANSIONS:
        t, res = expanded[name]
        row = {"score": score, "h": h, "epsilon": str(epsilon), "leaves": n_leaves, "expansion": name,
               "min_count": t, "spent": spent}
        if res is None or res[1].sum() == 0:
            row.update(accuracy=float("nan"), synthetic_records=0 if res is not None else float("nan"))
        else:
            row.update(accuracy=_accuracy(res[0], res[1], shape, X_te, y_te, min_leaf_fraction),
                       synthetic_records=int(res[1].sum()))
        rows.append(row)
    for row in rows:
        row["seconds"] = time.perf_counter() - t0
    return rows


def run_experiment(adult: pd.DataFrame, *, repetitions: int = 3, hs: Sequence[int] = HS,
                   epsilons: Sequence[str] = EPSILONS,
                   scores: Sequence[str] = ("max", "infogain")) -> tuple[pd.DataFrame, dict]:
    """The whole grid; returns (runs table, {"BA": .., "LA": .., "min_leaf_fraction": .., "seconds": ..})."""
    t0 = time.perf_counter()
    train, test = adult.iloc[:N_TRAIN].reset_index(drop=True), adult.iloc[N_TRAIN:].reset_index(drop=True)
    frac = choose_min_leaf_fraction(train)
    ba, la = baseline_accuracy(train, test, frac)
    randomness = FastDiffGenRandomness()
    from fragrelease.rng.laplace import evaluation_generator

    gen = evaluation_generator()
    rows = []
    for score in scores:
        for h in hs:
            for eps in epsilons:
                for rep in range(repetitions):
                    for r in run_cell(train, test, epsilon=Fraction(eps), h=h, score=score, randomness=randomness,
                                      gen=gen, min_leaf_fraction=frac):
                        r["repetition"] = rep
                        rows.append(r)
    return pd.DataFrame(rows), {"BA": ba, "LA": la, "min_leaf_fraction": frac,
                                "min_leaf_fraction_grid": list(MIN_LEAF_FRACTIONS),
                                "seconds": time.perf_counter() - t0, "train_rows": len(train),
                                "test_rows": len(test), "sampler": randomness.name}


def root_selection(train: pd.DataFrame, *, score: str, h: int = 10,
                   epsilons: Sequence[str] = ("0.1", "1", "10", "100", "1000")) -> pd.DataFrame:
    """How strongly the first exponential-mechanism draw prefers the best candidate, per ε (analytic, no noise).

    At the top cut (every predictor at its root; numeric root intervals split at their best point),
    the selection probability ``exp(ε'u/2) / Σ exp(ε'u'/2)`` of the highest-scoring candidate, with
    ε' = ε/(2(6 + 2h)). Columns out: score, epsilon, eps_prime, best (attribute), best_score,
    p_best, p_uniform (1 / number of candidates).
    """
    preds = adult_predictors()
    y = train[ADULT_CLASS].to_numpy()
    counts = {p.attribute: marginal_counts(p, train[p.attribute].to_numpy(), y, ADULT_CLASS_VALUES) for p in preds}
    from fragrelease.diffgen.engine import DiffGenEngine, epsilon_prime
    from fragrelease.rng.diffgen import SeededDiffGenRandomness

    # a huge ε' for the split-point draws only, so each numeric root gets its best split (deterministic)
    engine = DiffGenEngine(preds, counts, eps_prime=Fraction(10 ** 6), score=score,
                           randomness=SeededDiffGenRandomness(0))
    cands = engine.candidate_list()
    u = np.array([c.score for c in cands])
    best = int(np.argmax(u))
    rows = []
    for eps in epsilons:
        ep = epsilon_prime(Fraction(eps), sum(p.kind == "numeric" for p in preds), h)
        lw = float(ep) * u / 2
        w = np.exp(lw - lw.max())
        rows.append({"score": score, "epsilon": eps, "eps_prime": float(ep), "best": cands[best].attribute,
                     "best_score": float(u[best]), "p_best": float(w[best] / w.sum()), "p_uniform": 1 / len(cands)})
    return pd.DataFrame(rows)


def plot(runs: pd.DataFrame, base: dict, out_dir: str) -> list[str]:
    """One PNG per score and expansion (``accuracy-<score>.png`` for the filtered default,
    ``accuracy-<score>-rounded.png``): mean accuracy ± standard error vs h, one line per ε, with BA and LA."""
    import os

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for (score, expansion), g in runs.groupby(["score", "expansion"]):
        fig, ax = plt.subplots(figsize=(6, 4))
        for eps, ge in g.groupby("epsilon", sort=False):
            m = ge.groupby("h")["accuracy"].agg(["mean", "sem"])
            ax.errorbar(m.index, m["mean"] * 100, yerr=m["sem"].fillna(0) * 100, marker="o", capsize=3,
                        label=f"ε = {eps}")
        ax.axhline(base["BA"] * 100, color="k", ls="--", label=f"BA (raw data) {base['BA'] * 100:.1f}%")
        ax.axhline(base["LA"] * 100, color="gray", ls=":", label=f"LA (majority) {base['LA'] * 100:.1f}%")
        ax.set_xlabel("number of specializations h")
        ax.set_ylabel("test accuracy (%), mean ± s.e.")
        ax.set_title(f"DiffGen on Adult, score {score}, {expansion} expansion")
        ax.legend(fontsize=8)
        fig.tight_layout()
        suffix = "" if expansion == "filtered" else f"-{expansion}"
        path = os.path.join(out_dir, f"accuracy-{score}{suffix}.png")
        fig.savefig(path, dpi=120)
        plt.close(fig)
        paths.append(path)
    return paths


def summarize(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean, std and standard error of accuracy per (score, expansion, h, ε), with median leaves and synthetic records."""
    return runs.groupby(["score", "expansion", "h", "epsilon"], sort=False).agg(
        accuracy_mean=("accuracy", "mean"), accuracy_std=("accuracy", "std"), accuracy_sem=("accuracy", "sem"),
        runs=("accuracy", "count"), leaves_median=("leaves", "median"), min_count_median=("min_count", "median"),
        synthetic_records_median=("synthetic_records", "median")).reset_index()
