"""fragrelease.risk: anonymeter's attacks with a held-out control set and the marginal baseline (Spark-free)."""
from __future__ import annotations

import dataclasses
import sys

import numpy as np
import pandas as pd
import pytest

from fragrelease.errors import InvalidParameterError, MissingDependencyError
from fragrelease.risk import (
    INFERENCE,
    LINKABILITY,
    MISSING_ANONYMETER,
    SINGLING_OUT_MULTIVARIATE,
    SINGLING_OUT_UNIVARIATE,
    anonymeter_evaluators,
    column_halves,
    inference_risk,
    marginal_baseline,
    measure_risk,
    report_frame,
    singling_out_risk,
)

pytest.importorskip("anonymeter")
pytestmark = pytest.mark.usefixtures("anonymeter_numba_cache")  # tests/conftest.py: compiled kernels kept on disk


def population(n: int, rng: np.random.Generator) -> pd.DataFrame:
    """Rows with 4 numeric and 3 categorical columns; the secret ``c`` is independent of the rest."""
    cols = {
        "x1": rng.normal(size=n), "x2": rng.normal(size=n), "x3": rng.integers(0, 100, n).astype(float),
        "x4": rng.uniform(size=n),
        "a": rng.choice(["p", "q", "r", "s"], n), "b": rng.choice(["u", "v"], n),
        "c": rng.choice(["k0", "k1", "k2", "k3", "k4"], n),
    }
    # interleaved: each column half (linkability) holds continuous columns that tell rows apart
    return pd.DataFrame({k: cols[k] for k in ("x1", "a", "x2", "b", "x3", "c", "x4")})


@pytest.fixture(scope="module")
def sets():
    rng = np.random.default_rng(7)
    pop = population(1800, rng)
    return pop.iloc[:600].reset_index(drop=True), pop.iloc[600:1200].reset_index(drop=True), \
        pop.iloc[1200:].reset_index(drop=True)


def test_marginal_baseline_is_the_chance_of_a_guess_drawn_from_the_released_column():
    original = pd.Series(["a", "a", "a", "b"])  # p = (3/4, 1/4)
    released = pd.Series(["a", "b", "b", "b", "c"])  # q = (1/5, 3/5, 1/5)
    assert marginal_baseline(original, released) == pytest.approx(3 / 4 * 1 / 5 + 1 / 4 * 3 / 5)
    with pytest.raises(InvalidParameterError):
        marginal_baseline(pd.Series([], dtype=str), released)


def test_column_halves_split_in_table_order():
    assert column_halves(["a", "b", "c", "d", "e"]) == (["a", "b", "c"], ["d", "e"])
    with pytest.raises(InvalidParameterError, match="at least 2 columns"):
        column_halves(["a"])


def test_a_release_that_is_the_original_leaks_and_independent_rows_do_not(sets):
    """The calibration the experiment relies on: the original table itself is attacked successfully
    (risk interval above 0); real rows not in the release give an interval containing 0."""
    original, control, independent = sets
    np.random.seed(1)  # anonymeter draws its targets with numpy's global generator; seeds only in tests
    leak = inference_risk(original, original, control, "c", n_attacks=300)
    assert leak.risk.low > 0.5 and leak.attack_rate.value > 0.9
    assert leak.control_rate.value < 0.5
    calm = inference_risk(original, independent, control, "c", n_attacks=300)
    assert calm.risk.low == 0.0 and calm.risk.value < 0.15
    # the baseline: the released marginal of a uniform 5-way secret, about 1/5
    assert calm.baseline_rate == pytest.approx(0.2, abs=0.03)


def test_anonymeters_own_inference_baseline_is_near_zero_ours_is_not(sets):
    """Why fragrelease.risk computes the baseline itself: anonymeter 1.1.0 re-indexes its random
    guesses onto the targets' index, so a guess survives only where a drawn release row's index
    equals a target's: with a release indexed apart from the original (or much larger) its baseline
    is 0 or near it, whatever the secret's distribution."""
    original, control, independent = sets
    ev = anonymeter_evaluators()
    np.random.seed(2)
    apart = independent.set_axis(range(10_000, 10_000 + len(independent)))
    res = ev.InferenceEvaluator(ori=original, syn=apart, control=control, aux_cols=["x1", "x2", "a"],
                                secret="b", regression=False, n_attacks=300).evaluate(n_jobs=1).results()
    assert res.n_baseline == 0 and res.baseline_rate.value < 0.01  # a binary secret guessed at random is right about half the time
    assert marginal_baseline(original["b"], apart["b"]) == pytest.approx(0.5, abs=0.05)


def test_measure_risk_runs_every_attack_with_typed_frozen_results(sets):
    original, control, _ = sets
    np.random.seed(3)
    report = measure_risk(original, original, control, categorical=["a", "b", "c"], n_attacks=100)
    assert [r.attack for r in report.results] == [SINGLING_OUT_UNIVARIATE, SINGLING_OUT_MULTIVARIATE, LINKABILITY,
                                                  INFERENCE, INFERENCE, INFERENCE]
    assert [r.attribute for r in report.results if r.attack == INFERENCE] == ["a", "b", "c"]
    for r in report.results:
        assert 0 <= r.risk.low <= r.risk.value <= r.risk.high <= 1
    # the original as its own release: its rows are found again, across the column halves too
    assert report.of(LINKABILITY).risk.low > 0.5
    assert report.worst(INFERENCE).risk.low > 0.5
    assert report.n_control == len(control)
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.results[0].risk.value = 0.0  # type: ignore[misc]
    frame = report_frame(report)
    assert list(frame["attack"]) == [r.attack for r in report.results]
    assert list(frame.columns[:5]) == ["attack", "attribute", "risk", "low", "high"]


def test_singling_out_is_reproducible_with_a_seed_in_tests(sets):
    original, control, _ = sets
    a = singling_out_risk(original, original, control, mode="multivariate", n_attacks=50, seed=5)
    b = singling_out_risk(original, original, control, mode="multivariate", n_attacks=50, seed=5)
    # the seed fixes the attack's queries (anonymeter's random-query baseline may still differ)
    assert (a.risk, a.attack_rate, a.control_rate) == (b.risk, b.attack_rate, b.control_rate)
    assert a.risk.value > 0.5  # the original singles out its own rows
    with pytest.raises(InvalidParameterError, match="mode"):
        singling_out_risk(original, original, control, mode="both", n_attacks=5)


def test_bad_input_is_refused_with_the_problem_named(sets):
    original, control, _ = sets
    with pytest.raises(InvalidParameterError, match="control columns"):
        measure_risk(original, original, control[["x1", "a"]], categorical=["a"], n_attacks=10)
    with pytest.raises(InvalidParameterError, match="'zz'"):
        measure_risk(original, original, control, categorical=["zz"], n_attacks=10)
    with pytest.raises(InvalidParameterError, match="secret 'nope'"):
        inference_risk(original, original, control, "nope", n_attacks=10)
    with pytest.raises(InvalidParameterError, match="n_attacks"):
        measure_risk(original, original, control, categorical=["a"], n_attacks=0)


def test_a_missing_anonymeter_is_one_line_naming_the_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "anonymeter", None)
    with pytest.raises(MissingDependencyError) as exc:
        anonymeter_evaluators()
    assert str(exc.value) == MISSING_ANONYMETER and "\n" not in MISSING_ANONYMETER


def test_anonymeters_kernels_are_cached_on_disk_in_the_test_session(anonymeter_numba_cache):
    """tests/conftest.py's fixture: numba writes and reloads the two kernels (not its NullCache)."""
    from numba.core.caching import FunctionCache

    assert anonymeter_numba_cache is not None and len(anonymeter_numba_cache) == 2
    for kernel in anonymeter_numba_cache:
        assert isinstance(kernel._cache, FunctionCache)
