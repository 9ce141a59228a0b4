"""Cost of the samplers: OpenDP's secure Laplace (releases) vs numpy's (evaluation only).

    python benchmarks/bench_sampler.py --draws 1000000 10000000
"""
import argparse
import time

import numpy as np

from fragrelease.rng import FastLaplace, SecureLaplace


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--draws", type=int, nargs="+", default=[1_000_000, 10_000_000])
    p.add_argument("--chunk", type=int, default=1_000_000, help="draws per call (as a UDF batch would)")
    args = p.parse_args()
    print(f"{'sampler':<10} {'draws':>12} {'seconds':>9} {'draws/s':>12}")
    for name, source in (("secure", SecureLaplace()), ("fast", FastLaplace())):
        for n in args.draws:
            t = time.perf_counter()
            done = 0
            while done < n:
                m = min(args.chunk, n - done)
                source.perturb(np.zeros(m), np.full(m, 2.0), np.zeros(m), np.zeros(m))
                done += m
            s = time.perf_counter() - t
            print(f"{name:<10} {n:>12,} {s:>9.2f} {n / s:>12,.0f}", flush=True)


if __name__ == "__main__":
    main()
