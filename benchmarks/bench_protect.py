"""Benchmark: protect N rows x 10 attributes with iDP-IR, Spark vs single-thread numpy.

Prints, for each N: wall time, rows/s, Spark/numpy ratio, Spark/floor ratio and peak driver memory (RSS of this
Python driver process, and of the local Spark JVM, which in local mode is driver and executor at
once). The numpy reference runs after Spark, in a child process. The data is generated inside Spark with DataFrame
expressions (never passes through the Python driver); numpy gets the same distribution generated
in memory. Both apply the same IR microaggregation + one Laplace draw per cluster.

Three single-thread numpy figures, each in its own child process after Spark: ``numpy s`` the
reference with numpy's ``lexsort`` (the baseline), ``packed s`` the same mechanism with the packed
64-bit sort (:func:`fragrelease.idpir.microaggregation.ir_order`), and ``floor s`` the packed sort
alone with its gather and scatter (each attribute's permutation, values gathered into rank order
and scattered back), no noise: what any exact IR release has to do at least.

``--plan distributed`` (or ``whole``) forces the distributed plan (or one task per attribute)
whatever N, to measure where one overtakes the other (``auto``: the job's own threshold).

``--repeat 3`` protects each size three times in one JVM (new data and noise each time; the
generation is not timed) and prints a line per run: the first also pays the JVM's first Python
workers, Arrow stages and code generation, the later ones are the job's throughput.

Each run also prints, per stage and for the whole protection, the CPU seconds (user + sys) of the
driver, the local JVM and its Python daemon and workers (from ``/proc``; NaN elsewhere): on a shared
machine the CPU is the figure to compare, the wall seconds grow with the load.

``--linkage unlinked`` times the owner's unlinked output (every column in its own random order,
:meth:`fragrelease.jobs.idpir.protect.ReleasedValues.unlinked`) instead of the rows lined up by id.

``--data numeric``: 10 numeric attributes, uniform in [0, 1000] with 2 decimals.
``--data mixed``: 5 numeric as above + 5 categorical with 2, 5, 10, 20 and 50 categories and skewed
frequencies (category i drawn with probability falling in i), i.e. heavy ties.

    python benchmarks/bench_protect.py --rows 1000000 10000000 --k 100 --master local[2]
    python benchmarks/bench_protect.py --rows 10000000 --data mixed
    python benchmarks/bench_protect.py --rows 1000000 2000000 4000000 --plan distributed
"""
from __future__ import annotations

import argparse
import logging
import math
import multiprocessing
import os
import resource
import subprocess
import time
from concurrent.futures import ProcessPoolExecutor
from fractions import Fraction

import numpy as np

CATEGORY_COUNTS = (2, 5, 10, 20, 50)


def attributes(n_attrs: int, data: str):
    from fragrelease.schemas.base import Attribute

    out = []
    for i in range(n_attrs):
        if data == "mixed" and i >= n_attrs // 2:
            m = CATEGORY_COUNTS[(i - n_attrs // 2) % len(CATEGORY_COUNTS)]
            out.append(Attribute(name=f"a{i}", type="string", role="quasi-identifier", kind="categorical",
                                 categories=tuple(f"c{j}" for j in range(m))))
        else:
            out.append(Attribute(name=f"a{i}", type="double", role="quasi-identifier", kind="numeric",
                                 domain=(0, 1000)))
    return out


def numpy_reference(n: int, attrs, k: int, eps_attr: float, postprocess: str = "isotonic", sort: str = "lexsort") -> float:
    from fragrelease.idpir.category_order import DEFAULT_ORDER_SHARE, dp_frequency_order
    from fragrelease.idpir.mechanisms import protect_attribute
    from fragrelease.idpir.stage import AttributeTask
    from fragrelease.protocol.options import ReleaseOptions
    from fragrelease.rng.laplace import SecureLaplace

    rng = np.random.default_rng()  # benchmark data only, not a release
    noise = SecureLaplace()
    ids = np.arange(n)
    t = time.perf_counter()
    for a in attrs:
        if a.categorical:
            # integer category codes; ranks from the dp-frequency order, as the release does
            m = len(a.categories)
            codes = np.floor(rng.uniform(0, 1, n) ** 2 * m).astype(np.int64)
            freq = np.bincount(codes, minlength=m)
            order = dp_frequency_order(dict(zip(a.categories, freq.tolist())), a.categories,
                                       eps_attr * DEFAULT_ORDER_SHARE, noise, attribute=a.name)
            rank_of = np.empty(m)
            rank_of[[a.categories.index(c) for c in order]] = np.arange(1, m + 1)
            x = rank_of[codes]
        else:
            x = np.round(rng.uniform(0, 1000, n), 2)
        lo, hi = a.bounds()
        protect_attribute(x, AttributeTask(a.name, lo, hi, categorical=a.categorical, epsilon=eps_attr),
                          k=k, mechanism="idp-ir", noise=noise, tiebreak=ids,
                          options=ReleaseOptions.of(postprocess=postprocess), sort=sort)
    return time.perf_counter() - t


def packed_floor(n: int, attrs) -> float:
    """Single-thread packed sort of every attribute by (value, id) plus its gather and scatter (no noise)."""
    from fragrelease.idpir.microaggregation import ir_order

    rng = np.random.default_rng()  # benchmark data only
    ids = np.arange(n)
    total = 0.0
    for a in attrs:
        x = rng.integers(1, len(a.categories) + 1, n).astype(float) if a.categorical else np.round(rng.uniform(0, 1000, n), 2)
        t = time.perf_counter()
        order = ir_order(x, ids)
        ranked = x[order]  # gather into rank order
        back = np.empty_like(x)
        back[order] = ranked  # scatter back to the ids' order
        total += time.perf_counter() - t
    return total


def _child(fn, *args) -> float:
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


def jvm_peak_rss_mb() -> float:
    """Peak RSS (VmHWM) of the local Spark driver JVM started by this process."""
    try:
        out = subprocess.run(["pgrep", "-P", str(os.getpid()), "java"], capture_output=True, text=True).stdout.split()
        peak = 0
        for pid in out:
            for line in open(f"/proc/{pid}/status"):
                if line.startswith("VmHWM"):
                    peak = max(peak, int(line.split()[1]))
        return peak / 1024
    except OSError:
        return float("nan")


def tree_cpu_seconds() -> float:
    """CPU seconds (user + sys) of this process and every live descendant (the local JVM, its Python
    daemon and workers), each with the children it has reaped (Linux ``/proc``; NaN elsewhere)."""
    try:
        tick = os.sysconf("SC_CLK_TCK")
        parent: dict[int, int] = {}
        cpu: dict[int, float] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parent[int(entry)] = int(fields[1])
            cpu[int(entry)] = sum(int(v) for v in fields[11:15]) / tick  # utime, stime, cutime, cstime
        me = os.getpid()
        total = sum(os.times()[:2])  # this process without its children (the numpy children are not Spark's)
        for pid in cpu:
            q = parent.get(pid)
            while q is not None and q != me and q in parent:
                q = parent[q]
            if q == me and pid != me:
                total += cpu[pid]
        return total
    except OSError:
        return float("nan")


class StageTimes(logging.Handler):
    """Collects ``protect_fragment``'s DEBUG stage timings; prints each as it ends."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.logger = logging.getLogger("fragrelease.jobs.idpir.protect")
        self.logger.setLevel(logging.DEBUG)
        self.logger.addHandler(self)
        self.cpu = tree_cpu_seconds()

    def emit(self, record: logging.LogRecord) -> None:
        line = record.getMessage()
        self.lines.append(line)
        cpu = tree_cpu_seconds()
        used, self.cpu = cpu - self.cpu, cpu
        print(f"    {line}, CPU {used:.1f} s  (as it ends)", flush=True)  # a run that fails still shows how far it got

    def done(self, total: float) -> None:
        self.logger.removeHandler(self)
        seconds = [float(line.rsplit(": ", 1)[1].split()[0]) for line in self.lines]
        print(f"    protect stage map values to noisy centroids, line up by id (or unlink), write (noop): "
              f"{total - sum(seconds):.2f} s, CPU {tree_cpu_seconds() - self.cpu:.1f} s")


def spark_run(spark, n: int, attrs, k: int, eps_attr: Fraction, postprocess: str = "isotonic", plan: str = "auto",
              linkage: str = "linked") -> float:
    from pyspark.sql import functions as F

    import fragrelease.jobs.idpir.protect as protect
    from fragrelease.idpir.spec import protection_spec
    from fragrelease.jobs.idpir.protect import released_fragment
    from fragrelease.protocol.options import ReleaseOptions

    if plan != "auto":  # benchmark only: force one plan whatever n
        protect._WHOLE_ATTRIBUTE_ROWS = 0 if plan == "distributed" else n

    def column(a):
        if a.categorical:
            m = len(a.categories)
            pick = (F.floor(F.pow(F.rand(), 2) * m) + 1).cast("int")
            return F.element_at(F.array(*[F.lit(c) for c in a.categories]), pick).alias(a.name)
        return F.round(F.rand() * 1000, 2).alias(a.name)

    # about 1M rows per input partition, like a table stored in files of ~100 MB
    df = spark.range(0, n, 1, max(2, math.ceil(n / 1_000_000))).withColumnRenamed("id", "record_id")
    df = df.select("record_id", *[column(a) for a in attrs])
    t = time.perf_counter()
    df = df.localCheckpoint(eager=True)  # generate once, outside the timed section
    print(f"    generated {n:,} rows (stored, not timed): {time.perf_counter() - t:.2f} s", flush=True)
    stages = StageTimes()
    cpu = tree_cpu_seconds()
    t = time.perf_counter()
    spec = protection_spec(owner="bench", dataset="bench", plan_id="bench", attributes=[(a.name, a.categorical) for a in attrs],
                           mechanism="idp-ir", k=k, epsilon=eps_attr * len(attrs),
                           options=ReleaseOptions.of(category_order="dp-frequency", postprocess=postprocess), n_records=n)
    released = released_fragment(df, attrs, spec, id_column="record_id")
    out = released.lined_up() if linkage == "linked" else released.unlinked()
    out.write.format("noop").mode("overwrite").save()
    total = time.perf_counter() - t
    stages.done(total)
    print(f"    CPU of the protection (driver, JVM, Python workers; user + sys): {tree_cpu_seconds() - cpu:.1f} s, "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    return total


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    p.add_argument("--attributes", type=int, default=10)
    p.add_argument("--data", choices=["numeric", "mixed"], default="numeric")
    p.add_argument("--k", type=int, default=100)
    p.add_argument("--epsilon", default="1")
    p.add_argument("--postprocess", choices=["isotonic", "none"], default="isotonic")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--driver-memory", default="8g")
    p.add_argument("--skip-numpy", action="store_true", help="Spark only (e.g. 100M rows, where numpy needs GBs)")
    p.add_argument("--plan", choices=["auto", "distributed", "whole"], default="auto")
    p.add_argument("--linkage", choices=["linked", "unlinked"], default="linked",
                   help="unlinked: the owner's columns each in its own random order instead of lined up by id "
                        "(the numpy figures stay the linked reference's)")
    p.add_argument("--repeat", type=int, default=1,
                   help="protect each size this many times in the same JVM (fresh noise each time) and print every "
                        "run: the first pays the JVM's first Python and Arrow stages, the later ones show the throughput")
    args = p.parse_args()
    os.environ["FRAGRELEASE_DRIVER_MEMORY"] = args.driver_memory
    from fragrelease.jobs.session import get_spark

    spark = get_spark("fragrelease-bench", args.master, shuffle_partitions=8)
    eps_attr = Fraction(args.epsilon) / args.attributes
    attrs = attributes(args.attributes, args.data)
    print(f"data {args.data}, {args.attributes} attributes, k {args.k}, eps {args.epsilon}, "
          f"postprocess {args.postprocess}, {args.master}, plan {args.plan}, {args.linkage}, load average {os.getloadavg()[0]:.1f}")
    head = (f"{'rows':>12} {'spark s':>9} {'rows/s':>12} {'numpy s':>9} {'packed s':>9} {'floor s':>8} "
            f"{'/numpy':>7} {'/floor':>7} {'py RSS MB':>10} {'JVM RSS MB':>11}")
    print(head)
    for n in args.rows:
        runs = [spark_run(spark, n, attrs, args.k, eps_attr, args.postprocess, args.plan, args.linkage)
                for _ in range(max(1, args.repeat))]
        py_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # the Spark driver's Python only
        # numpy runs afterwards in child processes, alone, so its arrays do not count as driver memory
        tn = tp = tf = float("nan")
        if not args.skip_numpy:
            tn = _child(numpy_reference, n, attrs, args.k, float(eps_attr), args.postprocess, "lexsort")
            tp = _child(numpy_reference, n, attrs, args.k, float(eps_attr), args.postprocess, "packed")
            tf = _child(packed_floor, n, attrs)
        print(head)
        jvm_mb = jvm_peak_rss_mb()
        for i, ts in enumerate(runs):
            label = "" if len(runs) == 1 else ("  (first run in this JVM)" if i == 0 else f"  (run {i + 1}, same JVM)")
            print(f"{n:>12,} {ts:>9.1f} {n / ts:>12,.0f} {tn:>9.1f} {tp:>9.1f} {tf:>8.1f} {ts / tn:>7.2f} {ts / tf:>7.2f} "
                  f"{py_mb:>10.0f} {jvm_mb:>11.0f}{label}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
