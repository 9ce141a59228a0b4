"""Benchmark: the composition-attack audit on the paper's scale (Baig et al. (CIKM 2011) §7: 5 publishers x 200k rows).

Synthetic generalized releases are generated inside Spark with DataFrame expressions (no row data
passes through the Python driver) and written as Parquet; then :func:`run_audit` (read, audit every
pair of releases, commit the privacy-risk tuples as a Delta table, write the summary) is timed.
Release p holds ``rows - overlap`` people of its own and ``overlap`` people of a shared pool of
``pool`` people (a bijection of the pool per publisher, so a pool person appears at most once per
release). Equivalence classes are random groups of about ``class_size`` rows with a numeric range
and a taxonomy value; each person's sensitive value (of 14) is fixed across releases. The data is
sized like the paper's, not anonymized: only the audit's cost is measured.

    python benchmarks/bench_composition.py --publishers 5 --rows 200000 --overlap 100000 --master local[2]
"""
from __future__ import annotations

import argparse
import math
import os
import shutil
import tempfile
import time


def _multipliers(n: int, pool: int) -> list[int]:
    out, a = [], 1_000_003
    while len(out) < n:
        if math.gcd(a, pool) == 1:
            out.append(a)
        a += 2
    return out


def synthetic_releases(spark, *, publishers: int, rows: int, overlap: int, pool: int, class_size: int):
    """One DataFrame with a ``publisher`` column: person, eq_class, age_lo/age_hi, education, occupation."""
    from pyspark.sql import functions as F

    mult = _multipliers(publishers, pool)
    education = ["Higher education", "Undergraduate", "Graduate", "Secondary education", "High School", "*"]
    frames = []
    for p in range(publishers):
        i = F.col("id")
        person = F.when(i < overlap, F.pmod(i * F.lit(mult[p]) + F.lit(17 * p), F.lit(pool))) \
            .otherwise(F.lit(pool) + F.lit(p) * F.lit(rows) + i)
        df = spark.range(rows).select(F.lit(f"p{p}").alias("publisher"), person.alias("record_id"), i.alias("i"))
        n_classes = max(rows // class_size, 1)
        df = df.withColumn("eq_class", F.pmod(F.xxhash64("i", F.lit(p)), F.lit(n_classes)))
        df = df.select(
            "publisher", "record_id", "eq_class",
            (F.lit(17) + F.pmod(F.col("eq_class") * 7, F.lit(60))).cast("double").alias("age_lo"),
            (F.lit(32) + F.pmod(F.col("eq_class") * 7, F.lit(60))).cast("double").alias("age_hi"),
            F.element_at(F.array(*[F.lit(e) for e in education]),
                         (F.pmod(F.col("eq_class"), F.lit(len(education))) + 1).cast("int")).alias("education"),
            F.concat(F.lit("occ"), F.pmod(F.xxhash64("record_id", F.lit("s")), F.lit(14)).cast("string"))
            .alias("occupation"),
        )
        frames.append(df)
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--publishers", type=int, default=5)
    ap.add_argument("--rows", type=int, default=200_000, help="rows per publisher")
    ap.add_argument("--overlap", type=int, default=100_000, help="pool people per publisher")
    ap.add_argument("--pool", type=int, default=None, help="pool size (default: --overlap)")
    ap.add_argument("--class-size", type=int, default=10)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--shuffle-partitions", type=int, default=16)
    args = ap.parse_args()
    from fragrelease.jobs.publications.runner import run_audit
    from fragrelease.jobs.session import get_spark
    from fragrelease.publications.params import AuditParams
    from fragrelease.schemas.taxonomies import adult_quasi_identifiers

    spark = get_spark("bench-composition", args.master, shuffle_partitions=args.shuffle_partitions)
    pool = args.pool or args.overlap
    work = tempfile.mkdtemp(prefix="bench-composition-")
    try:
        src = os.path.join(work, "releases")
        t = time.perf_counter()
        synthetic_releases(spark, publishers=args.publishers, rows=args.rows, overlap=args.overlap, pool=pool,
                           class_size=args.class_size).write.parquet(src)
        gen = time.perf_counter() - t
        qis = adult_quasi_identifiers(["age", "education"])
        t = time.perf_counter()
        res = run_audit(spark, AuditParams(releases=(src,), output=os.path.join(work, "risky"), person="record_id",
                                           sensitive="occupation", publisher="publisher", qis=tuple(qis)))
        audit = time.perf_counter() - t
        s = res.summary
        pairs = sum(p["overlapping"] for p in s.pairs)
        print(f"publishers={args.publishers} rows/publisher={args.rows} overlap={args.overlap} pool={pool} "
              f"master={args.master} cores={os.cpu_count()}")
        print(f"generate+write: {gen:.1f} s")
        print(f"audit (read, {len(s.pairs)} release pairs, {pairs} person-pairs, commit, summary): {audit:.1f} s")
        print(f"overlapping people {s.overlapping_people}, risky people {s.risky_people}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
