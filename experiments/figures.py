"""The paper's figures (the fragmented-data paper's §5, Figs 2-6) as PNG heatmaps, from the evaluation's results.

The heatmaps show the main category-order series only (``main``: the release default); when the
results hold several orders, the figures say which one they show.

- ``<dataset>-baseline.png``: centralized iDP-IR MeanSSE over (ε, k) (Figs 2-3).
- ``<dataset>-idp-minus-dp.png``: centralized iDP-IR minus DP-IR (Fig 4; negative = iDP-IR better).
- ``<dataset>-fragmented-minus-centralized.png``: horizontal and vertical minus centralized, iDP-IR,
  negative differences drawn as 0 as in the paper (Figs 5-6); the signed values stay in results.csv.
- ``<dataset>-category-order.png`` (datasets with categorical attributes and several orders):
  centralized iDP-IR MeanSSE and category TVD against k, one line per order setting, one panel per ε.
- ``<dataset>-postprocess.png`` (results with both ``postprocess`` values): centralized iDP-IR
  MeanSSE without (``none``) and with (``isotonic``) the isotonic projection of the noisy centroids,
  and their ratio; cells where the projection is worse by more than two paired standard errors
  are marked.
- ``<dataset>-postprocess-ratio-all.png``: the ratio for every scenario, split and mechanism.
- ``postprocess-ratio.png``: the centralized iDP-IR ratio of every dataset side by side (the README's).

The paper's figures (the first three) show one ``postprocess`` value (``main_postprocess``; the
evaluation passes ``none``, the paper's release), named in their titles.
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


def _heatmap(ax, m: pd.DataFrame, title: str, cmap: str, vmin=None, vmax=None, fmt="{:.2f}", black_text=False):
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
                color = "white" if abs(vals[i, j]) > 0.6 * hi and not black_text else "black"
                ax.text(j, i, fmt.format(vals[i, j]), ha="center", va="center", fontsize=7, color=color)
    return im


def _select(summary, dataset, scenario, mechanism, split=None):
    q = (summary["dataset"] == dataset) & (summary["scenario"] == scenario) & (summary["mechanism"] == mechanism)
    if split is not None:
        q &= summary["split"] == split
    return summary[q]


def _order_label(order: str, share: str) -> str:
    return f"{order} {share}" if order == "dp-frequency" else order


def plot_order_comparison(summary: pd.DataFrame, dataset: str, out_dir: str) -> str | None:
    """Centralized iDP-IR MeanSSE (top) and category TVD (bottom) against k, per order and ε."""
    d = _select(summary, dataset, "centralized", "idp-ir")
    settings = d[["category_order", "order_share"]].drop_duplicates().itertuples(index=False)
    settings = list(settings)
    if len(settings) < 2 or d["category_tvd"].isna().all():
        return None
    eps = sorted(d["epsilon"].unique(), key=float)
    fig, axes = plt.subplots(2, len(eps), figsize=(3.2 * len(eps), 6.0), squeeze=False)
    ks = sorted(d["k"].unique())
    for j, e in enumerate(eps):
        for o, sh in settings:
            q = d[(d["epsilon"] == e) & (d["category_order"] == o) & (d["order_share"] == sh)].set_index("k").loc[ks]
            style = "--" if o == "data-frequency" else "-"
            for i, col in enumerate(("mean_sse", "category_tvd")):
                axes[i][j].plot(range(len(ks)), q[col].to_numpy(float), style, marker="o", ms=3,
                                label=_order_label(o, sh))
        for i, col in enumerate(("MeanSSE", "category TVD")):
            axes[i][j].set_xticks(range(len(ks)), [str(k) for k in ks], fontsize=7)
            axes[i][j].set_title(f"{dataset}, ε = {e}: {col}", fontsize=9)
            axes[i][j].set_xlabel("k")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"{dataset}: centralized iDP-IR by category order (data-frequency = the paper's, not private)",
                 fontsize=10)
    return _save(fig, out_dir, f"{dataset}-category-order.png")


def _ratio_matrix(paired: pd.DataFrame, col: str = "ratio") -> pd.DataFrame:
    return _matrix(paired.rename(columns={"mean_sse": "_m", col: "mean_sse"}))


def _mark_worse(ax, paired: pd.DataFrame, m: pd.DataFrame) -> None:
    worse = paired[paired["worse_by_2se"].astype(bool)]
    rows, cols = [str(r) for r in m.index], list(m.columns)
    for e, k in zip(worse["epsilon"], worse["k"], strict=True):
        if str(e) in rows and k in cols:
            ax.add_patch(plt.Rectangle((cols.index(k) - 0.5, rows.index(str(e)) - 0.5), 1, 1, fill=False,
                                       edgecolor="red", lw=2))


def plot_postprocess(paired: pd.DataFrame, dataset: str, out_dir: str, main: tuple[str, str]) -> list[str]:
    """MeanSSE without / with the isotonic projection and their ratio (centralized iDP-IR), and the ratio everywhere.

    ``paired``: :func:`fragrelease.experiments.evaluation.postprocess_comparison` rows. Ratio < 1: the
    projection lowers MeanSSE; red frame: worse by more than two paired standard errors.
    """
    d = paired[(paired["dataset"] == dataset) & (paired["category_order"] == main[0])
               & (paired["order_share"].astype(str) == str(main[1]))]
    if d.empty:
        return []
    d = d.assign(epsilon=d["epsilon"].astype(str))
    paths = []
    c = d[(d["scenario"] == "centralized") & (d["mechanism"] == "idp-ir")]
    label = f"category order: {_order_label(*main)}, {int(c['runs'].min()) if len(c) else 0} paired runs"
    if not c.empty:
        none, iso, ratio = (_ratio_matrix(c, col) for col in ("mean_sse_none", "mean_sse_isotonic", "ratio"))
        w = 1.0 + 0.75 * ratio.shape[1]
        fig, axes = plt.subplots(3, 1, figsize=(w, 9.6))
        vmax = float(np.nanmax(none.to_numpy(float)))
        _heatmap(axes[0], none, f"{dataset}: MeanSSE, postprocess none (centralized iDP-IR)", "viridis_r", 0, vmax)
        _heatmap(axes[1], iso, f"{dataset}: MeanSSE, postprocess isotonic (centralized iDP-IR)", "viridis_r", 0, vmax)
        _heatmap(axes[2], ratio, f"{dataset}: ratio isotonic / none\n({label})", "RdYlGn_r", 0, 2, black_text=True)
        _mark_worse(axes[2], c, ratio)
        paths.append(_save(fig, out_dir, f"{dataset}-postprocess.png"))
    panels = []
    for (scen, split), g in d.groupby(["scenario", "split"], sort=True):
        for mech in ("idp-ir", "dp-ir"):
            gm = g[g["mechanism"] == mech]
            if not gm.empty:
                name = scen if split == "none" else f"{scen} ({split})"
                panels.append((f"{name}, {mech}", gm))
    if panels:
        ncol = 2
        nrow = (len(panels) + 1) // 2
        w = 1.0 + 0.75 * _ratio_matrix(panels[0][1]).shape[1]
        fig, axes = plt.subplots(nrow, ncol, figsize=(ncol * w, 3.0 * nrow), squeeze=False)
        for ax, (title, g) in zip(axes.flat, panels, strict=False):
            m = _ratio_matrix(g)
            _heatmap(ax, m, f"{dataset}: {title}", "RdYlGn_r", 0, 2, black_text=True)
            _mark_worse(ax, g, m)
        for ax in list(axes.flat)[len(panels):]:
            ax.axis("off")
        fig.suptitle(f"{dataset}: MeanSSE ratio isotonic / none ({label}; red frame: worse by > 2 SE)", fontsize=10)
        paths.append(_save(fig, out_dir, f"{dataset}-postprocess-ratio-all.png"))
    return paths


def plot_postprocess_headline(paired: pd.DataFrame, out_dir: str, main: tuple[str, str]) -> str | None:
    """``postprocess-ratio.png``: the ratio isotonic / none, centralized iDP-IR, one panel per dataset."""
    d = paired[(paired["scenario"] == "centralized") & (paired["mechanism"] == "idp-ir")
               & (paired["category_order"] == main[0]) & (paired["order_share"].astype(str) == str(main[1]))]
    datasets = sorted(d["dataset"].unique())
    if not datasets:
        return None
    d = d.assign(epsilon=d["epsilon"].astype(str))
    widths = [1.0 + 0.75 * d[d["dataset"] == ds]["k"].nunique() for ds in datasets]
    fig, axes = plt.subplots(1, len(datasets), figsize=(sum(widths), 3.4), squeeze=False,
                             gridspec_kw={"width_ratios": widths})
    for ax, ds in zip(axes[0], datasets, strict=True):
        g = d[d["dataset"] == ds]
        m = _ratio_matrix(g)
        _heatmap(ax, m, f"{ds}: MeanSSE with / without the isotonic projection\n(centralized iDP-IR, "
                 f"{int(g['runs'].min())} paired runs; < 1: projection better)", "RdYlGn_r", 0, 2, black_text=True)
        _mark_worse(ax, g, m)
    return _save(fig, out_dir, "postprocess-ratio.png")


def plot_all(summary: pd.DataFrame, out_dir: str, main: tuple[str, str] | None = None,
             main_postprocess: str | None = None, paired: pd.DataFrame | None = None) -> list[str]:
    """Write every figure the results allow; return their paths.

    ``main`` = (category_order, order_share) of the series the heatmaps show (default: the first
    row's); the category-order comparison figure shows every order. ``main_postprocess``: the
    ``postprocess`` value of the paper's figures (default: the first row's). ``paired``: the
    paired comparison (:func:`fragrelease.experiments.evaluation.postprocess_comparison`) for the
    post-processing figures.
    """
    paths = []
    suffix = ""
    if "postprocess" in summary.columns and len(summary):
        if main_postprocess is None:
            main_postprocess = summary["postprocess"].iloc[0]
        summary = summary[summary["postprocess"] == main_postprocess]
        suffix = f", postprocess {main_postprocess}"
    full = summary
    if "category_order" in summary.columns and len(summary):
        if main is None:
            main = (summary["category_order"].iloc[0], summary["order_share"].iloc[0])
        summary = summary[(summary["category_order"] == main[0]) & (summary["order_share"].astype(str) == str(main[1]))]
        suffix = f"\ncategory order: {_order_label(*main)}{suffix}"
    for dataset in sorted(summary["dataset"].unique()):
        central = _select(summary, dataset, "centralized", "idp-ir")
        if central.empty:
            continue
        has_cat = "category_tvd" in summary.columns and not central["category_tvd"].isna().all()
        sfx = suffix if has_cat else ""
        base = _matrix(central)
        fig, ax = plt.subplots(figsize=(1.0 + 0.75 * base.shape[1], 3.2 + 0.3 * bool(sfx)))
        _heatmap(ax, base, f"{dataset}: centralized iDP-IR MeanSSE{sfx}", "viridis_r")
        paths.append(_save(fig, out_dir, f"{dataset}-baseline.png"))

        dp = _select(summary, dataset, "centralized", "dp-ir")
        if not dp.empty:
            diff = base - _matrix(dp)
            lim = float(np.nanmax(np.abs(diff.to_numpy(float)))) or 1.0
            fig, ax = plt.subplots(figsize=(1.0 + 0.75 * diff.shape[1], 3.2 + 0.3 * bool(sfx)))
            _heatmap(ax, diff, f"{dataset}: iDP-IR minus DP-IR (centralized){sfx}", "RdBu_r", -lim, lim)
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
            fig, axes = plt.subplots(1, len(panels), figsize=(len(panels) * (1.0 + 0.75 * base.shape[1]),
                                                              3.2 + 0.3 * bool(sfx)), squeeze=False)
            for ax, (label, d) in zip(axes[0], panels, strict=True):
                _heatmap(ax, d, f"{dataset}: {label} minus centralized\n(iDP-IR, negatives drawn as 0){sfx}", "Reds",
                         0, vmax)
            paths.append(_save(fig, out_dir, f"{dataset}-fragmented-minus-centralized.png"))
        if "category_order" in full.columns:
            p = plot_order_comparison(full, dataset, out_dir)
            if p:
                paths.append(p)
        if paired is not None and len(paired) and main is not None:
            paths += plot_postprocess(paired, dataset, out_dir, main)
    if paired is not None and len(paired) and main is not None:
        head = plot_postprocess_headline(paired, out_dir, main)
        if head:
            paths.append(head)
    return paths


def _save(fig, out_dir: str, name: str) -> str:
    path = os.path.join(out_dir, name)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
