"""Measured disclosure risk of every release kind on Adult (evaluation only, not the release path).

Source: anonymeter 1.1.0's three attacks (Giomi et al., "A Unified Framework for Quantifying
Privacy Risk in Synthetic Data", PoPETs 2023) through :func:`fragrelease.risk.measure_risk`:
singling-out (univariate and multivariate), linkability on the two column halves, and attribute
inference on every categorical attribute, each with its 95 % interval and a held-out control set.
The numbers are empirical lower bounds on what these attacks achieve, not guarantees
(:mod:`fragrelease.risk`).

Data: Adult's 30,162 training rows (:func:`fragrelease.schemas.datasets.load_adult_train_test`),
the paper's 10 attributes and income (:func:`fragrelease.experiments.downstream.adult_specs`). Each
run shuffles them (numpy generator seeded from the OS, :func:`fragrelease.rng.laplace.evaluation_generator`)
into three disjoint parts: ``control`` (``--control`` rows, 5,000: real rows no release sees),
``independent`` (as many: the calibration "release", real rows of the same population that are
not the training rows, whose risk should be about 0), and the training table (the rest, 20,162 rows)
that every release is made from and every attack targets.

Release kinds, per run (``--runs`` independent releases, 3 by default), at total ε ``--epsilon``
(1) and k ``--k`` (50):

- ``idp-ir`` / ``dp-ir`` × ``none`` / ``isotonic`` × ``linked`` / ``unlinked``: the release's own
  steps, centralized (:func:`fragrelease.experiments.downstream.ir_tables`, the numpy reference
  path :func:`fragrelease.experiments.linkage.protect_table`; ε/11 per attribute, category order
  ``dp-frequency`` with share 1/10);
- ``mst`` (and ``aim`` with ``--synthesizers mst aim``): OpenDP 0.16's MST / AIM at the same total
  ε, sampled with ``synthesize(method="sample")`` (:func:`fragrelease.experiments.downstream.synthesize`; mbi 1.1.0's default
  ``"round"`` makes independent children comonotone);
- ``synthetic`` (``--synthesizers synthetic``): fragrelease's ``linkage: synthetic`` release over 4
  simulated horizontal owners (:func:`fragrelease.experiments.synthesis.synthesize_fragments` with the
  release's own coding, :func:`fragrelease.experiments.synthesis.release_domain`);
- ``original``: the training table itself (what no protection leaks);
- ``independent``: the calibration rows.

Run: ``nice -n 10 python -m fragrelease.experiments.risk --out docs/evaluation`` writes
``risk.csv`` (one row per release, run, attack and attribute) and ``risk-summary.csv`` and prints
the Markdown table of docs/evaluation.md ("Measured disclosure risk").
"""
from __future__ import annotations

import argparse
import os
import platform
import time
from typing import Callable, Optional, Sequence

import numpy as np
import pandas as pd

from fragrelease.errors import InvalidParameterError
from fragrelease.risk import ATTACKS, INFERENCE, measure_risk, report_frame
from fragrelease.rng.laplace import FastLaplace, evaluation_generator

from .downstream import adult_specs, guarantee, ir_tables, synthesize
from .evaluation import AttributeSpec

EPSILON = "1"
K = 50
RUNS = 3
N_ATTACKS = 1000
N_CONTROL = 5000
MECHANISMS = ("idp-ir", "dp-ir")


def split(table: pd.DataFrame, n_control: int, rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(training, control, independent): a random partition of ``table``'s rows, the last two of ``n_control`` rows.

    Raises
    ------
    InvalidParameterError
        Fewer than ``2 n_control + 2`` rows.
    """
    if len(table) < 2 * n_control + 2:
        raise InvalidParameterError(f"{len(table)} rows cannot hold two disjoint sets of {n_control} rows and a training table")
    order = rng.permutation(len(table))
    t = table.iloc[order].reset_index(drop=True)
    return (t.iloc[2 * n_control:].reset_index(drop=True), t.iloc[:n_control].reset_index(drop=True),
            t.iloc[n_control:2 * n_control].reset_index(drop=True))


def typed(table: pd.DataFrame, specs: Sequence[AttributeSpec]) -> pd.DataFrame:
    """``table``'s spec columns in spec order, numeric as float and categorical as text (what the attacks compare)."""
    return pd.DataFrame({s.name: table[s.name].astype(str) if s.categorical else pd.to_numeric(table[s.name]).astype(float)
                         for s in specs})


def releases(train: pd.DataFrame, independent: pd.DataFrame, specs: Sequence[AttributeSpec], *, epsilon: str, k: int,
             mechanisms: Sequence[str], synthesizers: Sequence[str], iters: int,
             aim_rounds: Optional[int]) -> list[tuple[dict, pd.DataFrame]]:
    """[(keys, released table)] of one run: original, independent, every IR kind, every synthesizer."""
    out: list[tuple[dict, pd.DataFrame]] = [
        ({"method": "original", "postprocess": "", "linkage": ""}, train),
        ({"method": "independent", "postprocess": "", "linkage": ""}, independent)]
    noise, rng = FastLaplace(), evaluation_generator()
    for mech in mechanisms:
        t0 = time.perf_counter()
        tables = ir_tables(train, specs, mechanism=mech, epsilon=epsilon, k=k, noise=noise, rng=rng)
        sec = time.perf_counter() - t0
        for (p, lk), t in tables.items():
            out.append(({"method": mech, "postprocess": p, "linkage": lk, "release_seconds": sec}, t))
    for alg in synthesizers:
        t0 = time.perf_counter()
        if alg == "synthetic":  # fragrelease's own release kind over 4 simulated owners (docs/specification.md §10)
            from fractions import Fraction

            from .synthesis import release_domain, synthesize_fragments

            t = synthesize_fragments(train, specs, epsilon=Fraction(epsilon), owners=4, target=specs[-1].name,
                                     gen=rng, iters=1000, domain=release_domain())
        else:
            t = synthesize(train, specs, algorithm=alg, epsilon=epsilon, iters=iters, aim_rounds=aim_rounds)
        out.append(({"method": alg, "postprocess": "", "linkage": "", "release_seconds": time.perf_counter() - t0}, t))
    return out


def row_guarantee(method: str, epsilon: str, n_attributes: int, linkage: str) -> str:
    """:func:`fragrelease.experiments.downstream.guarantee`, and the calibration rows' statement."""
    if method == "independent":
        return "calibration: real rows not in the training table (no release of it at all)"
    return guarantee(method, epsilon, n_attributes, linkage)


def run_experiment(table: pd.DataFrame, *, epsilon: str = EPSILON, k: int = K, runs: int = RUNS,
                   n_attacks: int = N_ATTACKS, n_control: int = N_CONTROL, mechanisms: Sequence[str] = MECHANISMS,
                   synthesizers: Sequence[str] = ("mst",), attacks: Sequence[str] = ATTACKS, iters: int = 300,
                   aim_rounds: Optional[int] = None, progress: Callable[[str], None] = lambda m: None,
                   checkpoint: Callable[[pd.DataFrame], None] = lambda rows: None) -> pd.DataFrame:
    """One row per (release kind, run, attack, attribute): risk, interval, rates, baseline, guarantee, seconds.

    Raises
    ------
    InvalidParameterError
        runs < 1, or too few rows for the control and calibration sets.
    """
    if runs < 1:
        raise InvalidParameterError(f"runs must be >= 1, not {runs}")
    specs = adult_specs()
    cats = [s.name for s in specs if s.categorical]
    rng = evaluation_generator()
    frames: list[pd.DataFrame] = []
    for run in range(runs):
        train, control, independent = split(table, n_control, rng)
        for keys, released in releases(train, independent, specs, epsilon=epsilon, k=k, mechanisms=mechanisms,
                                       synthesizers=synthesizers, iters=iters, aim_rounds=aim_rounds):
            t0 = time.perf_counter()
            report = measure_risk(typed(train, specs), typed(released, specs), typed(control, specs),
                                  categorical=cats, n_attacks=n_attacks, attacks=attacks)
            f = report_frame(report)
            label = keys["method"] if keys["method"] in ("original", "independent", "mst", "aim", "synthetic") else \
                f"{keys['method']} {keys['postprocess']} {keys['linkage']}"
            f.insert(0, "release", label)
            for name in ("method", "postprocess", "linkage"):
                f[name] = keys[name]
            f["epsilon"] = "inf" if keys["method"] in ("original", "independent") else epsilon
            f["k"] = k if keys["method"] in MECHANISMS else 0
            f["run"] = run
            f["rows"] = len(released)
            f["release_seconds"] = keys.get("release_seconds", 0.0)
            f["measure_seconds"] = time.perf_counter() - t0
            f["guarantee"] = row_guarantee(keys["method"], epsilon, len(specs), keys["linkage"])
            frames.append(f)
            progress(f"run {run} {label}: {time.perf_counter() - t0:.0f} s")
            checkpoint(pd.concat(frames, ignore_index=True))
    return pd.concat(frames, ignore_index=True)


def summarize(per_run: pd.DataFrame) -> pd.DataFrame:
    """Per (release, attack, attribute): the runs' risks (min–max), the widest interval, runs whose interval excludes 0."""
    g = per_run.groupby(["release", "attack", "attribute"], sort=False)
    out = g.agg(risk_min=("risk", "min"), risk_max=("risk", "max"), low=("low", "min"), high=("high", "max"),
                runs=("run", "nunique"), above_zero=("low", lambda s: int((s > 0).sum())),
                attack_rate=("attack_rate", "mean"), control_rate=("control_rate", "mean"),
                baseline_rate=("baseline_rate", "mean"), guarantee=("guarantee", "first")).reset_index()
    return out


def _cell(r) -> str:
    risk = f"{r.risk_min:.3f}" if abs(r.risk_max - r.risk_min) < 5e-4 else f"{r.risk_min:.3f}–{r.risk_max:.3f}"
    mark = f" **{r.above_zero}/{r.runs}**" if r.above_zero else ""
    return f"{risk} [{r.low:.3f}, {r.high:.3f}]{mark}"


def markdown_table(summary: pd.DataFrame) -> str:
    """One line per release: its guarantee, then each attack's risk range over runs, its widest 95 % interval,
    and (bold) in how many runs the interval excludes 0; inference: the worst attribute and its numbers."""
    lines = ["| release | guarantee | singling-out (uni) | singling-out (multi) | linkability | worst inference (attribute) |",
             "|---|---|---|---|---|---|"]
    for rel, s in summary.groupby("release", sort=False):
        cells = []
        for attack in ("singling-out-univariate", "singling-out-multivariate", "linkability"):
            r = s[s["attack"] == attack]
            cells.append(_cell(r.iloc[0]) if len(r) else "–")
        inf = s[s["attack"] == INFERENCE]
        if len(inf):
            w = inf.sort_values(["above_zero", "risk_max"], ascending=False).iloc[0]
            cells.append(f"{w.attribute}: {_cell(w)}")
        else:
            cells.append("–")
        lines.append(f"| {rel} | {s['guarantee'].iloc[0]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def inference_table(summary: pd.DataFrame) -> str:
    """Attribute inference, one line per release and one column per secret: risk range and marginal baseline."""
    inf = summary[summary["attack"] == INFERENCE]
    attrs = list(dict.fromkeys(inf["attribute"]))
    lines = ["| release | " + " | ".join(attrs) + " |", "|---|" + "---|" * len(attrs)]
    for rel, s in inf.groupby("release", sort=False):
        by = {r.attribute: r for r in s.itertuples()}
        lines.append(f"| {rel} | " + " | ".join(_cell(by[a]) if a in by else "–" for a in attrs) + " |")
    base = inf.groupby("attribute", sort=False)["baseline_rate"].mean()
    lines.append("| random guess from the release's marginal (success rate, mean) | "
                 + " | ".join(f"{base[a]:.3f}" for a in attrs) + " |")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> dict:
    from fragrelease.schemas.datasets import load_adult_train_test

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="docs/evaluation")
    ap.add_argument("--runs", type=int, default=RUNS)
    ap.add_argument("--epsilon", default=EPSILON)
    ap.add_argument("--k", type=int, default=K)
    ap.add_argument("--attacks", type=int, default=N_ATTACKS, help="attacks per set (targets and control)")
    ap.add_argument("--control", type=int, default=N_CONTROL, help="held-out control rows (and calibration rows)")
    ap.add_argument("--mechanisms", nargs="*", default=list(MECHANISMS))
    ap.add_argument("--synthesizers", nargs="*", default=["mst"])
    ap.add_argument("--only", nargs="*", default=list(ATTACKS), help="attacks to run")
    ap.add_argument("--iters", type=int, default=300, help="Private-PGM mirror-descent iterations per fit")
    ap.add_argument("--aim-rounds", type=int)
    ap.add_argument("--rows", type=int, help="first N training rows only (smoke tests)")
    ap.add_argument("--name", default="risk", help="file name stem of the outputs")
    ap.add_argument("--from-csv", nargs="+", metavar="CSV",
                    help="summarize earlier runs' per-run CSVs (run numbers renumbered per file) instead of running")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    t0 = time.perf_counter()
    path = os.path.join(a.out, f"{a.name}.csv")
    if a.from_csv:
        frames, offset = [], 0
        for f in a.from_csv:
            part = pd.read_csv(f, keep_default_na=False)
            part["run"] = part["run"] + offset
            offset = int(part["run"].max()) + 1
            frames.append(part)
        per_run = pd.concat(frames, ignore_index=True)
    else:
        table = load_adult_train_test()[0]
        if a.rows:
            table = table.iloc[:a.rows]
        per_run = run_experiment(table, epsilon=a.epsilon, k=a.k, runs=a.runs, n_attacks=a.attacks,
                                 n_control=a.control, mechanisms=a.mechanisms, synthesizers=a.synthesizers,
                                 attacks=a.only, iters=a.iters, aim_rounds=a.aim_rounds,
                                 progress=lambda m: print(m, flush=True),
                                 checkpoint=lambda rows: rows.to_csv(path, index=False, float_format="%.6g"))
        per_run.to_csv(path, index=False, float_format="%.6g")
    summary = summarize(per_run)
    summary.to_csv(os.path.join(a.out, f"{a.name}-summary.csv"), index=False, float_format="%.6g")
    seconds = time.perf_counter() - t0
    print(markdown_table(summary))
    print()
    print(inference_table(summary))
    print(f"risk: {len(per_run)} rows in {seconds:.0f} s on {platform.machine()} ({os.cpu_count()} cores), "
          f"{platform.python_version()} -> {path}")
    return {"per_run": per_run, "summary": summary, "seconds": seconds}


if __name__ == "__main__":
    main()
