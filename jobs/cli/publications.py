"""``fragrelease publications``: independent publications, the composition-attack audit and cloning.

    fragrelease publications simulate --output DIR [--publishers 5 --base 6000 --pool 6000 --overlap 2000]
    fragrelease publications anonymize SOURCE --method mondrian|cloning --qi age --qi sex ...
                                       --sensitive occupation --k 5 [--l 4 | --mu 0.2 --eta 3] --output TABLE
    fragrelease publications audit RELEASE1 [RELEASE2 ...] --person record_id --sensitive occupation --output TABLE

Quasi-identifiers are Adult attributes with their vendored taxonomies and declared domains unless
``--taxonomy NAME=FILE.csv`` (ARX format: one ``;``-separated path per leaf, root last) or
``--domain NAME=LO:HI`` (a numeric attribute) describe them.
"""
from __future__ import annotations

from typing import List, Mapping, Optional

import typer
from rich.table import Table

from fragrelease.errors import ConfigError

from ._common import MASTER, console


def _spark(master: Optional[str]):
    from ..session import get_spark

    return get_spark("fragrelease-publications", master)


def _pairs(items: Optional[List[str]], what: str) -> Mapping[str, str]:
    out = {}
    for item in items or []:
        if "=" not in item:
            raise ConfigError(f"{what} must look like NAME=VALUE, not {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def quasi_identifiers(names: List[str], taxonomies: Optional[List[str]] = None, domains: Optional[List[str]] = None):
    """QuasiIdentifier objects for CLI options (see the module docstring)."""
    from fragrelease.schemas.datasets import ADULT_TAXONOMY_FILES
    from fragrelease.schemas.taxonomies import adult_quasi_identifiers
    from fragrelease.taxonomy import QuasiIdentifier, Taxonomy

    tax = _pairs(taxonomies, "--taxonomy")
    dom = _pairs(domains, "--domain")
    out = []
    for n in names:
        t = None
        if n in tax:
            from ..storage import read_text

            lines = [ln for ln in read_text(tax[n]).splitlines() if ln.strip()]
            t = Taxonomy(n, [[p.strip() for p in ln.split(";")] for ln in lines])
        if n in dom:
            try:
                lo, hi = (float(x) for x in dom[n].split(":"))
            except ValueError:
                raise ConfigError(f"--domain {n}= must be LO:HI, not {dom[n]!r}") from None
            if t is None and n in ADULT_TAXONOMY_FILES:
                t = adult_quasi_identifiers([n])[0].taxonomy
            out.append(QuasiIdentifier(n, "numeric", t, (lo, hi)))
        elif t is not None:
            out.append(QuasiIdentifier(n, "categorical", t))
        else:
            out.extend(adult_quasi_identifiers([n]))
    if not out:
        raise ConfigError("give at least one --qi")
    return out


def _check_anonymize(source: str, fmt: str, method: str, k: int, l: int, mu: float, eta: int) -> None:
    """Refuse bad anonymization parameters and a missing local source before Spark starts, naming the value."""
    from fragrelease.errors import InvalidParameterError
    from fragrelease.taxonomy import check_positive_int

    from ..protocol.preflight import check_source_exists
    from ..publications.runner import METHODS

    if method not in METHODS:
        raise ConfigError(f"--method: must be one of {METHODS}, not {method!r}")
    if fmt not in ("parquet", "csv", "delta"):
        raise ConfigError(f"--format: must be parquet, csv or delta, not {fmt!r}")
    k = check_positive_int("--k", k)
    check_positive_int("--l", l)
    eta = check_positive_int("--eta", eta)
    if method == "cloning" and eta > k:
        raise InvalidParameterError(f"--eta: must be <= k = {k}, not {eta}")
    if not (0 < mu <= 1):
        raise InvalidParameterError(f"--mu: must be a fraction of the data in (0, 1], not {mu!r}")
    check_source_exists(source, key="SOURCE")


def simulate(
    output: str = typer.Option(..., help="Folder for the Parquet table (column 'publisher')."),
    publishers: int = typer.Option(5, help="Number of independent publishers."),
    base: int = typer.Option(6000, help="Own (disjoint) Adult records per publisher."),
    pool: int = typer.Option(6000, help="Records in the shared overlap pool."),
    overlap: int = typer.Option(2000, help="Pool records each publisher also holds."),
    master: Optional[str] = MASTER,
):
    """Split Adult (public, vendored) into independent publishers sharing an overlap pool (Baig et al. (CIKM 2011) §7)."""
    import os

    import pandas as pd

    from fragrelease.errors import ReleaseExistsError
    from fragrelease.publications.composition import split_with_overlap
    from fragrelease.schemas.datasets import load_builtin_pandas

    if "://" not in output and os.path.exists(output):
        raise ReleaseExistsError(f"{output!r} already exists; choose another --output")
    adult = load_builtin_pandas("adult")
    parts = split_with_overlap(len(adult), publishers=publishers, base=base, pool=pool, overlap=overlap)
    pdf = pd.concat([adult.iloc[p].assign(publisher=f"publisher{i + 1}") for i, p in enumerate(parts)],
                    ignore_index=True)
    spark = _spark(master)
    spark.createDataFrame(pdf).write.mode("error").parquet(output)
    console.print(f"wrote {len(pdf)} rows of {publishers} publishers to {output}")


def anonymize(
    source: str = typer.Argument(..., help="Input table (Parquet folder, CSV or Delta)."),
    output: str = typer.Option(..., help="Delta table for the release."),
    method: str = typer.Option("cloning", help="cloning (docs/specification.md §5) or mondrian (ℓ-diverse baseline, docs/specification.md §8)."),
    qi: List[str] = typer.Option(..., "--qi", help="A quasi-identifier (repeat)."),
    sensitive: str = typer.Option(..., help="The sensitive attribute."),
    k: int = typer.Option(5, help="Minimum class (sub-class) size."),
    l: int = typer.Option(2, "--l", help="Distinct ℓ-diversity (mondrian)."),
    mu: float = typer.Option(0.2, help="Distortion control: candidates as a fraction of the data (cloning)."),
    eta: int = typer.Option(1, help="Indicative-range width η ≤ k (cloning)."),
    fmt: str = typer.Option("parquet", "--format", help="parquet, csv or delta."),
    publisher: Optional[str] = typer.Option("publisher", "--publisher-column",
                                            help="Column naming the publisher; '' for one publisher."),
    keep: Optional[List[str]] = typer.Option(None, "--keep", help="Column to carry, e.g. an audit key (repeat)."),
    taxonomy: Optional[List[str]] = typer.Option(None, "--taxonomy", help="NAME=FILE.csv (repeat)."),
    domain: Optional[List[str]] = typer.Option(None, "--domain", help="NAME=LO:HI for a numeric QI (repeat)."),
    if_exists: str = typer.Option("error", "--if-exists", help="error or new-version."),
    master: Optional[str] = MASTER,
):
    """Anonymize every publisher independently and commit one Delta release."""
    from fragrelease.publications.params import AnonymizeParams

    from ..publications.runner import run_anonymize

    qis = quasi_identifiers(qi, taxonomy, domain)
    _check_anonymize(source, fmt, method, k, l, mu, eta)
    params = AnonymizeParams.of(source=source, fmt=fmt, output=output, method=method, qis=tuple(qis),
                                sensitive=sensitive, k=k, l=l, mu=mu, eta=eta, publisher=publisher or None,
                                keep=tuple(keep or ()), if_exists=if_exists)
    spark = _spark(master)
    res = run_anonymize(spark, params)
    console.print(f"[bold]Release written[/bold] to Delta table {res.path} (version {res.version})")
    rep = res.report
    if rep is not None:
        t = Table(title="cloning report (for the publishers; not published)")
        for c in rep.columns:
            t.add_column(c, justify="right")
        for row in rep.itertuples(index=False):
            t.add_row(*[f"{v:.4f}" if isinstance(v, float) else str(v) for v in row])
        console.print(t)


def audit(
    releases: List[str] = typer.Argument(..., help="Release tables (Delta or Parquet)."),
    output: str = typer.Option(..., help="Delta table for the privacy-risk tuples; summary at OUTPUT.summary.json."),
    person: str = typer.Option(..., help="The audit key naming a person in every release."),
    sensitive: str = typer.Option(..., help="The sensitive attribute."),
    publisher: Optional[str] = typer.Option("publisher", "--publisher-column",
                                            help="Column splitting one table into several releases; '' for none."),
    qi: Optional[List[str]] = typer.Option(None, "--qi", help="QI whose generalizations to intersect (repeat)."),
    taxonomy: Optional[List[str]] = typer.Option(None, "--taxonomy", help="NAME=FILE.csv (repeat)."),
    domain: Optional[List[str]] = typer.Option(None, "--domain", help="NAME=LO:HI for a numeric QI (repeat)."),
    if_exists: str = typer.Option("error", "--if-exists", help="error or new-version."),
    counterfeit_bound: int = typer.Option(
        1, "--counterfeit-bound", min=0,
        help="Counterfeits of one value per clone class the adversary assumes (1 for this version's cloning; "
             "0 = no bound, for cloned releases of older versions, which stacked counterfeits)."),
    master: Optional[str] = MASTER,
):
    """Composition attack on people present in two releases: privacy-risk tuples per pair of releases."""
    from fragrelease.publications.params import AuditParams

    from ..protocol.preflight import check_source_exists
    from ..publications.runner import run_audit

    qis = quasi_identifiers(qi, taxonomy, domain) if qi else []
    for i, r in enumerate(releases):
        check_source_exists(r, key=f"RELEASES[{i}]")
    params = AuditParams.of(releases=tuple(releases), output=output, person=person, sensitive=sensitive,
                            publisher=publisher or None, qis=tuple(qis), if_exists=if_exists,
                            counterfeit_bound=counterfeit_bound or None)
    spark = _spark(master)
    res = run_audit(spark, params)
    s = res.summary
    t = Table(title=f"composition attack: {s.risky_people} of {s.overlapping_people} overlapping people at risk")
    for c in ("release A", "release B", "overlapping", "privacy-risk tuples", "mean confidence", "max confidence"):
        t.add_column(c, justify="right", overflow="fold")
    for p in s.pairs:
        t.add_row(p["release_a"], p["release_b"], str(p["overlapping"]), str(p["risky"]),
                  f"{p['mean_confidence']:.3f}", f"{p['max_confidence']:.3f}")
    console.print(t)
    console.print(f"privacy-risk tuples: Delta table {res.path} (version {res.version}); "
                  f"summary: {res.path.rstrip('/')}.summary.json")
