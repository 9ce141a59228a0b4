"""Tiered releases with increasing privacy along a propagation chain (docs/specification.md §6).

Source: W. Chang and J. Wu, "Strengthening Data Privacy During Propagation", SPME 2014.
A table ``T_0`` travels along a chain of ``l`` recipients; recipient
``v_i`` receives ``T_i``, a *sanitization* of ``T_{i-1}`` (every equivalence class of ``T_i`` is a
union of equivalence classes of ``T_{i-1}``), and ``P(T_i) < (l - i + 1)·δ``: the deepest tier gets
the strongest protection. Everything here is Spark-free; ``fragrelease.jobs.tiers`` applies it.

Terms and formulas (docs/specification.md §6, paper §2 and §5):

- quasi-identifiers ``A_1..A_{n-1}`` (numeric), sensitive attribute ``A_n``, weights ``w`` (Σ = 1);
- an equivalence class is a set of rows with identical quasi-identifier values;
- disclosure ``P(T) = max over classes of JS(p(table), p(class))`` over the sensitive values,
  Jensen–Shannon divergence with log base 2 (so ``P`` lies in [0, 1]);
- row distance ``d(t, t') = sqrt(Σ_k w_k (t[k] - t'[k])²)``; table distance = the sum of the row
  distances of the same rows (paper §2, ``U(T)``);
- sanitization replaces the quasi-identifiers of a class's members by the class mean;
- utility ``U(T') = d(T', T~)`` and utility loss ``UL = 1 - d(T', T~) / d(T, T~)`` where ``T~`` is
  the source table merged into one class (every row recoded to the table mean).

Class means are size-weighted, so every sanitization keeps the table mean: ``T~`` is the same for
every tier and can be computed from any tier. ``UL`` lies in [0, 1] and never decreases along a
chain (by the triangle inequality, merging classes cannot increase ``d(·, T~)``).

Internally the algorithms work on *atoms*: the equivalence classes of their input table. They only
ever group atoms, never split one, which is what makes the output a sanitization of the input (a
recipient cannot tell the members of a class apart, paper §3.2). Order-dependent choices are broken
by the atom's smallest row number (paper §4, Theorem 2), so the same input gives the same output.
In a release the row numbers are CSPRNG surrogates drawn once before ``T_1`` (docs/specification.md
§6): the tiers carry no linkage key back to the input, and the chain is deterministic given them.
A threshold at or above the disclosure of singleton classes is refused (:func:`refuse_loose_thresholds`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from .errors import DomainError, InvalidParameterError, SchemaMismatchError, ThresholdTooLooseError
from .rng import secure_random_keys

#: Algorithms a tier can be computed with (paper §3).
ALGORITHMS: tuple[str, ...] = ("bua", "tda", "fla")

#: Relative margin below which two utilities count as equal. Utilities are sums of floating-point
#: distances; Spark and numpy add them in different orders, so an exact comparison could break a
#: tie differently on the two paths. A tie goes to the coarser-looking default (see each caller).
UTILITY_TIE_RTOL = 1e-9

#: PLSA examines every combination of the per-value halves when at most this many sensitive values
#: have an ambiguous half; beyond it, each value's half closest to half its rows is taken.
PLSA_MAX_EXHAUSTIVE = 10


# --------------------------------------------------------------------------------------------------
# Formulas
# --------------------------------------------------------------------------------------------------

def js_divergence(p: Sequence[float] | np.ndarray, q: Sequence[float] | np.ndarray) -> float:
    """Jensen–Shannon divergence of two distributions over the same values, log base 2.

    ``JS(p, q) = ½ KL(p ‖ m) + ½ KL(q ‖ m)`` with ``m = (p + q) / 2``; ``0 · log 0 = 0``.

    Parameters
    ----------
    p, q : 1-D arrays of the same length, non-negative, each summing to 1 (counts are normalized).

    Returns
    -------
    float in [0, 1].

    Raises
    ------
    InvalidParameterError
        Different lengths, negative entries or an all-zero vector.

    References
    ----------
    docs/specification.md §6; Chang & Wu (SPME 2014) §2 (``P(T)``).
    """
    p = np.asarray(p, dtype=float)
    q = np.asarray(q, dtype=float)
    if p.shape != q.shape or p.ndim != 1:
        raise InvalidParameterError(f"distributions must be 1-D of the same length, not {p.shape} and {q.shape}")
    if (p < 0).any() or (q < 0).any() or p.sum() <= 0 or q.sum() <= 0:
        raise InvalidParameterError(f"distributions must be non-negative and non-zero, not {p.tolist()} and {q.tolist()}")
    return float(_js_rows(p / p.sum(), (q / q.sum())[None, :])[0])


def _js_rows(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """JS(p, q_r) for each row q_r of ``q`` (rows are distributions), log base 2."""
    m = (q + p[None, :]) / 2.0
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(p[None, :] > 0, p[None, :] * np.log2(p[None, :] / m), 0.0)
        b = np.where(q > 0, q * np.log2(q / m), 0.0)
    return np.clip(0.5 * a.sum(axis=1) + 0.5 * b.sum(axis=1), 0.0, 1.0)


def _js_counts(p: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """JS(p, counts_r / Σ counts_r) for each row of a (g, s) count matrix."""
    counts = np.atleast_2d(np.asarray(counts, dtype=float))
    return _js_rows(p, counts / counts.sum(axis=1, keepdims=True))


def disclosure(class_counts: np.ndarray, p: Optional[np.ndarray] = None) -> float:
    """``P(T)``: the largest JS divergence between a class's and the table's sensitive distribution.

    Parameters
    ----------
    class_counts : (classes, sensitive values) array of counts; row ``c`` counts the sensitive
        values of class ``c``.
    p : the table's distribution over the same values; default the column sums, normalized.

    Returns
    -------
    float in [0, 1].

    References
    ----------
    docs/specification.md §6; Chang & Wu (SPME 2014) §2.
    """
    counts = np.atleast_2d(np.asarray(class_counts, dtype=float))
    if p is None:
        p = counts.sum(axis=0) / counts.sum()
    return float(_js_counts(np.asarray(p, dtype=float), counts).max())


def weighted_distance(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, weights: Sequence[float]) -> float:
    """``d(t_i, t_j) = sqrt(Σ_k w_k (t_i[k] - t_j[k])²)`` (Chang & Wu (SPME 2014) §5; docs/specification.md §6)."""
    a, b, w = (np.asarray(x, dtype=float) for x in (a, b, weights))
    return float(np.sqrt(np.sum(w * (a - b) ** 2)))


def table_distance(x: np.ndarray, y: np.ndarray, weights: Sequence[float]) -> float:
    """Distance of two versions of the same rows: the sum of their row distances.

    ``x`` and ``y`` are (rows, quasi-identifiers) arrays with the rows in the same order.
    Source: Chang & Wu (SPME 2014) §2 (``U(T)`` sums the per-value distances over rows) and §5.
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    return float(np.sum(_row_norms(x - y, np.asarray(weights, dtype=float))))


def _row_norms(diff: np.ndarray, w: np.ndarray) -> np.ndarray:
    return np.sqrt(np.sum(w[None, :] * diff * diff, axis=1))


def utility(x: np.ndarray, weights: Sequence[float] | np.ndarray, mean: Optional[np.ndarray] = None) -> float:
    """``U(T') = d(T', T~)``: how far the rows are from the one-class table (Chang & Wu (SPME 2014) §2).

    ``mean`` is the table mean (the value every row takes in ``T~``); default the mean of ``x``.
    """
    x = np.asarray(x, dtype=float)
    mu = x.mean(axis=0) if mean is None else np.asarray(mean, dtype=float)
    return float(np.sum(_row_norms(x - mu[None, :], np.asarray(weights, dtype=float))))


def utility_loss(released: np.ndarray, source: np.ndarray, weights: Sequence[float]) -> float:
    """``UL = 1 - d(T', T~) / d(T, T~)`` with ``T~`` the source merged into one class.

    Parameters
    ----------
    released : (rows, quasi-identifiers) values of the sanitized table ``T'``.
    source : the same rows, same order, in the source table ``T``.
    weights : attribute weights (length = quasi-identifiers).

    Returns
    -------
    float: 0 for ``T' = T``, 1 for ``T' = T~``; 0 when every source row already equals the mean.

    References
    ----------
    docs/specification.md §6; Chang & Wu (SPME 2014) §5.
    """
    source = np.asarray(source, dtype=float)
    mu = source.mean(axis=0)
    base = utility(source, weights, mu)
    if base == 0:
        return 0.0
    return 1.0 - utility(released, weights, mu) / base


def class_means(x: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Each row's quasi-identifiers replaced by the mean of its class (``labels``: one per row)."""
    x = np.asarray(x, dtype=float)
    _, inv = np.unique(labels, return_inverse=True)
    sums = np.zeros((inv.max() + 1, x.shape[1]))
    np.add.at(sums, inv, x)
    sizes = np.bincount(inv).astype(float)
    return (sums / sizes[:, None])[inv]


def thresholds(delta, hops: int) -> list[Fraction]:
    """The chain's thresholds ``(l - i + 1)·δ`` for tiers ``i = 1..l`` (docs/specification.md §6), exact.

    Raises
    ------
    InvalidParameterError
        ``δ`` not a positive finite number or ``hops`` not an integer ≥ 1.
    """
    d = parse_delta(delta)
    if isinstance(hops, bool) or not isinstance(hops, (int, np.integer)) or hops < 1:
        raise InvalidParameterError(f"hops (chain length l) must be an integer >= 1, not {hops!r}")
    return [(hops - i + 1) * d for i in range(1, int(hops) + 1)]


def parse_delta(delta) -> Fraction:
    """δ as an exact positive Fraction (accepts ``0.05``, ``"0.05"``, ``"1/20"``).

    Raises
    ------
    InvalidParameterError
        Not a number, not finite, or ≤ 0.
    """
    try:
        if isinstance(delta, float) and not math.isfinite(delta):
            raise ValueError
        d = Fraction(str(delta)) if not isinstance(delta, Fraction) else delta
    except (ValueError, ZeroDivisionError, TypeError):
        raise InvalidParameterError(f"delta must be a positive number, not {delta!r}") from None
    if d <= 0:
        raise InvalidParameterError(f"delta must be > 0, not {delta!r}")
    return d


def singleton_disclosure(p: Sequence[float] | np.ndarray) -> float:
    """``P`` of the table in which every record is its own class: ``max_v JS(p, e_v)`` over present values.

    A class of one record with sensitive value ``v`` has the point distribution ``e_v``; because JS
    is convex in its second argument, no class of any table with the distribution ``p`` has a larger
    divergence, so ``P(T) ≤`` this value for every table (``T_0`` included).

    Parameters
    ----------
    p : the table's sensitive-value distribution (1-D, non-negative, non-zero; normalized here).

    Returns
    -------
    float in [0, 1]; 0 when the sensitive attribute has one value (0.493 on German Credit).

    Raises
    ------
    InvalidParameterError
        Negative entries or an all-zero vector.

    References
    ----------
    docs/specification.md §6 (the refusal of thresholds at or above it); Chang & Wu (SPME 2014) §2.
    """
    p = np.asarray(p, dtype=float)
    if p.ndim != 1 or (p < 0).any() or p.sum() <= 0:
        raise InvalidParameterError(f"a distribution must be 1-D, non-negative and non-zero, not {p.tolist()}")
    p = p / float(p.sum())
    present = np.flatnonzero(p > 0)
    return float(_js_rows(p, np.eye(len(p))[present]).max())


def refuse_loose_thresholds(ths: Sequence[Fraction], singleton: float) -> None:
    """Refuse a chain whose loosest threshold ``l·δ`` (tier 1) is not below the singleton disclosure.

    Every tier ``i`` needs ``(l - i + 1)·δ < singleton`` (:func:`singleton_disclosure`): at a
    threshold at or above it the input table may already satisfy ``P < θ`` (``P(T) ≤ singleton`` for
    every table), so the tier could equal ``T_0`` unchanged. The thresholds decrease with ``i``, so
    the check is on tier 1, i.e. on δ and the chain length together.

    Parameters
    ----------
    ths : the chain's thresholds, tier 1 first (:func:`thresholds`).
    singleton : the source's singleton disclosure, in [0, 1].

    Raises
    ------
    ThresholdTooLooseError
        Naming tier 1's threshold, the tiers affected and the singleton disclosure. The singleton
        disclosure is an aggregate of the data (it fixes the rarest sensitive value's share when
        there are two values): this error is shown to the operator only and is never written into
        any tier's provenance, manifest or log (the check runs before anything is committed).

    References
    ----------
    docs/specification.md §6.
    """
    bad = [i for i, th in enumerate(ths, start=1) if float(th) >= singleton]
    if not bad:
        return
    hops = len(ths)
    th = ths[0]
    which = "tier 1" if bad == [1] else f"tiers {bad[0]}..{bad[-1]}"
    raise ThresholdTooLooseError(
        f"tier 1's threshold l·δ = {float(th):g} (l = {hops}, δ = {float(th) / hops:g}) is at or above the "
        f"disclosure of singleton classes, {singleton:.4f} ({which} of {hops} affected): such a tier could equal "
        f"the source unchanged; choose δ < {singleton / hops:.4g} for l = {hops}",
        tier=1, threshold=th, singleton_disclosure=singleton)


def draw_surrogate_ids(n: int) -> np.ndarray:
    """``n`` distinct row ids drawn from the OS CSPRNG (:func:`fragrelease.rng.secure_random_keys`).

    Uniform in [0, 2**63), int64; redrawn in the (probability < n² / 2⁶⁴) event of a collision.
    Their order is a uniformly random permutation of the rows, so they carry nothing of the input's
    ids or row order (docs/specification.md §6).

    Raises
    ------
    InvalidParameterError
        ``n`` < 0.
    """
    while True:
        ids = secure_random_keys(n)
        if len(np.unique(ids)) == n:
            return ids


def with_surrogate_ids(pdf: pd.DataFrame, cols: "TierColumns") -> pd.DataFrame:
    """A copy of ``pdf`` whose row-id column holds CSPRNG surrogates (:func:`draw_surrogate_ids`).

    Row ``j`` of the copy is row ``j`` of ``pdf`` with a fresh id; the map from surrogates back to
    the input's ids is not returned or kept anywhere (docs/tiers.md, Limits).
    """
    out = pdf.copy()
    out[cols.row_id] = draw_surrogate_ids(len(out))
    return out


# --------------------------------------------------------------------------------------------------
# Table context and atoms
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TableContext:
    """Facts about a tier's *input* table that every per-class step needs.

    ``values``: the sensitive values, in a fixed order; ``p``: the table's distribution over them;
    ``weights``: the source's attribute weights (Σ = 1); ``ranges``: max - min of each
    quasi-identifier over the table (to normalize widths, Mondrian-style); ``mean``: the table mean
    (the value of every row in ``T~``). All are properties of the input table alone.
    """

    values: tuple
    p: np.ndarray
    weights: np.ndarray
    ranges: np.ndarray
    mean: np.ndarray

    @staticmethod
    def from_arrays(x: np.ndarray, sensitive_codes: np.ndarray, values: Sequence, weights: np.ndarray) -> "TableContext":
        counts = np.bincount(sensitive_codes, minlength=len(values)).astype(float)
        return TableContext(tuple(values), counts / counts.sum(), np.asarray(weights, dtype=float),
                            x.max(axis=0) - x.min(axis=0), x.mean(axis=0))


@dataclass
class Atoms:
    """Equivalence classes of an input table, ordered by their smallest row number.

    ``x`` (m, q) quasi-identifier values; ``counts`` (m, s) sensitive-value counts; ``size`` (m,)
    rows; ``first`` (m,) smallest row number; ``row_atom`` maps each input row to its atom.
    """

    x: np.ndarray
    counts: np.ndarray
    size: np.ndarray
    first: np.ndarray
    row_atom: np.ndarray


def build_atoms(x: np.ndarray, codes: np.ndarray, row_ids: np.ndarray, n_values: int) -> Atoms:
    """Group rows with identical quasi-identifiers into atoms (ordered by smallest row number)."""
    x = np.ascontiguousarray(x, dtype=float)
    if len(x) == 0:
        raise InvalidParameterError("a table to sanitize must have at least one row, not 0")
    key = pd.DataFrame(x).groupby(list(range(x.shape[1])), sort=False, dropna=False).ngroup().to_numpy()
    n_atoms = int(key.max()) + 1
    first = np.full(n_atoms, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, key, row_ids.astype(np.int64))
    order = np.argsort(first, kind="stable")
    rank = np.empty(n_atoms, dtype=np.int64)
    rank[order] = np.arange(n_atoms)
    row_atom = rank[key]
    counts = np.zeros((n_atoms, n_values), dtype=np.int64)
    np.add.at(counts, (row_atom, codes), 1)
    ax = np.zeros((n_atoms, x.shape[1]))
    ax[row_atom] = x
    return Atoms(np.ascontiguousarray(ax), counts, counts.sum(axis=1), first[order], row_atom)


def _group_mean(a: Atoms, idx: np.ndarray) -> np.ndarray:
    """Size-weighted mean of the atoms ``idx`` (the class mean of their rows)."""
    idx = np.sort(idx)
    w = a.size[idx].astype(float)
    return np.sum(a.x[idx] * w[:, None], axis=0) / w.sum()


def _group_utility(a: Atoms, groups: list[np.ndarray], ctx: TableContext) -> float:
    """Σ over groups of rows × distance of the group mean to the table mean (``U`` of the part)."""
    total = 0.0
    for g in sorted(groups, key=lambda g: a.first[g].min()):
        m = _group_mean(a, g)
        total += float(a.size[g].sum()) * math.sqrt(float(np.sum(ctx.weights * (m - ctx.mean) ** 2)))
    return total


def _p_of(a: Atoms, idx: np.ndarray, ctx: TableContext) -> float:
    return float(_js_counts(ctx.p, a.counts[idx].sum(axis=0)[None, :])[0])


def _order_key(g: np.ndarray, a: Atoms) -> int:
    return int(a.first[g].min())


# --------------------------------------------------------------------------------------------------
# TDA (paper §3.2, Algorithm 3)
# --------------------------------------------------------------------------------------------------

def _dimensions_by_width(a: Atoms, idx: np.ndarray, ctx: TableContext) -> list[int]:
    """Quasi-identifiers with a non-zero spread in ``idx``, widest normalized range first (ties by column)."""
    xs = a.x[idx]
    width = xs.max(axis=0) - xs.min(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        norm = np.where(ctx.ranges > 0, width / ctx.ranges, 0.0)
    return [int(k) for k in np.lexsort((np.arange(len(norm)), -norm)) if norm[k] > 0]


def tda_split(a: Atoms, idx: np.ndarray, ctx: TableContext, theta: float) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """One binary TDA split of the atoms ``idx``, or None when no split keeps both halves below θ.

    Mondrian-style (LeFevre et al. (ICDE 2006); docs/specification.md §6 and §8): the quasi-identifiers
    are tried widest normalized range first; on each, atoms are ordered by (value, smallest row number) and cut at the
    median row (the prefix whose row count is closest to half, ties to the shorter prefix). The first
    cut with ``P(T_1) < θ`` and ``P(T_2) < θ`` is taken. Source: Chang & Wu (SPME 2014) §3.2, Algorithm 3.
    """
    idx = np.sort(idx)
    if len(idx) < 2:
        return None
    n = float(a.size[idx].sum())
    for k in _dimensions_by_width(a, idx, ctx):
        order = idx[np.lexsort((a.first[idx], a.x[idx, k]))]
        cum = np.cumsum(a.size[order])[:-1]
        cut = int(np.argmin(np.abs(cum - n / 2.0))) + 1
        left, right = np.sort(order[:cut]), np.sort(order[cut:])
        if _p_of(a, left, ctx) < theta and _p_of(a, right, ctx) < theta:
            return left, right
    return None


def tda_phase1(a: Atoms, idx: np.ndarray, ctx: TableContext, theta: float) -> list[np.ndarray]:
    """TDA phase I: split ``idx`` top-down (binary) while both halves stay below θ.

    Returns the master classes (arrays of atom indices) ordered by smallest row number. Each
    node's split depends on that node's atoms only, so the result does not depend on the order in
    which nodes are processed (the Spark job processes them level by level). Source: Chang & Wu
    2014, §3.2, Algorithm 3 (phase I) and §3.3 (FLA's master classes).
    """
    todo, done = [np.sort(np.asarray(idx))], []
    while todo:
        node = todo.pop()
        split = tda_split(a, node, ctx, theta)
        if split is None:
            done.append(node)
        else:
            todo.extend(split)
    return sorted(done, key=lambda g: _order_key(g, a))


# --------------------------------------------------------------------------------------------------
# PLSA (paper §3.1, Algorithm 2)
# --------------------------------------------------------------------------------------------------

def _majority(a: Atoms) -> np.ndarray:
    """Each atom's most frequent sensitive value (ties to the value listed first)."""
    return np.argmax(a.counts, axis=1)


def plsa_split(a: Atoms, idx: np.ndarray, ctx: TableContext) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """Halve a class keeping each sensitive value's share (Chang & Wu (SPME 2014) §3.1, Algorithm 2).

    The tuples of each sensitive value ``a_i`` are ordered along the class's widest normalized
    quasi-identifier (ties by row number) and cut into a lower half ``S_{a_i}`` and an upper half
    ``S'_{a_i}``; ``T_1 = ∪ S_{a_i}``, ``T_2 = ∪ S'_{a_i}``. When a value's rows cannot be halved
    exactly, both cuts next to the middle are candidates, and the combination with the smallest
    ``max(P(T_1), P(T_2))`` is taken ("optimally combine"; exhaustive up to
    :data:`PLSA_MAX_EXHAUSTIVE` ambiguous values, ties to the earlier combination). Atoms holding
    several sensitive values (classes of an earlier tier) move as a whole with their majority value.
    Returns None when the class cannot be halved.
    """
    idx = np.sort(idx)
    if len(idx) < 2:
        return None
    dims = _dimensions_by_width(a, idx, ctx)
    major = _majority(a)[idx]
    lists, options = [], []
    for v in np.unique(major):
        members = idx[major == v]
        if dims:
            members = members[np.lexsort((a.first[members], a.x[members, dims[0]]))]
        cum = np.concatenate([[0], np.cumsum(a.size[members])])
        half = cum[-1] / 2.0
        lo = int(np.searchsorted(cum, half, side="right")) - 1  # largest prefix with rows <= half
        hi = int(np.searchsorted(cum, half, side="left"))       # smallest prefix with rows >= half
        lists.append(members)
        options.append(sorted({lo, hi}))
    ambiguous = [i for i, o in enumerate(options) if len(o) > 1]
    if len(ambiguous) > PLSA_MAX_EXHAUSTIVE:
        closest = []
        for members, o in zip(lists, options):
            half = a.size[members].sum() / 2.0
            cum = np.concatenate([[0], np.cumsum(a.size[members])])
            closest.append([min(o, key=lambda c: (abs(cum[c] - half), c))])
        options = closest
    # every combination of the per-value cuts, in lexicographic order (first value slowest)
    total = a.counts[idx].sum(axis=0).astype(float)
    left = np.zeros((1, a.counts.shape[1]))
    combos = np.zeros((1, 0), dtype=np.int64)
    for members, o in zip(lists, options):
        prefix = np.array([a.counts[members[:c]].sum(axis=0) for c in o], dtype=float)
        left = (left[:, None, :] + prefix[None, :, :]).reshape(-1, left.shape[1])
        combos = np.concatenate([np.repeat(combos, len(o), axis=0),
                                 np.tile(np.array(o, dtype=np.int64), len(combos))[:, None]], axis=1)
    right = total[None, :] - left
    valid = (left.sum(axis=1) > 0) & (right.sum(axis=1) > 0)
    if not valid.any():
        return None
    worst = np.full(len(left), np.inf)
    worst[valid] = np.maximum(_js_counts(ctx.p, left[valid]), _js_counts(ctx.p, right[valid]))
    combo = combos[int(np.argmin(worst))]
    lhalf = np.concatenate([m[:c] for m, c in zip(lists, combo)]).astype(np.int64)
    rhalf = np.concatenate([m[c:] for m, c in zip(lists, combo)]).astype(np.int64)
    return np.sort(lhalf), np.sort(rhalf)


def plsa(a: Atoms, groups: list[np.ndarray], ctx: TableContext, theta: float) -> list[np.ndarray]:
    """PLSA: split classes into smaller ones while both halves stay below θ.

    Source: Chang & Wu (SPME 2014) §3.1, Algorithm 2 (used as TDA phase II and after BUA).
    """
    todo, done = [np.sort(g) for g in groups][::-1], []
    while todo:
        g = todo.pop()
        split = plsa_split(a, g, ctx)
        if split is not None and _p_of(a, split[0], ctx) < theta and _p_of(a, split[1], ctx) < theta:
            todo.extend(split[::-1])
        else:
            done.append(g)
    return sorted(done, key=lambda g: _order_key(g, a))


def tda(a: Atoms, idx: np.ndarray, ctx: TableContext, theta: float) -> list[np.ndarray]:
    """TDA: phase I (binary top-down splits) then PLSA on each class (Chang & Wu (SPME 2014) §3.2, Algorithm 3)."""
    return plsa(a, tda_phase1(a, idx, ctx, theta), ctx, theta)


# --------------------------------------------------------------------------------------------------
# BUA (paper §3.1, Algorithm 1)
# --------------------------------------------------------------------------------------------------

def _largest_remainder(total: int, weights: np.ndarray) -> np.ndarray:
    """Integer quotas summing to ``total``, proportional to ``weights`` (ties to the lower index)."""
    if weights.sum() == 0:
        return np.zeros(len(weights), dtype=np.int64)
    exact = total * weights / weights.sum()
    quota = np.floor(exact).astype(np.int64)
    rest = total - int(quota.sum())
    order = np.lexsort((np.arange(len(weights)), -(exact - quota)))
    quota[order[:rest]] += 1
    return quota


def bua(a: Atoms, idx: np.ndarray, ctx: TableContext, theta: float) -> list[np.ndarray]:
    """BUA: sensitive-value-dominated groups merged bottom-up until every group is below θ, then PLSA.

    Source: Chang & Wu (SPME 2014) §3.1, Algorithm 1. Reading implemented (deterministic; atoms are taken
    by smallest row number, distances are the weighted distance of docs/specification.md §6):

    Phase I. Let ``G`` be the number of atoms of the rarest sensitive value present (an atom's value
    is its majority value). Each of them seeds a basic group, and takes, for every other value, the
    nearest not yet grouped atom of that value, so each value occurs once per basic group. The ``G``
    groups get dominating values in proportion to how many atoms of each value remain (largest
    remainder); a group gets the value whose nearest remaining atom is closest to the group's mean,
    smallest distances first. Every remaining atom then joins the nearest group dominated by its
    value (the nearest group overall if no group is). With one value present, each atom is a group.

    Phase II. While some group has ``P ≥ θ``, the group with the largest ``P`` (ties: smallest row
    number) merges with the nearest group (by mean) whose union lowers its ``P``; if no union
    lowers it, with the nearest group. Each merge removes a group, so the loop ends (at worst with
    one group, ``P = 0``). Phase III. PLSA (Algorithm 2) on the groups.
    """
    idx = np.sort(np.asarray(idx))
    w = ctx.weights
    label = _majority(a)
    present = [v for v in range(a.counts.shape[1]) if (label[idx] == v).any()]
    if len(present) < 2:
        groups = [np.array([i]) for i in idx]
    else:
        per_value = {v: idx[label[idx] == v] for v in present}
        rare = min(present, key=lambda v: (len(per_value[v]), v))
        seeds = per_value[rare]
        members: list[list[int]] = [[int(s)] for s in seeds]
        free = {v: np.ones(len(per_value[v]), dtype=bool) for v in present if v != rare}
        for gi, s in enumerate(seeds):
            for v in present:
                if v == rare:
                    continue
                cand = per_value[v]
                d = np.where(free[v], np.sum(w * (a.x[cand] - a.x[s]) ** 2, axis=1), np.inf)
                j = int(np.argmin(d))  # candidates are in row order, so ties go to the smaller row
                free[v][j] = False
                members[gi].append(int(cand[j]))
        remaining = {v: per_value[v][free[v]] for v in free}
        n_left = np.array([len(remaining.get(v, [])) for v in present], dtype=float)
        if n_left.sum() > 0:
            centroids = np.array([_group_mean(a, np.array(m)) for m in members])
            quota = dict(zip(present, _largest_remainder(len(members), n_left)))
            dist = np.full((len(members), len(present)), np.inf)
            for j, v in enumerate(present):
                rem = remaining.get(v)
                if rem is not None and len(rem):
                    diff = centroids[:, None, :] - a.x[rem][None, :, :]
                    dist[:, j] = np.sqrt(np.min(np.sum(w * diff * diff, axis=2), axis=1))
            dominant = np.full(len(members), -1)
            flat = np.lexsort((np.tile(np.arange(len(present)), len(members)),
                               np.repeat(np.arange(len(members)), len(present)), dist.ravel()))
            for f in flat:
                gi, j = divmod(int(f), len(present))
                if dominant[gi] < 0 and quota[present[j]] > 0 and np.isfinite(dist[gi, j]):
                    dominant[gi] = present[j]
                    quota[present[j]] -= 1
            rest = np.sort(np.concatenate([r for r in remaining.values() if len(r)]))
            for atom in rest:
                d = np.sum(w * (centroids - a.x[atom]) ** 2, axis=1)
                mine = dominant == label[atom]
                if mine.any():
                    d = np.where(mine, d, np.inf)
                members[int(np.argmin(d))].append(int(atom))
        groups = [np.sort(np.array(m, dtype=np.int64)) for m in members]
    groups = _bua_merge(a, groups, ctx, theta)
    return plsa(a, groups, ctx, theta)


def _bua_merge(a: Atoms, groups: list[np.ndarray], ctx: TableContext, theta: float) -> list[np.ndarray]:
    """BUA phase II (Chang & Wu (SPME 2014) §3.1, Algorithm 1): merge groups until all have ``P < θ``."""
    groups = sorted(groups, key=lambda g: _order_key(g, a))
    counts = np.array([a.counts[g].sum(axis=0) for g in groups], dtype=float)
    sizes = np.array([a.size[g].sum() for g in groups], dtype=float)
    sums = np.array([np.sum(a.x[g] * a.size[g][:, None].astype(float), axis=0) for g in groups])
    first = np.array([_order_key(g, a) for g in groups])
    alive = np.ones(len(groups), dtype=bool)
    members = [list(g) for g in groups]
    pg = _js_counts(ctx.p, counts)
    w = ctx.weights
    while True:
        bad = alive & (pg >= theta)
        if not bad.any():
            break
        cand = np.flatnonzero(bad)
        i = int(cand[np.lexsort((first[cand], -pg[cand]))[0]])
        others = np.flatnonzero(alive & (np.arange(len(groups)) != i))
        if len(others) == 0:  # one group left: P = 0 < θ, cannot happen; guard anyway
            break
        ci = sums[i] / sizes[i]
        d = np.sum(w * (sums[others] / sizes[others][:, None] - ci) ** 2, axis=1)
        order = others[np.lexsort((first[others], d))]
        union_p = _js_counts(ctx.p, counts[order] + counts[i][None, :])
        better = np.flatnonzero(union_p < pg[i])
        j = int(order[better[0]]) if len(better) else int(order[0])
        keep, drop = (i, j) if first[i] < first[j] else (j, i)
        counts[keep] += counts[drop]
        sizes[keep] += sizes[drop]
        sums[keep] += sums[drop]
        members[keep].extend(members[drop])
        alive[drop] = False
        pg[keep] = _js_counts(ctx.p, counts[keep][None, :])[0]
        pg[drop] = 0.0
    return [np.sort(np.array(members[g], dtype=np.int64)) for g in np.flatnonzero(alive)]


# --------------------------------------------------------------------------------------------------
# FLA (paper §3.3)
# --------------------------------------------------------------------------------------------------

def prefer_first(u_first: float, u_second: float) -> bool:
    """True when ``u_first`` is greater than ``u_second`` beyond :data:`UTILITY_TIE_RTOL`."""
    return u_first > u_second + UTILITY_TIE_RTOL * max(abs(u_first), abs(u_second), 1e-300)


def fla_tree(a: Atoms, idx: np.ndarray, ctx: TableContext, theta: float, reading: str = "tree") -> list[np.ndarray]:
    """One FLA sanitization of the atoms ``idx`` at threshold θ (Chang & Wu (SPME 2014) §3.3, Fig. 3(a)).

    FLA runs TDA phase I (binary splits while both halves stay below θ) and, within classes that
    meet the level, keeps whichever of BUA or TDA's continuation preserves more utility ``U``.

    ``reading="tree"`` (default): the comparison is made at every node of the phase-I tree, bottom
    up, as Fig. 3(a) does at S1, S3 and S4, which are inner nodes: a leaf (master class) keeps the
    better of BUA and PLSA (TDA phase II); an inner node keeps the better of BUA on the whole node
    and the union of its children's choices. The root is a node too, so one FLA step keeps at least
    the utility of BUA and of TDA on the same input (up to :data:`UTILITY_TIE_RTOL`).
    ``reading="leaves"``: the comparison is made only in the master classes (the narrower
    reading of the paper's text, docs/specification.md §6). Ties go to TDA's side.
    """
    if reading not in ("tree", "leaves"):
        raise InvalidParameterError(f"FLA reading must be 'tree' or 'leaves', not {reading!r}")
    idx = np.sort(np.asarray(idx))
    split = tda_split(a, idx, ctx, theta)
    if split is None:
        below = plsa(a, [idx], ctx, theta)
    else:
        below = fla_tree(a, split[0], ctx, theta, reading) + fla_tree(a, split[1], ctx, theta, reading)
        if reading == "leaves":
            return sorted(below, key=lambda g: _order_key(g, a))
    alternative = bua(a, idx, ctx, theta)
    if prefer_first(_group_utility(a, alternative, ctx), _group_utility(a, below, ctx)):
        return alternative
    return sorted(below, key=lambda g: _order_key(g, a))


#: Nodes with more rows than this are split by TDA phase I without considering BUA (and, when no
#: split is possible, finished by PLSA): it bounds BUA's quadratic work and the rows one Spark task
#: holds beyond the first levels. German Credit (1,000 rows) never reaches it.
DEFAULT_MAX_NODE_ROWS = 20_000


def solve(a: Atoms, idx: np.ndarray, ctx: TableContext, theta: float, algorithm: str,
          max_node_rows: int = DEFAULT_MAX_NODE_ROWS, reading: str = "tree") -> list[np.ndarray]:
    """The classes (arrays of atom indices) of one sanitization of ``idx`` at θ with ``algorithm``.

    ``bua`` runs on the whole of ``idx``. ``tda`` and ``fla`` first split nodes with more than
    ``max_node_rows`` rows by TDA phase I (a node that cannot be split is finished by PLSA), then
    solve each smaller node whole (:func:`tda` or :func:`fla_tree`). For ``tda`` the result does not
    depend on ``max_node_rows``. The Spark job follows exactly this recursion, one level per pass.
    """
    if algorithm == "bua":
        return bua(a, idx, ctx, theta)
    if algorithm not in ALGORITHMS:
        raise InvalidParameterError(f"algorithm must be one of {list(ALGORITHMS)}, not {algorithm!r}")
    idx = np.sort(np.asarray(idx))
    if a.size[idx].sum() > max_node_rows:
        split = tda_split(a, idx, ctx, theta)
        if split is None:
            return plsa(a, [idx], ctx, theta)
        out = (solve(a, split[0], ctx, theta, algorithm, max_node_rows, reading)
               + solve(a, split[1], ctx, theta, algorithm, max_node_rows, reading))
        return sorted(out, key=lambda g: _order_key(g, a))
    if algorithm == "tda":
        return tda(a, idx, ctx, theta)
    return fla_tree(a, idx, ctx, theta, reading)


def fla_choose(u_strict: float, u_current: float, u_next: float) -> bool:
    """FLA's look-ahead: publish the stricter table when ``2·U(T_1) > U(T_2) + U(T_3)``.

    ``u_strict`` = U(T_1) (sanitized at the next hop's threshold), ``u_current`` = U(T_2) (at this
    hop's), ``u_next`` = U(T_3) (T_2 sanitized at the next hop's). Ties go to ``T_2``.
    Source: Chang & Wu (SPME 2014) §3.3 (Fig. 3(b)).
    """
    return prefer_first(2.0 * u_strict, u_current + u_next)


# --------------------------------------------------------------------------------------------------
# Tables (pandas) and chains
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TierColumns:
    """Which columns of a table play which role.

    ``quasi_identifiers``: numeric columns; ``sensitive``: the sensitive attribute; ``row_id``: the
    row number (unique integers: the paper's row numbers, which break ties; :func:`run_chain` and
    the Spark job replace the input's values by CSPRNG surrogates before ``T_1``, and the tiers
    carry only those); ``weights``: one per quasi-identifier, Σ = 1.
    """

    quasi_identifiers: tuple[str, ...]
    sensitive: str
    row_id: str
    weights: tuple[float, ...]

    @staticmethod
    def make(quasi_identifiers: Sequence[str], sensitive: str, row_id: str,
             weights: Optional[Sequence[float]] = None) -> "TierColumns":
        """Validated columns; ``weights`` default uniform, otherwise normalized to sum 1.

        Raises
        ------
        InvalidParameterError
            No quasi-identifier, duplicates, the sensitive or row-id column among them, a weight
            count that differs, or negative / non-finite / all-zero weights.
        """
        qi = tuple(quasi_identifiers)
        if not qi:
            raise InvalidParameterError("at least one quasi-identifier is needed, not none")
        if len(set(qi)) != len(qi):
            raise InvalidParameterError(f"quasi-identifiers must be distinct, not {list(qi)}")
        for col in (sensitive, row_id):
            if col in qi:
                raise InvalidParameterError(f"column {col!r} cannot be both a quasi-identifier and the sensitive/row-id column")
        if sensitive == row_id:
            raise InvalidParameterError(f"the sensitive attribute and the row id must differ, not both {sensitive!r}")
        if weights is None:
            w = np.full(len(qi), 1.0 / len(qi))
        else:
            w = np.asarray(list(weights), dtype=float)
            if w.shape != (len(qi),):
                raise InvalidParameterError(f"need one weight per quasi-identifier ({len(qi)}), not {len(w)}")
            if not np.isfinite(w).all() or (w < 0).any() or w.sum() <= 0:
                raise InvalidParameterError(f"weights must be finite, >= 0 and not all 0, not {w.tolist()}")
            w = w / w.sum()
        return TierColumns(qi, sensitive, row_id, tuple(float(v) for v in w))


def validate_table(pdf: pd.DataFrame, cols: TierColumns) -> None:
    """Check a pandas table for a tier chain.

    Raises
    ------
    SchemaMismatchError
        A named column is missing, or a quasi-identifier is not numeric.
    DomainError
        Nulls or non-finite values in a used column, or duplicate row ids.
    """
    for c in (*cols.quasi_identifiers, cols.sensitive, cols.row_id):
        if c not in pdf.columns:
            raise SchemaMismatchError(f"column {c!r} is not in the table (columns: {list(pdf.columns)})")
    for c in cols.quasi_identifiers:
        if not pd.api.types.is_numeric_dtype(pdf[c]) or pd.api.types.is_bool_dtype(pdf[c]):
            raise SchemaMismatchError(f"quasi-identifier {c!r} must be numeric, not {pdf[c].dtype}")
    for c in (*cols.quasi_identifiers, cols.sensitive, cols.row_id):
        n_null = int(pdf[c].isna().sum())
        if n_null:
            raise DomainError(f"column {c!r} has {n_null} null value(s)")
    x = pdf[list(cols.quasi_identifiers)].to_numpy(float)
    if not np.isfinite(x).all():
        bad = [c for c in cols.quasi_identifiers if not np.isfinite(pdf[c].to_numpy(float)).all()]
        raise DomainError(f"quasi-identifier(s) {bad} have non-finite values")
    if not pd.api.types.is_integer_dtype(pdf[cols.row_id]):
        raise SchemaMismatchError(f"row id {cols.row_id!r} must be integer, not {pdf[cols.row_id].dtype}")
    if pdf[cols.row_id].duplicated().any():
        raise DomainError(f"row id {cols.row_id!r} has duplicate values")


def sensitive_values(series: pd.Series) -> tuple:
    """The sensitive attribute's distinct values in a fixed order (sorted by their string form)."""
    return tuple(sorted(pd.unique(series).tolist(), key=lambda v: (str(type(v)), str(v))))


def standardize(pdf: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """Copy of ``pdf`` with ``columns`` as z-scores (population standard deviation; constant columns → 0).

    The experiment's preprocessing (docs/specification.md §6: German Credit attributes standardized).
    """
    out = pdf.copy()
    for c in columns:
        v = out[c].to_numpy(float)
        mu, sd = float(np.mean(v)), float(np.std(v))
        out[c] = (v - mu) / sd if sd > 0 else np.zeros(len(v))
    return out


def table_context(pdf: pd.DataFrame, cols: TierColumns, values: tuple) -> TableContext:
    """The :class:`TableContext` of a pandas table (the pure-python reference path)."""
    x = pdf[list(cols.quasi_identifiers)].to_numpy(float)
    return TableContext.from_arrays(x, encode_sensitive(pdf[cols.sensitive], values), values, np.array(cols.weights))


def encode_sensitive(series: pd.Series, values: tuple) -> np.ndarray:
    """Sensitive values as indices into ``values``.

    Raises
    ------
    DomainError
        A value that is not in ``values``.
    """
    index = {v: i for i, v in enumerate(values)}
    try:
        return np.array([index[v] for v in series.tolist()], dtype=np.int64)
    except KeyError as exc:
        raise DomainError(f"sensitive value {exc.args[0]!r} is not among the table's values {list(values)}") from None


def _atoms_of(pdf: pd.DataFrame, cols: TierColumns, ctx: TableContext) -> tuple[pd.DataFrame, Atoms]:
    pdf = pdf.sort_values(cols.row_id, kind="stable").reset_index(drop=True)
    x = pdf[list(cols.quasi_identifiers)].to_numpy(float)
    codes = encode_sensitive(pdf[cols.sensitive], ctx.values)
    return pdf, build_atoms(x, codes, pdf[cols.row_id].to_numpy(), len(ctx.values))


def _recoded(pdf: pd.DataFrame, a: Atoms, groups: list[np.ndarray], cols: TierColumns) -> pd.DataFrame:
    atom_group = np.empty(len(a.size), dtype=np.int64)
    for gi, g in enumerate(groups):
        atom_group[g] = gi
    means = np.array([_group_mean(a, g) for g in groups])
    recoded = means[atom_group[a.row_atom]]
    out = pdf.copy()
    for k, c in enumerate(cols.quasi_identifiers):
        out[c] = recoded[:, k]
    return out


def sanitize_rows(pdf: pd.DataFrame, cols: TierColumns, ctx: TableContext, theta: float, algorithm: str,
                  max_node_rows: int = DEFAULT_MAX_NODE_ROWS, reading: str = "tree") -> pd.DataFrame:
    """Sanitize ``pdf`` (a whole table, or one node of its phase-I tree) at θ: one call of :func:`solve`.

    Parameters
    ----------
    pdf : rows with the columns of ``cols`` (quasi-identifiers numeric, no nulls).
    ctx : the :class:`TableContext` of the *whole* input table.
    theta : the threshold, in (0, 1]; classes of the output have ``P < θ``.
    algorithm : ``bua``, ``tda`` or ``fla`` (one FLA step, without the look-ahead).

    Returns
    -------
    ``pdf`` sorted by row id, quasi-identifiers replaced by their class means (float64).
    """
    pdf, a = _atoms_of(pdf, cols, ctx)
    groups = solve(a, np.arange(len(a.size)), ctx, theta, algorithm, max_node_rows, reading)
    return _recoded(pdf, a, groups, cols)


def node_step(pdf: pd.DataFrame, cols: TierColumns, ctx: TableContext, theta: float, algorithm: str,
              max_node_rows: int = DEFAULT_MAX_NODE_ROWS, reading: str = "tree") -> tuple[pd.DataFrame, bool]:
    """One step of :func:`solve` on the rows of one node, as the Spark job runs it per group.

    A node with more than ``max_node_rows`` rows (never for ``bua``) is split once by TDA phase I:
    the rows come back with a ``node`` column (smallest row number of their half) and ``False``;
    if it cannot be split, it is finished by PLSA. Any other node is solved whole. Finished rows
    come back recoded (quasi-identifiers = class means) with ``True``.
    """
    pdf, a = _atoms_of(pdf, cols, ctx)
    everything = np.arange(len(a.size))
    if algorithm != "bua" and a.size.sum() > max_node_rows:
        split = tda_split(a, everything, ctx, theta)
        if split is None:
            return _recoded(pdf, a, plsa(a, [everything], ctx, theta), cols), True
        atom_node = np.empty(len(a.size), dtype=np.int64)
        for half in split:
            atom_node[half] = int(a.first[half].min())
        out = pdf.copy()
        out["node"] = atom_node[a.row_atom]
        return out, False
    groups = solve(a, everything, ctx, theta, algorithm, max_node_rows, reading)
    return _recoded(pdf, a, groups, cols), True


@dataclass(frozen=True)
class Tier:
    """One tier of a chain: the table, its threshold, its disclosure and its utility loss."""

    index: int
    threshold: Fraction
    table: pd.DataFrame
    disclosure: float
    utility_loss: float


def table_disclosure(pdf: pd.DataFrame, cols: TierColumns, values: Optional[tuple] = None) -> float:
    """``P(T)`` of a pandas table, classes = rows with identical quasi-identifiers (docs/specification.md §6)."""
    values = values or sensitive_values(pdf[cols.sensitive])
    codes = encode_sensitive(pdf[cols.sensitive], values)
    x = pdf[list(cols.quasi_identifiers)].to_numpy(float)
    key = pd.DataFrame(x).groupby(list(range(x.shape[1])), sort=False).ngroup().to_numpy()
    counts = np.zeros((key.max() + 1, len(values)))
    np.add.at(counts, (key, codes), 1)
    return disclosure(counts)


def sanitize(pdf: pd.DataFrame, cols: TierColumns, theta: float, algorithm: str,
             next_theta: Optional[float] = None, values: Optional[tuple] = None,
             max_node_rows: int = DEFAULT_MAX_NODE_ROWS, reading: str = "tree") -> pd.DataFrame:
    """One hop: sanitize ``pdf`` (the previous tier) so that ``P < θ``.

    For ``fla`` with ``next_theta`` (every hop but the last) the look-ahead of §3.3 is applied:
    ``T_1 = step(T, θ_next)``, ``T_2 = step(T, θ)``, ``T_3 = step(T_2, θ_next)``; the output is
    ``T_1`` when ``2·U(T_1) > U(T_2) + U(T_3)``, else ``T_2``. ``bua`` and ``tda`` ignore
    ``next_theta``. Columns in = columns out (quasi-identifiers as float64), rows sorted by row id.
    Source: Chang & Wu (SPME 2014) §3.1–3.3.
    """
    values = values or sensitive_values(pdf[cols.sensitive])
    pdf = pdf.sort_values(cols.row_id, kind="stable").reset_index(drop=True)
    pdf = pdf.astype({c: float for c in cols.quasi_identifiers})
    ctx = table_context(pdf, cols, values)
    if algorithm not in ALGORITHMS:
        raise InvalidParameterError(f"algorithm must be one of {list(ALGORITHMS)}, not {algorithm!r}")
    if algorithm != "fla" or next_theta is None:
        return sanitize_rows(pdf, cols, ctx, theta, algorithm, max_node_rows, reading)
    qi = list(cols.quasi_identifiers)
    strict = sanitize_rows(pdf, cols, ctx, next_theta, "fla", max_node_rows, reading)
    current = sanitize_rows(pdf, cols, ctx, theta, "fla", max_node_rows, reading)
    ctx_current = table_context(current, cols, values)
    following = sanitize_rows(current, cols, ctx_current, next_theta, "fla", max_node_rows, reading)
    w = ctx.weights
    u = [utility(t[qi].to_numpy(float), w, ctx.mean) for t in (strict, current, following)]
    return strict if fla_choose(*u) else current


def run_chain(source: pd.DataFrame, cols: TierColumns, delta, hops: int, algorithm: str = "fla", *,
              max_node_rows: int = DEFAULT_MAX_NODE_ROWS, reading: str = "tree",
              surrogate_ids: bool = True) -> list[Tier]:
    """Tiers ``T_1..T_l`` of ``source`` with ``P(T_i) < (l - i + 1)·δ``, each computed from ``T_{i-1}`` only.

    Before ``T_1`` the row ids are replaced by CSPRNG surrogates (:func:`with_surrogate_ids`), so no
    tier carries a linkage key back to the input; the chain is then deterministic given those
    surrogates (ties go to the smallest surrogate, a random row order). ``surrogate_ids=False``
    keeps the input's ids and so the paper's tie order: for tests and the reproducible evaluation
    only, never for a release (the Spark job :mod:`fragrelease.jobs.tiers` has no such switch).

    Parameters
    ----------
    source : ``T_0`` with the columns of ``cols`` (others are dropped).
    delta : δ > 0 (number or string such as ``"1/20"``); hops : l ≥ 1; ``l·δ`` must be below the
        source's :func:`singleton_disclosure`.
    algorithm : ``bua``, ``tda`` or ``fla``.
    max_node_rows, reading : see :func:`solve` and :func:`fla_tree`.

    Returns
    -------
    list of :class:`Tier`; ``utility_loss`` relative to the source (docs/specification.md §6).

    Raises
    ------
    ThresholdTooLooseError
        ``l·δ`` at or above the singleton disclosure (:func:`refuse_loose_thresholds`).
    InvalidParameterError, SchemaMismatchError, DomainError
        Bad δ, hops, algorithm, columns or values (see :func:`validate_table`).
    """
    ths = thresholds(delta, hops)
    if algorithm not in ALGORITHMS:
        raise InvalidParameterError(f"algorithm must be one of {list(ALGORITHMS)}, not {algorithm!r}")
    validate_table(source, cols)
    keep = [cols.row_id, *cols.quasi_identifiers, cols.sensitive]
    prev = source[keep]
    values = sensitive_values(prev[cols.sensitive])
    # the singleton disclosure is computed from the data: the refusal is for the caller only
    refuse_loose_thresholds(ths, singleton_disclosure(table_context(prev, cols, values).p))
    if surrogate_ids:
        prev = with_surrogate_ids(prev, cols)  # before T_1: no tier carries the input's ids
    prev = prev.sort_values(cols.row_id, kind="stable").reset_index(drop=True)
    prev = prev.astype({c: float for c in cols.quasi_identifiers})
    x0 = prev[list(cols.quasi_identifiers)].to_numpy(float)
    tiers = []
    for i, th in enumerate(ths, start=1):
        nxt = float(ths[i]) if i < len(ths) else None
        table = sanitize(prev, cols, float(th), algorithm, nxt, values, max_node_rows, reading)
        p = table_disclosure(table, cols, values)
        ul = utility_loss(table[list(cols.quasi_identifiers)].to_numpy(float), x0, cols.weights)
        tiers.append(Tier(i, th, table, p, ul))
        prev = table
    return tiers


def is_sanitization(previous: pd.DataFrame, current: pd.DataFrame, cols: TierColumns) -> bool:
    """True when every equivalence class of ``current`` is a union of classes of ``previous``.

    Rows are matched by row id; classes are rows with identical quasi-identifiers.
    """
    qi = list(cols.quasi_identifiers)
    a = previous.sort_values(cols.row_id).reset_index(drop=True)
    b = current.sort_values(cols.row_id).reset_index(drop=True)
    if not np.array_equal(a[cols.row_id].to_numpy(), b[cols.row_id].to_numpy()):
        return False
    ka = a[qi].groupby(qi, sort=False).ngroup().to_numpy()
    kb = b[qi].groupby(qi, sort=False).ngroup().to_numpy()
    # each previous class must map to exactly one current class
    pairs = pd.DataFrame({"a": ka, "b": kb}).drop_duplicates()
    return not pairs["a"].duplicated().any()
