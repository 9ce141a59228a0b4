"""DiffGen's classification experiment on Adult (SPEC.md §7; Mohammed et al. KDD 2011 §6).

Train on the first 30,162 cleaned rows (adult.data), test on the 15,060 rows of adult.test. For each
(score, h, ε) cell and repetition: run DiffGen on the training rows, generate the synthetic records
from the noisy leaf counts, train a scikit-learn decision tree on them and test it on adult.test
generalized with the same cut. BA = the same tree trained on the raw training rows; LA = the share of
the majority class in the test rows.

This module runs the pure-python DiffGen core on pandas/numpy (not Spark) for speed, and its
randomness is :class:`fragrelease.rng.FastDiffGenRandomness` (evaluation only). Synthetic records
are generated exactly as from a full release but without enumerating every empty leaf: a leaf with
true count 0 yields ``max(0, floor(Lap(2/ε) + 0.5))`` records, which is ≥ 1 with probability
``p = exp(-1/(2b))/2`` (b = 2/ε) and then equals ``floor(1 + Exp(b))`` (the Laplace tail is
memoryless). So the number of non-empty "empty" leaves is Binomial(E, p), they are uniform among the
E empty leaves, and their counts are iid ``floor(1 + Exp(b))``: the same distribution of synthetic
data, at a cost proportional to the records produced.

A decision tree trained with each distinct generalized record weighted by its count is the same tree
as one trained on the expanded records (scikit-learn's criteria use weighted counts).
"""
from __future__ import annotations

import math
import time
from fractions import Fraction
from typing import Sequence

import numpy as np
import pandas as pd

from .diffgen import leaf_shape, marginal_counts, specialize_cut
from .diffgen_taxonomy import ADULT_CLASS, ADULT_CLASS_VALUES, ADULT_PREDICTORS, adult_predictors
from .rng import FastDiffGenRandomness

N_TRAIN = 30_162
HS = (4, 7, 10, 13, 16)
EPSILONS = ("0.1", "0.25", "0.5", "1")
#: Skip (record as NaN) a run whose synthetic data would come from more leaves than this.
MAX_SYNTHETIC_LEAVES = 3_000_000


def _tree():
    from sklearn.tree import DecisionTreeClassifier

    return DecisionTreeClassifier(random_state=0, min_samples_leaf=5)


def baseline_accuracy(train: pd.DataFrame, test: pd.DataFrame) -> tuple[float, float]:
    """(BA, LA): tree on raw data (categories as ordinal codes), and majority-class accuracy on test."""
    X_tr, X_te = [], []
    for a in ADULT_PREDICTORS:
        if train[a].dtype.kind in "iuf":
            X_tr.append(train[a].to_numpy(float))
            X_te.append(test[a].to_numpy(float))
        else:
            cats = {v: i for i, v in enumerate(sorted(set(train[a]) | set(test[a])))}
            X_tr.append(train[a].map(cats).to_numpy(float))
            X_te.append(test[a].map(cats).to_numpy(float))
    tree = _tree().fit(np.column_stack(X_tr), train[ADULT_CLASS].to_numpy())
    ba = float((tree.predict(np.column_stack(X_te)) == test[ADULT_CLASS].to_numpy()).mean())
    majority = train[ADULT_CLASS].value_counts().idxmax()
    la = float((test[ADULT_CLASS] == majority).mean())
    return ba, la


def synthetic_leaf_counts(true_flat_codes: np.ndarray, n_leaves: int, epsilon: Fraction, gen: np.random.Generator,
                          randomness) -> tuple[np.ndarray, np.ndarray]:
    """(leaf indices, record counts > 0) of the synthetic data, distributed as from the full release."""
    b = float(2 / Fraction(epsilon))
    leaves, true = np.unique(true_flat_codes, return_counts=True)
    noisy = randomness.laplace(true.astype(float), b)
    k = np.maximum(np.floor(noisy + 0.5), 0).astype(np.int64)
    empty = n_leaves - leaves.size
    p = 0.5 * math.exp(-0.5 / b)
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
    extra = np.floor(1 + gen.exponential(b, size=n_pos)).astype(np.int64)
    idx = np.concatenate([leaves, picked])
    cnt = np.concatenate([k, extra])
    keep = cnt > 0
    return idx[keep], cnt[keep]


def run_cell(train: pd.DataFrame, test: pd.DataFrame, *, epsilon: Fraction, h: int, score: str,
             randomness, gen: np.random.Generator) -> dict:
    """One DiffGen run + classifier; returns accuracy, leaves, synthetic size and runtime."""
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
    row = {"score": score, "h": h, "epsilon": str(epsilon), "leaves": n_leaves}
    try:
        idx, cnt = synthetic_leaf_counts(flat, n_leaves, epsilon, gen, randomness)
    except OverflowError:
        row.update(accuracy=float("nan"), synthetic_records=float("nan"), seconds=time.perf_counter() - t0)
        return row
    parts = np.unravel_index(idx, shape)
    X = np.column_stack(parts[:-1]).astype(float)
    ys = np.asarray(ADULT_CLASS_VALUES)[parts[-1]]
    tree = _tree().fit(X, ys, sample_weight=cnt.astype(float))
    X_te = np.column_stack([cut.cell_codes(a, test[a].to_numpy()) for a in cut.attributes]).astype(float)
    acc = float((tree.predict(X_te) == test[ADULT_CLASS].to_numpy()).mean())
    row.update(accuracy=acc, synthetic_records=int(cnt.sum()), seconds=time.perf_counter() - t0,
               spent=str(sum((s.epsilon for s in ledger), Fraction(0)) + Fraction(epsilon) / 2))
    return row


def run_experiment(adult: pd.DataFrame, *, repetitions: int = 3, hs: Sequence[int] = HS,
                   epsilons: Sequence[str] = EPSILONS,
                   scores: Sequence[str] = ("max", "infogain")) -> tuple[pd.DataFrame, dict]:
    """The whole grid; returns (runs table, {"BA": .., "LA": .., "seconds": ..})."""
    t0 = time.perf_counter()
    train, test = adult.iloc[:N_TRAIN].reset_index(drop=True), adult.iloc[N_TRAIN:].reset_index(drop=True)
    ba, la = baseline_accuracy(train, test)
    randomness = FastDiffGenRandomness()
    from .rng import evaluation_generator

    gen = evaluation_generator()
    rows = []
    for score in scores:
        for h in hs:
            for eps in epsilons:
                for rep in range(repetitions):
                    r = run_cell(train, test, epsilon=Fraction(eps), h=h, score=score, randomness=randomness, gen=gen)
                    r["repetition"] = rep
                    rows.append(r)
    return pd.DataFrame(rows), {"BA": ba, "LA": la, "seconds": time.perf_counter() - t0,
                                "train_rows": len(train), "test_rows": len(test), "sampler": randomness.name}


def plot(runs: pd.DataFrame, base: dict, out_dir: str) -> list[str]:
    """One PNG per score: mean accuracy vs h, one line per ε, with BA and LA."""
    import os

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for score, g in runs.groupby("score"):
        fig, ax = plt.subplots(figsize=(6, 4))
        for eps, ge in g.groupby("epsilon", sort=False):
            m = ge.groupby("h")["accuracy"].agg(["mean", "std"])
            ax.errorbar(m.index, m["mean"] * 100, yerr=m["std"].fillna(0) * 100, marker="o", capsize=3,
                        label=f"ε = {eps}")
        ax.axhline(base["BA"] * 100, color="k", ls="--", label=f"BA (raw data) {base['BA'] * 100:.1f}%")
        ax.axhline(base["LA"] * 100, color="gray", ls=":", label=f"LA (majority) {base['LA'] * 100:.1f}%")
        ax.set_xlabel("number of specializations h")
        ax.set_ylabel("test accuracy (%)")
        ax.set_title(f"DiffGen on Adult, score {score}")
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = os.path.join(out_dir, f"accuracy-{score}.png")
        fig.savefig(path, dpi=120)
        plt.close(fig)
        paths.append(path)
    return paths


def summarize(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean and std of accuracy per (score, h, ε), with median leaves and synthetic records."""
    return runs.groupby(["score", "h", "epsilon"], sort=False).agg(
        accuracy_mean=("accuracy", "mean"), accuracy_std=("accuracy", "std"), runs=("accuracy", "count"),
        leaves_median=("leaves", "median"), synthetic_records_median=("synthetic_records", "median")).reset_index()
