"""Benchmark: the fixed cost of a small fragmented release, end to end, from the JVM start.

A 1,000-row table with 20 quasi-identifiers (14 numeric, 6 categorical) is written as two CSV
fragments (500 records each, horizontal) with a schema YAML, and the whole protocol runs in this
driver (owners' metadata, the plan, both owners' protection, the aggregator's commit, the MeanSSE
against the originals), as ``fragrelease run`` does. Prints the wall time of each phase, of each
step and in all, with and without the owners' private reports and the public report, and the number
of Spark jobs each phase started (from Spark's status tracker; benchmark only). A phase is the steps
that ran at the same time: the owners' steps of one phase run together in threads of the driver
(:func:`fragrelease.jobs.idpir.release.play_release`), so their jobs are counted together.

The first line is what ``fragrelease run`` pays: the JVM and session start plus the first release
(reports on) in that fresh JVM, with its steps; then warm runs in the same JVM, reports off and on.

Also times the Adult horizontal quick start (``conf/adult-horizontal.yaml``, 4 owners, reports on)
with ``--adult``.

    python benchmarks/bench_small_release.py --master local[2] --runs 3 --adult

``--linkage unlinked`` releases every column in its own random order (owners and aggregator).
``--call-sites`` lists each phase's jobs by call site (the name Spark gives the job's last stage);
``--no-warm`` turns off the embedded session's Python worker warm-up
(:func:`fragrelease.jobs.session.warm_python_workers`), to compare. The session is started as
``fragrelease run`` starts it: C1-only JIT when the two fragments are small
(:func:`fragrelease.jobs.session.inputs_are_small`); ``--jit default`` keeps the JVM's own JIT, to compare.
Each phase also prints its CPU seconds: the driver's Python, the JVM's own threads and the Python
workers (the JVM's descendant processes; Linux ``/proc``), which the machine's load changes less than
the wall time.

Targets (docs/benchmarks.md, issue 41): the warm 1,000 × 20 release with reports ≤ 6 s on an idle
machine, and the first release in a new JVM (JVM start included) ≤ 2× that warm release (printed as
a ratio at the end); ≤ 40 s for the Adult quick start including reports. The job counts per phase
(``--call-sites``) do not depend on the machine's load; the seconds do. ``--owners-one-after-another``
plays the owners of each phase one after another, as before issue 41's session 5, to compare;
``--compare-owners N`` alternates the two on warm releases with reports in one JVM (a shared
machine's load then weighs on both alike).
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
    """Times each progress step of the local driver and each phase: the steps that ran at the same time
    (the owners' steps of one phase run together in threads of the driver), with the phase's CPU seconds
    (driver Python, JVM, Python workers) and the Spark jobs started while it ran.

    Jobs are counted per phase, not per step: steps that overlap share one window of Spark's status
    tracker. A phase opens when a step starts while none runs and closes when no step runs any more
    (the driver reports every event from the step's own thread, one at a time:
    :class:`fragrelease.jobs.progress.Steps`)."""

    def __init__(self, spark) -> None:
        self.tracker = spark.sparkContext.statusTracker()  # benchmark only: the jobs never use it
        self.jvm = jvm_pid_of(spark)
        # one row per phase: (its steps' labels and wall seconds, wall s, jobs, call sites, CPU s)
        self.rows: list[tuple[list[tuple[str, float]], float, int, list[str], tuple[float, ...]]] = []
        self.running: dict[int, tuple[str, float]] = {}
        self.phase: tuple[float, set[int], tuple[float, float, float], list[tuple[str, float]]] | None = None

    def _job_ids(self) -> set[int]:
        return set(self.tracker.getJobIdsForGroup(None))

    def _call_site(self, job: int) -> str:
        """The call site Spark names the job's last stage by (e.g. ``collect at fragment.py:215``)."""
        info = self.tracker.getJobInfo(job)
        stages = sorted(info.stageIds) if info is not None else []
        stage = self.tracker.getStageInfo(stages[-1]) if stages else None
        return stage.name if stage is not None else "?"

    def __call__(self, event) -> None:
        now = time.perf_counter()
        if event.status == "started":
            if self.phase is None:
                self.phase = (now, self._job_ids(), cpu_seconds(self.jvm), [])
            self.running[event.step] = (event.label, now)
            return
        label, t0 = self.running.pop(event.step)
        assert self.phase is not None
        self.phase[3].append((label + ("" if event.status == "done" else " (failed)"), now - t0))
        if not self.running:
            self.close()

    def close(self) -> None:
        if self.phase is not None:
            t0, before, cpu0, steps = self.phase
            new = sorted(self._job_ids() - before)
            cpu = tuple(b - a for a, b in zip(cpu0, cpu_seconds(self.jvm)))
            self.rows.append((sorted(steps), time.perf_counter() - t0, len(new), [self._call_site(j) for j in new],
                              cpu))
            self.phase, self.running = None, {}


def run_once(spark, cfg_path: Path, reports: bool, show_steps: bool, call_sites: bool = False,
             cpu_out: list | None = None) -> float:
    from fragrelease.idpir.config import load_config
    from fragrelease.jobs.idpir.release import run_local_release

    cfg = load_config(str(cfg_path), overrides={"reports": reports})
    steps = Steps(spark)
    t = time.perf_counter()
    cpu0 = cpu_seconds(steps.jvm)
    run_local_release(spark, cfg, progress=steps)
    steps.close()
    total = time.perf_counter() - t
    if show_steps:
        for labels, s, jobs, sites, (drv, jvm, py) in steps.rows:
            head = labels[0][0] if len(labels) == 1 else f"phase of {len(labels)} steps at the same time"
            print(f"    {s:6.2f} s  {jobs:3d} Spark jobs  CPU driver {drv:5.2f} JVM {jvm:5.2f} "
                  f"workers {py:5.2f} s  {head}")
            if len(labels) > 1:
                for label, own in labels:
                    print(f"           {own:6.2f} s  {label}")
            if call_sites:
                counted: dict[str, int] = {}
                for site in sites:
                    counted[site] = counted.get(site, 0) + 1
                for site, m in counted.items():
                    print(f"                 {m:3d} x {site}")
    drv, jvm, py = (b - a for a, b in zip(cpu0, cpu_seconds(steps.jvm)))
    if show_steps:
        print(f"    release: {total:.2f} s wall; CPU driver {drv:.2f} s, JVM {jvm:.2f} s, Python workers {py:.2f} s")
    if cpu_out is not None:
        cpu_out.append((drv, jvm, py))
    return total


def compare_owners(spark, cfg: Path, runs: int) -> None:
    """Warm releases with reports, alternating the owners at the same time and one after another
    (``--compare-owners``): the same JVM and the machine's load of the same minutes for both."""
    import statistics

    from fragrelease.jobs.idpir import release

    together = release._owners_together
    alone = lambda *a, **k: together(*a, **{**k, "at_once": False})  # noqa: E731 - benchmark only
    got: dict[str, list[tuple[float, tuple[float, float, float]]]] = {"at the same time": [], "one after another": []}
    for _ in range(runs):
        for mode, fn in (("at the same time", together), ("one after another", alone)):
            release._owners_together = fn  # type: ignore[assignment]
            cpu: list = []
            wall = run_once(spark, cfg, True, show_steps=False, cpu_out=cpu)
            got[mode].append((wall, cpu[0]))
            print(f"  owners {mode}: {wall:.2f} s wall; CPU driver {cpu[0][0]:.2f} s, JVM {cpu[0][1]:.2f} s, "
                  f"workers {cpu[0][2]:.2f} s; load {os.getloadavg()[0]:.1f}", flush=True)
    release._owners_together = together  # type: ignore[assignment]
    for mode, rows in got.items():
        walls = [w for w, _ in rows]
        cpus = [sum(c) for _, c in rows]
        print(f"owners {mode}, reports on: median {statistics.median(walls):.2f} s wall (best {min(walls):.2f} s), "
              f"median CPU {statistics.median(cpus):.2f} s")


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
                   help="print each phase's Spark jobs by call site (the name of the job's last stage)")
    p.add_argument("--compare-owners", type=int, default=0, metavar="N",
                   help="after the first release, N pairs of warm releases with reports: the owners at the same "
                        "time, then one after another (alternating, in this JVM); then stop")
    p.add_argument("--owners-one-after-another", action="store_true",
                   help="play the owners' steps of each phase one after another (to compare)")
    args = p.parse_args()
    if args.owners_one_after_another:
        from fragrelease.jobs.idpir import release

        together = release._owners_together  # benchmark only: the driver's phases, one owner at a time
        release._owners_together = lambda *a, **k: together(*a, **{**k, "at_once": False})  # type: ignore[assignment]
    logging.basicConfig(level=logging.WARNING)
    from fragrelease.jobs import session
    from fragrelease.jobs.session import get_spark, inputs_are_small

    session.WARM_PYTHON_WORKERS = not args.no_warm

    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("FRAGRELEASE_PRIVATE_ROOT", str(Path(tmp) / "private-root"))
        cfg = write_inputs(Path(tmp), args.linkage)
        # what `fragrelease run` costs: the JVM and session start plus a first release in that JVM
        t = time.perf_counter()
        # as `fragrelease run` decides it (jobs/cli/idpir.py, _spark): the declared fragments' sizes
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
        if args.compare_owners:
            compare_owners(spark, cfg, args.compare_owners)
            return
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
