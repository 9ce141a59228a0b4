"""Reporting of the downstream-utility experiment (:mod:`fragrelease.experiments.downstream`): the
per-run CSV, the summary over runs, the ε at which each row comes within 1 point of the original's
accuracy, the docs/evaluation.md table and the figure.
"""
from __future__ import annotations

from typing import Callable

import pandas as pd

#: The synthetic-data rows, drawn thicker in the figure.
SYNTHESIZERS = ("mst", "aim", "dpmm-mst")

ROW_KEYS = ["method", "postprocess", "linkage", "epsilon"]


def read_per_run(path: str) -> pd.DataFrame:
    """A per-run CSV written by :func:`main`, with the row keys as strings ("" for not applicable)."""
    df = pd.read_csv(path, dtype={"epsilon": str, "postprocess": str, "linkage": str})
    return df.fillna({"postprocess": "", "linkage": ""})


def summarize(per_run: pd.DataFrame) -> pd.DataFrame:
    """Mean and standard deviation over runs per (method, postprocess, linkage, ε), with the guarantee."""
    g = per_run.groupby(ROW_KEYS, sort=False)
    out = g.agg(acc_lr=("acc_lr", "mean"), acc_lr_std=("acc_lr", "std"), acc_gb=("acc_gb", "mean"),
                acc_gb_std=("acc_gb", "std"), tvd1=("tvd1", "mean"), tvd2=("tvd2", "mean"),
                release_seconds=("release_seconds", "mean"), runs=("run", "count"),
                guarantee=("guarantee", "first")).reset_index()
    return out


def epsilon_within(summary: pd.DataFrame, metric: str, points: float = 1.0) -> pd.DataFrame:
    """Per row, the smallest ε of the grid whose mean ``metric`` is within ``points`` accuracy points of the original's.

    ``None`` when no ε of the grid reaches it. Returns columns method, postprocess, linkage, eps_within.
    """
    orig = float(summary.loc[summary["method"] == "original", metric].iloc[0])
    rows = []
    for keys, g in summary[summary["method"] != "original"].groupby(ROW_KEYS[:3], sort=False):
        g = g.assign(e=g["epsilon"].astype(float)).sort_values("e")
        hit = g[g[metric] >= orig - points / 100]
        rows.append(dict(zip(ROW_KEYS[:3], keys), metric=metric,
                         eps_within=(None if hit.empty else str(hit["epsilon"].iloc[0]))))
    return pd.DataFrame(rows)


def markdown_table(summary: pd.DataFrame, within: pd.DataFrame, statement: Callable[[str, str], str]) -> str:
    """The table of docs/evaluation.md: accuracy (%) per ε, TVDs at ε = 1, the ε within 1 point, runs, guarantee.

    ``statement(method, linkage)`` is a row's guarantee with ε left symbolic
    (:func:`fragrelease.experiments.downstream.guarantee`)."""
    eps = sorted(summary.loc[summary["method"] != "original", "epsilon"].unique(), key=float)
    head = ("| row | guarantee | GB accuracy at ε = " + " / ".join(eps) + " | LR accuracy at ε = " + " / ".join(eps)
            + " | 1-way / 2-way TVD at ε = 1 | ε within 1 point (LR, GB) | runs |")
    lines = [head, "|" + "---|" * 7]
    w = within.set_index(["method", "postprocess", "linkage", "metric"])["eps_within"]
    for group, g in summary.groupby(ROW_KEYS[:3], sort=False):
        keys = tuple(str(x) for x in group)  # (method, postprocess, linkage)
        g = g.set_index("epsilon")
        if keys[0] == "original":
            o = g.iloc[0]
            lines.append(f"| original | {o['guarantee']} | {100 * o['acc_gb']:.1f} | {100 * o['acc_lr']:.1f} | 0 / 0 | "
                         f"– | {int(o['runs'])} |")
            continue

        def cells(col: str, g: pd.DataFrame = g) -> str:
            return " / ".join(f"{100 * g.loc[e, col]:.1f}" if e in g.index else "–" for e in eps)
        tvd = f"{g.loc['1', 'tvd1']:.3f} / {g.loc['1', 'tvd2']:.3f}" if "1" in g.index else "–"
        reach = ", ".join(str(w.get((*keys, m)) or "not reached") for m in ("acc_lr", "acc_gb"))
        runs = "/".join(str(int(r)) for r in g["runs"]) if g["runs"].nunique() > 1 else str(int(g["runs"].iloc[0]))
        lines.append(f"| {label(keys[0], keys[1], keys[2])} | {statement(keys[0], keys[2])} | "
                     f"{cells('acc_gb')} | {cells('acc_lr')} | {tvd} | "
                     f"{reach} | {runs} |")
    return "\n".join(lines)


def label(method: str, postprocess: str, linkage: str) -> str:
    if method in ("idp-ir", "dp-ir"):
        return f"{ {'idp-ir': 'iDP-IR', 'dp-ir': 'DP-IR'}[method]}, {postprocess}, {linkage}"
    if method == "dpmm-mst":
        return "MST (dpmm)"
    if method in ("mst", "aim"):
        return f"{method.upper()} (OpenDP)"
    return method


def plot(summary: pd.DataFrame, path: str) -> str:
    """Accuracy (LR, GB) and marginal TVD (1-way, 2-way) vs total ε for every row."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(20, 4.8))
    orig = summary[summary["method"] == "original"].iloc[0]
    styles = {"idp-ir": "-", "dp-ir": "--", "mst": "-", "aim": "-", "dpmm-mst": "--"}
    colors = {("none", "linked"): "#9ecae1", ("isotonic", "linked"): "#08519c", ("none", "unlinked"): "#fdae6b",
              ("isotonic", "unlinked"): "#a63603"}
    for group, g in summary[summary["method"] != "original"].groupby(ROW_KEYS[:3], sort=False):
        m, p, lk = (str(x) for x in group)
        g = g.assign(e=g["epsilon"].astype(float)).sort_values("e")
        color = colors.get((p, lk), {"mst": "#31a354", "dpmm-mst": "#006d2c"}.get(m, "#756bb1"))
        marker = "o" if m != "aim" else "s"
        for ax, col in zip(axes, ("acc_lr", "acc_gb", "tvd1", "tvd2")):
            ax.plot(g["e"], 100 * g[col] if col.startswith("acc") else g[col], ls=styles[m], marker=marker,
                    color=color, lw=2.2 if m in SYNTHESIZERS else 1.2, label=label(m, p, lk))
    for ax, col, title in zip(axes, ("acc_lr", "acc_gb", "tvd1", "tvd2"),
                              ("logistic regression accuracy (%)", "gradient boosting accuracy (%)",
                               "mean 1-way marginal TVD", "mean 2-way marginal TVD")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("total ε (IR: ε/11 per column; linked IR has no table-level ε)")
        ax.set_title(f"Adult, trained on the release, tested on adult.test\n{title}", fontsize=9)
        if col.startswith("acc"):
            ax.axhline(100 * orig[col], color="black", lw=1, label="original")
            ax.axhline(100 * orig[col] - 1, color="black", lw=0.8, ls=":", label="original − 1 point")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=6, fontsize=8)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
