"""dpmm's MST on a table of public bin codes: a second MST next to OpenDP's (evaluation only).

This file runs in **its own interpreter**, not fragrelease's: dpmm 0.1.9 (PyPI ``dpmm``, Mahiou and
Ganev, "dpmm: Differentially Private Marginal Models, a Library for Synthetic Tabular Data
Generation") pins ``opendp==0.12.1``, and fragrelease needs ``opendp>=0.16,<0.17``, so the two cannot
share one environment. It imports only the standard library, numpy, pandas and dpmm; the caller
(:func:`fragrelease.experiments.downstream.synthesize` with ``algorithm="dpmm-mst"``) encodes the
training table with the public bins, writes it here, and decodes and scores the synthetic codes
exactly as it scores OpenDP's MST.

Input: a CSV of non-negative integer codes (one column per attribute, no nulls) and a JSON object
``{column: number of codes}`` (the public domain; nothing is taken from the data). dpmm's own
binner is disabled (``disable_processing=True``): it would spend part of ε on private bin edges,
and the comparison gives every synthesizer the same public bins.

dpmm's MST measures the 1-way marginals and the selected tree's 2-way marginals with **Gaussian**
noise under ρ-zCDP, ρ converted from (ε, δ) (dpmm ``cdp_rho``); its guarantee is therefore
(ε, δ)-DP, not pure ε-DP, with the unit dpmm's sensitivities assume (one record added or removed).
The synthetic rows come from dpmm's vendored Private-PGM ``synthetic_data``, whose default
``round`` method shuffles each group's values (no comonotone columns; the test of
``tests/experiments/test_downstream_sampler.py`` checks the rows it returns).

Usage: ``python dpmm_mst.py CODES.csv DOMAIN.json OUT.csv --epsilon 1 --delta 1e-5``
"""
from __future__ import annotations

import argparse
import json
import time


def main(argv=None) -> None:
    import pandas as pd
    from dpmm.pipelines import MSTPipeline  # type: ignore[import-not-found]  # its own venv (module docstring)

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("codes")
    ap.add_argument("domain")
    ap.add_argument("out")
    ap.add_argument("--epsilon", type=float, required=True)
    ap.add_argument("--delta", type=float, required=True)
    ap.add_argument("--rows", type=int, help="rows to generate (default: dpmm's noisy total)")
    a = ap.parse_args(argv)
    with open(a.domain, encoding="utf-8") as f:
        domain = {str(k): int(v) for k, v in json.load(f).items()}
    codes = pd.read_csv(a.codes).astype("int64")
    if list(codes.columns) != list(domain):
        raise SystemExit(f"dpmm_mst: columns {list(codes.columns)} differ from the domain's {list(domain)}")
    bad = [c for c in codes.columns if ((codes[c] < 0) | (codes[c] >= domain[c])).any()]
    if bad:
        raise SystemExit(f"dpmm_mst: codes outside [0, size) in {bad}")
    t0 = time.perf_counter()
    # n_jobs=1: dpmm's default (-1) forks a process pool per measurement round
    pipe = MSTPipeline(epsilon=a.epsilon, delta=a.delta, disable_processing=True, n_jobs=1)
    pipe.fit(codes, domain=domain)
    # about n rows: the model's noisy total (as OpenDP's synthesize()), unless --rows says otherwise
    rows = a.rows if a.rows else max(1, int(round(float(pipe.gen.generator.model.total))))
    synth = pipe.generate(n_records=rows)
    synth[list(domain)].astype("int64").to_csv(a.out, index=False)
    print(f"dpmm_mst: {len(synth)} rows in {time.perf_counter() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
