"""Utility reports written beside every release (HTML, one self-contained file; the charts are HTML and CSS
that the browser draws, no image).

Two parts, produced separately because they are for different readers:

- **Public report** (the aggregator, beside the release table): it opens with the table, its version,
  its row count and the guarantee in one sentence (the release's own ``per_column`` and ``table``
  statements, :func:`fragrelease.idpir.guarantee.release_guarantee`, against release recipients);
  then charts of the noise per attribute (the 95 % interval as a share of the domain, the chance a
  categorical rank moves) from the public parameters, and statistics **of the released table only**
  (histograms over the declared domain, category frequencies, mean, standard deviation, quantiles,
  the correlation matrix as a table coloured as a heat map); then the full guarantee, the parameters
  and ε per owner and attribute.
  Everything in it can be recomputed by anyone from the released table and its provenance, so it
  discloses nothing beyond the release.
- **Owner report** (each data owner, in its own folder): its fragment's original values against its
  released values **as the release table stores them** (integer-declared attributes rounded half to
  even and cast, :func:`fragrelease.jobs.describe.cast_declared_integers`, as the aggregator does):
  a chart of the error per attribute (RMS error as a share of the domain, labels changed), MeanSSE,
  the distributions overlaid and the correlation difference. It is computed from the original data,
  which the privacy model does not protect: it is for that owner's eyes only and must not be shared.

The HTML comes from Jinja2 templates with autoescaping on (``templates/``, shipped as package data):
``base.html.j2`` (page, footer, ``extra_sections``), ``public_report.html.j2`` and
``owner_report.html.j2`` (one ``{% block %}`` per section), ``description.html.j2`` and
``macros.html.j2``. A further section is a :class:`ReportSection` passed as ``extra_sections``.

All statistics are computed in Spark; only aggregates (a few numbers per attribute and partition) reach
the driver. Intervals of the Laplace noise come from OpenDP's accuracy function
(:func:`fragrelease.idpir.accuracy.laplace_half_width`).
"""
from __future__ import annotations

import functools
import math
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

import jinja2
import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from fragrelease.idpir.metrics import CATEGORICAL_SCALE, SCALE_TEXT
from fragrelease.schemas.base import Attribute

from ..describe import cast_declared_integers, integer_columns
from ..frames import aggregate_row
from ..storage import write_text

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
BINS = 20


_RELATIVE_ERROR = 1e-4  # of the quantiles (Spark's Greenwald-Khanna sketch, percentile_approx)
#: A table of fewer records than this has its quantiles computed exactly, in the summary pass, when it is
#: one partition: Spark's sketch at ``_RELATIVE_ERROR`` keeps every value of fewer than
#: ``1 / (2 * _RELATIVE_ERROR)`` records (no sample merged, none inserted with a rank uncertainty), so
#: ``percentile_approx`` returns exactly :func:`_rank_quantiles` there (tests/jobs/idpir/test_report_passes.py).
EXACT_QUANTILE_RECORDS = int(round(1 / (2 * _RELATIVE_ERROR)))


def _rank_quantiles(values: np.ndarray, probabilities: Sequence[float]) -> Optional[list[float]]:
    """The ``probabilities`` quantiles of ``values`` (NaN ignored) as Spark's ``percentile_approx`` gives them
    from an exact sketch: the value of rank ``ceil(p * n)`` (1-based, at least 1) in sorted order; ``None``
    when there is no value."""
    x = np.sort(values[~np.isnan(values)])
    n = len(x)
    if not n:
        return None
    return [float(x[max(math.ceil(q * n), 1) - 1]) for q in probabilities]


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


def _partial_summaries(attrs: Sequence[Attribute], quantiles: bool = False):
    """A ``mapInPandas`` function: per partition, one row per table in it (column ``_SIDE``) with its
    count, means, co-moments, bins and category counts (no row for a table the partition lacks);
    with ``quantiles``, also the :data:`QUANTILES` of each numeric attribute over the partition's rows
    of that table (:func:`_rank_quantiles`; NaN where it has no value), which are the table's own when
    the partition holds all of its rows."""
    numeric = [a for a in attrs if not a.categorical]
    categorical = [a for a in attrs if a.categorical]
    lo = np.array([a.bounds()[0] for a in numeric], dtype=float)
    width = np.array([(a.bounds()[1] - a.bounds()[0]) / BINS for a in numeric], dtype=float)
    p = len(numeric)

    def empty() -> list:
        return [(0, np.zeros(p), np.zeros((p, p))), np.zeros((p, BINS), dtype=np.int64),
                [np.zeros(len(a.categories or ()), dtype=np.int64) for a in categorical]]

    def add(state: list, pdf: pd.DataFrame) -> None:
        m = len(pdf)
        if p:
            x = pdf[[a.name for a in numeric]].to_numpy(dtype=float)
            mean = x.mean(axis=0)
            d = x - mean
            state[0] = _combine(state[0], (m, mean, d.T @ d))
            b = np.minimum(np.floor((x - lo) / width), BINS - 1)
            for i in range(p):
                ok = b[:, i] >= 0
                state[1][i] += np.bincount(b[ok, i].astype(np.int64), minlength=BINS)[:BINS]
        for f, a in zip(state[2], categorical):
            codes = pd.Categorical(pdf[a.name], categories=list(a.categories or ())).codes
            f += np.bincount(codes[codes >= 0], minlength=len(a.categories or ()))
        if not p:
            state[0] = (state[0][0] + m, state[0][1], state[0][2])

    def ranked(blocks: list) -> np.ndarray:
        # every numeric attribute's quantiles over the partition's rows of one table, attribute-major
        x = np.concatenate(blocks) if blocks else np.zeros((0, p))
        out = [_rank_quantiles(x[:, i], QUANTILES) for i in range(p)]
        return np.array([v for q in out for v in (q if q is not None else [np.nan] * len(QUANTILES))], dtype=float)

    def summarize(batches):
        # one summary per table (the _SIDE tag of each row) present in this partition
        states: dict[int, list] = {}
        values: dict[int, list] = {}
        for pdf in batches:
            if len(pdf) == 0:
                continue
            for side, rows in pdf.groupby(_SIDE, sort=True):
                add(states.setdefault(int(side), empty()), rows)
                if quantiles and p:
                    values.setdefault(int(side), []).append(rows[[a.name for a in numeric]].to_numpy(dtype=float))
        for side, (acc, hist, freq) in sorted(states.items()):
            row = {"side": [side], "n": [acc[0]], "mean": [acc[1]], "comoment": [acc[2].ravel()],
                   "hist": [hist.ravel()], "freq": [np.concatenate(freq) if freq else np.zeros(0, np.int64)]}
            if quantiles:
                row["quantiles"] = [ranked(values.get(side, []))]
            yield pd.DataFrame(row)

    return summarize


def table_summary(df: DataFrame, attrs: Sequence[Attribute]) -> tuple[Mapping[str, Any], Optional[np.ndarray]]:
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
    stats, corr, _ = _counted_summary_pass(df, attrs)
    return _with_quantiles(stats, _quantiles(df, attrs)), corr


def _counted_summary_pass(df: DataFrame, attrs: Sequence[Attribute]) -> tuple[dict, Optional[np.ndarray], int]:
    """:func:`table_summary` without the quantiles (``None`` each), with the row count of ``df``: the one
    ``mapInPandas`` pass. Returns ``(stats, corr, n)``; the histograms and category counts the plots draw
    are complete."""
    return _summary_passes([df], attrs)[0]


_SIDE = "__fragrelease_side"


def _summary_passes(frames: Sequence[DataFrame], attrs: Sequence[Attribute], *,
                    quantiles: bool = False) -> list[tuple[dict, Optional[np.ndarray], int]]:
    """:func:`_counted_summary_pass` of each of ``frames`` (each with the columns of ``attrs``), in order,
    from one Spark job: ``mapInPandas`` over their union (which moves no rows), each row tagged with its
    frame; every partition summarizes each frame's rows apart, and the driver merges each frame's
    partial summaries only (a frame with no rows: n = 0, no means).

    ``quantiles``: the caller made each frame one partition of fewer than :data:`EXACT_QUANTILE_RECORDS`
    records (public or the owner's own counts); the same job then also gives each numeric attribute's
    :data:`QUANTILES`, exactly those of :func:`_quantiles` (one Spark job instead of two). A frame found in
    more than one partition raises RuntimeError (a programming error: the caller's promise broken)."""
    attrs = list(attrs)
    schema = T.StructType([
        T.StructField("side", T.IntegerType()),
        T.StructField("n", T.LongType()), T.StructField("mean", T.ArrayType(T.DoubleType())),
        T.StructField("comoment", T.ArrayType(T.DoubleType())), T.StructField("hist", T.ArrayType(T.LongType())),
        T.StructField("freq", T.ArrayType(T.LongType())),
        *([T.StructField("quantiles", T.ArrayType(T.DoubleType()))] if quantiles else []),
    ])
    # numeric columns as doubles (as each partition reads them) so the union's column types agree
    tagged = [df.select(*[F.col(a.name).cast("double").alias(a.name) if not a.categorical else F.col(a.name)
                          for a in attrs], F.lit(i).alias(_SIDE)) for i, df in enumerate(frames)]
    union = functools.reduce(DataFrame.union, tagged)
    # per-partition aggregates only (one row each), no record-level data reaches the driver
    parts = union.mapInPandas(_partial_summaries(attrs, quantiles), schema).collect()
    out = []
    for i in range(len(frames)):
        mine = [r for r in parts if r["side"] == i]
        stats, corr, n = _merged(attrs, mine)
        if quantiles:
            if len(mine) > 1:
                raise RuntimeError(f"frame {i} of the summary pass spans {len(mine)} partitions, not one")
            flat = np.asarray(mine[0]["quantiles"], dtype=float) if mine else np.zeros(0)
            numeric = [a.name for a in attrs if not a.categorical]
            k = len(QUANTILES)
            # an attribute without a value has no quantiles (as :func:`_quantiles`): its entries stay None
            _with_quantiles(stats, {name: [float(v) for v in flat[j * k:(j + 1) * k]] for j, name in enumerate(numeric)
                                    if len(flat) and not np.isnan(flat[j * k:(j + 1) * k]).any()})
        out.append((stats, corr, n))
    return out


def _merged(attrs: list[Attribute], parts: Sequence[Any]) -> tuple[dict, Optional[np.ndarray], int]:
    """One table's ``(stats, corr, n)`` from its partitions' summaries (rows of :func:`_partial_summaries`)."""
    numeric = [a for a in attrs if not a.categorical]
    categorical = [a for a in attrs if a.categorical]
    p = len(numeric)
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
    return stats, corr, int(n)


def _quantiles(df: DataFrame, attrs: Sequence[Attribute]) -> Mapping[str, Any]:
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


def _with_quantiles(stats: dict, quantiles: Mapping[str, Any]) -> Mapping[str, Any]:
    for name, q in quantiles.items():
        stats[name]["quantiles"] = q
    return stats


#: Reader features under which a version's active data files, read with the log's schema, are the
#: table (none changes what a data file's rows mean: no column mapping, deletion vectors, type widening).
PLAIN_READER_FEATURES = frozenset({"timestampNtz", "v2Checkpoint", "vacuumProtocolCheck"})


def plain_parquet_table(table) -> bool:
    """Whether the rows of delta-rs ``table``'s version are its active data files read as Parquet with
    the log's schema: reader protocol 1, or 2-3 with column mapping off and only
    :data:`PLAIN_READER_FEATURES`, and no partition columns (their values live in the log, not the files).

    Else (a user's existing table with column mapping, deletion vectors, partitions, a reader feature
    added later) only Delta's reader reads it right (Delta's table protocol, "Reader Requirements")."""
    protocol, metadata = table.protocol(), table.metadata()
    if protocol.min_reader_version > 3 or metadata.partition_columns:
        return False
    if (metadata.configuration or {}).get("delta.columnMapping.mode", "none") != "none":
        return False
    return protocol.min_reader_version < 3 or set(protocol.reader_features or ()) <= PLAIN_READER_FEATURES


def committed_release(spark, path: str, version: int) -> DataFrame:
    """The rows of version ``version`` of the release table at ``path`` (a Delta root), for the public report.

    A table :func:`plain_parquet_table` accepts is read from the version's active data files, which
    delta-rs lists from the log, with the log's schema (:func:`fragrelease.jobs.protocol.digests.committed_rows`):
    no Spark job rebuilds Delta's state or reads footers, and a version of at most
    :data:`fragrelease.jobs.protocol.digests.SINGLE_TASK_BYTES` of data files is one partition (its
    aggregations need no shuffle). Any other table, or one delta-rs cannot open here
    (``DeltaProtocolError``, a store it has no credentials for), is read with :func:`fragrelease.jobs.storage.read_delta`, as before.
    Shapes: the table's columns in the log's order, one row per released row.

    A version without data files is read with Delta's reader too (no rows). Raises what
    :func:`fragrelease.jobs.storage.read_delta` raises for a path that is no Delta table.
    """
    from deltalake import DeltaTable

    from ..storage import absolute, is_delta_table, read_delta
    from .digests import committed_rows

    try:
        # a version without data files (an empty release) is read by Delta's reader: no rows, no error
        table = DeltaTable(absolute(path), version=version) if is_delta_table(path) else None
        plain = table is not None and plain_parquet_table(table) and bool(table.file_uris())
    except Exception:  # noqa: BLE001 - delta-rs cannot open it here (DeltaProtocolError, a store it has no
        # credentials for, a panic): the release is committed, so its report is read by Spark's Delta reader
        plain = False
    if plain:
        return committed_rows(spark, path, version)
    return read_delta(spark, path, version)


#: The templates' folder (package data of fragrelease.jobs: setup.py ``package_data``).
# resolved: under a strict editable install report.py is a link into the checkout, whose templates are the current ones
TEMPLATES = Path(__file__).resolve().with_name("templates")


@dataclass(frozen=True)
class ReportSection:
    """A section added to a report after its own ones (``extra_sections``; ``base.html.j2``).

    ``template`` is a file under :data:`TEMPLATES`, rendered inside ``<section id=anchor><h2>title</h2>``
    (autoescaped); it sees ``section`` (this object, its values as ``section.context``) and imports
    ``macros.html.j2`` itself. ``table_section.html.j2`` renders ``section.context`` = ``{"text"
    (optional), "header", "rows"}`` as a paragraph and a table."""

    title: str
    template: str
    context: Mapping[str, Any] = field(default_factory=dict)
    anchor: str = "section"


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The reports' Jinja2 environment: templates from :data:`TEMPLATES`, autoescape on for every
    template (a value can never become markup), an undefined variable an error (``StrictUndefined``).
    Every template sees ``chart_colours`` (the distribution charts' :data:`ORIGINAL_COLOUR` and
    :data:`RELEASED_COLOUR`, ``original`` and ``released``: ``base.html.j2``'s style colours the bars with them)."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.globals["chart_colours"] = {"original": ORIGINAL_COLOUR, "released": RELEASED_COLOUR}
    return env


def render(template: str, **context: Any) -> str:
    """Render ``template`` (a file under :data:`TEMPLATES`) with ``context``; the page templates also
    get ``extra_sections`` (default none), ``fragrelease_version`` and ``generated`` (UTC, seconds).

    Raises ``jinja2.TemplateNotFound`` for a missing template and ``jinja2.UndefinedError`` for a
    variable the template uses and ``context`` lacks."""
    from fragrelease.version import __version__

    context.setdefault("extra_sections", ())
    context.setdefault("fragrelease_version", __version__)
    context.setdefault("generated", datetime.now(timezone.utc).isoformat(timespec="seconds"))
    return environment().get_template(template).render(**context)


#: A fragment of at most this many values (records x attributes) is summarized in one task by the owner report.
SINGLE_TASK_VALUES = 2_000_000


def _single_task(n_records: Any, n_attributes: int) -> bool:
    """Whether a table of ``n_records`` records (``None``: unknown) and ``n_attributes`` is small enough for one task."""
    return isinstance(n_records, int) and n_records * max(n_attributes, 1) <= SINGLE_TASK_VALUES


@contextmanager
def _awaiting(future, handoff: Optional[Future] = None):
    """On an error in the block, fail ``handoff`` (a future the plot thread waits on for its data, when
    not yet set) with that error, wait for ``future``'s thread to end, then raise the block's error
    (never the plots' own), so no plot thread outlives a failed report."""
    try:
        yield
    except BaseException as error:
        if handoff is not None and not handoff.done():
            handoff.set_exception(error)
        wait([future])
        raise


def _in_background(draw: Callable[[], Any]):
    """Start ``draw`` (the public report's charts) in a thread; returns its future.

    The public report's noise charts come from a simulation on public parameters only, so they are
    made while its summary job runs. Every chart is HTML computed in Python (:func:`_distributions`,
    :func:`_bar_chart`): nothing is drawn; the owner report's distribution charts take milliseconds and
    are made in the driver's own thread."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fragrelease-report-plots")
    future = pool.submit(draw)
    pool.shutdown(wait=False)  # the thread ends with its one task; the caller waits on the future
    return future


#: The distribution charts' colours: the original's bars (drawn with opacity 0.6) and the released ones.
ORIGINAL_COLOUR, RELEASED_COLOUR = "#999999", "#3b75af"
_STEPS = (1, 2, 2.5, 5, 10)  # tick steps (times a power of ten): a domain 0 to 100 gets 0, 25, 50, 75, 100


@dataclass(frozen=True)
class Tick:
    """One labelled tick of a distribution chart's axis: its ``label`` and its ``position``, in % of the
    axis from its start (the counts' axis from the bottom, the x axis from the left)."""

    label: str
    position: float


@dataclass(frozen=True)
class Distribution:
    """One distribution chart drawn in HTML (``macros.html.j2``, ``distribution``; :func:`_distribution`).

    ``released``: a bar per bin (numeric) or category (categorical), its height in % of the plot's
    height; ``original``: the original's bars in the same way (owner report; None in the public report);
    ``yticks``: the counts' axis; ``xticks``: the declared domain's ticks (numeric) or each category's
    name under its bars (categorical); ``alt``: the alternative text (the figure is ``role="img"`` with
    it as its label); ``caption``: shown under the chart."""

    alt: str
    caption: str
    categorical: bool
    released: tuple[float, ...]
    original: Optional[tuple[float, ...]]
    yticks: tuple[Tick, ...]
    xticks: tuple[Tick, ...]

    @property
    def bins(self) -> list[tuple[Optional[float], float]]:
        """``(original height or None, released height)`` per bin or category, in order."""
        return list(zip(self.original or (None,) * len(self.released), self.released))


def _heights(counts: Sequence[float], top: float) -> tuple[float, ...]:
    """Each of ``counts`` as a share of ``top`` (the chart's largest count), in %; all 0 when ``top`` is 0."""
    return tuple(100.0 * c / top if top > 0 else 0.0 for c in counts)


def _tick_values(lo: float, hi: float) -> list[float]:
    """The ticks Matplotlib's axis drew from ``lo`` to ``hi`` (``lo`` < ``hi``): ``MaxNLocator(4,
    steps=_STEPS).tick_values(lo, hi)`` (no figure, nothing drawn) within [lo, hi], so at most 5, cleared
    of floating-point noise (12 significant digits)."""
    from matplotlib.ticker import MaxNLocator

    slack = 1e-9 * (hi - lo)
    return [float(f"{v:.12g}") + 0.0 for v in MaxNLocator(4, steps=_STEPS).tick_values(lo, hi)
            if lo - slack <= v <= hi + slack]


def _tick_label(v: float) -> str:
    """A tick's value as text: whole numbers without a decimal point (2000, -4), others to 6 significant digits."""
    return str(int(v)) if float(v).is_integer() and abs(v) < 1e15 else f"{v:.6g}"


def _count_ticks(top: float) -> tuple[Tick, ...]:
    """The counts' axis of a chart whose largest count is ``top``: the :func:`_tick_values` from 0 to
    ``top``, each at its share of ``top``; 0 alone when ``top`` is 0 (nothing counted)."""
    if top <= 0:
        return (Tick("0", 0.0),)
    return tuple(Tick(_tick_label(v), 100.0 * v / top) for v in _tick_values(0.0, top))


def _domain_ticks(lo: float, hi: float) -> tuple[Tick, ...]:
    """A numeric attribute's axis over its declared domain [lo, hi]: the :func:`_tick_values`, each at
    (value − lo) / (hi − lo) of the axis."""
    return tuple(Tick(_tick_label(v), 100.0 * (v - lo) / (hi - lo)) for v in _tick_values(lo, hi))


def _distribution(a: Attribute, released: dict, original: Optional[dict]) -> Distribution:
    """The distribution chart of attribute ``a``: its ``released`` summary's histogram (``edges``: the
    declared domain cut into equal bins, ``hist``) or category counts (``freq``), beside ``original``'s
    when given (its bars behind the released ones for a numeric attribute, to their left for a
    categorical one). Every bar's height is its count as a share of the chart's largest count, the
    original's and released ones together (:func:`_heights`). Alternative text and caption: the
    attribute's name, what is drawn and (numeric) the declared domain; nothing else is shown but the
    bars and the axes' ticks."""
    if a.categorical:
        cats = list(a.categories or ())
        counts = [released["freq"][c] for c in cats]
        before = None if original is None else [original["freq"][c] for c in cats]
        xticks = tuple(Tick(str(c), 100.0 * (i + 0.5) / len(cats)) for i, c in enumerate(cats))
        what, over = "records per category", ""
    else:
        counts, before = list(released["hist"]), None if original is None else list(original["hist"])
        lo, hi = float(released["edges"][0]), float(released["edges"][-1])
        xticks = _domain_ticks(lo, hi)
        what, over = "records per bin", f"declared domain {lo:g} to {hi:g}"
    top = max([*counts, *(before or ())], default=0)
    values = "original and released" if original is not None else "released"
    alt = f"{a.name}: distribution of the {values} values" + (f" over the {over}" if over else "")
    return Distribution(alt, f"{a.name}: {what}" + (f", {over}" if over else ""), a.categorical,
                        _heights(counts, top), None if before is None else _heights(before, top),
                        _count_ticks(top), xticks)


def _distributions(attrs: Sequence[Attribute], released: Mapping[str, dict],
                   original: Optional[Mapping[str, dict]] = None) -> list[Distribution]:
    """One distribution chart per attribute of ``attrs`` (in order), from the summaries ``released``
    (and ``original``) by attribute name (:func:`_distribution`).

    Drawn by the browser, not as images: the numbers here are the bars' heights and the ticks, 0.5-3 KB
    of HTML per chart. About 3 ms of driver CPU for 20 charts with their HTML, where Matplotlib's PNGs
    took 0.28-0.37 s (docs/benchmarks.md, "Issue 41, session 6: the distribution charts in HTML")."""
    return [_distribution(a, released[a.name], None if original is None else original[a.name]) for a in attrs]


def _percent(share: float) -> str:
    """A share as a percentage: whole numbers from 10 %, two significant digits below (0.42%, 0.05%)."""
    return f"{share:.0%}" if abs(share) >= 0.1 else f"{100 * share:.2g}%"


#: A horizontal bar chart's bar colours: a bar, a flagged bar (amber).
BAR_COLOUR, FLAGGED_COLOUR = "#3b75af", "#d08c00"


@dataclass(frozen=True)
class Bar:
    """One bar of a :class:`BarChart`: the attribute's ``name``, its share as text (``label``), its
    ``width`` (% of the chart's width) and ``colour``."""

    name: str
    label: str
    width: float
    colour: str


@dataclass(frozen=True)
class BarChart:
    """A horizontal bar chart drawn in HTML (``macros.html.j2``, ``bar_chart``): a ``title``, the
    alternative text ``alt`` (the title, every name with its share and the dashed line's value; the
    chart is ``role="img"`` with it as its label), the ``bars`` and the dashed line's position
    ``limit`` (% of the chart's width; None for none)."""

    title: str
    alt: str
    bars: tuple[Bar, ...]
    limit: Optional[float] = None


def _bar_chart(names: Sequence[str], shares: Sequence[float], title: str, *, limit: Optional[float] = None,
               flagged: Sequence[bool] = ()) -> BarChart:
    """Horizontal bars of ``shares`` (fractions, shown as %), one per name, each labelled with its share
    (:func:`_percent`); a dashed line at ``limit``; bars with ``flagged`` True in amber.

    Drawn by the browser, not as an image (a Matplotlib image was 0.085 s of CPU each, most of it its 40
    texts; docs/benchmarks.md, "Issue 41, session 5: the reports' charts"): the chart's width is the
    larger of 100 % (1 % without ``limit``) and 115 % of the largest share, room for the labels, as the
    image's axis was. Alternative text: the title, every name with its share, then the dashed line's value."""
    top = max(100.0 if limit is not None else 1.0, *(115 * s for s in shares))  # the width, in %
    colours = [FLAGGED_COLOUR if f else BAR_COLOUR for f in (flagged or [False] * len(names))]
    bars = tuple(Bar(n, _percent(s), 100 * max(100 * s, 0.0) / top, c) for n, s, c in zip(names, shares, colours))
    alt = f"{title}: " + ", ".join(f"{n} {_percent(s)}" for n, s in zip(names, shares))
    if limit is not None:
        alt += f"; dashed line at {_percent(limit)}"
    return BarChart(title, alt, bars, None if limit is None else min(100 * 100 * limit / top, 100.0))


#: Samples of the correlation colour scale in its legend (a CSS gradient between them).
SCALE_STOPS = 11


@dataclass(frozen=True)
class HeatCell:
    """One cell of a correlation table: its ``value`` (None when not finite: shown as "–"), its
    ``background`` colour (``#rrggbb``; None when not finite) and whether its text is ``dark``-backed (white)."""

    value: Optional[float]
    background: Optional[str]
    dark: bool


def _heat_scale(m: np.ndarray, difference: bool) -> float:
    """The colour scale's half range: 1 for correlations; for a difference its largest finite magnitude, at least 0.05."""
    finite = np.abs(m[np.isfinite(m)])
    return 1.0 if not difference else max(float(finite.max()) if finite.size else 0.0, 0.05)


def _heat_table(names: Sequence[str], m: np.ndarray, title: str, *, difference: bool = False) -> Mapping[str, Any]:
    """A correlation (or correlation-difference) matrix as a coloured HTML table: no image, the values as text.

    ``m``: p × p, rows and columns in the order of ``names``. Returns ``caption`` (``title``), ``names``,
    ``rows`` (p lists of p :class:`HeatCell`: the background is Matplotlib's ``RdBu_r`` colormap at the
    value on the scale −top to top, top = :func:`_heat_scale`; white text where |value| > 0.6·top) and
    ``scale`` (``low``, ``high``: −top and top; ``gradient``: :data:`SCALE_STOPS` colours of the colormap
    from −top to top, for the legend): the colours and white text of the heat map image it replaces.
    """
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    cmap = colormaps["RdBu_r"]
    top = _heat_scale(m, difference)
    finite = np.isfinite(m)
    shares = (np.where(finite, m, 0.0) + top) / (2 * top)  # Normalize(-top, top); the colormap clips outside [0, 1]
    colours = cmap(shares)
    rows = [[HeatCell(float(m[i, j]), to_hex(colours[i, j]), bool(abs(m[i, j]) > 0.6 * top))
             if finite[i, j] else HeatCell(None, None, False) for j in range(len(names))] for i in range(len(names))]
    return {"caption": title, "names": list(names), "rows": rows,
            "scale": {"low": -top, "high": top,
                      "gradient": ", ".join(to_hex(c) for c in cmap(np.linspace(0.0, 1.0, SCALE_STOPS)))}}


def _correlation(names: Sequence[str], m: Optional[np.ndarray], title: str, *,
                 difference: bool = False) -> Optional[Mapping[str, Any]]:
    """The correlation section's values: ``heat`` (the coloured table, :func:`_heat_table`), ``header``
    and ``rows`` (the matrix as numbers); None without a matrix."""
    if m is None:
        return None
    return {"heat": _heat_table(names, m, title, difference=difference), "header": ["", *names],
            "rows": [[n, *(float(v) for v in m[i])] for i, n in enumerate(names)]}


def _numeric_rows(attrs, stats, suffix=""):
    return [[f"{a.name}{suffix}", stats[a.name]["mean"], stats[a.name]["std"], *stats[a.name]["quantiles"]]
            for a in attrs if stats[a.name]["kind"] == "numeric"]


NUMERIC_HEADER = ["attribute", "mean", "std", *[f"q{int(q * 100)}" for q in QUANTILES]]


def _description_html(described: Optional[dict]) -> list[str]:
    """The table's own description, ``fragrelease.*`` properties and column comments
    (:func:`fragrelease.jobs.storage.table_self_description`) as HTML (``description.html.j2``)."""
    if not described:
        return []
    return [render("description.html.j2", described=described)]


def guarantee_sentence(guarantee: Optional[Mapping[str, str]]) -> str:
    """The public report's one-sentence guarantee: the release's own ``per_column`` and ``table``
    statements (:func:`fragrelease.idpir.guarantee.release_guarantee`, docs/privacy.md), stated
    against release recipients (anyone who reads the table), with a pointer to the rest."""
    if not guarantee or not guarantee.get("per_column") or not guarantee.get("table"):
        return "Guarantee: not recorded in this release's provenance."
    return (f"Guarantee against release recipients (anyone who reads the table): {guarantee['per_column']}; "
            f"{guarantee['table']} (against the aggregator and the key holders: see Guarantee below).")


def _number(x: float) -> str:
    """Four significant digits; thousands as whole numbers with separators (as the CLI's preview table)."""
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"


def noise_section(provenance: Mapping[str, Any]) -> Optional[Mapping[str, Any]]:
    """The public report's noise per attribute, from the provenance's public parameters only
    (mechanism, k, ε, budgets, record counts, declared domains; :func:`fragrelease.idpir.preview.preview_from_provenance`).

    Returns None for a provenance written before these fields existed, else a dict: ``title``,
    ``header``, ``rows`` (the CLI's table: :func:`fragrelease.idpir.preview_table.table_rows`),
    ``warning``, ``notes`` and ``draw``, a function that draws its charts (a list of :class:`BarChart`: the
    interval's share of the domain per attribute, P(rank moves) when an attribute is categorical, and
    the expected released error relative to the constant release's). The half-width is OpenDP's
    (:func:`fragrelease.idpir.accuracy.laplace_half_width` of b at α = 0.05), the share 2·half-width /
    (hi − lo); the check is the preview's.
    """
    from fragrelease.idpir.preview import preview_from_provenance
    from fragrelease.idpir.preview_table import table_header, table_rows, table_title

    try:
        pv = preview_from_provenance(provenance)
    except (KeyError, TypeError):  # a provenance written before these fields existed
        return None
    # the rows the CLI prints (one definition): the half-width is the preview's, from OpenDP
    header, rows = table_header(pv), table_rows(pv)
    shares = [a.coverage for a in pv.attributes]
    names = [a.attribute for a in pv.attributes]

    def draw() -> list[BarChart]:
        charts = [_bar_chart(names, shares, "95 % noise interval, share of the declared domain",
                             limit=pv.threshold, flagged=[a.warn for a in pv.attributes])]
        moves = [(a.attribute, a.p_move) for a in pv.attributes if a.p_move is not None]
        if moves:
            charts.append(_bar_chart([n for n, _ in moves], [p for _, p in moves],
                                     "chance a released category rank moves by 1 or more", limit=1.0))
        errors = [(a.attribute, a.error.released / a.error.baseline) for a in pv.attributes
                  if a.error is not None and a.error.baseline > 0]
        if errors:
            charts.append(_bar_chart([n for n, _ in errors], [r for _, r in errors],
                                     "expected released error after post-processing, relative to releasing the "
                                     "mean or most frequent category", limit=pv.threshold,
                                     flagged=[a.warn for a in pv.attributes if a.error is not None
                                              and a.error.baseline > 0]))
        return charts

    return {"title": table_title(pv), "header": header, "rows": rows, "warning": pv.warning_text(),
            "notes": list(pv.notes), "draw": draw}


def public_report(release_df: DataFrame, attrs: Sequence[Attribute], provenance: Mapping[str, Any], path: str,
                  described: Optional[Mapping[str, Any]] = None, *, table: Optional[str] = None, version: Optional[int] = None,
                  extra_sections: Sequence[ReportSection] = (), records: Optional[int] = None) -> str:
    """Write the public report of a release to ``path`` (HTML, ``public_report.html.j2``); return the path.

    ``release_df``: the committed table as it is stored; ``table``, ``version``: its name (catalog
    name or path) and Delta version, shown first with its row count (counted in the summary pass)
    and :func:`guarantee_sentence`. ``described`` is the table's description, properties and column
    comments (:func:`fragrelease.jobs.storage.table_self_description`); the report shows them as
    written. Nothing in the report is computed from anything but ``release_df`` and ``provenance``.
    ``records``: the release's row count from the plan (public), when known: with fewer than
    :data:`EXACT_QUANTILE_RECORDS` rows the table is summarized in one task and its quantiles come from
    that pass (the same values as :func:`_quantiles`; one Spark job instead of two).

    Raises what :func:`fragrelease.jobs.storage.write_text` raises for ``path``.
    """
    names = [a.name for a in attrs if not a.categorical]
    noise = noise_section(provenance)
    summary: Future = Future()  # the summary pass's statistics and correlations, handed to the plot thread

    def draw():
        noise_charts = noise["draw"]() if noise else []  # public parameters only: drawn during the summary pass
        stats, corr = summary.result()
        return _distributions(attrs, stats), noise_charts

    charts = _in_background(draw)  # drawn while Spark computes the summary (noise charts) and the quantiles
    with _awaiting(charts, summary):
        if isinstance(records, int) and records < EXACT_QUANTILE_RECORDS:
            (stats, corr, n), = _summary_passes([release_df.coalesce(1)], attrs, quantiles=True)
            summary.set_result((stats, corr))
        else:
            stats, corr, n = _counted_summary_pass(release_df, attrs)
            summary.set_result((stats, corr))
            _with_quantiles(stats, _quantiles(release_df, attrs))
    distributions, noise_charts = charts.result()
    if noise:
        noise = {**{k: v for k, v in noise.items() if k != "draw"}, "charts": noise_charts}
    owners = provenance.get("owners", [])
    dataset = provenance.get("dataset")
    text = render(
        "public_report.html.j2", extra_sections=extra_sections,
        title=f"Release report: {dataset} ({provenance.get('fragmentation')})",
        table=table or f"release of {dataset}",
        version=_version_text(version, provenance.get("fragrelease_version")),
        rows=n, guarantee_sentence=guarantee_sentence(provenance.get("guarantee")),
        noise=noise, distributions=distributions, numeric_header=NUMERIC_HEADER,
        numeric_rows=_numeric_rows(attrs, stats),
        correlation=_correlation(names, corr, "correlations of the released numeric attributes"),
        guarantee_rows=[[k.replace("_", " "), v] for k, v in (provenance.get("guarantee") or {}).items()],
        parameters=_parameters(provenance),
        owners=[[o["name"], o["n_records"], o["epsilon"], o.get("epsilon_per_attribute", "–"), ", ".join(o["attributes"])]
                for o in owners],
        budgets=[[o["name"], b["attribute"], b["epsilon"], b["epsilon_order"], b["epsilon_centroids"]]
                 for o in owners for b in o.get("budgets", ())],
        described=described or None,
    )
    write_text(path, text)
    return path


def _parameters(provenance: Mapping[str, Any]) -> list[list[Any]]:
    """The report's parameter rows: the release kind's public terms (a synthetic release has no k or mechanism)."""
    rows = [["dataset", provenance.get("dataset")], ["fragmentation", provenance.get("fragmentation")]]
    if provenance.get("linkage") == "synthetic":
        terms = provenance.get("synthesis") or {}
        return rows + [
            ["total ε", provenance.get("epsilon")], ["composition", provenance.get("composition")],
            ["plan id", provenance.get("plan_id")], ["linkage", "synthetic (rows drawn from a model)"],
            ["ε of the 1-way marginals", terms.get("epsilon_one_way")],
            ["ε of the tree selection", terms.get("epsilon_selection")],
            ["ε of the cliques", terms.get("epsilon_cliques")],
            ["target", terms.get("target") or "none"], ["numeric bins", terms.get("bins")],
            ["cliques", "; ".join(" × ".join(c) for c in terms.get("cliques", ()))],
        ]
    return rows + [
        ["mechanism", provenance.get("mechanism")], ["k", provenance.get("k")],
        ["total ε", provenance.get("epsilon")], ["composition", provenance.get("composition")],
        ["vertical ε split", provenance.get("epsilon_split")], ["plan id", provenance.get("plan_id")],
        ["record id released", provenance.get("keep_id")],
        ["category order", f"{provenance.get('category_order')} (share {provenance.get('category_order_share')})"],
        ["linkage", provenance.get("linkage")], ["post-processing", provenance.get("postprocess")],
    ]


def _version_text(version: Optional[int], written_by: Optional[str]) -> str:
    text = "?" if version is None else str(version)
    return text if not written_by else f"{text} (written by fragrelease {written_by})"


def as_stored(df: DataFrame, attrs: Sequence[Attribute]) -> DataFrame:
    """``df`` with its values as the release table stores them: every numeric attribute declared
    ``integer``/``long`` rounded half to even and cast (:func:`fragrelease.jobs.describe.cast_declared_integers`,
    the aggregator's own step; post-processing). Other columns unchanged."""
    return cast_declared_integers(df, integer_columns([a.public_spec() for a in attrs], {a.name: a.type for a in attrs}))


def _stored_text(attrs: Sequence[Attribute]) -> str:
    rounded = [a.name for a in attrs if not a.categorical and a.type in ("integer", "long")]
    if not rounded:
        return "no attribute is declared integer, so none is rounded"
    return f"{', '.join(rounded)} rounded half to even to integers, as the release table holds them"


def risk_section(risk) -> Optional[ReportSection]:
    """The owner report's "Measured disclosure risk" section, or None without a measurement.

    ``risk``: a :class:`fragrelease.jobs.idpir.risk_check.AdvisoryRisk` (``risk_check``). One row per
    attack: risk, 95 % interval, attack, control and random-guess success rates, and its flag
    (``above flag_<attack>_risk <t>`` when the point estimate exceeds the configured threshold). The
    text says the check is advisory and names the flagged attacks (docs/privacy.md, "Measured
    disclosure risk and the owner's risk check"). Only this private report shows it.
    """
    if risk is None:
        return None
    report = risk.report
    rows = [[r.attack, r.attribute or "", f"{r.risk.value:.3f}", f"{r.risk.low:.3f} – {r.risk.high:.3f}",
             f"{r.attack_rate.value:.3f}", f"{r.control_rate.value:.3f}", f"{r.baseline_rate:.3f}", r.n_attacks,
             risk.flag(r)] for r in report.results]
    flagged = risk.flagged()
    if flagged:
        named = ", ".join(f"{r.attack} of {r.attribute}" if r.attribute else r.attack for r in flagged)
        verdict = (f"Flagged: {len(flagged)} of {len(report.results)} measured risks are above the thresholds you "
                   f"set ({named}). ")
    elif risk.inference_limit is not None or risk.linkability_limit is not None:
        verdict = "No measured risk is above the thresholds you set. "
    else:
        verdict = ""
    text = (f"{verdict}Advisory: this fragment was handed over before the measurement ran, whatever it found; "
            "lowering the risk means another release (a larger k, a smaller ε, linkage: unlinked), which spends "
            f"its ε again. anonymeter 1.1.0's attacks (Giomi et al., PoPETs 2023) on this owner's released rows, "
            f"against {report.n_control} of its held-out records as the control set. An empirical lower bound on "
            "what these attacks achieve, not a guarantee: another attack may do better.")
    return ReportSection("Measured disclosure risk", "table_section.html.j2",
                         {"text": text, "header": ["attack", "attribute", "risk", "95 % interval", "attack rate",
                                                   "control rate", "random guess", "attacks", "flag"], "rows": rows},
                         anchor="risk")


def owner_report(original: DataFrame, protected: DataFrame, attrs: Sequence[Attribute], id_column: str,
                 manifest: dict, path: str, mean_sse_value: Optional[float] = None, *,
                 extra_sections: Sequence[ReportSection] = (), risk=None) -> str:
    """Write an owner's private report (its original fragment vs its released values); return the path.

    ``protected``: the owner's protected fragment lined up by ``id_column``, before the release's
    final cast; the report shows and scores it **as the release table stores it** (:func:`as_stored`),
    so the statistics, the error per attribute and MeanSSE are those of the stored values.
    ``mean_sse_value`` overrides the MeanSSE shown (default: the sum of the per-attribute contributions).
    Template ``owner_report.html.j2``; ``extra_sections`` are appended (:class:`ReportSection`), then
    ``risk``, the owner's measured disclosure risk (:func:`risk_section`), when given.

    Two Spark jobs: both tables' summaries (:func:`_summary_passes`), and MeanSSE with both tables'
    quantiles over the id join; when ``manifest["n_records"]`` × attributes is at most
    :data:`SINGLE_TASK_VALUES`, each side is one partition and neither job shuffles, and with fewer than
    :data:`EXACT_QUANTILE_RECORDS` records the quantiles come from the summaries' job (the same values)
    and the join computes MeanSSE only.

    A local ``path`` is created with mode 0600 in a folder of mode 0700
    (:func:`fragrelease.jobs.protocol.workspace.write_private_text`, which raises what a failed write raises).
    Raises :class:`fragrelease.errors.InvalidParameterError` when records do not match by ``id_column``
    (:func:`fragrelease.jobs.idpir.evaluate.mean_sse_by_attribute`).
    """
    from ..idpir.evaluate import mean_sse_by_attribute, mean_sse_with_quantiles

    stored = as_stored(protected, attrs)
    n_records = manifest.get("n_records")
    small = _single_task(n_records, len(attrs))
    # fewer records than EXACT_QUANTILE_RECORDS, each side one partition: the quantiles come exactly from the
    # summaries' pass (the same values as percentile_approx there), and the join computes MeanSSE only
    exact = small and isinstance(n_records, int) and n_records < EXACT_QUANTILE_RECORDS
    if small:
        # small, and its size known from the manifest: each side one partition (no rows move), so the
        # summaries and the MeanSSE join and its aggregation plan no shuffle (each pass one Spark job).
        # The limit drops nothing (it is at least the manifest's record count; a row too many or too few
        # would show as unmatched ids): it gives the planner the size of the checkpointed protected
        # values, which it otherwise takes as unbounded and shuffles (spark.sql.maxSinglePartitionBytes)
        cap = SINGLE_TASK_VALUES // max(len(attrs), 1)
        original, stored = original.coalesce(1), stored.coalesce(1).limit(cap)
    measured = risk_section(risk)
    if measured is not None:
        extra_sections = (*extra_sections, measured)
    # the two Spark passes (both tables' summaries, one job; MeanSSE with both tables' quantiles, one
    # aggregation over the join) are small and independent: submitted together from threads, Spark plans
    # and schedules them side by side instead of one after another; leaving the block waits for both (a
    # failure is raised after every pass has ended, so no thread outlives the report)
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="fragrelease-report-spark") as pool:
        summaries = pool.submit(_summary_passes, [original, stored], attrs, quantiles=exact)  # both tables, one job
        scored: Future[Any] = (
            pool.submit(mean_sse_by_attribute, original, stored, attrs, id_column) if exact
            else pool.submit(mean_sse_with_quantiles, original, stored, attrs, id_column, list(QUANTILES),
                             int(round(1 / _RELATIVE_ERROR))))
        (so, co, n), (sp, cp, _) = summaries.result()
        names = [a.name for a in attrs if not a.categorical]
        diff = None if co is None or cp is None else cp - co
        distributions = _distributions(attrs, sp, so)  # numbers for the HTML charts, milliseconds: no thread
        if exact:
            contributions = scored.result()
        else:
            contributions, quantiles_o, quantiles_p = scored.result()
            _with_quantiles(so, quantiles_o)
            _with_quantiles(sp, quantiles_p)
    if mean_sse_value is None:
        mean_sse_value = sum(contributions.values())
    numeric_rows = [row for a in attrs if not a.categorical
                    for row in (_numeric_rows([a], so, " (original)") + _numeric_rows([a], sp, " (released)"))]
    category_rows = [[a.name, c, so[a.name]["freq"][c], sp[a.name]["freq"][c]]
                     for a in attrs if a.categorical for c in (a.categories or ())]
    text = render(
        "owner_report.html.j2", extra_sections=extra_sections,
        title=f"Owner report: {manifest.get('owner')} (private)", owner=manifest.get("owner"),
        plan_id=manifest.get("plan_id"), rows=n, stored=_stored_text(attrs), mean_sse=mean_sse_value,
        scale_text=SCALE_TEXT, error=attribute_error(attrs, so, sp, contributions),
        distributions=distributions, colours={"original": ORIGINAL_COLOUR, "released": RELEASED_COLOUR},
        numeric_header=NUMERIC_HEADER, numeric_rows=numeric_rows, category_rows=category_rows,
        correlation=_correlation(names, diff, "correlation difference (released minus original)", difference=True),
        parameters=[["owner", manifest.get("owner")], ["plan id", manifest.get("plan_id")],
                    ["mechanism", manifest.get("mechanism")], ["k", manifest.get("k")],
                    ["ε_j", manifest.get("epsilon")], ["ε per attribute", manifest.get("epsilon_per_attribute")],
                    ["records", manifest.get("n_records")], ["MeanSSE (authors' convention)", mean_sse_value]],
    )
    from .workspace import write_private_text

    write_private_text(path, text, who=f"owner {manifest.get('owner')!r}")  # 0600 in a 0700 folder, whatever the umask
    return path


def attribute_error(attrs: Sequence[Attribute], original: dict, released: dict, contributions: Mapping[str, float]) -> Mapping[str, Any]:
    """The owner's actual error per attribute (private): ``header``, ``rows`` and ``charts``.

    Numeric: released mean − original mean (the attribute's units), that shift in original standard
    deviations, released sd / original sd, and the root-mean-square error s·√(c·l) (s the original's
    sample sd, c the attribute's MeanSSE contribution, l the number of attributes), charted as a share
    of the declared domain width; categorical: the share of changed labels c·l·(1/2)², charted.
    Every attribute: its contribution to MeanSSE (the contributions add up to it; docs/specification.md §4).
    """
    l = len(attrs)
    rows: list[list] = []
    numeric: list[tuple[str, float]] = []
    labels: list[tuple[str, float]] = []
    for a in attrs:
        c = contributions[a.name]
        if a.categorical:  # c = changed · (1/s)² / l, s = CATEGORICAL_SCALE
            changed = c * l * CATEGORICAL_SCALE ** 2
            labels.append((a.name, changed))
            rows.append([a.name, "categorical", None, None, None, None, f"{changed:.1%} labels changed", c])
            continue
        o, r = original[a.name], released[a.name]
        shift = None if o["mean"] is None or r["mean"] is None else r["mean"] - o["mean"]
        in_sd = None if shift is None or not o["std"] else shift / o["std"]
        ratio = None if not o["std"] or r["std"] is None else r["std"] / o["std"]
        rms = None if not o["std"] else float(o["std"] * np.sqrt(c * l))
        if rms is not None:
            lo, hi = a.bounds()
            numeric.append((a.name, rms / (hi - lo)))
        rows.append([a.name, "numeric", shift, in_sd, ratio, rms, "", c])

    def draw() -> list[BarChart]:
        out = []
        if numeric:
            out.append(_bar_chart([n for n, _ in numeric], [s for _, s in numeric],
                                  "RMS error, share of the declared domain"))
        if labels:
            out.append(_bar_chart([n for n, _ in labels], [s for _, s in labels], "labels changed", limit=1.0))
        return out

    return {"header": ["attribute", "kind", "mean shift (released − original)", "shift in original sd",
                       "sd ratio (released / original)", "RMS error", "labels", "MeanSSE contribution"],
            "rows": rows, "charts": draw()}


def public_report_path(output: str, version: int) -> str:
    """``<output>_reports/release-v<version>.html``, beside the release table."""
    return f"{output.rstrip('/')}_reports/release-v{version}.html"
