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

All statistics are computed in Spark; only aggregates (a few numbers per attribute and partition) reach
the driver.
"""
from __future__ import annotations

import base64
import html
import io
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Optional, Sequence

import numpy as np
import pandas as pd

# object-oriented Matplotlib (no pyplot): drawing a report never switches a notebook's backend
from matplotlib.figure import Figure
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from fragrelease.idpir.metrics import CATEGORICAL_SCALE, SCALE_TEXT
from fragrelease.jobs.frames import aggregate_row
from fragrelease.jobs.storage import write_text
from fragrelease.schemas.base import Attribute

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
BINS = 20


_RELATIVE_ERROR = 1e-4  # of the quantiles (Spark's Greenwald-Khanna sketch, percentile_approx)


def _combine(a: tuple, b: tuple) -> tuple:
    """Merge two (count, mean vector, co-moment matrix) summaries (Chan, Golub & LeVeque's pairwise update)."""
    n_a, mean_a, c_a = a
    n_b, mean_b, c_b = b
    if n_a == 0:
        return b
    if n_b == 0:
        return a
    n = n_a + n_b
    delta = mean_b - mean_a
    return n, mean_a + delta * (n_b / n), c_a + c_b + np.outer(delta, delta) * (n_a * n_b / n)


def _partial_summaries(attrs: Sequence[Attribute]):
    """A ``mapInPandas`` function: one row per partition with its count, means, co-moments, bins, counts."""
    numeric = [a for a in attrs if not a.categorical]
    categorical = [a for a in attrs if a.categorical]
    lo = np.array([a.bounds()[0] for a in numeric], dtype=float)
    width = np.array([(a.bounds()[1] - a.bounds()[0]) / BINS for a in numeric], dtype=float)
    p = len(numeric)

    def summarize(batches):
        acc = (0, np.zeros(p), np.zeros((p, p)))
        hist = np.zeros((p, BINS), dtype=np.int64)
        freq = [np.zeros(len(a.categories or ()), dtype=np.int64) for a in categorical]
        for pdf in batches:
            m = len(pdf)
            if m == 0:
                continue
            if p:
                x = pdf[[a.name for a in numeric]].to_numpy(dtype=float)
                mean = x.mean(axis=0)
                d = x - mean
                acc = _combine(acc, (m, mean, d.T @ d))
                b = np.minimum(np.floor((x - lo) / width), BINS - 1)
                for i in range(p):
                    ok = b[:, i] >= 0
                    hist[i] += np.bincount(b[ok, i].astype(np.int64), minlength=BINS)[:BINS]
            for f, a in zip(freq, categorical):
                codes = pd.Categorical(pdf[a.name], categories=list(a.categories or ())).codes
                f += np.bincount(codes[codes >= 0], minlength=len(a.categories or ()))
            if not p:
                acc = (acc[0] + m, acc[1], acc[2])
        yield pd.DataFrame({"n": [acc[0]], "mean": [acc[1]], "comoment": [acc[2].ravel()],
                            "hist": [hist.ravel()], "freq": [np.concatenate(freq) if freq else np.zeros(0, np.int64)]})

    return summarize


def table_summary(df: DataFrame, attrs: Sequence[Attribute]) -> tuple[dict, Optional[np.ndarray]]:
    """Per-attribute statistics and the numeric correlation matrix of ``df``, in two Spark passes.

    Numeric attribute → mean, sample standard deviation, the 5/25/50/75/95 % quantiles
    (approximate, relative rank error 1e-4) and a 20-bin histogram over the declared domain;
    categorical attribute → the count of every declared category. The correlation matrix (Pearson,
    numeric attributes in declared order; ``None`` with fewer than two) comes from the same pass.

    How: each partition summarizes its rows (count, means, co-moments, bin and category counts) in
    one ``mapInPandas`` task, and the driver merges these few numbers per partition (never rows);
    the quantiles are one ``percentile_approx`` aggregation. A handful of small plans instead of one aggregate
    expression per statistic, whose planning and code generation dominated small releases.
    """
    stats, corr = _summary_pass(df, attrs)
    return _with_quantiles(stats, _quantiles(df, attrs)), corr


def _summary_pass(df: DataFrame, attrs: Sequence[Attribute]) -> tuple[dict, Optional[np.ndarray]]:
    """:func:`table_summary` without the quantiles (``None`` each): the one ``mapInPandas`` pass.

    Returns ``(stats, corr)``; the histograms and category counts the plots draw are complete."""
    attrs = list(attrs)
    numeric = [a for a in attrs if not a.categorical]
    categorical = [a for a in attrs if a.categorical]
    p = len(numeric)
    schema = T.StructType([
        T.StructField("n", T.LongType()), T.StructField("mean", T.ArrayType(T.DoubleType())),
        T.StructField("comoment", T.ArrayType(T.DoubleType())), T.StructField("hist", T.ArrayType(T.LongType())),
        T.StructField("freq", T.ArrayType(T.LongType())),
    ])
    # per-partition aggregates only (one row each), no record-level data reaches the driver
    parts = df.select(*[a.name for a in attrs]).mapInPandas(_partial_summaries(attrs), schema).collect()
    acc: tuple = (0, np.zeros(p), np.zeros((p, p)))
    hist = np.zeros(p * BINS, dtype=np.int64)
    freq = np.zeros(sum(len(a.categories or ()) for a in categorical), dtype=np.int64)
    for r in parts:
        acc = _combine(acc, (int(r["n"]), np.asarray(r["mean"], dtype=float),
                             np.asarray(r["comoment"], dtype=float).reshape(p, p)))
        hist += np.asarray(r["hist"], dtype=np.int64)
        freq += np.asarray(r["freq"], dtype=np.int64)
    n, mean, com = acc
    stats: dict = {}
    offset, i = 0, 0
    for a in attrs:
        if a.categorical:
            m = len(a.categories or ())
            stats[a.name] = {"kind": "categorical",
                             "freq": {cat: int(v) for cat, v in zip((a.categories or ()), freq[offset:offset + m])}}
            offset += m
            continue
        lo, hi = a.bounds()
        w = (hi - lo) / BINS
        stats[a.name] = {"kind": "numeric", "mean": float(mean[i]) if n else None,
                         "std": float(np.sqrt(com[i, i] / (n - 1))) if n > 1 else None,
                         "quantiles": [None] * len(QUANTILES),
                         "edges": [lo + j * w for j in range(BINS + 1)],
                         "hist": [int(v) for v in hist[i * BINS:(i + 1) * BINS]]}
        i += 1
    corr = None
    if p >= 2:
        with np.errstate(invalid="ignore", divide="ignore"):
            sd = np.sqrt(np.diag(com))
            corr = com / np.outer(sd, sd)
        np.fill_diagonal(corr, 1.0)
    return stats, corr


def _quantiles(df: DataFrame, attrs: Sequence[Attribute]) -> dict:
    """The :data:`QUANTILES` of every numeric attribute of ``df``: one aggregation (none for an empty ``df``).

    ``percentile_approx`` with accuracy ``1 / _RELATIVE_ERROR``: the same Greenwald-Khanna sketch as
    ``DataFrame.approxQuantile``, as one SQL aggregate instead of an RDD ``treeAggregate`` (0.17-0.32 s
    against 0.25-2.2 s for 1,000 rows x 14 columns in a warm session; docs/benchmarks.md, "Issue 26,
    session 12"). Values as doubles.
    """
    names = [a.name for a in attrs if not a.categorical]
    if not names:
        return {}
    accuracy = int(round(1 / _RELATIVE_ERROR))
    row = aggregate_row(df.agg(*[F.percentile_approx(F.col(name).cast("double"), list(QUANTILES), accuracy)
                                 .alias(f"q{i}") for i, name in enumerate(names)]))
    # an empty table (or a column of nulls) has no quantiles: its entries stay None
    return {name: [float(v) for v in row[f"q{i}"]] for i, name in enumerate(names) if row[f"q{i}"] is not None}


def _with_quantiles(stats: dict, quantiles: dict) -> dict:
    for name, q in quantiles.items():
        stats[name]["quantiles"] = q
    return stats


@contextmanager
def _awaiting(future):
    """On an error in the block, wait for ``future``'s thread to end, then raise the block's error
    (never the plots' own), so no plot thread outlives a failed report."""
    try:
        yield
    except BaseException:
        wait([future])
        raise


def _plots_in_background(attrs: Sequence[Attribute], released: dict, original: Optional[dict] = None):
    """Start drawing one plot per attribute in a thread; returns a future of the ``<img>`` tags.

    The plots need only the histograms and category counts of the one-pass summary, so they are
    drawn while the driver waits for the quantile (and MeanSSE) Spark jobs instead of after them.
    Matplotlib's object-oriented API (one ``Figure`` per plot, no pyplot state) is used by this one
    thread only."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    # the first Agg canvas of the process looks at sys.modules["IPython"] (once per canvas class):
    # do it here, where no import runs concurrently, never in the thread while the driver imports
    FigureCanvasAgg(Figure())
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fragrelease-report-plots")
    future = pool.submit(lambda: [_plot_attribute(a, released[a.name], original[a.name] if original else None)
                                  for a in attrs])
    pool.shutdown(wait=False)  # the thread ends with its one task; the caller waits on the future
    return future


def correlations(df: DataFrame, attrs: Sequence[Attribute]) -> Optional[np.ndarray]:
    """Pearson correlation matrix of the numeric attributes (None with fewer than two; see :func:`table_summary`)."""
    return table_summary(df, attrs)[1]


def _png(fig, bottom: float) -> str:
    buf = io.BytesIO()
    # fixed margins: tight_layout measured every text first and was about a third of each plot's time
    fig.subplots_adjust(left=0.18, right=0.98, top=0.9, bottom=bottom)
    fig.savefig(buf, format="png", dpi=90)
    return f'<img alt="plot" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'


def _plot_attribute(a: Attribute, released: dict, original: Optional[dict]) -> str:
    fig = Figure(figsize=(5.2, 2.6))
    ax = fig.add_subplot()
    if a.categorical:
        cats = list(a.categories or ())
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
        ax.legend(fontsize=7, loc="upper right")  # "best" searches every bar: slow, and warns under load
    return _png(fig, bottom=0.4 if a.categorical else 0.2)


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


def _description_html(described: Optional[dict]) -> list[str]:
    """The table's own description, ``fragrelease.*`` properties and column comments
    (:func:`fragrelease.jobs.storage.table_self_description`), as HTML parts."""
    if not described:
        return []
    parts = ["<h2>What the table says about itself</h2>",
             f"<p>{html.escape(described.get('description') or '(no description)')}</p>"]
    if described.get("properties"):
        parts.append(_table(["table property", "value"], [[k, v] for k, v in described["properties"].items()]))
    if described.get("column_comments"):
        parts.append(_table(["column", "comment (its guarantee)"],
                            [[k, v] for k, v in described["column_comments"].items()]))
    return parts


def public_report(release_df: DataFrame, attrs: Sequence[Attribute], provenance: dict, path: str,
                  described: Optional[dict] = None) -> str:
    """Write the public report of a release to ``path`` (HTML); return the path.

    ``described`` is the table's description, properties and column comments
    (:func:`fragrelease.jobs.storage.table_self_description`); the report shows them as written.
    """
    stats, corr = _summary_pass(release_df, attrs)
    plots = _plots_in_background(attrs, stats)  # drawn while Spark computes the quantiles
    with _awaiting(plots):
        _with_quantiles(stats, _quantiles(release_df, attrs))
    images = plots.result()
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
        *noise_preview_html(provenance),
        *_description_html(described),
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
        *images,
        "</div>",
    ]
    text = _page(f"Release report: {provenance.get('dataset')} ({provenance.get('fragmentation')})", parts)
    write_text(path, text)
    return path


def owner_report(original: DataFrame, protected: DataFrame, attrs: Sequence[Attribute], id_column: str,
                 manifest: dict, path: str, mean_sse_value: Optional[float] = None, risk=None) -> str:
    """Write an owner's private report (its original fragment vs its protected fragment); return the path.

    ``risk``: the owner's measured disclosure risk (:class:`fragrelease.risk.RiskReport`, from
    ``risk_check``), shown in its own section (:func:`risk_html`); this report is the only place it goes.

    A local ``path`` is created with mode 0600 in a folder of mode 0700
    (:func:`fragrelease.jobs.idpir.workspace.write_private_text`)."""
    from fragrelease.jobs.idpir.evaluate import mean_sse_by_attribute

    # the five Spark passes are small and independent: submitted together from threads, Spark plans
    # and schedules them side by side instead of one after another; leaving the block waits for all
    # of them (a failure is raised after every pass has ended, so no thread outlives the report)
    with ThreadPoolExecutor(max_workers=5, thread_name_prefix="fragrelease-report-spark") as pool:
        summary_o = pool.submit(_summary_pass, original, attrs)
        summary_p = pool.submit(_summary_pass, protected, attrs)
        errors = pool.submit(mean_sse_by_attribute, original, protected, attrs, id_column)
        quantiles_o = pool.submit(_quantiles, original, attrs)
        quantiles_p = pool.submit(_quantiles, protected, attrs)
        so, co = summary_o.result()
        sp, cp = summary_p.result()
        plots = _plots_in_background(attrs, sp, so)  # drawn while Spark computes MeanSSE and the quantiles
        with _awaiting(plots):
            contributions = errors.result()
            _with_quantiles(so, quantiles_o.result())
            _with_quantiles(sp, quantiles_p.result())
    if mean_sse_value is None:
        mean_sse_value = sum(contributions.values())
    images = plots.result()
    names = [a.name for a in attrs if not a.categorical]
    rows = []
    for a in attrs:
        if not a.categorical:
            rows.append([f"{a.name} (original)", so[a.name]["mean"], so[a.name]["std"], *so[a.name]["quantiles"]])
            rows.append([f"{a.name} (released)", sp[a.name]["mean"], sp[a.name]["std"], *sp[a.name]["quantiles"]])
    cat_rows = []
    for a in attrs:
        if a.categorical:
            for c in (a.categories or ()):
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
        f"<p>MeanSSE: {html.escape(SCALE_TEXT)}.</p>",
        *attribute_error_html(attrs, so, sp, contributions),
        "<h2>Numeric attributes: original vs released</h2>",
        _table(["attribute", "mean", "std", *[f"q{int(q * 100)}" for q in QUANTILES]], rows),
        "<h2>Categorical attributes: frequencies</h2>" if cat_rows else "",
        _table(["attribute", "category", "original", "released"], cat_rows) if cat_rows else "",
        _corr_html(names, None if co is None else cp - co, "Correlation difference (released minus original)"),
        *risk_html(risk),
        "<h2>Distributions: original vs released</h2><div class='grid'>",
        *images,
        "</div>",
    ]
    text = _page(f"Owner report: {manifest.get('owner')} (private)", parts)
    from fragrelease.jobs.idpir.workspace import write_private_text

    write_private_text(path, text, who=f"owner {manifest.get('owner')!r}")  # 0600 in a 0700 folder, whatever the umask
    return path


def risk_html(risk) -> list[str]:
    """The owner report's "Measured disclosure risk" section (empty without a measurement).

    ``risk``: a :class:`fragrelease.risk.RiskReport` or None. One row per attack: risk, 95 % interval,
    attack, control and random-guess success rates (docs/privacy.md, "The owner's risk check").
    """
    if risk is None:
        return []
    rows = [[r.attack, r.attribute or "", f"{r.risk.value:.3f}", f"{r.risk.low:.3f} – {r.risk.high:.3f}",
             f"{r.attack_rate.value:.3f}", f"{r.control_rate.value:.3f}", f"{r.baseline_rate:.3f}", r.n_attacks]
            for r in risk.results]
    return [
        "<h2>Measured disclosure risk</h2>",
        "<p>anonymeter 1.1.0's attacks (Giomi et al., PoPETs 2023) on this owner's released rows, against "
        f"{risk.n_control} of its held-out records as the control set. An empirical lower bound on what these "
        "attacks achieve, not a guarantee: another attack may do better.</p>",
        _table(["attack", "attribute", "risk", "95 % interval", "attack rate", "control rate", "random guess",
                "attacks"], rows),
    ]


def noise_preview_html(provenance: dict) -> list[str]:
    """The per-attribute noise table of a release (:func:`fragrelease.idpir.preview.preview_from_provenance`):
    ε_attr, the Laplace scale, the 95 % interval and the rank-move chance, from the provenance's public
    parameters only (mechanism, k, ε, budgets, record counts, declared domains)."""
    from fragrelease.idpir.preview import preview_from_provenance
    from fragrelease.idpir.preview_table import table_header, table_rows, table_title

    try:
        pv = preview_from_provenance(provenance)
    except (KeyError, TypeError):  # a provenance written before these fields existed
        return []
    warning = pv.warning_text()
    return ["<h2>Noise per attribute</h2>", f"<p>{html.escape(table_title(pv))}. The interval is ±b·ln 20 around "
            "the exact centroid, in the attribute's units (ranks for categorical attributes).</p>",
            _table(table_header(pv), table_rows(pv)),
            f"<p class='warn'>{html.escape(warning)}</p>" if warning else "",
            "<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in pv.notes) + "</ul>"]


def attribute_error_html(attrs: Sequence[Attribute], original: dict, released: dict,
                         contributions: dict) -> list[str]:
    """The owner's actual error per attribute (private): mean shift, standard-deviation ratio, MeanSSE share.

    Numeric: released mean − original mean (the attribute's units), that shift in original standard
    deviations, released sd / original sd; categorical: the share of changed labels. Every attribute:
    its contribution to MeanSSE (the contributions add up to it; docs/specification.md §4).
    """
    l = len(attrs)
    rows = []
    for a in attrs:
        c = contributions[a.name]
        if a.categorical:  # c = changed · (1/s)² / l, s = CATEGORICAL_SCALE
            changed = c * l * CATEGORICAL_SCALE ** 2
            rows.append([a.name, "categorical", None, None, None, f"{changed:.1%} labels changed", c])
            continue
        o, r = original[a.name], released[a.name]
        shift = None if o["mean"] is None or r["mean"] is None else r["mean"] - o["mean"]
        in_sd = None if shift is None or not o["std"] else shift / o["std"]
        ratio = None if not o["std"] or r["std"] is None else r["std"] / o["std"]
        rows.append([a.name, "numeric", shift, in_sd, ratio, "", c])
    return ["<h2>Error per attribute (this fragment)</h2>",
            _table(["attribute", "kind", "mean shift (released − original)", "shift in original sd",
                    "sd ratio (released / original)", "labels", "MeanSSE contribution"], rows)]


def public_report_path(output: str, version: int) -> str:
    """``<output>_reports/release-v<version>.html``, beside the release table."""
    return f"{output.rstrip('/')}_reports/release-v{version}.html"
