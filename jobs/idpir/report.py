"""Utility reports written beside every release (HTML, self-contained, plots inline).

Two parts, produced separately because they are for different readers:

- **Public report** (the aggregator, beside the release table): the release's parameters, the
  composition, ε per owner and per attribute, and statistics **of the released table only**
  (mean, standard deviation, quantiles, histograms over the declared domain, category frequencies,
  correlations). Everything in it can be recomputed by anyone from the released table and its
  provenance, so it discloses nothing beyond the release.
- **Owner report** (each data owner, in its own folder): its fragment's original values against its
  protected values: MeanSSE, per-attribute statistics side by side, the correlation difference and
  overlaid plots. It is computed from the original data, which the privacy model does not protect:
  it is for that owner's eyes only and must not be shared.

All statistics are Spark aggregations; only aggregates (a few numbers per attribute) reach the driver.
"""
from __future__ import annotations

import base64
import html
import io
from datetime import datetime, timezone
from typing import Optional, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from pyspark.sql import DataFrame  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from fragrelease.jobs.storage import write_text  # noqa: E402
from fragrelease.schemas.base import Attribute  # noqa: E402

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
BINS = 20


def attribute_statistics(df: DataFrame, attrs: Sequence[Attribute]) -> dict:
    """Per attribute: numeric → mean, std, quantiles, histogram over the declared domain;
    categorical → frequency of every declared category. One Spark aggregation for everything."""
    aggs = []
    for i, a in enumerate(attrs):
        c = F.col(a.name)
        if a.categorical:
            aggs += [F.sum(F.when(c == cat, 1).otherwise(0)).alias(f"f{i}_{j}") for j, cat in enumerate(a.categories)]
            continue
        x = c.cast("double")
        lo, hi = a.bounds()
        b = F.least(F.floor((x - lo) / ((hi - lo) / BINS)), F.lit(BINS - 1))
        aggs += [F.avg(x).alias(f"m{i}"), F.stddev_samp(x).alias(f"s{i}"),
                 F.percentile_approx(x, list(QUANTILES), 10_000).alias(f"q{i}")]
        aggs += [F.sum(F.when(b == j, 1).otherwise(0)).alias(f"h{i}_{j}") for j in range(BINS)]
    row = df.agg(*aggs).first()
    stats: dict = {}
    for i, a in enumerate(attrs):
        if a.categorical:
            stats[a.name] = {"kind": "categorical",
                             "freq": {cat: int(row[f"f{i}_{j}"] or 0) for j, cat in enumerate(a.categories)}}
        else:
            lo, hi = a.bounds()
            width = (hi - lo) / BINS
            stats[a.name] = {"kind": "numeric", "mean": row[f"m{i}"], "std": row[f"s{i}"],
                             "quantiles": list(row[f"q{i}"]),
                             "edges": [lo + j * width for j in range(BINS + 1)],
                             "hist": [int(row[f"h{i}_{j}"] or 0) for j in range(BINS)]}
    return stats


def correlations(df: DataFrame, attrs: Sequence[Attribute]) -> Optional[np.ndarray]:
    """Pearson correlation matrix of the numeric attributes (None with fewer than two)."""
    names = [a.name for a in attrs if not a.categorical]
    if len(names) < 2:
        return None
    pairs = [(i, j) for i in range(len(names)) for j in range(i + 1, len(names))]
    row = df.agg(*[F.corr(F.col(names[i]).cast("double"), F.col(names[j]).cast("double")).alias(f"c{i}_{j}")
                   for i, j in pairs]).first()
    m = np.eye(len(names))
    for i, j in pairs:
        m[i, j] = m[j, i] = row[f"c{i}_{j}"] if row[f"c{i}_{j}"] is not None else np.nan
    return m


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return f'<img alt="plot" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'


def _plot_attribute(a: Attribute, released: dict, original: Optional[dict]) -> str:
    fig, ax = plt.subplots(figsize=(5.2, 2.6))
    if a.categorical:
        cats = list(a.categories)
        x = np.arange(len(cats))
        w = 0.4 if original else 0.8
        if original:
            ax.bar(x - w / 2, [original["freq"][c] for c in cats], w, label="original", color="#999999")
        ax.bar(x + (w / 2 if original else 0), [released["freq"][c] for c in cats], w, label="released", color="#3b75af")
        ax.set_xticks(x, cats, rotation=60, ha="right", fontsize=6)
    else:
        edges = np.array(released["edges"])
        centers = (edges[:-1] + edges[1:]) / 2
        width = edges[1] - edges[0]
        if original:
            ax.bar(centers, original["hist"], width, label="original", color="#999999", alpha=0.6)
        ax.bar(centers, released["hist"], width * (0.5 if original else 0.9), label="released", color="#3b75af")
        ax.set_xlabel(f"{a.name} (declared domain {edges[0]:g} to {edges[-1]:g})")
    ax.set_ylabel("records")
    ax.set_title(a.name, fontsize=9)
    if original:
        ax.legend(fontsize=7)
    return _png(fig)


def _fmt(v) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.4g}"
    return html.escape(str(v))


def _table(header: Sequence[str], rows: Sequence[Sequence]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_fmt(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _corr_html(names: Sequence[str], m: Optional[np.ndarray], title: str) -> str:
    if m is None:
        return ""
    return f"<h3>{html.escape(title)}</h3>" + _table([""] + list(names), [[n, *m[i]] for i, n in enumerate(names)])


_STYLE = """body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.2em}td,th{border:1px solid #ccc;padding:3px 7px;font-size:13px;text-align:right}
th{background:#f3f3f3}.warn{background:#fff3cd;border:1px solid #e0c36a;padding:.7em}.grid{display:flex;flex-wrap:wrap;gap:8px}"""


def _page(title: str, parts: Sequence[str]) -> str:
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>{''.join(parts)}"
            f"<p><small>Generated by fragrelease on {datetime.now(timezone.utc).isoformat(timespec='seconds')}"
            f"</small></p></body></html>")


def _numeric_rows(attrs, stats, prefix=""):
    rows = []
    for a in attrs:
        s = stats[a.name]
        if s["kind"] == "numeric":
            rows.append([f"{prefix}{a.name}", s["mean"], s["std"], *s["quantiles"]])
    return rows


def public_report(release_df: DataFrame, attrs: Sequence[Attribute], provenance: dict, path: str) -> str:
    """Write the public report of a release to ``path`` (HTML); return the path."""
    stats = attribute_statistics(release_df, attrs)
    corr = correlations(release_df, attrs)
    owners = provenance.get("owners", [])
    parts = [
        "<p>Everything on this page is computed from the released table and its recorded parameters "
        "only, so it discloses nothing beyond the release itself.</p>",
        "<h2>Parameters</h2>",
        _table(["parameter", "value"], [
            ["dataset", provenance.get("dataset")], ["fragmentation", provenance.get("fragmentation")],
            ["mechanism", provenance.get("mechanism")], ["k", provenance.get("k")],
            ["total ε", provenance.get("epsilon")], ["composition", provenance.get("composition")],
            ["vertical ε split", provenance.get("epsilon_split")], ["plan id", provenance.get("plan_id")],
            ["record id released", provenance.get("keep_id")],
            ["category order", f"{provenance.get('category_order')} (share {provenance.get('category_order_share')})"],
            ["linkage", provenance.get("linkage")],
        ]),
        "<h2>Guarantee</h2>",
        _table(["what", "statement"], [[k.replace("_", " "), v] for k, v in (provenance.get("guarantee") or {}).items()]),
        "<h2>Budget per owner and per attribute</h2>",
        _table(["owner", "records", "ε_j", "ε per attribute", "attributes"],
               [[o["name"], o["n_records"], o["epsilon"], o["epsilon_per_attribute"], ", ".join(o["attributes"])]
                for o in owners]),
        _table(["owner", "attribute", "ε", "ε category order", "ε centroids"],
               [[o["name"], b["attribute"], b["epsilon"], b["epsilon_order"], b["epsilon_centroids"]]
                for o in owners for b in o.get("budgets", ())]),
        "<h2>Released numeric attributes</h2>",
        _table(["attribute", "mean", "std", *[f"q{int(q * 100)}" for q in QUANTILES]], _numeric_rows(attrs, stats)),
        _corr_html([a.name for a in attrs if not a.categorical], corr, "Correlations of the released numeric attributes"),
        "<h2>Distributions of the released attributes</h2><div class='grid'>",
        *[_plot_attribute(a, stats[a.name], None) for a in attrs],
        "</div>",
    ]
    text = _page(f"Release report: {provenance.get('dataset')} ({provenance.get('fragmentation')})", parts)
    write_text(path, text)
    return path


def owner_report(original: DataFrame, protected: DataFrame, attrs: Sequence[Attribute], id_column: str,
                 manifest: dict, path: str, mean_sse_value: Optional[float] = None) -> str:
    """Write an owner's private report (its original fragment vs its protected fragment); return the path."""
    from fragrelease.jobs.idpir.evaluate import mean_sse

    if mean_sse_value is None:
        mean_sse_value = mean_sse(original, protected, attrs, id_column)
    so = attribute_statistics(original, attrs)
    sp = attribute_statistics(protected, attrs)
    names = [a.name for a in attrs if not a.categorical]
    co, cp = correlations(original, attrs), correlations(protected, attrs)
    rows = []
    for a in attrs:
        if not a.categorical:
            rows.append([f"{a.name} (original)", so[a.name]["mean"], so[a.name]["std"], *so[a.name]["quantiles"]])
            rows.append([f"{a.name} (released)", sp[a.name]["mean"], sp[a.name]["std"], *sp[a.name]["quantiles"]])
    cat_rows = []
    for a in attrs:
        if a.categorical:
            for c in a.categories:
                cat_rows.append([a.name, c, so[a.name]["freq"][c], sp[a.name]["freq"][c]])
    parts = [
        "<p class='warn'><b>For the data owner's eyes only.</b> This report is computed from the original "
        "fragment, which the privacy model does not protect: the original statistics, the differences and "
        "MeanSSE below disclose information about individuals. Do not share it.</p>",
        "<h2>Parameters</h2>",
        _table(["parameter", "value"], [["owner", manifest.get("owner")], ["plan id", manifest.get("plan_id")],
                                        ["mechanism", manifest.get("mechanism")], ["k", manifest.get("k")],
                                        ["ε_j", manifest.get("epsilon")],
                                        ["ε per attribute", manifest.get("epsilon_per_attribute")],
                                        ["records", manifest.get("n_records")],
                                        ["MeanSSE (authors' convention)", mean_sse_value]]),
        "<h2>Numeric attributes: original vs released</h2>",
        _table(["attribute", "mean", "std", *[f"q{int(q * 100)}" for q in QUANTILES]], rows),
        "<h2>Categorical attributes: frequencies</h2>" if cat_rows else "",
        _table(["attribute", "category", "original", "released"], cat_rows) if cat_rows else "",
        _corr_html(names, None if co is None else cp - co, "Correlation difference (released minus original)"),
        "<h2>Distributions: original vs released</h2><div class='grid'>",
        *[_plot_attribute(a, sp[a.name], so[a.name]) for a in attrs],
        "</div>",
    ]
    text = _page(f"Owner report: {manifest.get('owner')} (private)", parts)
    write_text(path, text)
    return path


def public_report_path(output: str, version: int) -> str:
    """``<output>_reports/release-v<version>.html``, beside the release table."""
    return f"{output.rstrip('/')}_reports/release-v{version}.html"
