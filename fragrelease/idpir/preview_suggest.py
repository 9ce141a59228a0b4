"""The accuracy preview's suggestions (:func:`suggest`): the smallest k, the smallest ε with two
significant digits and the attributes to keep that bring every attribute's expected released error
under the threshold, each found by simulation on common random numbers (:mod:`fragrelease.idpir.preview`,
"Warning and suggestions")."""
from __future__ import annotations

from dataclasses import replace
from decimal import ROUND_CEILING, Decimal
from fractions import Fraction
from typing import Optional, Sequence

import numpy as np

from fragrelease.idpir.mechanisms import get_mechanism
from fragrelease.idpir.preview_figures import _domain_error, _holders, attribute_previews
from fragrelease.idpir.preview_types import DEFAULT_THRESHOLD, AttributePreview, PreviewParams, Suggestions
from fragrelease.protocol.messages import MIN_K
from fragrelease.rng.simulation import SecureSimulation, SimulationRandomness

#: Simulated releases per evaluation inside the suggestions' searches (common draws across candidates).
_SEARCH_RUNS = 8


class _Replay:
    """Common random numbers for a search: one stream of CSPRNG draws, replayed from its start for every candidate.

    Candidates (k, ε, attribute sets) are then compared on the same noise, so a search is not misled by
    the simulation's own randomness."""

    name = "replay"

    def __init__(self, source: SimulationRandomness) -> None:
        self._source = source
        self._buf = np.empty(0)
        self._pos = 0

    def rewind(self) -> None:
        self._pos = 0

    def laplace(self, size: int) -> np.ndarray:
        end = self._pos + size
        if end > self._buf.size:
            self._buf = np.concatenate([self._buf, self._source.laplace(end - self._buf.size)])
        out = self._buf[self._pos:end]
        self._pos = end
        return out


def _ratios(p: PreviewParams, rnd: _Replay) -> dict[str, float]:
    """Each attribute's expected released error over its constant release's (searches: no closed forms, common
    draws, :data:`_SEARCH_RUNS` runs); every n is declared when a search runs."""
    rnd.rewind()
    out = {}
    for name, held in _holders(p).items():
        error = _domain_error(p, name, held, runs=_SEARCH_RUNS, randomness=rnd)
        assert error is not None
        out[name] = error.ratio
    return out


def _fits(p: PreviewParams, threshold: float, rnd: _Replay) -> bool:
    return all(r < threshold for r in _ratios(p, rnd).values())


def _two_digits_up(x: float) -> Fraction:
    """The smallest number with two significant digits that is ≥ x (> 0)."""
    d = Decimal(repr(x))
    exp = d.adjusted() - 1
    q = Decimal(1).scaleb(exp)
    return Fraction((d / q).to_integral_value(rounding=ROUND_CEILING) * q)


def _previous_two_digits(x: Fraction) -> Fraction:
    """The next smaller number with two significant digits (x has two significant digits)."""
    d = Decimal(x.numerator) / Decimal(x.denominator)
    step = Decimal(1).scaleb(d.adjusted() - 1)
    if d - step < Decimal(10).scaleb(d.adjusted() - 1):  # 1.0 → 0.99
        step = step / 10
    return Fraction(d - step)


#: Largest factor the ε search tries above the configured ε.
_EPSILON_SEARCH_FACTOR = 2 ** 20


def _suggest_k(p: PreviewParams, threshold: float, rnd: _Replay) -> tuple[Optional[int], Optional[str]]:
    """The smallest k in [3, min n] that fits: a geometric scan (the error is not monotone in k: larger clusters
    have less noise but coarser centroids), then bisection below the first fitting k."""
    if get_mechanism(p.mechanism).fixed_k is not None:
        return None, f"mechanism {p.mechanism!r} fixes k, so no k is suggested"
    upper = min(o.n for o in p.owners if o.n is not None)
    previous, k = MIN_K - 1, MIN_K
    while True:
        if k <= upper and _fits(replace(p, k=k), threshold, rnd):
            break
        if k >= upper:
            return None, f"no k up to the smallest owner's record count n = {upper} suffices"
        previous, k = k, min(upper, k * 2)
    lo, hi = previous + 1, k  # previous does not fit (or is below 3); k fits
    while lo < hi:
        mid = (lo + hi) // 2
        if _fits(replace(p, k=mid), threshold, rnd):
            hi = mid
        else:
            lo = mid + 1
    return lo, None


def _suggest_epsilon(p: PreviewParams, threshold: float, rnd: _Replay) -> Optional[Fraction]:
    """The smallest ε with two significant digits that fits: doubling, bisection, then the two-digit grid."""
    lo, hi = p.epsilon, p.epsilon * 2
    while not _fits(replace(p, epsilon=hi), threshold, rnd):
        lo, hi = hi, hi * 2
        if hi > p.epsilon * _EPSILON_SEARCH_FACTOR:
            return None
    for _ in range(12):  # to about 0.02 % of ε
        mid = (lo + hi) / 2
        if _fits(replace(p, epsilon=mid), threshold, rnd):
            hi = mid
        else:
            lo = mid
    eps = _two_digits_up(float(hi))
    while not _fits(replace(p, epsilon=eps), threshold, rnd):  # the grid point above may still miss by noise
        eps = _two_digits_up(float(eps) * 1.005)
    while True:  # and down, while the grid point below fits too
        lower = _previous_two_digits(eps)
        if lower <= 0 or not _fits(replace(p, epsilon=lower), threshold, rnd):
            return eps
        eps = lower


def _suggest_keep(p: PreviewParams, threshold: float, rnd: _Replay) -> tuple[str, ...]:
    """Drop the attribute with the largest expected error relative to its constant release until all fit."""
    current = p
    while True:
        ratios = _ratios(current, rnd)
        if all(r < threshold for r in ratios.values()):
            return tuple(ratios)
        worst = max(ratios, key=lambda a: (ratios[a], a))
        owners = tuple(replace(o, attributes=tuple(a for a in o.attributes if a != worst)) for o in current.owners)
        owners = tuple(o for o in owners if o.attributes)
        if not owners:
            return ()
        current = replace(current, owners=owners, budgets=None)


def suggest(p: PreviewParams, threshold: float = DEFAULT_THRESHOLD, *,
            randomness: Optional[SimulationRandomness] = None,
            previews: Optional[Sequence[AttributePreview]] = None) -> Optional[Suggestions]:
    """What brings every attribute under ``threshold`` (None when none warns, or nothing could be simulated).

    Each suggestion changes one thing and keeps the rest, judged by simulation (:data:`_SEARCH_RUNS`
    runs per candidate, every candidate on the same CSPRNG draws): the smallest k in [3, min declared
    n] (a geometric scan, then bisection); the smallest ε with two significant digits (doubling,
    bisection, then the two-digit grid); the attributes to keep, dropping the attribute with the
    largest expected error relative to its constant release (ties: the later name) and recomputing
    the budgets until all fit. A release keeps needing at least two owners; the suggestion does not
    check that. Figures near the threshold are as uncertain as the simulation (its standard error is
    in each :class:`~fragrelease.idpir.preview_error.ErrorEstimate`).
    """
    p = replace(p, budgets=None)  # every variant recomputes its budgets from ε, the split and the order
    rnd = _Replay(randomness if randomness is not None else SecureSimulation())
    if previews is None:
        previews = attribute_previews(p, threshold, randomness=rnd)
    if not any(a.warn for a in previews):
        return None
    notes = []
    k, note = _suggest_k(p, threshold, rnd)
    if note:
        notes.append(note)
    eps = _suggest_epsilon(p, threshold, rnd)
    if eps is None:
        notes.append(f"no epsilon up to {_EPSILON_SEARCH_FACTOR} times the configured one suffices")
    keep = _suggest_keep(p, threshold, rnd)
    drop = tuple(a.attribute for a in previews if a.attribute not in keep)
    return Suggestions(k=k, epsilon=eps, keep=keep, drop=drop, notes=tuple(notes))
