"""Cost of the samplers: OpenDP's secure Laplace (releases) vs OpenDP's exact grid and numpy's (evaluation only).

    python benchmarks/bench_sampler.py --draws 1000000 10000000

``secure`` is the release sampler (:class:`fragrelease.rng.laplace.SecureLaplace`: OpenDP's ``make_laplace``
with a known vector size and granularity 2**-40, at a scale from
:func:`fragrelease.rng.laplace.calibrated_laplace_scale`); ``exact`` is the same OpenDP measurement on its
finest grid 2**-1074 (the release sampler of 0.4.0, now DiffGen's); ``fast`` is numpy's (never
for releases). Values are drawn in chunks of ``--chunk`` (Spark's Arrow batch default, 10,000 rows,
as the release UDF sees them).

"draws/s/core" is draws per CPU-second of this process (``time.process_time``): OpenDP samples in
one thread, so this is the rate of one core, and unlike the wall-clock rate it does not drop when
other processes share the machine. Target for ``secure``: ≥ 140,000 (docs/benchmarks.md).
"""
import argparse
import time

import numpy as np

from fragrelease.rng.laplace import FastLaplace, SecureLaplace, calibrated_laplace_scale

TARGET = 140_000


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--draws", type=int, nargs="+", default=[1_000_000, 10_000_000])
    p.add_argument("--chunk", type=int, default=10_000, help="draws per call (as a UDF batch would)")
    p.add_argument("--samplers", nargs="+", default=["secure", "exact", "fast"], choices=["secure", "exact", "fast"])
    args = p.parse_args()
    sources = {"secure": SecureLaplace(), "exact": SecureLaplace(exact=True), "fast": FastLaplace()}
    print(f"{'sampler':<8} {'draws':>12} {'wall s':>8} {'cpu s':>8} {'draws/s (wall)':>15} {'draws/s/core':>13}")
    for name in args.samplers:
        source = sources[name]
        for n in args.draws:
            scale = calibrated_laplace_scale(1.0, 0.5, n)  # Δ = 1, ε = 0.5 over the n values
            values = np.random.default_rng(0).uniform(0, 100, min(args.chunk, n))  # public benchmark values
            t, c = time.perf_counter(), time.process_time()
            done = 0
            while done < n:
                m = min(args.chunk, n - done)
                source.perturb(values[:m], np.full(m, scale), np.zeros(m), np.arange(m))
                done += m
            wall, cpu = time.perf_counter() - t, time.process_time() - c
            flag = ("  (target >= 140,000: " + ("met" if n / cpu >= TARGET else "NOT met") + ")") if name == "secure" else ""
            print(f"{name:<8} {n:>12,} {wall:>8.2f} {cpu:>8.2f} {n / wall:>15,.0f} {n / cpu:>13,.0f}{flag}", flush=True)


if __name__ == "__main__":
    main()
