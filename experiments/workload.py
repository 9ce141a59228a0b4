"""COUNT-query workload over anonymized releases (Baig et al. (CIKM 2011) §7; docs/specification.md §5 "Evaluation").

Evaluation only (not the release path). Each query is ``COUNT(*) WHERE pred(A_1) AND … AND pred(A_d)
AND S = s``; ``pred(A)`` selects a random range covering a fraction θ (the *selection range*) of A's
domain: a numeric interval of width θ·(hi - lo) placed uniformly in the declared domain [lo, hi], or
a run of ``max(1, round(θ·|leaves|))`` consecutive leaves of A's taxonomy in hierarchy order
(siblings adjacent), placed uniformly. The relative error is ``|act - est| / act``; queries with
act = 0 are redrawn (the error is undefined for them).

Estimators from a release (this project's; docs/publications.md "COUNT-query workload"). A release
is cut into groups g (a Mondrian equivalence class, or a cloning sub-class) with an expected number
of records w_g(s) of each sensitive value and a generalization per quasi-identifier; records are
assumed spread uniformly over the generalization and independently across attributes:
``est = Σ_g w_g(s) · Π_A p_A(g)``.

- Mondrian: ``w_g(s)`` = the class's count of s (exact); numeric ``p`` = the share of the integers of
  [min, max] inside the query interval.
- Cloning: ``w_g(s) = |g| · m_E(s) / |m_E|`` (the sub-class's size times the share of s in its class's
  published multiset); numeric ``p`` from the sub-class's range (``numeric`` below).

``categorical`` (how a generalized value's records spread over its leaves):

- ``"uniform"`` (the default): every leaf under the generalized value counts the same,
  ``p = |pred ∩ leaves(node)| / |leaves(node)|``;
- ``"release-marginal"`` (the estimator of earlier versions): leaves weighted by the release's own
  leaf marginal π (records of groups published at leaf level, plus one per leaf). It sends almost
  every generalized record to the leaves that are common at leaf level (Adult's United-States),
  while a generalized group holds exactly the records that could not be published at leaf level,
  the rare ones: on the Baig et al. workload it answers ~0 for most queries off the common leaves.

``numeric`` (cloning's numeric quasi-identifiers, which publish an average and the *indicative
range* [lo, hi] of the η values nearest it, not the sub-class's extent):

- ``"indicative"`` (earlier versions): spread over the integers of [lo, hi];
- ``"scaled"`` (the default for cloning): the η nearest values span (hi − lo + 1) of the sub-class's
  |g| values, so under uniformity the sub-class spans W = (hi − lo + 1)·|g|/η; spread uniformly over
  [avg − W/2, avg + W/2] ∩ [domain lo − ½, domain hi + ½], the query's integers [a, b] read as
  [a − ½, b + ½]. η is public (the release's provenance records it).
  Mondrian publishes the class's [min, max] and always uses it.

Floor (:func:`floor_counts`): exact QI counts times the table's share of s. A release that makes
every class mirror the table's sensitive distribution (δ-cloning) cannot do better on average: it
publishes no dependence between s and the QIs.

Numeric quasi-identifiers are taken to be integer-valued (Adult age).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

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
    #: cloning: numeric averages per QI (``<a>_avg``); None for Mondrian (its ranges are the classes' extent)
    averages: Optional[dict[str, np.ndarray]] = None
    #: cloning: number of distinct leaves per categorical QI (``<a>_distinct``); None for Mondrian
    distinct: Optional[dict[str, np.ndarray]] = None


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
                   if q.kind == "categorical"},
                  {q.name: first[f"{q.name}_avg"].to_numpy(float) for q in qis if q.kind == "numeric"},
                  {q.name: first[f"{q.name}_distinct"].to_numpy(float) for q in qis if q.kind == "categorical"})


CATEGORICAL_SPREADS = ("uniform", "release-marginal", "distinct")
NUMERIC_SPREADS = ("indicative", "scaled")


def estimate_counts(groups: Groups, qis: Sequence[QuasiIdentifier], queries: Queries, batch: int = 1000, *,
                    categorical: str = "uniform", numeric: str = "indicative", eta: Optional[int] = None) -> np.ndarray:
    """Estimated answers ``Σ_g w_g(s) Π_A p_A(g)``, shape (Q,) (module docstring).

    ``categorical``: ``"uniform"`` or ``"release-marginal"``; ``numeric``: ``"indicative"`` (the
    group's [lo, hi] as published, Mondrian's extent) or ``"scaled"`` (cloning only: needs
    ``groups.averages`` and the release's ``eta``).

    Raises
    ------
    InvalidParameterError
        An unknown spread, or ``"scaled"`` without averages or a positive η.
    """
    if categorical not in CATEGORICAL_SPREADS:
        raise InvalidParameterError(f"categorical spread must be one of {CATEGORICAL_SPREADS}, not {categorical!r}")
    if numeric not in NUMERIC_SPREADS:
        raise InvalidParameterError(f"numeric spread must be one of {NUMERIC_SPREADS}, not {numeric!r}")
    if numeric == "scaled" and (groups.averages is None or eta is None or eta < 1):
        raise InvalidParameterError("numeric spread 'scaled' needs a cloning release's averages and its eta >= 1")
    if categorical == "distinct" and groups.distinct is None:
        raise InvalidParameterError("categorical spread 'distinct' needs a cloning release's distinct counts")
    pos = {v: i for i, v in enumerate(groups.values)}
    out = np.zeros(len(queries))
    size = groups.weights.sum(axis=1)
    pi = {}
    for q in qis:
        if q.kind == "categorical":
            n_leaves = q.require_taxonomy().n_leaves
            if categorical == "uniform":
                pi[q.name] = np.ones(n_leaves)
            else:
                nodes = groups.categorical[q.name]
                at_leaf = nodes < n_leaves
                pi[q.name] = 1.0 + np.bincount(nodes[at_leaf], weights=size[at_leaf], minlength=n_leaves)
    spans = {}
    for q in qis:
        if q.kind != "numeric":
            continue
        glo, ghi = groups.numeric[q.name]
        if numeric == "scaled":
            dlo, dhi = q.require_domain()
            assert groups.averages is not None and eta is not None  # checked above
            half = (ghi - glo + 1) * size / eta / 2
            avg = groups.averages[q.name]
            spans[q.name] = (np.maximum(avg - half, dlo - 0.5), np.minimum(avg + half, dhi + 0.5))
        else:
            spans[q.name] = (glo - 0.5, ghi + 0.5)  # the integers lo..hi as a continuous span
    for b0 in range(0, len(queries), batch):
        sl = slice(b0, b0 + batch)
        cols = np.array([pos.get(str(s), -1) for s in queries.sensitive[sl]])
        w = np.where(cols[None, :] >= 0, groups.weights[:, np.maximum(cols, 0)], 0.0)  # G x B
        for q in qis:
            if q.kind == "numeric":
                slo, shi = spans[q.name]
                qlo, qhi = queries.numeric[q.name]
                inside = np.minimum(shi[:, None], qhi[None, sl] + 0.5) - np.maximum(slo[:, None], qlo[None, sl] - 0.5)
                w *= np.clip(inside, 0, None) / np.maximum(shi - slo, 1e-12)[:, None]
            else:
                node_leaves = q.require_taxonomy().member[groups.categorical[q.name]].astype(float)  # G x leaves
                sel = queries.categorical[q.name][sl].astype(float)                                # B x leaves
                member = node_leaves * pi[q.name][None, :]
                p = (member @ sel.T) / member.sum(axis=1)[:, None]
                if categorical == "distinct":
                    assert groups.distinct is not None  # checked above
                    # one dominant leaf (release marginal) holds |g| - (d - 1) records, d - 1 leaves one each (uniform)
                    rare = np.clip(groups.distinct[q.name] - 1, 0, None) / np.maximum(size, 1)
                    p = (1 - rare)[:, None] * p + rare[:, None] * ((node_leaves @ sel.T) / node_leaves.sum(axis=1)[:, None])
                w *= p
        out[sl] = w.sum(axis=0)
    return out


def floor_counts(df: pd.DataFrame, qis: Sequence[QuasiIdentifier], sensitive: str, queries: Queries) -> np.ndarray:
    """The floor: exact QI counts of ``df`` times the share of each query's s in ``df``, shape (Q,).

    The best answer of any release whose classes all mirror the table's sensitive distribution
    (module docstring). Computed from the original rows: a reference, never a release.
    """
    everyone = df[[q.name for q in qis]].copy()
    everyone["_all"] = "*"
    qi_only = Queries(queries.numeric, queries.categorical, np.full(len(queries), "*", dtype=object), queries.runs)
    qi_counts = actual_counts(everyone, qis, "_all", qi_only)
    share = df[sensitive].astype(str).value_counts(normalize=True)
    return qi_counts * share.reindex([str(s) for s in queries.sensitive]).fillna(0.0).to_numpy()
