"""``fragrelease diffgen ...``: DiffGen and two-party DistDiffGen releases of Adult (docs/specification.md §7).

    fragrelease diffgen run --epsilon 1 --specializations 10 --score max --output DIR
    fragrelease diffgen two-party --hospital-attributes age,sex,... --insurer-attributes workclass,... \\
        --epsilon 1 --specializations 10 --output DIR
    fragrelease diffgen experiment --out docs/diffgen --repetitions 5
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import typer

from fragrelease.errors import ConfigError

from ._common import MASTER, console

if TYPE_CHECKING:
    from fragrelease.diffgen.params import DiffGenResult

DEFAULT_HOSPITAL = "age,sex,race,marital-status,relationship,native-country,education,education-num"
DEFAULT_INSURER = "workclass,occupation,fnlwgt,capital-gain,capital-loss,hours-per-week"
_NOISE_HELP = ("Noise on the count shares. laplace-each (default): X_i = C_i + Lap(2/eps) from each party; "
               "the release is eps-DP against the public and against the other party (twice the variance "
               "of the released counts). gaussian-squares (opt-in, the paper's construction): X_i = C_i + "
               "Y_a^2 - Y_b^2, the sum is C + Lap(2/eps) and eps-DP against the public, but NOT DP against "
               "the other party: it can subtract its own half, and its view of the counts is only about "
               "(eps/2, 0.22)-DP at eps = 1.")
_MIN_COUNT_HELP = ("Synthetic records only from cells whose rounded noisy count is at least this: 'auto' "
                   "(sparse-domain filter: about one empty cell expanded at most) or an integer >= 1 "
                   "(1 = every positive count). The generalized table always holds every cell.")


def _attrs(text: str) -> list[str]:
    out = [a.strip() for a in text.split(",") if a.strip()]
    if not out:
        raise ConfigError(f"attribute list must name at least one Adult attribute, not {text!r}")
    return out


def _rows(text: Optional[str]) -> Optional[tuple[int, int]]:
    if text is None:
        return None
    try:
        lo, hi = (int(x) for x in text.split(":"))
    except ValueError:
        raise ConfigError(f"--rows must look like START:STOP, not {text!r}") from None
    return lo, hi


def _check(epsilon: str, specializations: int, score: str, synthetic_min_count: str = "auto") -> None:
    """Validate the parameters before any Spark session or party process starts; warn when ε > 10."""
    from fragrelease.budget import parse_epsilon
    from fragrelease.diffgen.predictors import SCORES
    from fragrelease.errors import InvalidParameterError
    from fragrelease.validation import warn_if_large_epsilon

    from ..diffgen.runner import resolve_min_count

    resolve_min_count(synthetic_min_count, 2, parse_epsilon(epsilon, name="--epsilon"))
    warn_if_large_epsilon(epsilon, what="--epsilon")
    if specializations < 0:
        raise InvalidParameterError(f"number of specializations h must be >= 0, not {specializations}")
    if score not in SCORES:
        raise InvalidParameterError(f"score must be one of {SCORES}, not {score!r}")


def _summary(result: DiffGenResult) -> None:
    from ..storage import absolute

    console.print(f"[bold]generalized table[/bold] (Delta): {absolute(result.generalized)}, "
                  f"{result.cells:,} leaf x class cells")
    console.print(f"[bold]synthetic microdata[/bold] (Delta): {absolute(result.synthetic)}, "
                  f"{result.synthetic_rows:,} records (cells with a rounded noisy count >= "
                  f"{result.synthetic_min_count})")
    for a, labels in result.cut.items():
        console.print(f"  {a}: {len(labels)} value(s)")
    console.print(f"ε spent {result.spent} in {len(result.ledger)} steps; {result.seconds:.1f} s")


def run(epsilon: str = typer.Option("1", help="Total ε (e.g. 1, 0.5, 1/4)."),
        specializations: int = typer.Option(10, help="Number of specializations h."),
        score: str = typer.Option("max", help="max or infogain."),
        output: str = typer.Option(..., help="Folder for the generalized and synthetic Delta tables."),
        if_exists: str = typer.Option("error", "--if-exists", help="error or new-version."),
        synthetic_min_count: str = typer.Option("auto", "--synthetic-min-count", help=_MIN_COUNT_HELP),
        master: Optional[str] = MASTER):
    """Single-party DiffGen of Adult on Spark."""
    from fragrelease.diffgen.params import DiffGenParams

    from ..diffgen.runner import run_diffgen_release
    from ..session import get_spark

    _check(epsilon, specializations, score, synthetic_min_count)
    params = DiffGenParams.of(epsilon=epsilon, specializations=specializations, score=score, output=output,
                              if_exists=if_exists, synthetic_min_count=synthetic_min_count)
    spark = get_spark("fragrelease-diffgen", master)
    _summary(run_diffgen_release(spark, params))


def two_party(hospital_attributes: str = typer.Option(DEFAULT_HOSPITAL, help="Comma-separated Adult attributes."),
              insurer_attributes: str = typer.Option(DEFAULT_INSURER, help="Comma-separated Adult attributes."),
              epsilon: str = typer.Option("1", help="Total ε."),
              specializations: int = typer.Option(10, help="Number of specializations h."),
              score: str = typer.Option("max", help="max or infogain."),
              output: str = typer.Option(..., help="Folder for the generalized and synthetic Delta tables."),
              key_bits: int = typer.Option(2048, "--key-bits", help="Paillier modulus bits (>= 2048)."),
              rows: Optional[str] = typer.Option(None, help="Only cleaned Adult rows START:STOP (default all)."),
              if_exists: str = typer.Option("error", "--if-exists"),
              backend: str = typer.Option("spark", help="Party data: spark (own SparkSession per party) or pandas."),
              synthetic_min_count: str = typer.Option("auto", "--synthetic-min-count", help=_MIN_COUNT_HELP),
              noise: str = typer.Option("laplace-each", "--noise", help=_NOISE_HELP),
              master: Optional[str] = MASTER):
    """Two-party DistDiffGen of Adult: hospital and insurer in separate processes over a local socket."""
    from fragrelease.errors import InvalidParameterError

    from ..diffgen.runner import run_two_party_release
    from ..session import get_spark

    _check(epsilon, specializations, score, synthetic_min_count)
    from fragrelease.diffgen.paillier_ops import paillier_module

    paillier_module()  # phe (setup.py's diffgen extra) is refused here, before any Spark session starts
    if backend not in ("spark", "pandas"):
        raise InvalidParameterError(f"backend must be 'spark' or 'pandas', not {backend!r}")
    from fragrelease.diffgen.share_noise import NOISE_MODES

    if noise not in NOISE_MODES:
        raise InvalidParameterError(f"--noise must be one of {NOISE_MODES}, not {noise!r}")
    if key_bits < 2048:
        raise InvalidParameterError(f"Paillier key must have >= 2048 bits, not {key_bits}")
    hosp, ins = _attrs(hospital_attributes), _attrs(insurer_attributes)
    from fragrelease.schemas.taxonomies import adult_predictors

    adult_predictors(hosp + ins)  # unknown attribute names fail here, naming the attribute
    from fragrelease.diffgen.params import TwoPartyParams

    params = TwoPartyParams.of(hospital_attributes=tuple(hosp), insurer_attributes=tuple(ins), epsilon=epsilon,
                               specializations=specializations, score=score, output=output, key_bits=key_bits,
                               rows=_rows(rows), if_exists=if_exists, backend=backend,
                               synthetic_min_count=synthetic_min_count, noise=noise)
    with console.status("hospital and insurer running the protocol"):
        res = run_two_party_release(lambda: get_spark("fragrelease-distdiffgen", master), params)
    _summary(res)
    for party, c in res.protocol_cost.items():
        secs = ", ".join(f"{k} {v:.1f} s" for k, v in c["seconds"].items())
        console.print(f"{party}: sent {c['sent_messages']} messages / {c['sent_bytes']:,} bytes; {secs}")
    console.print(f"winners: {', '.join(res.winners)}")
    g = res.guarantee or {}
    console.print(f"share noise [bold]{g['mode']}[/bold]: {g['construction']}", highlight=False)
    console.print(f"  against the public: {g['against_public']}", highlight=False)
    style = "" if g["dp_against_other_party"] else "[bold red]"
    console.print(f"  against the other party: {style}{g['against_other_party']}", highlight=False)


def experiment(out: str = typer.Option("docs/diffgen", help="Folder for runs.csv, results.csv and the PNGs."),
               repetitions: int = typer.Option(5, help="Runs per (score, h, ε) cell.")):
    """DiffGen's Adult classification experiment (pure-python core on pandas, evaluation sampler)."""
    import json
    import os

    import pandas as pd

    from fragrelease.experiments.diffgen import N_TRAIN, plot, root_selection, run_experiment, summarize
    from fragrelease.schemas.datasets import load_builtin_pandas

    os.makedirs(out, exist_ok=True)
    adult = load_builtin_pandas("adult")
    runs, base = run_experiment(adult, repetitions=repetitions)
    pd.concat([root_selection(adult.iloc[:N_TRAIN], score=s) for s in ("max", "infogain")]).to_csv(
        os.path.join(out, "selection.csv"), index=False)
    runs.to_csv(os.path.join(out, "runs.csv"), index=False)
    summarize(runs).to_csv(os.path.join(out, "results.csv"), index=False)
    with open(os.path.join(out, "baseline.json"), "w") as f:
        json.dump(base, f, indent=1)
    for p in plot(runs, base, out):
        console.print(f"figure: {p}")
    console.print(f"BA {base['BA']:.4f}, LA {base['LA']:.4f}, {len(runs)} runs in {base['seconds']:.0f} s")
