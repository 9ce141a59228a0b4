"""fragrelease.experiments.risk: the disclosure-risk evaluation's splits, rows and tables (small, Spark-free)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fragrelease.errors import InvalidParameterError
from fragrelease.experiments.risk import (
    inference_table,
    markdown_table,
    row_guarantee,
    run_experiment,
    split,
    summarize,
    typed,
)

pytest.importorskip("anonymeter")


def test_split_gives_three_disjoint_parts_covering_the_table():
    table = pd.DataFrame({"i": range(50)})
    train, control, independent = split(table, 10, np.random.default_rng(0))
    assert (len(train), len(control), len(independent)) == (30, 10, 10)
    parts = [set(p["i"]) for p in (train, control, independent)]
    assert set().union(*parts) == set(range(50)) and sum(len(p) for p in parts) == 50
    with pytest.raises(InvalidParameterError, match="two disjoint sets of 30 rows"):
        split(table, 30, np.random.default_rng(0))


def test_the_calibration_row_says_it_is_no_release():
    assert row_guarantee("independent", "1", 11, "").startswith("calibration: real rows not in the training table")
    assert row_guarantee("idp-ir", "1", 11, "linked").startswith("per column only")


def test_summary_counts_the_runs_whose_interval_excludes_zero():
    per_run = pd.DataFrame([
        {"release": "r", "attack": "inference", "attribute": "sex", "risk": 0.2, "low": 0.1, "high": 0.3, "run": 0,
         "attack_rate": 0.5, "control_rate": 0.4, "baseline_rate": 0.5, "guarantee": "g"},
        {"release": "r", "attack": "inference", "attribute": "sex", "risk": 0.05, "low": 0.0, "high": 0.1, "run": 1,
         "attack_rate": 0.5, "control_rate": 0.45, "baseline_rate": 0.5, "guarantee": "g"},
        {"release": "r", "attack": "linkability", "attribute": "", "risk": 0.0, "low": 0.0, "high": 0.01, "run": 0,
         "attack_rate": 0.0, "control_rate": 0.0, "baseline_rate": 0.0, "guarantee": "g"},
    ])
    s = summarize(per_run)
    sex = s[s["attribute"] == "sex"].iloc[0]
    assert (sex.risk_min, sex.risk_max, sex.low, sex.high, sex.runs, sex.above_zero) == (0.05, 0.2, 0.0, 0.3, 2, 1)
    table = markdown_table(s)
    assert "| r | g | – | – | 0.000 [0.000, 0.010] | sex: 0.050–0.200 [0.000, 0.300] **1/2** |" in table
    assert "| random guess from the release's marginal (success rate, mean) | 0.500 |" in inference_table(s)


@pytest.mark.slow  # anonymeter on a few hundred rows, one IR release of each kind
@pytest.mark.usefixtures("anonymeter_numba_cache")  # tests/conftest.py: compiled kernels kept on disk
def test_a_small_run_measures_every_release_kind_and_the_original_leaks(adult_pdf):
    table = adult_pdf.sample(700, random_state=3).reset_index(drop=True)
    np.random.seed(0)
    rows = run_experiment(table, epsilon="1", k=20, runs=1, n_attacks=60, n_control=150, mechanisms=("dp-ir",),
                          synthesizers=(), attacks=("inference",))
    assert set(rows["release"]) == {"original", "independent", "dp-ir none linked", "dp-ir none unlinked",
                                    "dp-ir isotonic linked", "dp-ir isotonic unlinked"}
    assert set(rows["attribute"]) == {"workclass", "education", "marital-status", "occupation", "relationship",
                                      "race", "sex", "native-country", "income"}
    original = rows[rows["release"] == "original"]
    assert (original["low"] > 0).mean() > 0.5  # the training table itself: its rows are found again
    assert set(rows.loc[rows["release"] == "original", "epsilon"]) == {"inf"}


def test_typed_casts_numbers_to_float_and_categories_to_text():
    from fragrelease.experiments.downstream import adult_specs

    specs = adult_specs()
    row = {s.name: (s.categories[0] if s.categorical else 30) for s in specs}
    t = typed(pd.DataFrame([row]), specs)
    assert list(t.columns) == [s.name for s in specs]
    assert t["age"].dtype == float and t["sex"].dtype == object
