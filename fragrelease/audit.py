"""Empirical privacy audit of the IR mechanisms on neighbouring datasets (Spark-free).

Method (a standard black-box DP audit, e.g. Jagielski et al., NeurIPS 2020; Nasr et al., 2021):

1. Take a dataset D (one attribute) and build its **worst-case neighbour** D' by brute force: every
   substitution of one record by the domain bounds lo or hi (the values that move the centroid
   vector the most, SPEC.md §2), keeping the one with the largest L1 change of the centroid vector.
2. Calibrate the mechanism **once, on D** (DP-IR: (hi − lo)/k; iDP-IR: the local sensitivity of D —
   iDP protects the actual dataset D against every neighbour) and run it ``runs`` times on D and on D'
   (IR centroids + one Laplace draw per cluster + clamping, the release's own code).
3. Distinguish the two with the likelihood-ratio statistic T(z) = Σ_j (|z_j − c'_j| − |z_j − c_j|)/b
   and, for every threshold t on a fixed grid, bound ε from below by
   ln(P̲[T(M(D)) ≥ t] / P̄[T(M(D')) ≥ t]) (and the mirrored ratio), with Clopper–Pearson bounds at
   confidence 1 − α per side, Bonferroni-corrected over the thresholds.

If the mechanism is ε-DP (ε-iDP for D), the reported lower bound exceeds ε with probability at most
α. The point estimate (same ratio without the confidence bounds, over thresholds whose tails hold at
least 100 runs on both sides) shows how close the audit gets.
The audit checks the calibration of the mechanism (clusters, sensitivity, scale); the sampler's
distribution is tested separately (Kolmogorov–Smirnov), so the audit may use the fast sampler.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .errors import InvalidParameterError
from .mechanisms import clamp_and_round, laplace_scale
from .microaggregation import ir_centroids, ir_clusters
from .rng import NoiseSource
from .sensitivity import mechanism_k, sensitivity


#: Runs a tail must hold before its ratio counts in the point estimate.
MIN_TAIL = 100


@dataclass(frozen=True)
class AuditResult:
    mechanism: str
    epsilon: float
    runs: int
    alpha: float
    sensitivity: float
    neighbour_shift: float
    epsilon_lower_bound: float
    epsilon_point_estimate: float


def centroid_vector(x: np.ndarray, k: int) -> np.ndarray:
    """IR centroids of x in rank order (record ids = positions for ties)."""
    return ir_centroids(x, ir_clusters(x, k, np.arange(len(x))))


def worst_neighbour(x: np.ndarray, k: int, lo: float, hi: float) -> tuple[np.ndarray, float]:
    """The substitution of one record by lo or hi that moves the centroid vector most (L1)."""
    c = centroid_vector(x, k)
    best, best_y = -1.0, x
    for i in range(len(x)):
        for v in (lo, hi):
            y = x.copy()
            y[i] = v
            shift = float(np.abs(centroid_vector(y, k) - c).sum())
            if shift > best:
                best, best_y = shift, y
    return best_y, best


def _clopper_pearson(successes: np.ndarray, n: int, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    from scipy.stats import beta

    lower = np.where(successes > 0, beta.ppf(alpha, successes, n - successes + 1), 0.0)
    upper = np.where(successes < n, beta.ppf(1 - alpha, successes + 1, n - successes), 1.0)
    return lower, upper


def audit(
    x: np.ndarray, *, k: int, lo: float, hi: float, epsilon: Fraction | float, mechanism: str, runs: int,
    noise: NoiseSource, alpha: float = 1e-6, thresholds: int = 41,
) -> AuditResult:
    """Estimate the privacy loss of ``mechanism`` on (D, worst-case D'); see the module docstring.

    Raises
    ------
    InvalidParameterError
        Fewer than 1,000 runs, or values outside [lo, hi].
    """
    x = np.asarray(x, dtype=float)
    if runs < 1000:
        raise InvalidParameterError(f"an audit needs at least 1000 runs, not {runs}")
    if np.any(x < lo) or np.any(x > hi):
        raise InvalidParameterError(f"values must lie in [{lo}, {hi}]")
    k_used = mechanism_k(mechanism, k)
    y, shift = worst_neighbour(x, k_used, lo, hi)
    delta = sensitivity(mechanism, x, k, lo, hi)
    b = laplace_scale(delta, epsilon)
    c, c2 = centroid_vector(x, k_used), centroid_vector(y, k_used)
    m = len(c)

    def sample(center):
        vals = np.tile(center, runs)
        z = noise.perturb(vals, np.full(vals.shape, b), np.zeros(vals.shape), np.tile(np.arange(m), runs))
        z = clamp_and_round(z, lo, hi, False).reshape(runs, m)
        return (np.abs(z - c2).sum(axis=1) - np.abs(z - c).sum(axis=1)) / b

    t_d, t_n = sample(c), sample(c2)
    grid = np.linspace(-float(epsilon), float(epsilon), thresholds)
    a = alpha / (2 * thresholds)
    hits_d = np.array([(t_d >= t).sum() for t in grid])
    hits_n = np.array([(t_n >= t).sum() for t in grid])
    lo_d, up_d = _clopper_pearson(hits_d, runs, a)
    lo_n, up_n = _clopper_pearson(hits_n, runs, a)
    with np.errstate(divide="ignore", invalid="ignore"):
        lower = np.concatenate([np.log(lo_d / up_n), np.log((1 - up_n) / (1 - lo_d))])
        pd_, pn_ = hits_d / runs, hits_n / runs
        # point estimate only where both tails hold enough runs to be estimated (>= MIN_TAIL)
        ok_upper = (hits_d >= MIN_TAIL) & (hits_n >= MIN_TAIL)
        ok_lower = (runs - hits_d >= MIN_TAIL) & (runs - hits_n >= MIN_TAIL)
        point = np.concatenate([np.log(pd_ / pn_)[ok_upper], np.log((1 - pn_) / (1 - pd_))[ok_lower]])
    lower = lower[np.isfinite(lower)]
    point = point[np.isfinite(point)]
    return AuditResult(mechanism, float(epsilon), runs, alpha, delta, shift,
                       float(lower.max()) if lower.size else 0.0, float(point.max()) if point.size else 0.0)
