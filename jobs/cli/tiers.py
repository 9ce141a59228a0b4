"""``fragrelease tiers``: tiered releases with increasing privacy (docs/specification.md §6).

    fragrelease tiers run --dataset german --delta 0.05 --hops 3 --output DIR
    fragrelease tiers run --dataset adult --sensitive occupation --qi age --qi hours-per-week ... --output DIR
    fragrelease tiers run --dataset path/to/table --format delta --qi a --qi b --sensitive s --output DIR
    fragrelease tiers experiment --out docs/tiers          (German Credit figures, pure python)
"""
from __future__ import annotations

from typing import Mapping, Optional

import typer
from rich.table import Table

from fragrelease.errors import InvalidParameterError

from ._common import MASTER, console


def _weights(items: Optional[list[str]]) -> Optional[Mapping[str, float]]:
    if not items:
        return None
    out = {}
    for item in items:
        name, sep, value = item.rpartition("=")
        try:
            if not sep or not name:
                raise ValueError
            out[name] = float(value)
        except ValueError:
            raise InvalidParameterError(f"--weight must look like COLUMN=NUMBER, not {item!r}") from None
    return out


def run(
    dataset: str = typer.Option("german", "--dataset", help="german, adult, or a table path (parquet/delta/csv)."),
    delta: str = typer.Option(..., "--delta", help="δ > 0; tier i gets P < (l - i + 1)·δ (e.g. 0.05 or 1/20); l·δ must be below the disclosure of singleton classes (0.493 on German Credit), else refused."),
    hops: int = typer.Option(..., "--hops", help="Chain length l ≥ 1 (number of tiers)."),
    output: str = typer.Option(..., "--output", help="Folder for the Delta tables tier_1 .. tier_l."),
    algorithm: str = typer.Option("fla", "--algorithm", help="fla (default), tda or bua."),
    sensitive: Optional[str] = typer.Option(None, "--sensitive", help="Sensitive attribute (german: credit_class; adult: occupation)."),
    qi: Optional[list[str]] = typer.Option(None, "--qi", help="Numeric quasi-identifier (repeat); defaults per built-in dataset."),
    row_id: str = typer.Option("record_id", "--row-id", help="Integer row-number column of the source; the tiers carry CSPRNG surrogates in its place (no map back is kept)."),
    weight: Optional[list[str]] = typer.Option(None, "--weight", help="COLUMN=WEIGHT (repeat); default uniform."),
    standardize: bool = typer.Option(True, "--standardize/--no-standardize", help="z-score the quasi-identifiers first."),
    fmt: str = typer.Option("parquet", "--format", help="Format of a path source: parquet, delta or csv."),
    reading: str = typer.Option("tree", "--fla-reading", help="FLA: compare BUA/TDA at every tree node (tree) or in master classes only (leaves)."),
    max_node_rows: int = typer.Option(20_000, "--max-node-rows", help="Nodes larger than this are split without trying BUA."),
    if_exists: str = typer.Option("error", "--if-exists", help="error (default) or new-version."),
    master: Optional[str] = MASTER,
):
    """Build T_1..T_l, each from the previous one, and commit one Delta table per tier."""
    from fragrelease.tiers import TiersParams, parse_delta, thresholds

    from ..session import get_spark
    from ..tiers.runner import run_tiers

    thresholds(parse_delta(delta), hops)  # fail on bad δ / hops before starting Spark
    params = TiersParams.of(dataset=dataset, delta=delta, hops=hops, output=output, algorithm=algorithm,
                            sensitive=sensitive, quasi_identifiers=tuple(qi) if qi else None, row_id=row_id,
                            weights=_weights(weight), standardize=standardize, fmt=fmt,
                            max_node_rows=max_node_rows, reading=reading, if_exists=if_exists)
    if not params.builtin:  # a table path: a local one must exist
        from fragrelease.errors import ConfigError

        from ..protocol.preflight import check_source_exists

        if fmt not in ("parquet", "csv", "delta"):
            raise ConfigError(f"--format: must be parquet, csv or delta, not {fmt!r}")
        if not qi or not sensitive:
            raise ConfigError(f"--dataset: {dataset!r} is not built in (german, adult): give --qi and --sensitive")
        check_source_exists(dataset, key="--dataset")
    spark = get_spark("fragrelease-tiers", master)
    with console.status("starting") as status:
        result = run_tiers(spark, params, progress=lambda m: status.update(m))
    prov = result.provenance
    table = Table(title=f"{str(prov['algorithm']).upper()} chain of {prov['source']}: δ = {prov['delta']}, l = {hops}, "
                        f"sensitive {prov['sensitive']}")
    for col in ("tier", "threshold (l-i+1)δ", "P(T_i)", "UL(T_i)", "Delta table"):
        table.add_column(col, justify="right" if col != "Delta table" else "left")
    for t in result.tiers:
        table.add_row(str(t.tier), f"{float(t.threshold):.4g}", f"{t.disclosure:.4f}",
                      f"{t.utility_loss:.4f}", f"{t.path} (v{t.version})")
    console.print(table)


def experiment(
    out: str = typer.Option("docs/tiers", "--out", help="Folder for results.csv and the figures."),
    hops: int = typer.Option(4, "--hops", help="Chain length for the δ sweep and the per-hop figure."),
    delta: str = typer.Option("0.02", "--delta", help="δ of the per-hop and chain-length figures."),
    max_hops: int = typer.Option(6, "--max-hops", help="Longest chain of the chain-length figure."),
):
    """German Credit: UL vs δ (paper Fig. 4), P(T_i) per hop (Fig. 5), mean UL vs chain length (Fig. 6)."""
    from fragrelease.experiments.tiers import run_experiment

    with console.status("running the German Credit chains"):
        result = run_experiment(out, hops=hops, delta=delta, max_hops=max_hops)
    console.print(f"{result['rows']} rows -> {result['csv']}")
    for f in result["figures"]:
        console.print(f"figure: {f}")
