"""Measured disclosure risk of a released table: anonymeter's three attacks, with a held-out control set.

Source: Giomi et al., "A Unified Framework for Quantifying Privacy Risk in Synthetic Data"
(PoPETs 2023), implemented by anonymeter 1.1.0 (PyPI, BSD-3-Clause-Clear). Spark-free: pandas in,
typed results out (:class:`RiskReport`).

What is measured, for a released table ``released`` made from the rows ``original`` and a
``control`` set of real rows of the same population that were **not** used to make the release:

- **singling-out** (``univariate``, ``multivariate``): predicates built from the release that
  isolate exactly one row of ``original``, against the same predicates on ``control``;
- **linkability**: the columns are cut into two halves (:func:`column_halves`); an attacker who
  knows one half of a target row and, separately, the other half, links them when both halves'
  nearest released rows are the same row;
- **inference** on every categorical attribute: the secret is that attribute, the attacker knows
  every other attribute (``aux``) and guesses the secret of its nearest released row.

Each attack runs ``n_attacks`` times against targets drawn from ``original`` and as many from
``control``; anonymeter's risk is the excess success on ``original`` over ``control``,
``(attack − control) / (1 − control)``, with a 95 % interval from Wilson score intervals of both
rates (:class:`Risk`). A risk whose interval contains 0 is not distinguishable from what the
release teaches about the population as a whole.

What the number is and is not: an **empirical lower bound** on what these three attacks achieve
against this one release. It is not a guarantee and not an upper bound: an attack written for
microaggregation (or any other attack) may do better; a risk near 0 says these attacks found
nothing, not that nothing can be found. The guarantee of a release is its (i)DP statement
(docs/privacy.md), which this measurement neither replaces nor weakens.

Random-guess baseline: anonymeter 1.1.0's inference baseline draws guesses from the release and
then re-indexes them on the targets' index (``guesses.reindex_like(targets)``), so almost every
guess becomes missing and the baseline is near 0. This module computes the baseline itself
(:func:`marginal_baseline`): the expected success of guessing the secret by drawing it from the
release's own column distribution, Σ_c p_original(c) · p_released(c) over the categories c.

Randomness: anonymeter draws its targets with pandas' ``DataFrame.sample`` (numpy's global
generator, seeded from the OS at start) and its singling-out queries with a fresh
``numpy.random.default_rng()``; nothing here seeds them. Tests seed numpy's global generator
and pass ``seed`` for singling-out; releases never do.

anonymeter 1.1.0 declares ``numpy<1.27`` while OpenDP's MBI extra (JAX) needs numpy 2; its code
runs on numpy 2, so scripts/setup.sh installs it with ``--no-deps`` beside setup.py's ``risk`` extra
(its other dependencies). :func:`anonymeter_evaluators` names the command when it is missing.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Optional, Sequence

import pandas as pd

from fragrelease.errors import InvalidParameterError, MissingDependencyError

#: The attacks, as results and messages name them.
SINGLING_OUT_UNIVARIATE = "singling-out-univariate"
SINGLING_OUT_MULTIVARIATE = "singling-out-multivariate"
LINKABILITY = "linkability"
INFERENCE = "inference"
ATTACKS = (SINGLING_OUT_UNIVARIATE, SINGLING_OUT_MULTIVARIATE, LINKABILITY, INFERENCE)
CONFIDENCE = 0.95

#: The one line printed when anonymeter is missing (scripts/setup.sh installs it).
MISSING_ANONYMETER = ("the disclosure-risk measurement needs anonymeter 1.1.0, which is not installed: "
                      "pip install 'fragrelease[risk]' && pip install --no-deps anonymeter==1.1.0")


def anonymeter_evaluators():
    """``anonymeter.evaluators`` (anonymeter 1.1.0).

    Raises
    ------
    MissingDependencyError
        anonymeter is not installed (:data:`MISSING_ANONYMETER`, one line).
    """
    try:
        from anonymeter import evaluators
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in ("anonymeter", "numba", "llvmlite", "joblib", "sklearn"):
            raise
        raise MissingDependencyError(MISSING_ANONYMETER) from None
    return evaluators


@dataclass(frozen=True)
class Rate:
    """A success rate with its Wilson half-width at 95 % (anonymeter's ``SuccessRate``)."""

    value: float
    error: float


@dataclass(frozen=True)
class Risk:
    """anonymeter's risk estimate: ``value`` in [0, 1] with its 95 % interval ``[low, high]``."""

    value: float
    low: float
    high: float

    @property
    def above_zero(self) -> bool:
        """Whether the interval excludes 0 (the attack did measurably better on the release's own rows)."""
        return self.low > 0


@dataclass(frozen=True)
class AttackResult:
    """One attack on one release.

    ``attack``: one of :data:`ATTACKS`; ``attribute``: the secret of an inference attack (None
    otherwise); ``risk``: anonymeter's excess risk over the control set; ``attack_rate`` and
    ``control_rate``: the success rates on the release's own rows and on the control rows;
    ``baseline_rate``: the random-guess success rate (inference: :func:`marginal_baseline`;
    otherwise anonymeter's random queries or links); ``n_attacks``: attacks on each set.
    """

    attack: str
    attribute: Optional[str]
    risk: Risk
    attack_rate: Rate
    control_rate: Rate
    baseline_rate: float
    n_attacks: int


@dataclass(frozen=True)
class RiskReport:
    """Every attack run on one release (:func:`measure_risk`); ``results`` in the order run."""

    results: tuple[AttackResult, ...]
    n_attacks: int
    n_control: int

    def of(self, attack: str, attribute: Optional[str] = None) -> AttackResult:
        """The result of ``attack`` (and secret ``attribute`` for inference).

        Raises
        ------
        KeyError
            No such result in this report.
        """
        for r in self.results:
            if r.attack == attack and r.attribute == attribute:
                return r
        raise KeyError((attack, attribute))

    def worst(self, attack: str) -> Optional[AttackResult]:
        """The result of ``attack`` with the highest risk (inference: over every secret), or None."""
        found = [r for r in self.results if r.attack == attack]
        return max(found, key=lambda r: r.risk.value) if found else None


def _risk(results) -> tuple[Risk, Rate, Rate]:
    """anonymeter ``EvaluationResults`` → (risk, attack rate, control rate)."""
    r = results.risk()
    ctl = results.control_rate
    return (Risk(float(r.value), float(r.ci[0]), float(r.ci[1])),
            Rate(float(results.attack_rate.value), float(results.attack_rate.error)),
            Rate(float(ctl.value), float(ctl.error)))


def column_halves(columns: Sequence[str]) -> tuple[list[str], list[str]]:
    """The linkability attack's two halves: the first ⌈l/2⌉ columns and the rest, in table order.

    Raises
    ------
    InvalidParameterError
        Fewer than 2 columns.
    """
    cols = list(columns)
    if len(cols) < 2:
        raise InvalidParameterError(f"linkability needs at least 2 columns, got {cols}")
    half = (len(cols) + 1) // 2
    return cols[:half], cols[half:]


def marginal_baseline(original: pd.Series, released: pd.Series) -> float:
    """Expected success of guessing a categorical secret by drawing it from the released column.

    Σ_c p_original(c) · p_released(c) over the categories c (exact, no sampling): the chance that a
    guess drawn from the release's distribution of the secret equals a random target's value.
    Shapes: two Series of labels (any lengths ≥ 1).

    Raises
    ------
    InvalidParameterError
        An empty series.
    """
    if len(original) == 0 or len(released) == 0:
        raise InvalidParameterError("marginal_baseline needs non-empty columns")
    p = original.astype(str).value_counts(normalize=True)
    q = released.astype(str).value_counts(normalize=True)
    return float((p * q.reindex(p.index, fill_value=0.0)).sum())


def _check(original: pd.DataFrame, released: pd.DataFrame, control: pd.DataFrame, n_attacks: int) -> list[str]:
    cols = list(released.columns)
    for name, df in (("original", original), ("control", control)):
        if list(df.columns) != cols:
            raise InvalidParameterError(f"{name} columns {list(df.columns)} differ from the release's {cols}")
    if n_attacks < 1:
        raise InvalidParameterError(f"n_attacks must be >= 1, not {n_attacks}")
    if min(len(original), len(released), len(control)) < 2:
        raise InvalidParameterError(f"original, released and control need at least 2 rows each "
                                    f"(got {len(original)}, {len(released)}, {len(control)})")
    return cols


def inference_risk(original: pd.DataFrame, released: pd.DataFrame, control: pd.DataFrame, secret: str, *,
                   n_attacks: int) -> AttackResult:
    """anonymeter's attribute inference on categorical ``secret`` (aux = every other column).

    Shapes: three DataFrames with the same columns (categorical columns as labels, numeric as
    numbers); ``n_attacks`` targets from ``original`` and from ``control`` (fewer when a set is
    smaller). Baseline: :func:`marginal_baseline`.

    Raises
    ------
    InvalidParameterError
        Columns differ, ``secret`` is not one of them, or a set has fewer than 2 rows.
    MissingDependencyError
        anonymeter is not installed.
    """
    cols = _check(original, released, control, n_attacks)
    if secret not in cols:
        raise InvalidParameterError(f"secret {secret!r} is not a column of the release ({cols})")
    ev = anonymeter_evaluators()
    aux = [c for c in cols if c != secret]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # anonymeter warns when its own (broken) baseline beats the attack
        res = ev.InferenceEvaluator(ori=original, syn=released, control=control, aux_cols=aux, secret=secret,
                                    regression=False, n_attacks=n_attacks).evaluate(n_jobs=1).results(CONFIDENCE)
    risk, rate, ctl = _risk(res)
    return AttackResult(INFERENCE, secret, risk, rate, ctl, marginal_baseline(original[secret], released[secret]),
                        int(res.n_attacks_ori))


def linkability_risk(original: pd.DataFrame, released: pd.DataFrame, control: pd.DataFrame, *,
                     n_attacks: int) -> AttackResult:
    """anonymeter's linkability on the two column halves (:func:`column_halves`), one neighbour.

    Shapes, errors: :func:`inference_risk` (without ``secret``). Baseline: anonymeter's random links.
    """
    cols = _check(original, released, control, n_attacks)
    ev = anonymeter_evaluators()
    n = min(n_attacks, len(original), len(control))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = ev.LinkabilityEvaluator(ori=original, syn=released, control=control, aux_cols=column_halves(cols),
                                      n_attacks=n, n_neighbors=1).evaluate(n_jobs=1).results(CONFIDENCE)
    risk, rate, ctl = _risk(res)
    return AttackResult(LINKABILITY, None, risk, rate, ctl, float(res.baseline_rate.value), n)


def singling_out_risk(original: pd.DataFrame, released: pd.DataFrame, control: pd.DataFrame, *, mode: str,
                      n_attacks: int, n_cols: int = 3, seed: Optional[int] = None) -> AttackResult:
    """anonymeter's singling-out, ``mode`` ``univariate`` or ``multivariate`` (``n_cols`` per predicate).

    ``seed``: tests only (the queries' generator); releases leave it None. anonymeter corrects the
    control successes for a control set of another size than ``original``. Shapes, errors:
    :func:`inference_risk` (without ``secret``); InvalidParameterError for another ``mode``.
    """
    if mode not in ("univariate", "multivariate"):
        raise InvalidParameterError(f"mode must be 'univariate' or 'multivariate', not {mode!r}")
    _check(original, released, control, n_attacks)
    ev = anonymeter_evaluators()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = ev.SinglingOutEvaluator(ori=original, syn=released, control=control, n_attacks=n_attacks, n_cols=n_cols,
                                      max_attempts=100 * n_attacks, seed=seed).evaluate(mode=mode).results(CONFIDENCE)
    risk, rate, ctl = _risk(res)
    attack = SINGLING_OUT_UNIVARIATE if mode == "univariate" else SINGLING_OUT_MULTIVARIATE
    return AttackResult(attack, None, risk, rate, ctl, float(res.baseline_rate.value), n_attacks)


def measure_risk(original: pd.DataFrame, released: pd.DataFrame, control: pd.DataFrame, *,
                 categorical: Sequence[str], n_attacks: int = 1000,
                 attacks: Sequence[str] = ATTACKS) -> RiskReport:
    """Every attack of ``attacks`` on one release: inference on every column of ``categorical``.

    Shapes: ``original`` (the rows the release was made from), ``released`` and ``control`` (real
    rows not in the release) share their columns; ``categorical`` names the categorical ones
    (labels; numeric columns are numbers). See the module docstring for what the result means.

    Raises
    ------
    InvalidParameterError
        Columns differ, an unknown attack or categorical column, fewer than 2 rows in a set.
    MissingDependencyError
        anonymeter is not installed.
    """
    cols = _check(original, released, control, n_attacks)
    unknown = [a for a in attacks if a not in ATTACKS] + [c for c in categorical if c not in cols]
    if unknown:
        raise InvalidParameterError(f"unknown attacks or columns {unknown}; attacks: {ATTACKS}; columns: {cols}")
    out: list[AttackResult] = []
    for mode, name in (("univariate", SINGLING_OUT_UNIVARIATE), ("multivariate", SINGLING_OUT_MULTIVARIATE)):
        if name in attacks:
            out.append(singling_out_risk(original, released, control, mode=mode, n_attacks=n_attacks))
    if LINKABILITY in attacks:
        out.append(linkability_risk(original, released, control, n_attacks=n_attacks))
    if INFERENCE in attacks:
        out.extend(inference_risk(original, released, control, c, n_attacks=n_attacks) for c in categorical)
    return RiskReport(tuple(out), n_attacks, len(control))


def report_frame(report: RiskReport) -> pd.DataFrame:
    """One row per attack result: attack, attribute, risk, low, high, attack/control rates, baseline."""
    return pd.DataFrame([{"attack": r.attack, "attribute": r.attribute or "", "risk": r.risk.value,
                          "low": r.risk.low, "high": r.risk.high, "attack_rate": r.attack_rate.value,
                          "control_rate": r.control_rate.value, "baseline_rate": r.baseline_rate,
                          "n_attacks": r.n_attacks} for r in report.results])
