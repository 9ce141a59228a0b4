"""COUNT-query workload over anonymized releases (Baig et al. (CIKM 2011) §7; docs/specification.md §5 "Evaluation").

Each query is ``COUNT(*) WHERE pred(A_1) AND … AND pred(A_d) AND S = s``; ``pred(A)`` selects a
random range covering a fraction θ (the *selection range*) of A's domain: a numeric interval of
width θ·(hi - lo) placed uniformly in the declared domain [lo, hi], or a run of
``max(1, round(θ·|leaves|))`` consecutive leaves of A's taxonomy in hierarchy order (siblings
adjacent), placed uniformly. The relative error is ``|act - est| / act``; queries with act = 0
are redrawn (the error is undefined for them).

Estimator from a release (this project's, documented in docs/publications.md). A release is cut
into groups g (a Mondrian equivalence class, or a cloning sub-class) with an expected number of
records w_g(s) of each sensitive value and a generalization per quasi-identifier; records are
assumed spread uniformly over the generalization and independently across attributes:
``est = Σ_g w_g(s) · Π_A p_A(g)``.

- Mondrian: ``w_g(s)`` = the class's count of s (exact); numeric ``p`` = the share of the integers of
  [min, max] inside the query interval; categorical ``p`` = the share of the generalized value's
  leaves selected.
- Cloning: ``w_g(s) = |g| · m_E(s) / |m_E|`` (the sub-class's size times the share of s in its class's
  published multiset); numeric ``p`` from the **indicative range** [lo, hi] as above (the η values
  nearest the average stand for the sub-class); categorical ``p`` from the lowest common ancestor.

Categorical ``p``: inside a generalized value the leaves are weighted by the release's own leaf
marginal π (records of groups published at leaf level, plus one per leaf), i.e.
``p = Σ_{leaf ∈ pred ∩ node} π(leaf) / Σ_{leaf ∈ node} π(leaf)``; a uniform split would spread
Adult's 90 % United-States records over 41 countries. π comes from the release only.
Numeric quasi-identifiers are taken to be integer-valued (Adult age).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from fragrelease.errors import InvalidParameterError
from fragrelease.taxonomy import QuasiIdentifier


@dataclass
class Queries:
    """A workload: per QI, numeric [lo, hi] bounds or a boolean leaf mask (Q x leaves); sensitive values."""

    numeric: dict[str, tuple[np.ndarray, np.ndarray]]
    categorical: dict[str, np.ndarray]
    sensitive: np.ndarray
    runs: dict[str, tuple[np.ndarray, np.ndarray]]  # categorical: first and last position in hierarchy order

    def __len__(self) -> int:
        return len(self.sensitive)

    def take(self, idx: np.ndarray) -> Queries:
        return Queries({k: (lo[idx], hi[idx]) for k, (lo, hi) in self.numeric.items()},
                       {k: m[idx] for k, m in self.categorical.items()}, self.sensitive[idx],
                       {k: (a[idx], b[idx]) for k, (a, b) in self.runs.items()})


def hierarchy_order(qi: QuasiIdentifier) -> np.ndarray:
    """Leaf ids of a taxonomy sorted by their root-ward path reversed, so siblings are adjacent."""
    t = qi.require_taxonomy()
    keys = [tuple(t.nodes[t.ancestor[leaf, h]] for h in range(t.depth, -1, -1)) for leaf in range(t.n_leaves)]
    return np.array(sorted(range(t.n_leaves), key=lambda i: keys[i]), dtype=np.int64)


def random_queries(qis: Sequence[QuasiIdentifier], sensitive_values: Sequence[str], *, theta: float, size: int,
                   generator: np.random.Generator) -> Queries:
    """``size`` random queries of selection range θ ∈ (0, 1] (module docstring)."""
    if not (0 < theta <= 1):
        raise InvalidParameterError(f"theta must be in (0, 1], not {theta!r}")
    numeric, categorical, runs = {}, {}, {}
    for q in qis:
        if q.kind == "numeric":
            lo, hi = q.require_domain()
            width = theta * (hi - lo)
            start: np.ndarray = generator.uniform(lo, hi - width, size)
            numeric[q.name] = (np.ceil(start), np.floor(start + width))
        else:
            order = hierarchy_order(q)
            n = len(order)
            run = max(1, int(round(theta * n)))
            start = generator.integers(0, n - run + 1, size)
            mask = np.zeros((size, q.require_taxonomy().n_leaves), dtype=bool)
            for off in range(run):
                mask[np.arange(size), order[start + off]] = True
            categorical[q.name] = mask
            runs[q.name] = (start, start + run - 1)
    sens = np.asarray(sensitive_values, dtype=object)[generator.integers(0, len(sensitive_values), size)]
    return Queries(numeric, categorical, sens, runs)


def actual_counts(df: pd.DataFrame, qis: Sequence[QuasiIdentifier], sensitive: str, queries: Queries) -> np.ndarray:
    """Exact answers on the original rows, shape (Q,).

    Every predicate is a range (numeric: integers of [lo, hi]; categorical: a run of leaves in
    hierarchy order), so the answers come from a prefix-sum cube over (QIs x sensitive value) by
    inclusion-exclusion over the 2^d corners.
    """
    dims, idx, lows, highs = [], [], [], []
    for q in qis:
        if q.kind == "numeric":
            lo, hi = (int(np.floor(q.require_domain()[0])), int(np.ceil(q.require_domain()[1])))
            dims.append(hi - lo + 1)
            idx.append(df[q.name].to_numpy(dtype=np.int64) - lo)
            qlo, qhi = queries.numeric[q.name]
            lows.append(np.clip(np.ceil(qlo).astype(np.int64) - lo, 0, hi - lo + 1))
            highs.append(np.clip(np.floor(qhi).astype(np.int64) - lo, -1, hi - lo))
        else:
            rank = np.empty(q.require_taxonomy().n_leaves, dtype=np.int64)
            rank[hierarchy_order(q)] = np.arange(q.require_taxonomy().n_leaves)
            dims.append(q.require_taxonomy().n_leaves)
            idx.append(rank[q.require_taxonomy().leaf_codes(df[q.name].astype(str).to_numpy())])
            a, b = queries.runs[q.name]
            lows.append(np.asarray(a, dtype=np.int64))
            highs.append(np.asarray(b, dtype=np.int64))
    values = sorted(set(df[sensitive].astype(str)) | set(map(str, queries.sensitive)))
    pos = {v: i for i, v in enumerate(values)}
    s_rows = np.array([pos[v] for v in df[sensitive].astype(str)], dtype=np.int64)
    s_q = np.array([pos[str(v)] for v in queries.sensitive], dtype=np.int64)
    cube = np.zeros([d + 1 for d in dims] + [len(values)], dtype=np.int64)
    np.add.at(cube, tuple(i + 1 for i in idx) + (s_rows,), 1)
    for ax in range(len(dims)):
        np.cumsum(cube, axis=ax, out=cube)
    out = np.zeros(len(queries), dtype=np.int64)
    d = len(dims)
    for corner in range(1 << d):
        sign = -1 if bin(corner).count("1") % 2 else 1
        at = tuple((lows[a] if corner >> a & 1 else highs[a] + 1) for a in range(d))
        out += sign * cube[at + (s_q,)]
    return out


@dataclass
class Groups:
    """Release groups for the estimator: weights (G x |S|), numeric ranges, categorical node ids."""

    weights: np.ndarray
    values: list
    numeric: dict[str, tuple[np.ndarray, np.ndarray]]
    categorical: dict[str, np.ndarray]


def mondrian_groups(release: pd.DataFrame, qis: Sequence[QuasiIdentifier], sensitive: str) -> Groups:
    """Groups of a Mondrian release (columns of :func:`fragrelease.publications.mondrian.mondrian_anonymize`)."""
    counts = pd.crosstab(release["eq_class"], release[sensitive].astype(str))
    first = release.groupby("eq_class").first().loc[counts.index]
    return Groups(counts.to_numpy(dtype=float), [str(c) for c in counts.columns],
                  {q.name: (first[f"{q.name}_lo"].to_numpy(float), first[f"{q.name}_hi"].to_numpy(float))
                   for q in qis if q.kind == "numeric"},
                  {q.name: np.array([q.require_taxonomy().node_id(v) for v in first[q.name]]) for q in qis
                   if q.kind == "categorical"})


def cloning_groups(release: pd.DataFrame, qis: Sequence[QuasiIdentifier], sensitive: str) -> Groups:
    """Groups (sub-classes) of a cloned release (columns of :func:`fragrelease.publications.cloning.cloning_anonymize`)."""
    first = release.groupby("sub_class").first()
    size = release.groupby("sub_class").size().loc[first.index].to_numpy(float)
    values = sorted({v for vs in first[f"{sensitive}_values"] for v in vs})
    pos = {v: i for i, v in enumerate(values)}
    w = np.zeros((len(first), len(values)))
    for g, (vs, cs) in enumerate(zip(first[f"{sensitive}_values"], first[f"{sensitive}_counts"])):
        tot = float(sum(cs))
        for v, c in zip(vs, cs):
            w[g, pos[v]] = size[g] * c / tot
    return Groups(w, values,
                  {q.name: (first[f"{q.name}_lo"].to_numpy(float), first[f"{q.name}_hi"].to_numpy(float))
                   for q in qis if q.kind == "numeric"},
                  {q.name: np.array([q.require_taxonomy().node_id(v) for v in first[q.name]]) for q in qis
                   if q.kind == "categorical"})


def estimate_counts(groups: Groups, qis: Sequence[QuasiIdentifier], queries: Queries, batch: int = 1000) -> np.ndarray:
    """Estimated answers ``Σ_g w_g(s) Π_A p_A(g)``, shape (Q,) (module docstring)."""
    pos = {v: i for i, v in enumerate(groups.values)}
    out = np.zeros(len(queries))
    size = groups.weights.sum(axis=1)
    pi = {}
    for q in qis:
        if q.kind == "categorical":
            nodes = groups.categorical[q.name]
            at_leaf = nodes < q.require_taxonomy().n_leaves
            pi[q.name] = 1.0 + np.bincount(nodes[at_leaf], weights=size[at_leaf], minlength=q.require_taxonomy().n_leaves)
    for b0 in range(0, len(queries), batch):
        sl = slice(b0, b0 + batch)
        cols = np.array([pos.get(str(s), -1) for s in queries.sensitive[sl]])
        w = np.where(cols[None, :] >= 0, groups.weights[:, np.maximum(cols, 0)], 0.0)  # G x B
        for q in qis:
            if q.kind == "numeric":
                glo, ghi = groups.numeric[q.name]
                qlo, qhi = queries.numeric[q.name]
                inside = np.minimum(ghi[:, None], qhi[None, sl]) - np.maximum(glo[:, None], qlo[None, sl]) + 1
                w *= np.clip(inside, 0, None) / (ghi - glo + 1)[:, None]
            else:
                member = q.require_taxonomy().member[groups.categorical[q.name]] * pi[q.name][None, :]  # G x leaves
                sel = queries.categorical[q.name][sl].astype(float)                        # B x leaves
                w *= (member @ sel.T) / member.sum(axis=1)[:, None]
        out[sl] = w.sum(axis=0)
    return out
