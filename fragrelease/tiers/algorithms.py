"""Tier algorithms: BUA, TDA, PLSA and FLA over atoms (docs/specification.md §6, paper §3).

Source: W. Chang and J. Wu, "Strengthening Data Privacy During Propagation", SPME 2014, §3.
Every function groups *atoms* (the equivalence classes of its input table) and never splits one;
see :mod:`fragrelease.tiers` for the terms and formulas.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from fragrelease.errors import InvalidParameterError
from fragrelease.tiers.measures import _js_counts

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
    def from_arrays(x: np.ndarray, sensitive_codes: np.ndarray, values: Sequence, weights: np.ndarray) -> TableContext:
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
