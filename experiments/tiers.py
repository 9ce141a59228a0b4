"""The tiered-release experiment on German Credit (docs/specification.md §6; Chang & Wu (SPME 2014) §5, Figs. 4-6).

Setting: UCI ``german.data-numeric`` (1,000 rows), the 24 attributes as quasi-identifiers,
standardized (z-scores), uniform weights, the credit class sensitive. Chains are computed with the
pure-python reference (:func:`fragrelease.tiers.run_chain`), which the tests check equal to the
Spark job. Output: ``results.csv`` and three PNGs in ``out``:

- ``ul-vs-delta.png`` (Fig. 4): mean UL per table of an ``l``-hop chain against δ;
- ``disclosure-per-hop.png`` (Fig. 5): ``P(T_i)`` per hop with the thresholds ``(l - i + 1)·δ``;
- ``ul-vs-hops.png`` (Fig. 6): mean UL per table against the chain length, at a fixed δ (each
  added hop adds a looser tier) and at a fixed loosest threshold ``l·δ`` (δ shrinks as l grows).

Algorithms: BUA, TDA, FLA (the tree reading, the default) and FLA-leaves (the narrower reading, docs/specification.md §6).
"""
from __future__ import annotations

import os
import time
from fractions import Fraction
from typing import Sequence

import pandas as pd

from fragrelease import tiers as tm

DELTAS: tuple[str, ...] = ("0.0025", "0.005", "0.01", "0.02", "0.03", "0.05", "0.075", "0.1")
VARIANTS: tuple[tuple[str, str, str], ...] = (
    ("BUA", "bua", "tree"), ("TDA", "tda", "tree"), ("FLA", "fla", "tree"), ("FLA-leaves", "fla", "leaves"),
)
STYLE = {"BUA": ("tab:red", "s"), "TDA": ("tab:blue", "^"), "FLA": ("tab:green", "o"), "FLA-leaves": ("tab:olive", "x")}


def german_source() -> tuple[pd.DataFrame, tm.TierColumns]:
    """German Credit standardized, with its roles (24 quasi-identifiers, ``credit_class`` sensitive)."""
    from fragrelease.schemas.datasets import GERMAN_COLUMNS, load_german_credit_pandas

    qi = [c for c in GERMAN_COLUMNS if c != "credit_class"]
    df = tm.standardize(load_german_credit_pandas(), qi)
    return df, tm.TierColumns.make(qi, "credit_class", "record_id")


def _rows(figure: str, name: str, delta: str | Fraction, hops: int, chain: list[tm.Tier], cols: tm.TierColumns, seconds: float):
    qi = list(cols.quasi_identifiers)
    for t in chain:
        yield {"figure": figure, "algorithm": name, "delta": float(delta), "hops": hops, "tier": t.index,
               "threshold": float(t.threshold), "disclosure": t.disclosure, "utility_loss": t.utility_loss,
               "classes": int(t.table[qi].drop_duplicates().shape[0]), "seconds": seconds}


def run_experiment(out: str, *, hops: int = 4, delta: str = "0.02", max_hops: int = 6,
                   deltas: Sequence[str] = DELTAS) -> dict:
    """Run the three sweeps, write ``results.csv`` and the figures; return their paths."""
    source, cols = german_source()
    rows = []
    top = tm.parse_delta(delta) * hops  # the loosest threshold of the per-hop chain
    for figure, grid in (("ul-vs-delta", [(d, hops) for d in deltas]),
                         ("disclosure-per-hop", [(delta, hops)]),
                         ("ul-vs-hops", [(delta, h) for h in range(1, max_hops + 1)]),
                         ("ul-vs-hops-fixed-top", [(top / h, h) for h in range(1, max_hops + 1)])):
        for d, h in grid:
            for name, alg, reading in VARIANTS:
                start = time.perf_counter()
                # the input's row numbers break ties (the paper's order), so the figures are reproducible;
                # a release draws CSPRNG surrogates instead (see docs/tiers.md for the spread that causes)
                chain = tm.run_chain(source, cols, d, h, alg, reading=reading, surrogate_ids=False)
                rows.extend(_rows(figure, name, d, h, chain, cols, time.perf_counter() - start))
    os.makedirs(out, exist_ok=True)
    res = pd.DataFrame(rows)
    csv = os.path.join(out, "results.csv")
    res.to_csv(csv, index=False, float_format="%.6g")
    figures = plot(res, out, hops=hops, delta=float(delta))
    return {"csv": csv, "rows": len(res), "figures": figures}


def plot(res: pd.DataFrame, out: str, *, hops: int, delta: float) -> list[str]:
    """The three figures from ``results.csv`` rows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    sub = res[res.figure == "ul-vs-delta"]
    for key, g in sub.groupby("algorithm", sort=False):
        name = str(key)
        m = g.groupby("delta")["utility_loss"].mean()
        ax.plot(m.index, m.to_numpy(), marker=STYLE[name][1], color=STYLE[name][0], label=name)
    ax.set_xscale("log")
    ax.set_xlabel("δ (tier i must have P < (l - i + 1)·δ)")
    ax.set_ylabel(f"mean UL per table ({hops}-hop chain)")
    ax.set_title("German Credit: utility loss vs δ (cf. paper Fig. 4)")
    ax.grid(alpha=0.3)
    ax.legend()
    paths.append(_save(fig, out, "ul-vs-delta.png"))

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    sub = res[res.figure == "disclosure-per-hop"]
    n = len(VARIANTS)
    for j, (key, g) in enumerate(sub.groupby("algorithm", sort=False)):
        name = str(key)
        x = g["tier"].to_numpy() + (j - (n - 1) / 2) * 0.18
        ax.bar(x, g["disclosure"], width=0.18, color=STYLE[name][0], label=name)
    th = sub.drop_duplicates("tier")
    for _, r in th.iterrows():
        ax.hlines(r["threshold"], r["tier"] - 0.45, r["tier"] + 0.45, colors="k", linestyles="--")
    ax.set_xticks(th["tier"])
    ax.set_xlabel("hop i")
    ax.set_ylabel("P(T_i) (max JS divergence, log2)")
    ax.set_title(f"German Credit: disclosure per hop, δ = {delta:g}, l = {hops} (cf. Fig. 5)\n"
                 "dashed: threshold (l - i + 1)·δ", fontsize=10)
    ax.legend(fontsize=8)
    paths.append(_save(fig, out, "disclosure-per-hop.png"))

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    top = delta * hops
    for ax, figure, title in ((axes[0], "ul-vs-hops", f"fixed δ = {delta:g} (thresholds lδ … δ)"),
                              (axes[1], "ul-vs-hops-fixed-top", f"fixed loosest threshold lδ = {top:g} (δ = {top:g}/l)")):
        sub = res[res.figure == figure]
        for key, g in sub.groupby("algorithm", sort=False):
            name = str(key)
            m = g.groupby("hops")["utility_loss"].mean()
            ax.plot(m.index, m.to_numpy(), marker=STYLE[name][1], color=STYLE[name][0], label=name)
        ax.set_xlabel("chain length l (hops)")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("mean UL per table")
    axes[0].legend()
    fig.suptitle("German Credit: mean utility loss per table vs chain length (cf. paper Fig. 6)")
    paths.append(_save(fig, out, "ul-vs-hops.png"))
    return paths


def _save(fig, out: str, name: str) -> str:
    path = os.path.join(out, name)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path
