"""``fragrelease`` commands of a whole release on one machine and the checks before it, whatever its kind
(docs/specification.md §1-§4, §10), registered in ``jobs/cli/__init__.py``.

    fragrelease run CONFIG                      every party in this driver (local Spark by default)
    fragrelease split CONFIG                    simulate the owners' fragments only
    fragrelease work clear CONFIG               remove only what an earlier run left in work_dir
    fragrelease validate CONFIG                 every check that needs no data, without Spark
    fragrelease plan CONFIG                     the kind's preview (IR: accuracy per attribute), before any data is read

What is particular to a release kind (its preview, warning and summary) comes from the kind
(:func:`fragrelease.protocol.kind.release_kind`) as text, printed by :mod:`.printing`.
"""
from __future__ import annotations

from typing import Optional

import typer

from fragrelease.errors import FragReleaseError
from fragrelease.protocol.config import ReleaseConfig, load_config
from fragrelease.protocol.kind import release_kind

from . import _common
from ._common import MASTER, OUTPUT_TABLE, SOURCE_TABLE, console, progress_display
from .machine import JSON_HELP, begin, emit
from .printing import owner_reports, print_blocks, print_summary


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
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
):
    """Run a whole fragmented release locally: owners, aggregator and a summary (with ``--json``: one JSON
    document on standard output, the rest on standard error)."""
    begin(json_out)
    cfg = _common._config(config, epsilon=epsilon, k=k, mechanism=mechanism, output=output, if_exists=if_exists,
                  category_order=category_order, category_order_share=order_share, linkage=linkage,
                  postprocess=postprocess)
    spark = _common._spark(master, cfg, commits=True, inputs=_common._declared_inputs(cfg))
    _warn_accuracy(cfg, config)  # before any data is read (after the session: no pyspark, one error line only)
    from ..protocol.release import run_local_release

    with progress_display() as progress:
        result = run_local_release(spark, cfg, progress=progress, config_path=config, new_plan=new_plan,
                                   announce=lambda line: console.print(line, highlight=False))
    print_summary(cfg, result)
    if json_out:
        from .documents import run_document

        emit(run_document(cfg, config, result, owner_reports(cfg)))


def _warn_accuracy(cfg: ReleaseConfig, config_path: str) -> None:
    """Before any data is read: log the kind's warning (public quantities only; IR: attributes that would drown
    in noise)."""
    import logging

    from ..protocol.preflight import run_warning

    warning = run_warning(cfg)
    if warning:
        logging.getLogger("fragrelease.preview").warning("%s; see fragrelease plan %s", warning, config_path)


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
        None, "--rows", help="Record count PER OWNER, for each owner whose configuration declares none (not the "
                             "table's total; public; sharpens the scale and bounds the suggested k)."),
    threshold: float = typer.Option(
        0.5, "--threshold", help="Warn when an attribute's expected released error (after the post-processing, "
                                 "simulated on data drawn from the declared domain) is at least this multiple of "
                                 "the error of releasing its mean or most frequent category on those data (default "
                                 "0.5: real data are typically about half as spread as data filling the domain)."),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
):
    """Accuracy preview before any data is read: per attribute, ε_attr, the Laplace scale, the expected noise and a
    95 % interval (units and share of the domain), the categorical rank-move chance, the expected released error
    after post-processing (simulated on data drawn from the declared domain) beside the error of releasing the mean
    or most frequent category; warnings and the k, ε or attributes that would fit. Public quantities only: no data,
    no Spark, no budget. docs/specification.md §2."""
    from fragrelease.errors import ConfigError

    from ..protocol.preflight import kind_preview

    begin(json_out)
    if rows is not None and rows < 1:
        raise ConfigError(f"--rows: must be >= 1, not {rows}")
    cfg = load_config(config, {"epsilon": epsilon, "k": k, "mechanism": mechanism, "category_order": category_order,
                               "category_order_share": order_share, "postprocess": postprocess})
    kind = release_kind(cfg.linkage)
    pv = kind_preview(cfg, rows=rows, threshold=threshold)
    heading, blocks = kind.plan_heading(cfg, config), kind.preview_blocks(pv)
    console.print(heading, highlight=False)
    if rows is not None:
        console.print(rows_line(cfg, rows), highlight=False)
    print_blocks(blocks)
    if json_out:
        from .documents import plan_document

        emit(plan_document(cfg, config, heading, pv, blocks))


def rows_line(cfg: ReleaseConfig, rows: int) -> str:
    """What ``plan --rows N`` assumed, per owner and in total: N records for each owner that declares no
    ``rows`` (public); the owners that declare theirs keep them."""
    undeclared = [o.name for o in cfg.owners if o.rows is None]
    if not undeclared:
        return f"--rows {rows:,} ignored: every owner declares its rows ({sum(o.rows or 0 for o in cfg.owners):,} in total)"
    total = sum(o.rows if o.rows is not None else rows for o in cfg.owners)
    return (f"--rows {rows:,} per owner, for {len(undeclared)} of {len(cfg.owners)} owners without declared rows: "
            f"{total:,} records in total")


def split(config: str = typer.Argument(...), master: Optional[str] = MASTER):
    """Simulate owners: cut the configured dataset into the owners' fragments."""
    from fragrelease.schemas.datasets import resolve_schema

    from ..protocol import simulate

    cfg = _common._config(config, "split")
    spark = _common._spark(master, cfg)
    schema = resolve_schema(cfg.dataset)
    sizes = simulate.split_fragments(spark, cfg, schema, simulate.load_dataset(spark, cfg, schema))
    for name, n in sizes.items():
        console.print(f"{name}: {n:,} records")


def work_clear(config: str = typer.Argument(..., help="Release configuration YAML.")):
    """Remove what an earlier run of this release left in its work_dir (metadata/, plan.json, owners/) and
    nothing else; refuse a work_dir that holds user files or belongs to another release."""
    from ..protocol.workspace import clear_work_dir

    cfg = _common._config(config, "run")
    removed = clear_work_dir(cfg, config)
    console.print(f"work_dir {cfg.work_dir}: removed {', '.join(removed) if removed else 'nothing'} "
                  f"(release {cfg.name!r})")


def validate(config: str = typer.Argument(..., help="Release configuration YAML (see conf/)."),
             owner: Optional[str] = typer.Option(
                 None, "--owner", help="Check as this data owner's step would (only its own source)."),
             aggregator: bool = typer.Option(False, "--aggregator", help="Check as the aggregator's steps would."),
             source_table: Optional[str] = SOURCE_TABLE, output_table: Optional[str] = OUTPUT_TABLE,
             json_out: bool = typer.Option(False, "--json", help=JSON_HELP)):
    """Run every check that needs no data (the configuration, its schema, owners, k, local paths): no Spark.

    Prints ``OK`` and what the configuration releases, or the problem on one line (exit status 2); with
    ``--json`` also one JSON document with the checks that ran.
    """
    begin(json_out)
    if owner is not None and aggregator:
        raise FragReleaseError("validate: give --owner or --aggregator, not both")
    party = "owner" if owner is not None else "aggregator" if aggregator else "run"
    checks: list[str] = []
    cfg = _common._config(config, party, owner, source_table=source_table, output_table=output_table, checks=checks)
    target = cfg.output_table or cfg.output
    console.print(f"OK {config}: {cfg.fragmentation} release of {cfg.dataset}, {len(cfg.owners)} owners, "
                  f"ε {cfg.epsilon}, {release_kind(cfg.linkage).terms_text(cfg)} -> {target} (checked for {party}"
                  f"{' ' + owner if owner else ''}; the data is checked when each owner runs)", highlight=False)
    if json_out:
        from .documents import validate_document

        emit(validate_document(cfg, config, party=party, owner=owner, checks=checks))
