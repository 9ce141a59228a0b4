"""The released error a release can expect, by simulating the mechanism and its default post-processing.

The noise table of :mod:`fragrelease.idpir.preview` describes the Laplace draw on each centroid; what a
user reads is the table after clamping and the isotonic projection (docs/specification.md §9), whose
error is usually far smaller. This module predicts that error by Monte Carlo: it runs the release's
own steps (IR clusters, the mechanism's sensitivity and calibrated scale,
:func:`fragrelease.idpir.postprocess.finish_centroids`) many times with fresh noise on an attribute
and scores each outcome against the data it was simulated on.

**Error.** Numeric attributes: the root mean squared error per record, √(mean (x − x')²), in the
attribute's units. Categorical attributes: the share of records whose released category differs
from their own. **Baseline**: the same error of the best constant release, i.e. releasing the
attribute's mean (its RMSE is the population standard deviation) or its most frequent category
(its error is 1 − that category's share). An attribute whose expected released error is at least
the baseline is no more useful than that constant (in MeanSSE terms, docs/specification.md §4, its
contribution is at least the constant's).

**On which data.** Two callers, two kinds of data:

- *public* (:func:`public_estimates`, ``fragrelease plan``): data drawn from the declared domain,
  as public as the domain itself: n values spread evenly over [lo, hi] (the quantiles
  lo + (hi − lo)·(i + ½)/n, i < n) or n records dealt evenly over the declared categories. n is each
  owner's declared record count. Nothing of anyone's data is read; the figures say how the
  mechanism treats data that fill the declared domain.
- *an owner's own* (:func:`fragment_estimate`, ``fragrelease owner preview``): the owner's sorted
  values or category counts, its actual local sensitivity (iDP-IR) and, under ``dp-frequency``, a
  fresh simulated noisy category order per run. The result is private to that owner.

Randomness: :mod:`fragrelease.rng.simulation` (the OS CSPRNG in production; seeds only in tests).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Optional, Sequence

import numpy as np

from fragrelease.errors import InvalidParameterError
from fragrelease.idpir.category_order import histogram_scale
from fragrelease.idpir.mechanisms import get_mechanism
from fragrelease.idpir.microaggregation import cluster_count
from fragrelease.idpir.postprocess import DEFAULT_POSTPROCESS, check_postprocess
from fragrelease.idpir.stage import AttributeTask, StageSpec
from fragrelease.protocol.options import ReleaseOptions
from fragrelease.rng.simulation import SecureSimulation, SimulationRandomness

#: Simulated releases per attribute and fragment (the figures' standard error is reported beside them).
DEFAULT_RUNS = 32


@dataclass(frozen=True)
class ErrorEstimate:
    """The expected error of one released attribute (one fragment or several combined).

    ``released``: expected RMSE per record (numeric, the attribute's units) or expected share of
    changed categories (categorical); ``stderr``: its Monte Carlo standard error; ``baseline``: the
    error of releasing the mean (numeric: the population standard deviation) or the most frequent
    category (categorical: 1 − its share); ``scale``: the Laplace scale b the simulated centroids got
    (largest over fragments; under iDP-IR the local scale of the simulated data); ``n``: records.
    """

    attribute: str
    kind: str
    released: float
    stderr: float
    baseline: float
    scale: float
    n: int
    runs: int

    @property
    def ratio(self) -> float:
        """released / baseline (inf when the baseline is 0: a constant attribute)."""
        return self.released / self.baseline if self.baseline > 0 else math.inf

    def worse_than_constant(self, threshold: float = 1.0) -> bool:
        """Whether the expected released error is at least ``threshold`` × the baseline's."""
        return self.released >= threshold * self.baseline

    def to_dict(self) -> dict:
        return {"attribute": self.attribute, "kind": self.kind, "released_error": self.released,
                "released_error_stderr": self.stderr, "baseline_error": self.baseline, "ratio": self.ratio,
                "scale": self.scale, "n": self.n, "runs": self.runs}


class _Numeric:
    """A numeric attribute of one fragment, sorted: cluster sizes, means and within-cluster squared sums."""

    def __init__(self, xs: np.ndarray, k: int, lo: float, hi: float) -> None:
        n = xs.size
        c = cluster_count(n, k)
        starts = np.arange(c) * k
        ends = np.append(starts[1:], n)
        s1 = np.concatenate([[0.0], np.cumsum(xs)])
        s2 = np.concatenate([[0.0], np.cumsum(xs * xs)])
        self.sizes = (ends - starts).astype(float)
        total = s1[ends] - s1[starts]
        self.means = total / self.sizes
        self.ss = float(np.sum(np.maximum(s2[ends] - s2[starts] - total * self.means, 0.0)))
        self.n, self.c, self.k = n, c, k
        self.extremes = (float(xs[0]), float(xs[starts[-1]]), float(xs[ends[-2] - 1]) if c > 1 else lo,
                         float(xs[-1]), int(ends[-1] - starts[-1]))
        self.baseline_sq = float(np.var(xs))  # releasing the mean: MSE = population variance

    def sq_error(self, z: np.ndarray) -> float:
        return self.ss + float(np.sum(self.sizes * (self.means - z) ** 2))


class _Ranked:
    """A categorical attribute of one fragment as ranks: block r (rank r + 1) holds counts[r] records."""

    def __init__(self, counts: np.ndarray, k: int) -> None:
        counts = np.asarray(counts, dtype=np.int64)
        n = int(counts.sum())
        m = counts.size
        c = cluster_count(n, k)
        self.block_end = np.cumsum(counts)
        self.block_start = self.block_end - counts
        starts = np.arange(c) * k
        ends = np.append(starts[1:], n)
        ranks = np.arange(1, m + 1, dtype=float)
        cum = np.concatenate([[0.0], np.cumsum(ranks * counts)])

        def prefix(p: np.ndarray) -> np.ndarray:  # Σ of the first p ranks in sorted order
            r = np.searchsorted(self.block_end, p, side="right")
            r_in = np.minimum(r, m - 1)
            part = (r_in + 1) * (p - self.block_start[r_in])
            return np.where(r >= m, cum[m], cum[np.minimum(r, m)] + part)

        self.starts, self.ends = starts, ends
        self.sizes = (ends - starts).astype(float)
        self.means = (prefix(ends) - prefix(starts)) / self.sizes
        self.n, self.c, self.k, self.m = n, c, k, m

        def rank_at(p: int) -> float:
            return float(np.searchsorted(self.block_end, p, side="right") + 1)

        self.extremes = (rank_at(0), rank_at(int(starts[-1])), rank_at(int(ends[-2]) - 1) if c > 1 else 1.0,
                         rank_at(n - 1), int(ends[-1] - starts[-1]))

    def changed(self, z: np.ndarray) -> float:
        """Records whose released rank ``z`` (whole ranks in [1, m], one per cluster) is not their own."""
        r = z.astype(np.int64) - 1
        same = np.maximum(np.minimum(self.ends, self.block_end[r]) - np.maximum(self.starts, self.block_start[r]), 0)
        return float(self.n - np.sum(same))


@lru_cache(maxsize=4096)
def _calibrated(mechanism: str, delta: float, epsilon: Fraction, c: int) -> float:
    return get_mechanism(mechanism).scale(delta, epsilon, c)


def _scale(mechanism: str, delta: float, epsilon: Fraction, c: int, calibrate: bool) -> float:
    """The release's calibrated scale (OpenDP's map, about 7 ms each), or Δ/ε, below it by at most c·2⁻⁴⁰/ε."""
    return _calibrated(mechanism, delta, epsilon, c) if calibrate else delta / float(epsilon)


def _delta(mechanism: str, attr: _Numeric | _Ranked, k: int, lo: float, hi: float) -> float:
    min_first, min_last, max_second_last, max_last, size_last = attr.extremes
    return get_mechanism(mechanism).sensitivity_from_extremes(min_first, min_last, max_second_last, max_last, k=k,
                                                              size_last=size_last, n_clusters=attr.c, lo=lo, hi=hi)


def _finish(attr: _Numeric | _Ranked, scale: float, task: AttributeTask, stage: StageSpec,
            randomness: SimulationRandomness) -> np.ndarray:
    noisy = attr.means + scale * randomness.laplace(attr.c)
    return stage.finish(noisy, attr.sizes, task)


@dataclass(frozen=True)
class FragmentError:
    """Raw simulation result of one attribute on one fragment: per-run error sums and the baseline's."""

    n: int
    errors: np.ndarray  # per run: Σ squared error (numeric) or number of changed records (categorical)
    baseline: float  # Σ squared error of the mean, or records outside the most frequent category
    scale: float


def simulate_numeric(sorted_values: np.ndarray, *, mechanism: str, k: int, lo: float, hi: float,
                     epsilon_centroids: Fraction, postprocess: str = DEFAULT_POSTPROCESS, runs: int = DEFAULT_RUNS,
                     randomness: Optional[SimulationRandomness] = None, calibrate: bool = True) -> FragmentError:
    """``runs`` simulated releases of one numeric attribute of one fragment (values sorted, shape (n,)).

    The mechanism's own k (plain iDP: 1), sensitivity (local for iDP-IR) and calibrated scale for the
    c = max(⌊n/k⌋, 1) clusters (``calibrate=False``: Δ/ε, which differs from it by at most c·2⁻⁴⁰/ε and
    saves OpenDP's calibration, for searches over many candidates); fresh noise per run;
    :func:`finish_centroids` with ``postprocess``.

    Raises
    ------
    InvalidParameterError
        Unknown mechanism or post-processing, k out of range, runs < 1, values unsorted or outside [lo, hi].
    """
    xs = np.asarray(sorted_values, dtype=float)
    mech = get_mechanism(mechanism)
    check_postprocess(postprocess)
    _check_runs(runs)
    if xs.ndim != 1 or xs.size == 0 or np.any(np.diff(xs) < 0):
        raise InvalidParameterError("values must be a non-empty sorted 1-D array")
    if xs[0] < lo or xs[-1] > hi:
        raise InvalidParameterError(f"values must lie in [{lo}, {hi}]")
    stage = StageSpec.build(mech, k, xs.size, ReleaseOptions.of(postprocess=postprocess))
    task = AttributeTask("a", lo, hi, False, Fraction(epsilon_centroids))
    attr = _Numeric(xs, stage.k, lo, hi)
    scale = _scale(mechanism, _delta(mechanism, attr, k, lo, hi), Fraction(epsilon_centroids), attr.c, calibrate)
    rnd = randomness if randomness is not None else SecureSimulation()
    errors = np.array([attr.sq_error(_finish(attr, scale, task, stage, rnd)) for _ in range(runs)])
    return FragmentError(n=attr.n, errors=errors, baseline=attr.baseline_sq * attr.n, scale=scale)


def simulate_categorical(counts: Sequence[int] | np.ndarray, *, mechanism: str, k: int, epsilon_centroids: Fraction,
                         epsilon_order: Fraction = Fraction(0), postprocess: str = DEFAULT_POSTPROCESS,
                         runs: int = DEFAULT_RUNS, randomness: Optional[SimulationRandomness] = None,
                         calibrate: bool = True) -> FragmentError:
    """``runs`` simulated releases of one categorical attribute of one fragment from its category counts.

    ``counts``: shape (|dom|,), the records per category in **declared** order. ``epsilon_order`` > 0
    (``dp-frequency``): every run first ranks the categories by counts plus Laplace noise of the
    release's histogram scale ``2/ε_order`` (most frequent first, ties by declared order), as the
    owner's step does; 0 (``declared``): rank = declared position. Then the IR clusters of the ranks,
    the mechanism's sensitivity and scale, noise and :func:`finish_centroids` (rounded ranks).

    Raises
    ------
    InvalidParameterError
        Fewer than 2 categories, a negative count, no record, or the conditions of :func:`simulate_numeric`.
    """
    counts = np.asarray(counts, dtype=np.int64)
    mech = get_mechanism(mechanism)
    check_postprocess(postprocess)
    _check_runs(runs)
    if counts.ndim != 1 or counts.size < 2 or np.any(counts < 0) or counts.sum() < 1:
        raise InvalidParameterError("category counts must be >= 0 for at least 2 categories, with a record")
    n, m = int(counts.sum()), counts.size
    stage = StageSpec.build(mech, k, n, ReleaseOptions.of(postprocess=postprocess))
    k_used = stage.k
    lo, hi = 1.0, float(m)
    task = AttributeTask("a", lo, hi, True, Fraction(epsilon_centroids))
    rnd = randomness if randomness is not None else SecureSimulation()
    order_scale = histogram_scale(epsilon_order, m) if epsilon_order > 0 else 0.0
    fixed = None if order_scale else _Ranked(counts, k_used)
    errors, scales = [], []
    for _ in range(runs):
        if fixed is None:
            noisy = counts + order_scale * rnd.laplace(m)
            attr = _Ranked(counts[np.lexsort((np.arange(m), -noisy))], k_used)
        else:
            attr = fixed
        scale = _scale(mechanism, _delta(mechanism, attr, k, lo, hi), Fraction(epsilon_centroids), attr.c,
                       calibrate)
        scales.append(scale)
        errors.append(attr.changed(_finish(attr, scale, task, stage, rnd)))
    return FragmentError(n=n, errors=np.asarray(errors), baseline=float(n - counts.max()), scale=max(scales))


def combine(attribute: str, categorical: bool, parts: Sequence[FragmentError]) -> ErrorEstimate:
    """One attribute's :class:`ErrorEstimate` over the fragments that release it (records pooled).

    Each run's error is summed over the fragments (their noise is independent), then averaged over
    runs; numeric: RMSE = √(Σ squared error / Σ n), its standard error by the delta method.
    """
    if not parts:
        raise InvalidParameterError(f"attribute {attribute!r}: no fragment to combine")
    runs = min(p.errors.size for p in parts)
    n = sum(p.n for p in parts)
    per_run = np.sum([p.errors[:runs] for p in parts], axis=0) / n
    base = sum(p.baseline for p in parts) / n
    mean = float(np.mean(per_run))
    se = float(np.std(per_run, ddof=1) / math.sqrt(runs)) if runs > 1 else math.nan
    scale = max(p.scale for p in parts)
    if categorical:
        return ErrorEstimate(attribute, "categorical", mean, se, base, scale, n, runs)
    rmse = math.sqrt(mean)
    return ErrorEstimate(attribute, "numeric", rmse, se / (2 * rmse) if rmse > 0 else 0.0, math.sqrt(base), scale, n,
                         runs)


def _check_runs(runs: int) -> None:
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise InvalidParameterError(f"runs must be an integer >= 1, not {runs!r}")


def domain_values(n: int, lo: float, hi: float) -> np.ndarray:
    """n values spread evenly over [lo, hi]: ``lo + (hi − lo)·(i + ½)/n``, i < n, sorted (public)."""
    return lo + (hi - lo) * (np.arange(n, dtype=float) + 0.5) / n


def domain_counts(n: int, categories: int) -> np.ndarray:
    """n records dealt evenly over ``categories`` categories (the first n mod |dom| get one more), public."""
    base, extra = divmod(n, categories)
    return np.array([base + (1 if i < extra else 0) for i in range(categories)], dtype=np.int64)
