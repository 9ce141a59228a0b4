"""Benchmark: the fixed cost of a small fragmented release, end to end, from the JVM start.

A 1,000-row table with 20 quasi-identifiers (14 numeric, 6 categorical) is written as two CSV
fragments (500 records each, horizontal) with a schema YAML, and the whole protocol runs in this
driver (owners' metadata, the plan, both owners' protection, the aggregator's commit, the MeanSSE
against the originals), as ``fragrelease run`` does. Prints the wall time of each step and in all,
with and without the owners' private reports and the public report, and the number of Spark jobs
each step started (from Spark's status tracker; benchmark only).

The first line is what ``fragrelease run`` pays: the JVM and session start plus the first release
(reports on) in that fresh JVM, with its steps; then warm runs in the same JVM, reports off and on.

Also times the Adult horizontal quick start (``conf/adult-horizontal.yaml``, 4 owners, reports on)
with ``--adult``.

    python benchmarks/bench_small_release.py --master local[2] --runs 3 --adult

``--linkage unlinked`` releases every column in its own random order (owners and aggregator).
``--call-sites`` lists each step's jobs by call site (the name Spark gives the job's last stage);
``--no-warm`` turns off the embedded session's Python worker warm-up
(:func:`fragrelease.jobs.session.warm_python_workers`), to compare. The session is started as
``fragrelease run`` starts it: C1-only JIT when the two fragments are small
(:func:`fragrelease.jobs.session.inputs_are_small`); ``--jit default`` keeps the JVM's own JIT, to compare.
Each step also prints its CPU seconds: the driver's Python, the JVM's own threads and the Python
workers (the JVM's descendant processes; Linux ``/proc``), which the machine's load changes less than
the wall time.

Targets (docs/benchmarks.md, issue 41): the warm 1,000 × 20 release with reports ≤ 6 s on an idle
machine, and the first release in a new JVM (JVM start included) ≤ 2× that warm release (printed as
a ratio at the end); ≤ 40 s for the Adult quick start including reports. The job counts per step
(``--call-sites``) do not depend on the machine's load; the seconds do.
"""
from __future__ import annotations

import argparse
import logging
import os
import tempfile
import time
from pathlib import Path

import numpy as np

N_ROWS = 1_000
N_NUMERIC = 14
CATEGORIES = (2, 3, 5, 8, 12, 20)


def write_inputs(root: Path, linkage: str = "linked") -> Path:
    """Schema YAML, two CSV fragments and a release configuration under ``root``; returns the config path."""
    rng = np.random.default_rng(7)  # benchmark data only, not a release
    lines = ["name: bench-small", "attributes:", "  - {name: rid, type: long, role: id}"]
    cols = {"rid": np.arange(N_ROWS)}
    for i in range(N_NUMERIC):
        lines.append(f"  - {{name: x{i}, type: double, role: quasi-identifier, kind: numeric, domain: [0, 100]}}")
        cols[f"x{i}"] = np.round(rng.uniform(0, 100, N_ROWS), 1)
    for j, m in enumerate(CATEGORIES):
        cats = [f"c{v}" for v in range(m)]
        lines.append(f"  - {{name: g{j}, type: string, role: quasi-identifier, kind: categorical, "
                     f"categories: [{', '.join(cats)}]}}")
        cols[f"g{j}"] = np.array(cats)[np.floor(rng.uniform(0, 1, N_ROWS) ** 2 * m).astype(int)]
    (root / "schema.yaml").write_text("\n".join(lines) + "\n")
    import pandas as pd

    table = pd.DataFrame(cols)
    for o, part in enumerate((table.iloc[: N_ROWS // 2], table.iloc[N_ROWS // 2:]), start=1):
        part.to_csv(root / f"owner-{o}.csv", index=False)
    cfg = f"""name: bench-small
dataset: {root / 'schema.yaml'}
fragmentation: horizontal
mechanism: idp-ir
epsilon: "1"
k: 10
linkage: {linkage}
owners:
  - {{name: owner-1, source: {{path: {root / 'owner-1.csv'}, format: csv}}, private_dir: {root / 'private/owner-1'}}}
  - {{name: owner-2, source: {{path: {root / 'owner-2.csv'}, format: csv}}, private_dir: {root / 'private/owner-2'}}}
work_dir: {root / 'work'}
output: {root / 'release'}
if_exists: new-version
"""
    path = root / "release.yaml"
    path.write_text(cfg)
    return path


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_stat(pid: int) -> tuple[int, float, float] | None:
    """(parent pid, own CPU s, reaped children's CPU s) of a process from ``/proc``; None when gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK, (int(fields[13]) + int(fields[14])) / _TICK


def cpu_seconds(jvm_pid: int | None) -> tuple[float, float, float]:
    """CPU seconds so far of the driver's Python, the JVM (its own threads) and the Python workers (the
    JVM's descendants, with the workers they have reaped); Linux only, zeros for what cannot be read."""
    t = os.times()
    driver = t.user + t.system
    if jvm_pid is None or not os.path.isdir("/proc"):
        return driver, 0.0, 0.0
    jvm = _proc_stat(jvm_pid)
    stats = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _proc_stat(int(name))
            if st is not None:
                stats[int(name)] = st
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    workers, todo = 0.0, list(children.get(jvm_pid, []))
    while todo:
        pid = todo.pop()
        workers += stats[pid][1] + stats[pid][2]
        todo.extend(children.get(pid, []))
    return driver, (jvm[1] if jvm else 0.0), workers


def jvm_pid_of(spark) -> int | None:
    """The pid of the driver JVM pyspark started (benchmark only), or None."""
    proc = getattr(getattr(spark.sparkContext, "_gateway", None), "proc", None)
    return getattr(proc, "pid", None)


class Steps:
    """Times each progress step of the local driver, its CPU seconds (driver Python, JVM, Python workers)
    and counts the Spark jobs it started."""

    def __init__(self, spark) -> None:
        self.tracker = spark.sparkContext.statusTracker()  # benchmark only: the jobs never use it
        self.jvm = jvm_pid_of(spark)
        self.rows: list[tuple[str, float, int, list[str], tuple[float, float, float]]] = []
        self.current: tuple[str, float, set[int], tuple[float, float, float]] | None = None

    def _job_ids(self) -> set[int]:
        return set(self.tracker.getJobIdsForGroup(None))

    def _call_site(self, job: int) -> str:
        """The call site Spark names the job's last stage by (e.g. ``collect at fragment.py:215``)."""
        info = self.tracker.getJobInfo(job)
        stages = sorted(info.stageIds) if info is not None else []
        stage = self.tracker.getStageInfo(stages[-1]) if stages else None
        return stage.name if stage is not None else "?"

    def __call__(self, event) -> None:
        self.close()
        if getattr(event, "status", "started") == "started":
            self.current = (str(event.label if hasattr(event, "label") else event), time.perf_counter(),
                            self._job_ids(), cpu_seconds(self.jvm))

    def close(self) -> None:
        if self.current is not None:
            msg, t0, before, cpu0 = self.current
            new = sorted(self._job_ids() - before)
            cpu = tuple(b - a for a, b in zip(cpu0, cpu_seconds(self.jvm)))
            self.rows.append((msg, time.perf_counter() - t0, len(new), [self._call_site(j) for j in new],
                              cpu))  # type: ignore[arg-type]
            self.current = None


def run_once(spark, cfg_path: Path, reports: bool, show_steps: bool, call_sites: bool = False) -> float:
    from fragrelease.jobs.protocol.release import run_local_release
    from fragrelease.protocol.config import load_config

    cfg = load_config(str(cfg_path), overrides={"reports": reports})
    steps = Steps(spark)
    t = time.perf_counter()
    cpu0 = cpu_seconds(steps.jvm)
    run_local_release(spark, cfg, progress=steps, new_plan=True)  # each timed run a release of its own
    steps.close()
    total = time.perf_counter() - t
    if show_steps:
        for msg, s, jobs, sites, (drv, jvm, py) in steps.rows:
            print(f"    {s:6.2f} s  {jobs:3d} Spark jobs  CPU driver {drv:5.2f} JVM {jvm:5.2f} "
                  f"workers {py:5.2f} s  {msg}")
            if call_sites:
                counted: dict[str, int] = {}
                for site in sites:
                    counted[site] = counted.get(site, 0) + 1
                for site, m in counted.items():
                    print(f"                 {m:3d} x {site}")
        drv, jvm, py = (b - a for a, b in zip(cpu0, cpu_seconds(steps.jvm)))
        print(f"    release: {total:.2f} s wall; CPU driver {drv:.2f} s, JVM {jvm:.2f} s, Python workers {py:.2f} s")
    return total


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--master", default="local[2]")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--adult", action="store_true", help="also time the Adult horizontal quick start")
    p.add_argument("--no-warm", action="store_true",
                   help="do not start the Python workers in the background at session start (to compare)")
    p.add_argument("--linkage", choices=["linked", "unlinked"], default="linked",
                   help="the release's linkage (unlinked: every column in its own random order)")
    p.add_argument("--jit", choices=["auto", "default"], default="auto",
                   help="auto: as `fragrelease run`, C1 only for small declared inputs "
                        "(fragrelease.jobs.session.inputs_are_small); default: the JVM's own JIT, to compare")
    p.add_argument("--call-sites", action="store_true",
                   help="print each step's Spark jobs by call site (the name of the job's last stage)")
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    from fragrelease.jobs import session_workers
    from fragrelease.jobs.session import get_spark, inputs_are_small

    session_workers.WARM_PYTHON_WORKERS = not args.no_warm

    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("FRAGRELEASE_PRIVATE_ROOT", str(Path(tmp) / "private-root"))
        cfg = write_inputs(Path(tmp), args.linkage)
        # what `fragrelease run` costs: the JVM and session start plus a first release in that JVM
        t = time.perf_counter()
        # as `fragrelease run` decides it (jobs/cli/_common.py, _spark): the declared fragments' sizes
        small = args.jit == "auto" and inputs_are_small([str(Path(tmp) / f"owner-{o}.csv") for o in (1, 2)])
        spark = get_spark("bench-small-release", master=args.master, small_inputs=small)
        started = time.perf_counter() - t
        drv, jvm, py = cpu_seconds(jvm_pid_of(spark))
        print(f"small inputs (C1 only): {small}")
        print(f"JVM and session start: CPU driver {drv:.2f} s (imports included), JVM {jvm:.2f} s, "
              f"Python workers {py:.2f} s")
        first = run_once(spark, cfg, True, show_steps=True, call_sites=args.call_sites)
        print(f"JVM and session start: {started:.1f} s; first release in this JVM, reports on: {first:.1f} s; "
              f"together {started + first:.1f} s")
        best = {}
        for reports in (False, True):
            times = []
            for r in range(args.runs):
                times.append(run_once(spark, cfg, reports, show_steps=(r == args.runs - 1),
                                      call_sites=args.call_sites and r == args.runs - 1))
            best[reports] = min(times)
            print(f"1,000 rows x 20 attributes, 2 owners, reports={'on' if reports else 'off'}: "
                  + ", ".join(f"{s:.1f}" for s in times) + f" s (best {min(times):.1f} s"
                  + ("; target <= 6 s idle)" if reports else ")"))
        print(f"JVM start + first release against the best warm release with reports: "
              f"{(started + first) / best[True]:.2f}x (target <= 2x)")
        if args.adult:
            here = Path(__file__).resolve().parent.parent
            src = (here / "conf" / "adult-horizontal.yaml").read_text()
            src = src.replace("work_dir: work/adult-horizontal", f"work_dir: {Path(tmp) / 'adult-work'}")
            src = src.replace("output: releases/adult-horizontal", f"output: {Path(tmp) / 'adult-release'}")
            adult = Path(tmp) / "adult.yaml"
            adult.write_text(src)
            times = [run_once(spark, adult, True, show_steps=(r == args.runs - 1)) for r in range(args.runs)]
            print("Adult horizontal quick start (4 owners, reports on): "
                  + ", ".join(f"{s:.1f}" for s in times) + f" s (best {min(times):.1f} s; target <= 40 s)")


if __name__ == "__main__":
    main()
