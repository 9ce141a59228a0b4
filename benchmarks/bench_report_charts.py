"""Benchmark: the reports' distribution charts (issue 41), their driver CPU and the pages' size.

Without Spark: ``report._distributions`` for 20 attributes, with the originals (an owner report's
charts) and without (the public report's), best of ``--rounds``; "three reports" is two owner reports
and the public one. Two schemas: the issue's session 6 brief (10 numeric attributes with 20 bins, 10
categorical with 2 to 16 categories) and ``bench_small_release.py``'s (14 numeric, 6 categorical of
2, 3, 5, 8, 12 and 20 categories).

With ``--pages`` (starts a local Spark session): writes an owner report (500 records) and the public
report (1,000 rows) of ``bench_small_release.py``'s schema and prints their sizes in bytes (``--out DIR``
keeps them there).

    python benchmarks/bench_report_charts.py --rounds 5 --pages
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from fragrelease.jobs.protocol import report
from fragrelease.schemas.base import Attribute

SCHEMAS = {
    "brief: 10 numeric, 10 categorical of 2-16": (10, (2, 3, 4, 5, 6, 8, 10, 12, 14, 16)),
    "bench_small_release: 14 numeric, 6 categorical of 2-20": (14, (2, 3, 5, 8, 12, 20)),
}


def attributes(n_numeric: int, categories: tuple[int, ...]) -> list[Attribute]:
    attrs = [Attribute(name=f"x{i}", type="double", role="quasi-identifier", kind="numeric", domain=[0, 100])
             for i in range(n_numeric)]
    attrs += [Attribute(name=f"g{j}", type="string", role="quasi-identifier", kind="categorical",
                        categories=[f"c{v}" for v in range(m)]) for j, m in enumerate(categories)]
    return attrs


def summaries(attrs: list[Attribute], seed: int) -> dict:
    """Histograms and category counts shaped as ``report._summary_passes`` gives them (benchmark data only)."""
    rng = np.random.default_rng(seed)
    out: dict = {}
    for a in attrs:
        if a.categorical:
            out[a.name] = {"kind": "categorical", "freq": {c: int(rng.integers(0, 300)) for c in a.categories or ()}}
        else:
            lo, hi = a.bounds()
            out[a.name] = {"kind": "numeric", "edges": list(np.linspace(lo, hi, report.BINS + 1)),
                           "hist": [int(v) for v in rng.integers(0, 60, report.BINS)]}
    return out


def best_cpu(rounds: int, *args) -> tuple[float, float]:
    """The least CPU time of ``report._distributions(*args)`` in ``rounds`` calls, and of rendering its
    charts with their macro of ``macros.html.j2`` (``distribution``; ``chart`` before session 6)."""
    macro = "distribution" if hasattr(report, "Distribution") else "chart"
    template = report.environment().from_string(
        '{% import "macros.html.j2" as m %}{% for c in charts %}{{ m.' + macro + '(c) }}{% endfor %}')
    best, render = float("inf"), float("inf")
    for _ in range(rounds):
        t = time.process_time()
        charts = report._distributions(*args)
        best = min(best, time.process_time() - t)
        t = time.process_time()
        template.render(charts=charts)
        render = min(render, time.process_time() - t)
    return best, render


def charts(rounds: int) -> None:
    for title, (n_numeric, categories) in SCHEMAS.items():
        attrs = attributes(n_numeric, categories)
        released, original = summaries(attrs, 1), summaries(attrs, 2)
        report._distributions(attrs, released, original)  # imports and first-use costs out of the timing
        (owner, owner_html), (public, public_html) = best_cpu(rounds, attrs, released, original), best_cpu(rounds, attrs, released)
        print(f"{title}: 20 overlaid (owner report) {owner:.4f} s + {owner_html:.4f} s rendered, 20 released "
              f"(public report) {public:.4f} + {public_html:.4f} s, three reports "
              f"{2 * owner + public:.4f} + {2 * owner_html + public_html:.4f} s (CPU, best of {rounds})")


def pages(out: str | None) -> None:
    import pandas as pd

    from fragrelease.idpir.guarantee import release_guarantee
    from fragrelease.jobs.protocol.kind import kind_jobs
    from fragrelease.jobs.session import get_spark

    attrs = attributes(*SCHEMAS["bench_small_release: 14 numeric, 6 categorical of 2-20"])
    rng = np.random.default_rng(7)  # benchmark data only
    n = 1_000
    cols: dict = {"rid": np.arange(n)}
    for a in attrs:
        if a.categorical:
            cats = list(a.categories or ())
            cols[a.name] = np.array(cats)[np.floor(rng.uniform(0, 1, n) ** 2 * len(cats)).astype(int)]
        else:
            cols[a.name] = np.round(rng.uniform(0, 100, n), 1)
    table = pd.DataFrame(cols)
    protected = table.copy()
    for a in attrs:
        if not a.categorical:
            protected[a.name] = np.clip(table[a.name] + rng.normal(0, 5, n), 0, 100)
    provenance = {
        "dataset": "bench", "fragmentation": "horizontal", "mechanism": "idp-ir", "k": 10, "epsilon": "1",
        "composition": "parallel", "category_order": "declared", "category_order_share": "1/10", "linkage": "linked",
        "plan_id": "p", "fragrelease_version": "bench", "attributes": [a.public_spec() for a in attrs],
        "guarantee": release_guarantee(mechanism="idp-ir", epsilon="1", composition="parallel", linkage="linked",
                                       category_order="declared"),
        "owners": [{"name": o, "n_records": n // 2, "epsilon": "1", "epsilon_per_attribute": "0.05",
                    "attributes": [a.name for a in attrs],
                    "budgets": [{"attribute": a.name, "epsilon": "0.05", "epsilon_order": "0",
                                 "epsilon_centroids": "0.05"} for a in attrs]} for o in ("owner-1", "owner-2")]}
    spark = get_spark("bench-report-charts", master="local[2]")
    with tempfile.TemporaryDirectory() as scratch:
        tmp = out or scratch
        os.environ.setdefault("FRAGRELEASE_PRIVATE_ROOT", tmp)
        half = slice(0, n // 2)
        owner = report.owner_report(spark.createDataFrame(table.iloc[half]), spark.createDataFrame(protected.iloc[half]),
                                    attrs, "rid", {"owner": "owner-1", "plan_id": "p", "n_records": n // 2},
                                    str(Path(tmp) / "owner" / "report.html"))
        public = report.public_report(spark.createDataFrame(protected.drop(columns="rid")), attrs, provenance,
                                      str(Path(tmp) / "public.html"), table="bench", version=0,
                                      extra_sections=kind_jobs("linked").report_sections(provenance, attrs))
        for name, path in (("owner report", owner), ("public report", public)):
            text = Path(path).read_text(encoding="utf-8")
            print(f"{name}: {len(text.encode()):,} bytes, {text.count('data:image/png')} PNG images")
    spark.stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--pages", action="store_true", help="also write an owner and the public report (Spark) and size them")
    p.add_argument("--out", help="with --pages: the folder to keep the two reports in (default: a temporary one)")
    args = p.parse_args()
    charts(args.rounds)
    if args.pages:
        pages(args.out)


if __name__ == "__main__":
    main()
