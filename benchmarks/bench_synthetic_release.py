"""Benchmark: a whole horizontal release of N rows × Adult's 10 attributes, synthetic beside linked.

Adult's 45,222 cleaned rows are resampled with replacement (benchmark data, not a release) to
``--rows`` records with ids 0..N−1, split into ``--owners`` equal parquet fragments, and each release
kind runs the whole protocol in this driver, as ``fragrelease run`` does (reports off, no
evaluation): the owners' metadata, the plan, the owners' steps (linked: protection; synthetic: two
measuring rounds) and the aggregator's verification and commit. Prints each kind's wall time and
the rows it committed; one JVM for both kinds (the linked one runs first and pays the warm-up).

    python benchmarks/bench_synthetic_release.py --rows 10000000 --master local[2]

The synthetic kind needs the ``synthesis`` extra (mbi). docs/benchmarks.md, "Synthetic release".
"""
from __future__ import annotations

import argparse
import logging
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

CHUNK = 1_000_000


def write_fragments(root: Path, rows: int, owners: int) -> list[str]:
    """``owners`` parquet fragments of ``rows`` resampled Adult records in all; returns their paths."""
    from fragrelease.schemas.datasets import load_builtin_pandas

    adult = load_builtin_pandas("adult")
    rng = np.random.default_rng(11)  # benchmark data only, not a release
    per = rows // owners
    paths = []
    start = 0
    for o in range(owners):
        n = per if o < owners - 1 else rows - per * (owners - 1)
        path = root / f"owner-{o + 1}"
        path.mkdir()
        for i, lo in enumerate(range(0, n, CHUNK)):
            m = min(CHUNK, n - lo)
            part = adult.iloc[rng.integers(0, len(adult), m)].reset_index(drop=True)
            part["record_id"] = np.arange(start + lo, start + lo + m, dtype=np.int64)
            table = pa.Table.from_pandas(part, preserve_index=False)  # the schema's types (int32, int64, string)
            pq.write_table(table, path / f"part-{i:05d}.parquet")
        start += n
        paths.append(str(path))
    return paths


def release_config(root: Path, sources: list[str], linkage: str):
    from fragrelease.protocol.config import config_from_dict

    data = dict(name=f"bench-{linkage}", dataset="adult", fragmentation="horizontal", epsilon="1", k=50,
                linkage=linkage, owners=[{"name": f"owner-{i + 1}", "source": {"path": p, "format": "parquet"}}
                                         for i, p in enumerate(sources)],
                work_dir=str(root / f"work-{linkage}"), output=str(root / f"release-{linkage}"), reports=False)
    return config_from_dict(data)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--owners", type=int, default=2)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--kinds", nargs="+", default=["linked", "synthetic"])
    a = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    from fragrelease.jobs.api import Release
    from fragrelease.jobs.session import get_spark

    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        sources = write_fragments(root, a.rows, a.owners)
        print(f"data: {a.rows:,} rows × 10 attributes in {a.owners} fragments, written in "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
        spark = get_spark("bench-synthetic", a.master)
        for kind in a.kinds:
            cfg = release_config(root, sources, kind)
            t0 = time.perf_counter()
            result = Release.from_config(cfg, spark=spark).run()
            seconds = time.perf_counter() - t0
            print(f"{kind}: {seconds:.1f} s for the whole release, {result.rows:,} rows committed "
                  f"(version {result.version})", flush=True)


if __name__ == "__main__":
    main()
