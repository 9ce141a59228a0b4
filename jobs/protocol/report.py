"""Utility reports written beside every release (HTML, one self-contained file; the charts are HTML and CSS
that the browser draws, no image). The pages' frames; the statistics are :mod:`.report_stats`', the HTML
and charts :mod:`.report_html`'s, and what is particular to a release kind is the kind's own sections
(:class:`ReportSection`, from :meth:`fragrelease.jobs.protocol.kind.KindJobs.report_sections` and
:meth:`~fragrelease.jobs.protocol.kind.KindJobs.owner_report_parts`): this module imports no kind.

Two parts, produced separately because they are for different readers:

- **Public report** (the aggregator, beside the release table): it opens with the table, its version,
  its row count and the guarantee in one sentence (the release's own ``per_column`` and ``table``
  statements, against release recipients); then the kind's leading sections (an IR release: charts of
  the noise per attribute from the public parameters), and statistics **of the released table only**
  (histograms over the declared domain, category frequencies, mean, standard deviation, quantiles,
  the correlation matrix as a table coloured as a heat map); then the full guarantee, the kind's
  parameters and ε per owner and attribute, the table's description, and the kind's closing sections.
  Everything in it can be recomputed by anyone from the released table and its provenance, so it
  discloses nothing beyond the release.
- **Owner report** (each data owner, in its own folder): its fragment's original values against its
  released values **as the release table stores them** (integer-declared attributes rounded half to
  even and cast, :func:`fragrelease.jobs.describe.cast_declared_integers`, as the aggregator does): the
  kind's leading sections (an IR release: the error per attribute and MeanSSE), the distributions
  overlaid and the correlation difference, the kind's parameters. It is computed from the original
  data, which the privacy model does not protect: it is for that owner's eyes only and must not be shared.

The HTML comes from Jinja2 templates with autoescaping on (``templates/``, shipped as package data):
``base.html.j2`` (page, footer, the ``end`` sections), ``public_report.html.j2`` and
``owner_report.html.j2`` (one ``{% block %}`` per section), ``section.html.j2``, ``table_section.html.j2``,
``charts_section.html.j2``, ``description.html.j2`` and ``macros.html.j2``. A further section is a
:class:`ReportSection` passed as ``extra_sections``.

All statistics are computed in Spark; only aggregates (a few numbers per attribute and partition) reach
the driver.
"""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import Any, Callable, Mapping, Optional, Sequence

from pyspark.sql import DataFrame

from fragrelease.protocol.messages import Manifest
from fragrelease.schemas.base import Attribute

from ..describe import cast_declared_integers, integer_columns
from ..storage import write_text
from .kind import OwnerReportParts, Scored, kind_jobs
from .report_html import (  # noqa: F401 - where the reports' templates are, named here too
    ORIGINAL_COLOUR,
    RELEASED_COLOUR,
    TEMPLATES,
    ReportSection,
    _correlation,
    _distributions,
    environment,
    guarantee_sentence,
    render,
    with_drawn,
)
from .report_stats import (  # noqa: F401 - the reports' statistics, named here too
    _RELATIVE_ERROR,
    BINS,
    EXACT_QUANTILE_RECORDS,
    NUMERIC_HEADER,
    QUANTILES,
    _counted_summary_pass,
    _numeric_rows,
    _quantiles,
    _summary_passes,
    _with_quantiles,
    table_summary,
)

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
    that pass (the same values as :func:`_quantiles`; one Spark job instead of two). ``extra_sections``:
    the release kind's sections (:meth:`fragrelease.jobs.protocol.kind.KindJobs.report_sections`: its
    leading ones, its parameters, its closing ones) and any other, each where its ``place`` says; a
    section's ``draw`` (the IR kind's noise charts, public parameters only) runs in the plot thread
    while Spark summarizes the table.

    Raises what :func:`fragrelease.jobs.storage.write_text` raises for ``path``.
    """
    names = [a.name for a in attrs if not a.categorical]
    summary: Future = Future()  # the summary pass's statistics and correlations, handed to the plot thread

    def draw():
        sections = [with_drawn(s) for s in extra_sections]  # public parameters only: drawn during the summary pass
        stats, corr = summary.result()
        return _distributions(attrs, stats), sections

    charts = _in_background(draw)  # drawn while Spark computes the summary (the sections' charts) and the quantiles
    with _awaiting(charts, summary):
        if isinstance(records, int) and records < EXACT_QUANTILE_RECORDS:
            (stats, corr, n), = _summary_passes([release_df.coalesce(1)], attrs, quantiles=True)
            summary.set_result((stats, corr))
        else:
            stats, corr, n = _counted_summary_pass(release_df, attrs)
            summary.set_result((stats, corr))
            _with_quantiles(stats, _quantiles(release_df, attrs))
    distributions, drawn = charts.result()
    owners = provenance.get("owners", [])
    dataset = provenance.get("dataset")
    text = render(
        "public_report.html.j2", extra_sections=drawn,
        # the kind named as the release records it: text, not a branch
        title=f"Release report: {dataset} ({', '.join(str(provenance[k]) for k in ('fragmentation', 'linkage') if k in provenance)})",
        table=table or f"release of {dataset}",
        version=_version_text(version, provenance.get("fragrelease_version")),
        rows=n, guarantee_sentence=guarantee_sentence(provenance.get("guarantee")),
        distributions=distributions, numeric_header=NUMERIC_HEADER,
        numeric_rows=_numeric_rows(attrs, stats),
        correlation=_correlation(names, corr, "correlations of the released numeric attributes"),
        guarantee_rows=[[k.replace("_", " "), v] for k, v in (provenance.get("guarantee") or {}).items()],
        owners=[[o["name"], o["n_records"], o["epsilon"], o.get("epsilon_per_attribute", "–"), ", ".join(o["attributes"])]
                for o in owners],
        budgets=[[o["name"], b["attribute"], b["epsilon"], b["epsilon_order"], b["epsilon_centroids"]]
                 for o in owners for b in o.get("budgets", ())],
        described=described or None,
    )
    write_text(path, text)
    return path


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


#: The linkage of a manifest that names none: the manifest's own default.
_DEFAULT_LINKAGE = Manifest.model_fields["linkage"].default


def owner_report(original: DataFrame, protected: DataFrame, attrs: Sequence[Attribute], id_column: str,
                 manifest: dict, path: str, mean_sse_value: Optional[float] = None, *,
                 extra_sections: Sequence[ReportSection] = (), risk=None) -> str:
    """Write an owner's private report (its original fragment vs its released values); return the path.

    The kind named by ``manifest["linkage"]`` (default: the manifest's) gives its parts
    (:meth:`fragrelease.jobs.protocol.kind.KindJobs.owner_report_parts` with ``id_column``,
    ``mean_sse_value`` and ``risk``; an IR release: MeanSSE, the error per attribute, its parameters and
    the measured risk, :mod:`fragrelease.jobs.idpir.report_sections`); :func:`owner_page` writes the page.
    Raises what the kind's score raises (IR: InvalidParameterError when records do not match by ``id_column``).
    """
    parts = kind_jobs(manifest.get("linkage") or _DEFAULT_LINKAGE).owner_report_parts(
        attrs, id_column, manifest, mean_sse_value=mean_sse_value, risk=risk)
    return owner_page(original, protected, attrs, manifest, path, parts, extra_sections=extra_sections)


def owner_page(original: DataFrame, protected: DataFrame, attrs: Sequence[Attribute], manifest: Mapping[str, Any],
               path: str, parts: OwnerReportParts, *, extra_sections: Sequence[ReportSection] = ()) -> str:
    """Write an owner's private report with the kind's ``parts``; return the path.

    ``protected``: the owner's protected fragment lined up with ``original`` (by the id column), before
    the release's final cast; the report shows and scores it **as the release table stores it**
    (:func:`as_stored`). Template ``owner_report.html.j2``; ``extra_sections`` are placed before the kind's
    closing sections.

    Two Spark jobs: both tables' summaries (:func:`_summary_passes`), and the kind's score (with both
    tables' quantiles); when ``manifest["n_records"]`` × attributes is at most :data:`SINGLE_TASK_VALUES`,
    each side is one partition and neither job shuffles, and with fewer than
    :data:`EXACT_QUANTILE_RECORDS` records the quantiles come from the summaries' job (the same values).

    A local ``path`` is created with mode 0600 in a folder of mode 0700
    (:func:`fragrelease.jobs.protocol.workspace.write_private_text`, which raises what a failed write raises).
    """
    stored = as_stored(protected, attrs)
    n_records = manifest.get("n_records")
    small = _single_task(n_records, len(attrs))
    # fewer records than EXACT_QUANTILE_RECORDS, each side one partition: the quantiles come exactly from the
    # summaries' pass (the same values as percentile_approx there), and the score computes none
    exact = small and isinstance(n_records, int) and n_records < EXACT_QUANTILE_RECORDS
    if small:
        # small, and its size known from the manifest: each side one partition (no rows move), so the
        # summaries and the score's join and its aggregation plan no shuffle (each pass one Spark job).
        # The limit drops nothing (it is at least the manifest's record count; a row too many or too few
        # would show as unmatched ids): it gives the planner the size of the checkpointed protected
        # values, which it otherwise takes as unbounded and shuffles (spark.sql.maxSinglePartitionBytes)
        cap = SINGLE_TASK_VALUES // max(len(attrs), 1)
        original, stored = original.coalesce(1), stored.coalesce(1).limit(cap)
    # the two Spark passes (both tables' summaries, one job; the kind's score with both tables' quantiles,
    # one aggregation over the join) are small and independent: submitted together from threads, Spark plans
    # and schedules them side by side instead of one after another; leaving the block waits for both (a
    # failure is raised after every pass has ended, so no thread outlives the report)
    asked = None if exact else (list(QUANTILES), int(round(1 / _RELATIVE_ERROR)))
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="fragrelease-report-spark") as pool:
        summaries = pool.submit(_summary_passes, [original, stored], attrs, quantiles=exact)  # both tables, one job
        scored: Optional[Future[Scored]] = None if parts.score is None else pool.submit(
            parts.score, original, stored, asked)
        (so, co, n), (sp, cp, _) = summaries.result()
        names = [a.name for a in attrs if not a.categorical]
        diff = None if co is None or cp is None else cp - co
        distributions = _distributions(attrs, sp, so)  # numbers for the HTML charts, milliseconds: no thread
        result, quantiles_o, quantiles_p = (None, None, None) if scored is None else scored.result()
    if not exact:
        _with_quantiles(so, _quantiles(original, attrs) if quantiles_o is None else quantiles_o)
        _with_quantiles(sp, _quantiles(stored, attrs) if quantiles_p is None else quantiles_p)
    numeric_rows = [row for a in attrs if not a.categorical
                    for row in (_numeric_rows([a], so, " (original)") + _numeric_rows([a], sp, " (released)"))]
    category_rows = [[a.name, c, so[a.name]["freq"][c], sp[a.name]["freq"][c]]
                     for a in attrs if a.categorical for c in (a.categories or ())]
    own = list(parts.sections(result, so, sp))
    sections = [*(s for s in own if s.place != "end"), *extra_sections, *(s for s in own if s.place == "end")]
    text = render(
        "owner_report.html.j2", extra_sections=sections, disclosed=parts.disclosed,
        title=f"Owner report: {manifest.get('owner')} (private)", owner=manifest.get("owner"),
        plan_id=manifest.get("plan_id"), rows=n, stored=_stored_text(attrs),
        distributions=distributions, colours={"original": ORIGINAL_COLOUR, "released": RELEASED_COLOUR},
        numeric_header=NUMERIC_HEADER, numeric_rows=numeric_rows, category_rows=category_rows,
        correlation=_correlation(names, diff, "correlation difference (released minus original)", difference=True),
    )
    from .workspace import write_private_text

    write_private_text(path, text, who=f"owner {manifest.get('owner')!r}")  # 0600 in a 0700 folder, whatever the umask
    return path


def public_report_path(output: str, version: int) -> str:
    """``<output>_reports/release-v<version>.html``, beside the release table."""
    return f"{output.rstrip('/')}_reports/release-v{version}.html"
