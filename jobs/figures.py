"""The paper's figures (paper 000 §5, Figs 2-6) as PNG heatmaps, from the evaluation's results table.

- ``<dataset>-baseline.png``: centralized iDP-IR MeanSSE over (ε, k) (Figs 2-3).
- ``<dataset>-idp-minus-dp.png``: centralized iDP-IR minus DP-IR (Fig 4; negative = iDP-IR better).
- ``<dataset>-fragmented-minus-centralized.png``: horizontal and vertical minus centralized, iDP-IR,
  negative differences drawn as 0 as in the paper (Figs 5-6); the signed values stay in results.csv.
"""
from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def _matrix(df: pd.DataFrame) -> pd.DataFrame:
    m = df.pivot_table(index="epsilon", columns="k", values="mean_sse", aggfunc="first")
    m = m.loc[sorted(m.index, key=float, reverse=True)]
    return m[sorted(m.columns)]


def _heatmap(ax, m: pd.DataFrame, title: str, cmap: str, vmin=None, vmax=None, fmt="{:.2f}"):
    im = ax.imshow(m.to_numpy(float), cmap=cmap, aspect="auto", vmin=vmin, vmax=vmax)
    ax.set_xticks(range(m.shape[1]), [str(c) for c in m.columns])
    ax.set_yticks(range(m.shape[0]), [str(r) for r in m.index])
    ax.set_xlabel("k")
    ax.set_ylabel("ε")
    ax.set_title(title, fontsize=10)
    vals = m.to_numpy(float)
    hi = np.nanmax(np.abs(vals)) if np.isfinite(vals).any() else 1.0
    for i in range(vals.shape[0]):
        for j in range(vals.shape[1]):
            if np.isfinite(vals[i, j]):
                color = "white" if abs(vals[i, j]) > 0.6 * hi else "black"
                ax.text(j, i, fmt.format(vals[i, j]), ha="center", va="center", fontsize=7, color=color)
    return im


def _select(summary, dataset, scenario, mechanism, split=None):
    q = (summary["dataset"] == dataset) & (summary["scenario"] == scenario) & (summary["mechanism"] == mechanism)
    if split is not None:
        q &= summary["split"] == split
    return summary[q]


def plot_all(summary: pd.DataFrame, out_dir: str) -> list[str]:
    """Write every figure the results allow; return their paths."""
    paths = []
    for dataset in sorted(summary["dataset"].unique()):
        central = _select(summary, dataset, "centralized", "idp-ir")
        if central.empty:
            continue
        base = _matrix(central)
        fig, ax = plt.subplots(figsize=(1.0 + 0.75 * base.shape[1], 3.2))
        _heatmap(ax, base, f"{dataset}: centralized iDP-IR MeanSSE", "viridis_r")
        paths.append(_save(fig, out_dir, f"{dataset}-baseline.png"))

        dp = _select(summary, dataset, "centralized", "dp-ir")
        if not dp.empty:
            diff = base - _matrix(dp)
            lim = float(np.nanmax(np.abs(diff.to_numpy(float)))) or 1.0
            fig, ax = plt.subplots(figsize=(1.0 + 0.75 * diff.shape[1], 3.2))
            _heatmap(ax, diff, f"{dataset}: iDP-IR minus DP-IR (centralized)", "RdBu_r", -lim, lim)
            paths.append(_save(fig, out_dir, f"{dataset}-idp-minus-dp.png"))

        panels = []
        for scen in ("horizontal", "vertical"):
            frag = _select(summary, dataset, scen, "idp-ir")
            for split in sorted(frag["split"].unique()):
                d = (_matrix(frag[frag["split"] == split]) - base).clip(lower=0)
                label = scen if scen == "horizontal" else f"vertical ({split})"
                panels.append((label, d))
        if panels:
            vmax = max(float(np.nanmax(p.to_numpy(float))) for _, p in panels) or 1.0
            fig, axes = plt.subplots(1, len(panels), figsize=(len(panels) * (1.0 + 0.75 * base.shape[1]), 3.2),
                                     squeeze=False)
            for ax, (label, d) in zip(axes[0], panels, strict=True):
                _heatmap(ax, d, f"{dataset}: {label} minus centralized\n(iDP-IR, negatives drawn as 0)", "Reds", 0, vmax)
            paths.append(_save(fig, out_dir, f"{dataset}-fragmented-minus-centralized.png"))
    return paths


def _save(fig, out_dir: str, name: str) -> str:
    path = os.path.join(out_dir, name)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
