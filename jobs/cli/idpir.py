"""``fragrelease`` commands of iDP-IR releases (docs/specification.md §1-§4), registered in ``jobs/cli/__init__.py``.

    fragrelease run CONFIG                      every party in this driver (local Spark by default)
    fragrelease split CONFIG                    simulate the owners' fragments only
    fragrelease owner metadata|protect|preview --config CONFIG --owner NAME
    fragrelease aggregator plan|release --config CONFIG
    fragrelease inspect TABLE|--table NAME      versions and provenance of a release (folder or catalog name)
    fragrelease validate CONFIG                 every check that needs no data, without Spark
    fragrelease plan CONFIG                     accuracy preview per attribute, before any data is read
    fragrelease evaluate / audit                the paper's evaluation grid and the empirical audit
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence

import typer
from rich.table import Table

from fragrelease.errors import FragReleaseError
from fragrelease.protocol.config import ReleaseConfig, SourceConfig, load_config
from fragrelease.protocol.fragmentation import linkage_of
from fragrelease.protocol.options import OPTION_NAMES

from ._common import MASTER, console, progress_display

if TYPE_CHECKING:  # the Spark side is imported only when a command needs it
    from ..api_common import ReleaseResult


def _config(path: str, party: str = "run", owner: Optional[str] = None, *, source_table: Optional[str] = None,
            output_table: Optional[str] = None, **overrides) -> ReleaseConfig:
    """The validated configuration, checked for ``party`` before any SparkSession exists.

    ``source_table`` (this owner's fragment) and ``output_table`` (the release) replace the
    configuration's paths with catalog table names (:func:`fragrelease.jobs.storage.with_table_names`).

    Raises ConfigError naming the key and value (see :mod:`fragrelease.jobs.protocol.preflight`).
    """
    from ..protocol.preflight import preflight
    from ..storage import with_table_names

    cfg = with_table_names(load_config(path, overrides), owner=owner, source_table=source_table,
                           output_table=output_table)
    preflight(cfg, party=party, owner=owner, config_path=path)  # type: ignore[arg-type]
    if party in ("run", "aggregator"):  # the release's catalog table: its database, before Spark starts
        from ..storage import check_local_catalog

        check_local_catalog(cfg, path)
    if party in ("owner", "aggregator"):  # these steps write into work_dir: it must be this release's
        from ..protocol.workspace import claim_work_dir

        claim_work_dir(cfg, path)
    return cfg


def _declared_inputs(cfg: ReleaseConfig) -> list[SourceConfig]:
    """The fragments ``fragrelease run`` reads: every owner's source, or the one table a simulation cuts."""
    if cfg.simulated:
        return [cfg.source] if cfg.source is not None else []
    return [o.source for o in cfg.owners if o.source is not None]


def _spark(master: Optional[str], cfg: Optional[ReleaseConfig] = None, *, catalog: bool = False,
           commits: bool = False, inputs: Sequence[SourceConfig] = ()):
    """The session; with a persistent catalog when ``catalog`` or ``cfg`` names a catalog table. ``commits``
    (the steps that commit the release): the database of ``cfg``'s ``output_table`` is made sure of before any
    data is read (:func:`fragrelease.jobs.storage.ensure_database`). ``inputs``: the fragments the step reads
    (``run``: :func:`_declared_inputs`; an owner's steps: its own); when they are small local files or folders,
    a new embedded session gets the small-input JVM options (:func:`fragrelease.jobs.session.inputs_are_small`,
    file sizes only, never written anywhere)."""
    from ..session import get_spark, inputs_are_small
    from ..storage import ensure_database, uses_catalog

    small = bool(inputs) and inputs_are_small([s.path if s.table is None else None for s in inputs])
    spark = get_spark("fragrelease", master, catalog=catalog or (cfg is not None and uses_catalog(cfg)),
                      small_inputs=small)
    if cfg is not None and commits:
        ensure_database(spark, cfg)
    return spark


def run(
    config: str = typer.Argument(..., help="Release configuration YAML (see conf/)."),
    epsilon: Optional[str] = typer.Option(None, help="Override the total ε (e.g. 1, 0.5, 1/3)."),
    k: Optional[int] = typer.Option(None, help="Override the cluster size k."),
    mechanism: Optional[str] = typer.Option(None, help="Override: idp-ir, dp-ir or idp."),
    output: Optional[str] = typer.Option(None, help="Override where the release table is written."),
    if_exists: Optional[str] = typer.Option(None, "--if-exists", help="error (default) or new-version."),
    category_order: Optional[str] = typer.Option(
        None, "--category-order",
        help="Override the rank order of categories: dp-frequency (default; a Laplace histogram paid from each "
             "categorical attribute's budget) or declared (the schema's order, no budget). "
             "docs/specification.md §1."),
    order_share: Optional[str] = typer.Option(
        None, "--order-share", help="Override the share of a categorical attribute's ε spent on the "
                                    "dp-frequency histogram, in (0, 1) (default 1/10)."),
    linkage: Optional[str] = typer.Option(
        None, "--linkage",
        help="Override: linked (default, the paper's rows; only each column is (i)DP), unlinked (every column "
             "shuffled on its own; the whole table is eps-(i)DP) or synthetic (rows drawn from a model of the owners' "
             "noisy marginals; the whole table is eps-DP; horizontal only). docs/privacy.md."),
    postprocess: Optional[str] = typer.Option(
        None, "--postprocess",
        help="Override: isotonic (default; each attribute's noisy centroids projected onto non-decreasing "
             "values in the domain, weighted by cluster size: post-processing, no privacy cost) or none "
             "(the paper's release). docs/specification.md §9."),
    new_plan: bool = typer.Option(
        False, "--new-plan",
        help="Spend ε again on a new plan. Without it, a run after a killed or failed attempt resumes that "
             "attempt's plan (owners that drew re-publish without spending), and a run after a committed "
             "release is refused. docs/usage.md."),
    master: Optional[str] = MASTER,
):
    """Run a whole fragmented release locally: owners, aggregator and a summary."""
    cfg = _config(config, epsilon=epsilon, k=k, mechanism=mechanism, output=output, if_exists=if_exists,
                  category_order=category_order, category_order_share=order_share, linkage=linkage,
                  postprocess=postprocess)
    spark = _spark(master, cfg, commits=True, inputs=_declared_inputs(cfg))
    _warn_accuracy(cfg, config)  # before any data is read (after the session: no pyspark, one error line only)
    from ..protocol.release import run_local_release

    with progress_display() as progress:
        result = run_local_release(spark, cfg, progress=progress, config_path=config, new_plan=new_plan,
                                   announce=lambda line: console.print(line, highlight=False))
    print_summary(cfg, result)


def _warn_accuracy(cfg: ReleaseConfig, config_path: str) -> None:
    """Before any data is read: log the preview's warning (public quantities only) when attributes would drown in
    noise."""
    import logging

    from ..protocol.preflight import accuracy_preview

    if linkage_of(cfg.linkage).synthesized:  # the IR preview does not apply; fragrelease plan shows the synthesis's
        return
    warning = accuracy_preview(cfg, suggestions=False).warning_text()
    if warning:
        logging.getLogger("fragrelease.preview").warning("%s; see fragrelease plan %s", warning, config_path)


def print_summary(cfg: ReleaseConfig, result: ReleaseResult) -> None:
    """The run summary: where the release went, each owner's ε_j, the guarantee and the noise table.

    Public parameters only, except MeanSSE (``evaluate``), which is computed from the owners' original
    data and is marked private wherever it is printed."""
    prov = result.provenance
    console.print(f"[bold]Release written[/bold] to Delta table {result.path} (version {result.version})")
    if result.report:
        console.print(f"public report: {result.report}")
    if linkage_of(cfg.linkage).synthesized:
        _print_synthetic_summary(cfg, result)
        return
    if cfg.reports:  # each owner's private report (its own data against its protected copy), in its own folder
        from ..protocol.layout import owner_report_path

        for party in cfg.owners:
            console.print(f"owner {party.name}: private report {owner_report_path(cfg.name, party)}", highlight=False,
                          soft_wrap=True)
    table = Table(title=f"{cfg.name}: {prov['fragmentation']} release of {prov['dataset']}")
    table.add_column("owner")
    table.add_column("records", justify="right")
    table.add_column("attributes", justify="right")
    table.add_column("ε_j", justify="right")
    for o in result.owners:
        table.add_row(o.name, f"{o.records:,}", str(len(o.attributes)), str(o.epsilon))
    console.print(table)
    # MeanSSE is computed from the originals: private to whoever runs this, never part of the release
    mean_sse = "not evaluated" if result.mean_sse is None else f"{result.mean_sse:.4f} (private: from the originals)"
    # every release option as the release recorded it (fragrelease/protocol/options.py), whatever it is
    options = " | ".join(f"{name.replace('_', ' ')} {prov[name]}" for name in OPTION_NAMES if name in prov)
    console.print(
        f"rows {result.rows:,} | total ε {result.epsilon} ({result.composition} composition) | "
        f"k {prov['k']} | mechanism {prov['mechanism']} | {options} | MeanSSE vs original {mean_sse}"
    )
    from fragrelease.idpir.metrics import SCALE_TEXT
    from fragrelease.idpir.preview import preview_from_provenance

    console.print(f"MeanSSE {mean_sse}: {SCALE_TEXT}", highlight=False)
    guarantee = prov["guarantee"]
    console.print(f"guarantee: {guarantee['per_column']}; {guarantee['table']}. Against: {guarantee['against']}.")
    if "hand_over" in guarantee:  # risk_check: the owners' advisory check adds nothing to the guarantee
        console.print(f"hand-over: {guarantee['hand_over']}.", highlight=False)
    print_preview(preview_from_provenance(prov), suggestions=False)  # public parameters of the release only


def _print_rows(header, rows, *, left, warning: Optional[str]) -> None:
    """A preview's table (columns in ``left`` left-aligned, the rest right-aligned), then its warning if any."""
    from rich import box

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for h in header:
        table.add_column(h, justify="left" if h in left else "right", no_wrap=True)
    for row in rows:
        table.add_row(*row)
    _print_wide(table)
    if warning:
        console.print(f"[bold yellow]warning:[/bold yellow] {warning}", highlight=False)


def _print_synthetic_summary(cfg: ReleaseConfig, result: ReleaseResult) -> None:
    """The summary of a synthetic release (docs/specification.md §10): public terms and noised values only."""
    prov = result.provenance
    terms = prov["synthesis"]
    console.print(f"{cfg.name}: synthetic release of {prov['dataset']} from {len(result.owners)} horizontal owners "
                  f"({', '.join(f'{o.name} {o.records:,} records' for o in result.owners)}), each spending ε_j = "
                  f"{result.epsilon}", highlight=False, soft_wrap=True)
    console.print(f"rows {result.rows:,} (drawn from the model; the count is noised) | ε {result.epsilon}: 1-ways "
                  f"{terms['epsilon_one_way']}, tree {terms['epsilon_selection']}, cliques {terms['epsilon_cliques']} | "
                  f"target {terms['target'] or 'none'} | numeric bins {terms['bins']}", highlight=False, soft_wrap=True)
    console.print("cliques: " + ", ".join("×".join(c) for c in terms["cliques"]), highlight=False, soft_wrap=True)
    guarantee = prov["guarantee"]
    console.print(f"guarantee: {guarantee['table']}. Against: {guarantee['against']}.", highlight=False, soft_wrap=True)


def print_synthesis_preview(cfg: ReleaseConfig, rows: Optional[int]) -> None:
    """``fragrelease plan`` for ``linkage: synthetic``: the ε split and each measurement's noise (public terms only)."""

    from ..protocol.preflight import synthesis_preview_of

    pv = synthesis_preview_of(cfg, rows=rows)
    _print_rows(pv.header(), pv.table_rows(), left=("measurement",), warning=pv.warning_text())
    for note in pv.notes:
        console.print(f"  note: {note}", highlight=False)


def preview_table(pv) -> Table:
    """The per-attribute accuracy table of a preview (:mod:`fragrelease.idpir.preview`) as a rich Table."""
    from rich import box

    from fragrelease.idpir.preview_table import table_header, table_rows

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for h in table_header(pv):
        text = h in ("attribute", "owner", "kind", "check")
        table.add_column(h, justify="left" if text else "right", no_wrap=True)
    for row in table_rows(pv):
        table.add_row(*row)
    return table


def _print_wide(table: Table) -> None:
    """Print ``table`` never squeezed below its natural width (a narrow terminal or a log file would cut the figures)."""
    from rich.console import Console
    from rich.measure import Measurement

    need = Measurement.get(console, console.options.update(width=10_000), table).maximum
    Console(file=console.file, width=max(console.width, need), quiet=console.quiet, highlight=False,
            force_terminal=console.is_terminal).print(table)


def print_preview(pv, *, suggestions: bool = True) -> None:
    """Print a preview: the table, its warning line, the suggestions and the notes (all public quantities)."""
    from fragrelease.idpir.preview_table import table_title

    console.print(table_title(pv), highlight=False)
    _print_wide(preview_table(pv))
    warning = pv.warning_text()
    if warning:
        console.print(f"[bold yellow]warning:[/bold yellow] {warning}", highlight=False)
    if suggestions and pv.suggestions is not None:
        for line in pv.suggestions.lines():
            console.print(f"  suggestion: {line}", highlight=False)
    for note in pv.notes:
        console.print(f"  note: {note}", highlight=False)


def plan(
    config: str = typer.Argument(..., help="Release configuration YAML (see conf/)."),
    epsilon: Optional[str] = typer.Option(None, help="Override the total ε (e.g. 1, 0.5, 1/3)."),
    k: Optional[int] = typer.Option(None, help="Override the cluster size k."),
    mechanism: Optional[str] = typer.Option(None, help="Override: idp-ir, dp-ir or idp."),
    category_order: Optional[str] = typer.Option(None, "--category-order", help="Override: dp-frequency or declared."),
    order_share: Optional[str] = typer.Option(None, "--order-share", help="Override the dp-frequency share, in (0, 1)."),
    postprocess: Optional[str] = typer.Option(
        None, "--postprocess", help="Override: isotonic (default) or none; the released error is simulated with it."),
    rows: Optional[int] = typer.Option(
        None, "--rows", help="Record count of every owner whose configuration declares none (public; sharpens the "
                             "scale and bounds the suggested k)."),
    threshold: float = typer.Option(
        0.5, "--threshold", help="Warn when an attribute's expected released error (after the post-processing, "
                                 "simulated on data drawn from the declared domain) is at least this multiple of "
                                 "the error of releasing its mean or most frequent category on those data (default "
                                 "0.5: real data are typically about half as spread as data filling the domain)."),
):
    """Accuracy preview before any data is read: per attribute, ε_attr, the Laplace scale, the expected noise and a
    95 % interval (units and share of the domain), the categorical rank-move chance, the expected released error
    after post-processing (simulated on data drawn from the declared domain) beside the error of releasing the mean
    or most frequent category; warnings and the k, ε or attributes that would fit. Public quantities only: no data,
    no Spark, no budget. docs/specification.md §2."""
    from fragrelease.errors import ConfigError

    from ..protocol.preflight import accuracy_preview

    if rows is not None and rows < 1:
        raise ConfigError(f"--rows: must be >= 1, not {rows}")
    cfg = load_config(config, {"epsilon": epsilon, "k": k, "mechanism": mechanism, "category_order": category_order,
                               "category_order_share": order_share, "postprocess": postprocess})
    if linkage_of(cfg.linkage).synthesized:
        console.print(f"{config}: synthetic release of {cfg.dataset} (whole table ε-DP), {len(cfg.owners)} horizontal "
                      f"owners, ε {cfg.epsilon}, target {cfg.synthesis_target or 'none'}", highlight=False)
        print_synthesis_preview(cfg, rows)
        return
    pv = accuracy_preview(cfg, rows=rows, threshold=threshold)
    console.print(f"{config}: {cfg.fragmentation} release of {cfg.dataset}, {len(cfg.owners)} owners, ε {cfg.epsilon}, "
                  f"k {cfg.k}, {cfg.mechanism}, category order {cfg.category_order}", highlight=False)
    print_preview(pv)


def split(config: str = typer.Argument(...), master: Optional[str] = MASTER):
    """Simulate owners: cut the configured dataset into the owners' fragments."""
    from fragrelease.schemas.datasets import resolve_schema

    from ..protocol import simulate

    cfg = _config(config, "split")
    spark = _spark(master, cfg)
    schema = resolve_schema(cfg.dataset)
    sizes = simulate.split_fragments(spark, cfg, schema, simulate.load_dataset(spark, cfg, schema))
    for name, n in sizes.items():
        console.print(f"{name}: {n:,} records")


def work_clear(config: str = typer.Argument(..., help="Release configuration YAML.")):
    """Remove what an earlier run of this release left in its work_dir (metadata/, plan.json, owners/) and
    nothing else; refuse a work_dir that holds user files or belongs to another release."""
    from ..protocol.workspace import clear_work_dir

    cfg = _config(config, "run")
    removed = clear_work_dir(cfg, config)
    console.print(f"work_dir {cfg.work_dir}: removed {', '.join(removed) if removed else 'nothing'} "
                  f"(release {cfg.name!r})")


SOURCE_TABLE = typer.Option(None, "--source-table", help="Read this owner's fragment from this catalog table (db.name).")
OUTPUT_TABLE = typer.Option(None, "--output-table", help="Commit the release to this catalog table (db.name).")


def owner_metadata(config: str = typer.Option(..., "--config"), owner: str = typer.Option(..., "--owner"),
                   master: Optional[str] = MASTER, source_table: Optional[str] = SOURCE_TABLE):
    """Validate the owner's fragment and write its public metadata for the aggregator."""
    from ..protocol.context import owner_context
    from ..protocol.fragment import FragmentContext, describe_source
    from ..protocol.owner import describe_fragment
    from ..storage import check_source_encoding

    cfg = _config(config, "owner", owner, source_table=source_table)
    ctx = owner_context(cfg, owner)  # no data: before Spark starts
    source = ctx.paths.fragment  # a UTF-16 CSV: said so from its first bytes, before Spark starts
    check_source_encoding(source, FragmentContext(ctx.name, describe_source(source)).where())
    meta = describe_fragment(_spark(master, cfg, inputs=[ctx.paths.fragment]), ctx)
    console.print(f"owner {meta.owner}: {meta.n_records:,} records, {len(meta.attributes)} attributes offered")


def owner_protect(config: str = typer.Option(..., "--config"), owner: str = typer.Option(..., "--owner"),
                  master: Optional[str] = MASTER, source_table: Optional[str] = SOURCE_TABLE):
    """Protect the owner's fragment under the aggregator's plan; write the table and manifest."""
    from ..protocol.context import owner_context
    from ..protocol.kind import kind_jobs
    from ..protocol.owner import read_verified_plan
    from ..protocol.preflight import find_owner
    from ..protocol.signatures import owner_signing_key

    cfg = _config(config, "owner", owner, source_table=source_table)
    ctx = owner_context(cfg, find_owner(cfg, owner)[1].name)
    owner_signing_key(ctx)  # signed manifests: no key, no Spark
    plan, _ = read_verified_plan(ctx)  # a damaged or foreign plan.json: no Spark
    kind = kind_jobs(plan.linkage)
    if kind.rounds_per_owner > 1:  # several rounds: each run of this step does the one that is due
        number, _ = kind.play_round(_spark(master, cfg), ctx)
        then = ("run this step again once every owner has written round one" if number < kind.rounds_per_owner
                else "the aggregator's release step is next once every owner has written its last round")
        console.print(f"owner {owner}: round {number} of plan {plan.plan_id} written; {then}", highlight=False)
        return
    _, result = kind.play_round(_spark(master, cfg, inputs=[ctx.paths.fragment]), ctx)
    m = result.manifest
    assert m is not None  # a one-round kind publishes a protected table with its manifest
    console.print(f"owner {m.owner}: protected {m.n_records:,} records with ε_j = {m.epsilon}, k = {m.k} (plan {m.plan_id})")
    if cfg.risk_check is not None:  # the same line whatever was measured: the numbers and flags are private
        console.print(f"owner {m.owner}: fragment handed over; its measured risk (advisory, flags included) is in "
                      f"its private report {ctx.paths.report}", highlight=False, soft_wrap=True)


def owner_preview(config: str = typer.Option(..., "--config"), owner: str = typer.Option(..., "--owner"),
                  runs: int = typer.Option(32, "--runs", help="Simulated releases per attribute (>= 1)."),
                  master: Optional[str] = MASTER, source_table: Optional[str] = SOURCE_TABLE):
    """Private preview of this owner's own fragment: per attribute, its local Laplace scale and the released error
    it can expect after post-processing (by simulation on its own data), beside the error of releasing its own
    mean or most frequent category. Printed here only: nothing is written, no budget is spent."""
    from fragrelease.errors import ConfigError
    from fragrelease.schemas.datasets import resolve_schema

    from ..idpir.owner_preview import owner_preview as run_preview
    from ..protocol.context import owner_context
    from ..protocol.preflight import check_source_exists, find_owner
    from ..storage import with_table_names

    if runs < 1:
        raise ConfigError(f"--runs: must be >= 1, not {runs}")
    cfg = with_table_names(load_config(config), owner=owner, source_table=source_table)
    if cfg.linkage == "synthetic":
        raise ConfigError(f"{config}: owner preview simulates microaggregation noise on the owner's data; a synthetic "
                          f"release's noise depends on public terms only: see fragrelease plan {config}")
    i, party = find_owner(cfg, owner)  # no data needed: before Spark starts
    resolve_schema(cfg.dataset)
    ctx = owner_context(cfg, owner)
    source = ctx.paths.fragment
    if source.path is not None:
        key = f"owners[{i}].source.path" if party.source is not None else \
            f"owner {owner!r}: its simulated fragment (run fragrelease split {config} first)"
        check_source_exists(source.path, key=key)
    pv = run_preview(_spark(master, cfg), ctx, runs=runs)
    console.print(f"owner {pv.owner} (source {pv.source}): {pv.n:,} records, {cfg.mechanism}, k {cfg.k}, "
                  f"postprocess {pv.postprocess}, {runs} simulated releases per attribute", highlight=False)

    _print_rows(pv.header(), pv.rows(), left=("attribute", "kind", "check"), warning=pv.warning_text())
    console.print(f"  ranking (best kept first): {', '.join(pv.ranking())}", highlight=False)
    for note in pv.notes:
        console.print(f"  note: {note}", highlight=False)


def aggregator_plan(config: str = typer.Option(..., "--config"), output_table: Optional[str] = OUTPUT_TABLE):
    """Validate the owners' metadata and issue the plan."""
    from ..protocol.aggregator import issue_plan
    from ..protocol.context import aggregator_context

    plan = issue_plan(aggregator_context(_config(config, "aggregator", output_table=output_table)))
    console.print(f"plan {plan.plan_id} issued (pinned; 'aggregator release' accepts only this plan)", highlight=False)
    for o in plan.owners:
        console.print(f"{o.name}: ε_j = {o.epsilon}, per attribute {o.epsilon_per_attribute}, k = {plan.k}")


def aggregator_release(config: str = typer.Option(..., "--config"), master: Optional[str] = MASTER,
                       output_table: Optional[str] = OUTPUT_TABLE,
                       plan_id: Optional[str] = typer.Option(
                           None, "--plan-id", help="The plan id 'aggregator plan' printed; any other plan.json is "
                                                   "refused. Needed when this step cannot read the plan step's "
                                                   "pin (another machine or FRAGRELEASE_PRIVATE_ROOT).")):
    """Verify the protected fragments, combine them and commit the release."""
    from ..protocol.aggregator import pinned_plan, release
    from ..protocol.context import aggregator_context
    from ..protocol.kind import kind_jobs

    cfg = _config(config, "aggregator", output_table=output_table)
    ctx = aggregator_context(cfg)
    plan = pinned_plan(ctx, plan_id)  # no Spark yet: a plan.json this aggregator did not issue is refused first
    kind_jobs(plan.linkage).check_written(ctx, plan)  # no Spark either for an owner's message not written yet
    result = release(_spark(master, cfg, commits=True), ctx, plan=plan)
    console.print(f"release committed: {result.table or result.path} version {result.version}, {result.rows:,} rows; "
                  f"report {result.report}")


def _kind_text(cfg: ReleaseConfig) -> str:
    """``k 50, idp-ir`` or, for a synthetic release, ``synthetic (target income)``."""
    if linkage_of(cfg.linkage).synthesized:
        return f"synthetic (target {cfg.synthesis_target or 'none'})"
    return f"k {cfg.k}, {cfg.mechanism}"


def validate(config: str = typer.Argument(..., help="Release configuration YAML (see conf/)."),
             owner: Optional[str] = typer.Option(
                 None, "--owner", help="Check as this data owner's step would (only its own source)."),
             aggregator: bool = typer.Option(False, "--aggregator", help="Check as the aggregator's steps would."),
             source_table: Optional[str] = SOURCE_TABLE, output_table: Optional[str] = OUTPUT_TABLE):
    """Run every check that needs no data (the configuration, its schema, owners, k, local paths): no Spark.

    Prints ``OK`` and what the configuration releases, or the problem on one line (exit status 2).
    """
    if owner is not None and aggregator:
        raise FragReleaseError("validate: give --owner or --aggregator, not both")
    party = "owner" if owner is not None else "aggregator" if aggregator else "run"
    cfg = _config(config, party, owner, source_table=source_table, output_table=output_table)
    target = cfg.output_table or cfg.output
    console.print(f"OK {config}: {cfg.fragmentation} release of {cfg.dataset}, {len(cfg.owners)} owners, "
                  f"ε {cfg.epsilon}, {_kind_text(cfg)} -> {target} (checked for {party}"
                  f"{' ' + owner if owner else ''}; the data is checked when each owner runs)", highlight=False)


def _release_location(table: str, catalog_name: Optional[str], master: Optional[str]) -> str:
    """The Delta folder of a release given as a path or a catalog table name (one-line errors).

    A folder (or URI) is used as it is; ``catalog_name``, or an argument that is no existing path
    and reads as ``db.name`` / ``catalog.db.name``, is looked up in the session's catalog.

    Raises
    ------
    FragReleaseError
        No such folder or table, or not a Delta table.
    """
    import os

    from fragrelease.validation import parse_table_name

    from ..storage import absolute, is_delta_table

    name = catalog_name
    if name is None and table and "/" not in table and "\\" not in table and not os.path.exists(table):
        try:
            parse_table_name(table)
            name = table if "." in table else None
        except FragReleaseError:
            name = None
    if name is not None:
        from ..storage import table_exists, table_location

        spark = _spark(master, catalog=True)
        if not table_exists(spark, name):
            raise FragReleaseError(f"inspect: table {name!r} is not in the catalog (give a release folder, or the "
                                   f"name of a table in this session's catalog)")
        location = table_location(spark, name)
    else:
        if not table:
            raise FragReleaseError("inspect: give a release folder or --table NAME")
        location = absolute(table)
        if "://" not in table and not os.path.exists(location):
            raise FragReleaseError(f"inspect: {table!r} does not exist (give a release folder or a catalog table name)")
    try:
        ok = is_delta_table(location)
    except Exception as exc:  # an unreachable URI: pyarrow's message, on one line
        raise FragReleaseError(f"inspect: cannot read {location!r}: {str(exc).splitlines()[0]}") from None
    if not ok:
        raise FragReleaseError(f"inspect: {location!r} is not a Delta table (no _delta_log): give a release folder "
                               f"or a catalog table name")
    return location


def inspect(table: Optional[str] = typer.Argument(None, help="A release: its Delta folder, or a catalog table name "
                                                                "(db.name)."),
            table_name: Optional[str] = typer.Option(None, "--table", help="The release's catalog table name."),
            full: bool = typer.Option(False, "--full", help="Print the whole provenance as JSON."),
            master: Optional[str] = MASTER):
    """Show a release's description, properties and column comments, and every version with its provenance
    (the commit's userMetadata; the custom key ``fragrelease`` for tables written by earlier versions)."""
    import json

    from ..storage import table_history, table_self_description

    if table is not None and table_name is not None:
        raise FragReleaseError("inspect: give a release folder or --table NAME, not both")
    location = _release_location(table or "", table_name, master)
    described = table_self_description(location)
    if described["description"]:
        console.print(f"[bold]description[/bold]: {described['description']}", highlight=False)
    for key, value in described["properties"].items():
        console.print(f"  {key} = {value}", highlight=False)
    for column, comment in described["column_comments"].items():
        console.print(f"  column {column}: {comment}", highlight=False)
    for entry, prov in table_history(location):
        owners = ", ".join(f"{o['name']} (ε_j {o['epsilon']})" for o in prov.get("owners", []))
        console.print(
            f"[bold]version {entry.get('version')}[/bold] {entry.get('operation')}: "
            f"{prov.get('fragmentation', '?')} {prov.get('mechanism', '?')}, ε {prov.get('epsilon', '?')} "
            f"({prov.get('composition', '?')}), k {prov.get('k', '?')}, plan {prov.get('plan_id', '?')}; owners: {owners}"
        )
        if full and prov:
            console.print_json(json.dumps(prov))


def evaluate(
    dataset: list[str] = typer.Option(["adult", "wine"], "--dataset", help="Built-in dataset(s): adult, wine, wine-2max."),
    out: str = typer.Option("docs/evaluation", help="Folder for results.csv, runs.csv.gz and the figures."),
    runs: int = typer.Option(50, help="Runs per cell."),
    scenario: list[str] = typer.Option(["centralized", "horizontal", "vertical"], "--scenario"),
    split: list[str] = typer.Option(["equal", "by-attributes"], "--split", help="Vertical budget split(s)."),
    mechanism: list[str] = typer.Option(["idp-ir", "dp-ir"], "--mechanism"),
    epsilon: Optional[list[str]] = typer.Option(None, "--epsilon", help="ε grid (default 0.01 0.1 0.5 1)."),
    convention: str = typer.Option("authors", help="MeanSSE: authors (default) or paper."),
    category_order: Optional[list[str]] = typer.Option(
        None, "--category-order",
        help="Category order(s), repeatable: dp-frequency, declared, or data-frequency (the paper's exact-count "
             "order, not private, evaluation only). The first is the figures' main series. Default: the release "
             "default, then data-frequency beside it."),
    order_share: Optional[list[str]] = typer.Option(
        None, "--order-share",
        help="Share(s) of a categorical attribute's ε spent on the dp-frequency histogram, repeatable; one "
             "series per share (default: the release default)."),
    postprocess: Optional[list[str]] = typer.Option(
        None, "--postprocess",
        help="Post-processing of the noisy centroids, repeatable: isotonic (the release default) and/or none (the "
             "paper's). Both are scored on the same noise draw of each run. Default: both."),
    master: Optional[str] = MASTER,
):
    """Reproduce the paper's §5: MeanSSE and category TVD over the (ε, k) grid, per scenario, mechanism, order and
    post-processing (isotonic vs none, paired noise)."""
    from fragrelease.experiments.evaluate_grid import (
        ORDER_SETTINGS,
        order_settings,
        postprocess_values,
        run_evaluation,
        share_text,
    )
    from fragrelease.experiments.evaluation import EPSILONS
    from fragrelease.idpir.category_order import DEFAULT_ORDER_SHARE
    from fragrelease.idpir.postprocess import POSTPROCESS

    if category_order:
        shares = order_share if order_share else ([share_text(DEFAULT_ORDER_SHARE)]
                                                  if "dp-frequency" in category_order else [])
        orders = order_settings(category_order, shares)
    elif order_share:  # the default orders, with these dp-frequency shares
        names = ["dp-frequency"] + [o.order for o in ORDER_SETTINGS if o.order != "dp-frequency"]
        orders = order_settings(names, order_share)
    else:
        orders = list(ORDER_SETTINGS)
    posts = postprocess_values(postprocess or list(POSTPROCESS))
    epsilons = epsilon or list(EPSILONS)
    _check_evaluate(dataset, runs, scenario, split, mechanism, epsilons, convention)
    spark = _spark(master)
    labels = ", ".join(o.label for o in orders)
    with console.status(f"evaluating {', '.join(dataset)}: {runs} runs per cell, category orders {labels}, "
                        f"postprocess {', '.join(posts)}"):
        result = run_evaluation(spark, dataset, out, scenarios=scenario, splits=split, mechanisms=mechanism,
                                epsilons=epsilons, runs=runs, convention=convention, orders=orders,
                                postprocess=posts)
    console.print(f"{result['cells']} cells x {result['runs']} runs in {result['seconds']:.1f} s -> {result['results']}")
    console.print(f"category orders: {labels} (main series: {orders[0].label}); postprocess: {', '.join(posts)}")
    if "postprocess" in result:
        console.print(f"paired comparison isotonic vs none: {result['postprocess']}")
    for f in result["figures"]:
        console.print(f"figure: {f}")


def _check_evaluate(datasets, runs, scenarios, splits, mechanisms, epsilons, convention) -> None:
    """Refuse bad evaluation parameters before Spark starts, naming the option and the value; warn on ε > 10."""
    from fragrelease.budget import EPSILON_SPLITS, parse_epsilon
    from fragrelease.errors import ConfigError
    from fragrelease.experiments.evaluate_grid import scenarios_for
    from fragrelease.idpir.mechanisms import get_mechanism
    from fragrelease.idpir.metrics import CONVENTIONS
    from fragrelease.schemas.datasets import BUILTIN_SCHEMAS
    from fragrelease.validation import warn_if_large_epsilon

    if runs < 1:
        raise ConfigError(f"--runs: must be >= 1, not {runs}")
    for d in datasets:
        if d not in BUILTIN_SCHEMAS:
            raise ConfigError(f"--dataset: the evaluation runs on the built-in datasets {sorted(BUILTIN_SCHEMAS)}, "
                              f"not {d!r}")
        scenarios_for(d, scenarios, splits)
    for s in splits:
        if s not in EPSILON_SPLITS:
            raise ConfigError(f"--split: must be one of {EPSILON_SPLITS}, not {s!r}")
    for m in mechanisms:
        get_mechanism(m)
    for e in epsilons:
        parse_epsilon(e, name="--epsilon")
        warn_if_large_epsilon(e, what="--epsilon")
    if convention not in CONVENTIONS:
        raise ConfigError(f"--convention: must be one of {CONVENTIONS}, not {convention!r}")


def audit(
    dataset: str = typer.Option("adult", help="Built-in dataset to take the records from."),
    attribute: str = typer.Option("age", help="Numeric attribute to audit."),
    n: int = typer.Option(24, help="Number of records (the first n)."),
    k: list[int] = typer.Option([4], "--k"),
    epsilon: list[str] = typer.Option(["1"], "--epsilon", help="ε as exact text (e.g. 1, 0.5, 1/4); repeatable."),
    mechanism: list[str] = typer.Option(["idp-ir", "dp-ir"], "--mechanism"),
    runs: int = typer.Option(200_000, help="Runs on each of D and D'."),
    alpha: float = typer.Option(1e-6, help="Probability that a correct mechanism's lower bound exceeds ε."),
):
    """Empirical privacy audit: estimate ε on (D, worst-case neighbour D') from many runs."""
    from fragrelease.budget import format_epsilon, parse_epsilon
    from fragrelease.experiments.audit import audit as run_audit
    from fragrelease.rng.laplace import FAST_SAMPLER_NAME, FastLaplace
    from fragrelease.schemas.datasets import load_builtin_pandas, resolve_schema

    epsilons = [parse_epsilon(e, name="--epsilon") for e in epsilon]  # exact, as every other command takes it
    attr = resolve_schema(dataset).attribute(attribute)
    if attr.categorical or not attr.protected:
        raise FragReleaseError(f"attribute {attribute!r} must be a released numeric attribute")
    lo, hi = attr.bounds()
    x = load_builtin_pandas(dataset)[attribute].to_numpy(float)[:n]
    table = Table(title=f"audit of {dataset}.{attribute}, n = {n}, {runs:,} runs per side, α = {alpha:g}")
    for col in ("mechanism", "k", "ε", "Δ used", "worst shift", "ε lower bound", "ε point estimate"):
        table.add_column(col, justify="right")
    for mech in mechanism:
        for kk in k:
            for eps in epsilons:
                r = run_audit(x, k=kk, lo=lo, hi=hi, epsilon=eps, mechanism=mech, runs=runs, noise=FastLaplace(),
                              alpha=alpha)
                table.add_row(mech, str(kk), format_epsilon(eps), f"{r.sensitivity:.3f}", f"{r.neighbour_shift:.3f}",
                              f"{r.epsilon_lower_bound:.3f}", f"{r.epsilon_point_estimate:.3f}")
    console.print(table)
    console.print(f"sampler: {FAST_SAMPLER_NAME}")
