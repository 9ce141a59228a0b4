"""The composition attack on independent publications of overlapping people (Baig et al. (CIKM 2011) §3-4; docs/specification.md §5).

An adversary who knows that a person is in two releases P* and Q* locates the person's equivalence
class in each (E_P, E_Q) and intersects them: the quasi-identifier generalizations intersect
(numeric ranges as intervals, categorical values through the taxonomy: the more specific value if
one generalizes the other, else empty), and only sensitive values present in **both** classes
remain (Definition 2). The person is a **privacy-risk tuple** when exactly one sensitive value
remains.

Adversary's confidence (this project's estimator, documented in docs/publications.md): the
adversary treats the person as a uniformly random member of each class, the two releases as
independent samples given the person's value, and takes as prior π the sensitive distribution of the
two releases pooled (public: it is the sum of the published multisets). Bayes' rule gives, over the
remaining values R,
``conf(s) ∝ f_P(s)·f_Q(s) / π(s)``, where f_X(s) is the share of s in class E_X. The reported
confidence is the top one (``max_s conf(s)``); it is 1 for every privacy-risk tuple, and equals the
prior's top share when both classes mirror the table (δ-cloning with δ = 0): no gain from composing.

Counterfeits (cloning only). A cloned class publishes a multiset M_E larger than its n_E rows: the
d_E = |M_E| − n_E extra copies are counterfeits, and everybody can compute d_E. The person is one of
the real rows, so the adversary's candidate values in E are those that can hold at least one
**real** row, not every published value. :func:`counterfeit_caps` states what the adversary knows
about where counterfeits can be, :func:`real_count_bounds` computes exactly which real counts r_s
are then possible (Σ r_s = n_E, m_s − cap_s ≤ r_s ≤ m_s), and the audit intersects the values
with ``hi_s ≥ 1`` and weights them by ``hi_s`` (the most real rows s can have) instead of m_s.
Without counterfeits (every generalized table, and every cloned class with d_E = 0) this is the
published multiset unchanged. See docs/publications.md ("Counterfeits the adversary can attribute").

Two release layouts are understood (both one row per published person):

- **generalized** (Mondrian, any k-anonymous/ℓ-diverse table): ``eq_class``, the generalized QIs
  and the person's sensitive value in ``<sensitive>``; a class's multiset is the count of its rows'
  values.
- **micro-statistics** (cloning): ``eq_class`` and the class's multiset as the list columns
  ``<sensitive>_values`` / ``<sensitive>_counts``.

This module is the Spark-free reference; ``fragrelease.jobs.publications.runner`` runs the same audit on
Spark, and the tests check that both agree.
"""
from __future__ import annotations

from typing import Iterable, Optional, cast

import numpy as np
import pandas as pd

from fragrelease.errors import SchemaMismatchError

CONFIDENCE_BINS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def release_layout(columns: Iterable[str], sensitive: str) -> str:
    """``"micro-statistics"`` or ``"generalized"``; :class:`SchemaMismatchError` naming what is missing."""
    cols = set(columns)
    if "eq_class" not in cols:
        raise SchemaMismatchError(f"a release needs an 'eq_class' column; columns are {sorted(cols)}")
    if {f"{sensitive}_values", f"{sensitive}_counts"} <= cols:
        return "micro-statistics"
    if sensitive in cols:
        return "generalized"
    raise SchemaMismatchError(
        f"sensitive attribute {sensitive!r} is neither a column nor '{sensitive}_values'/'{sensitive}_counts'; "
        f"columns are {sorted(cols)}")


def person_multisets(release: pd.DataFrame, *, person: str, sensitive: str) -> pd.DataFrame:
    """Per person: the class id and the class's sensitive multiset as a ``{value: count}`` dict.

    Returns a DataFrame with columns ``person``, ``eq_class``, ``counts`` (dict str → int) and
    ``rows`` (int, the class's number of published rows; equal to the multiset's size in a
    generalized table, smaller by the counterfeits in a cloned one).

    Raises
    ------
    SchemaMismatchError
        The person column is missing (named), or the layout is not recognised.
    """
    if person not in release.columns:
        raise SchemaMismatchError(f"person column {person!r} is missing; columns are {list(release.columns)}")
    layout = release_layout(release.columns, sensitive)
    if layout == "generalized":
        pairs = release.assign(_s=release[sensitive].astype(str)).groupby(["eq_class", "_s"]).size()
        per_class: dict = {}
        for key, c in pairs.items():
            eq, s = cast(tuple, key)  # the (eq_class, _s) MultiIndex key
            per_class.setdefault(eq, {})[s] = int(c)
        ms = pd.DataFrame({"eq_class": list(per_class), "counts": list(per_class.values())})
        out = release[[person, "eq_class"]].merge(ms, on="eq_class")
    else:
        out = release[[person, "eq_class"]].copy()
        # one dict per row (an object column); pandas-stubs accepts only scalars or arrays here
        out["counts"] = [dict(zip(map(str, v), map(int, c)))  # type: ignore[assignment]
                         for v, c in zip(release[f"{sensitive}_values"], release[f"{sensitive}_counts"])]
    out["rows"] = out.groupby("eq_class")["eq_class"].transform("size").astype(np.int64)
    return out.rename(columns={person: "person"})


def counterfeit_caps(counts: dict, rows: int, *, counterfeit_bound: Optional[int] = 1) -> dict:
    """The most counterfeit copies of each value a cloned class can hold, as the adversary knows it.

    Parameters
    ----------
    counts : the class's published multiset ``{value: copies}`` (copies ≥ 1).
    rows : the class's number of published rows n_E (≥ 0).
    counterfeit_bound : the mechanism's public bound on counterfeits of one value per clone class
        before the merge by k (docs/specification.md §5 step 4: ⌈cf_j / b⌉, which is 1 because
        step 3 counterfeits only when cf_j ≤ b/2). ``None``: no such bound (releases of older
        versions, which stacked counterfeits in the last classes).

    Returns
    -------
    ``{value: cap}`` with ``cap = min(m_s, d_E, counterfeit_bound·t_E)``, where d_E = |M_E| − n_E
    and t_E = min_s m_s is the number of clone classes merged into E (the key sub-dataset has
    c = 1, so every value's count is t_E·c_j); ``cap = 0`` for values with m_s ≤ t_E (c_j = 1:
    step 3 counterfeits only values rounded up from λ_j ≥ 1.5, so c_j ≥ 2) and when d_E = 0.

    Raises
    ------
    InvalidParameterError
        ``rows`` exceeds the multiset's size, or a negative count (values named).
    """
    from fragrelease.errors import InvalidParameterError

    total = sum(int(c) for c in counts.values())
    if rows < 0 or rows > total or any(int(c) < 1 for c in counts.values()):
        raise InvalidParameterError(f"a class with {rows} rows cannot publish the multiset {dict(counts)}")
    d = total - rows
    t = min((int(c) for c in counts.values()), default=0)
    caps = {}
    for s, m in counts.items():
        m = int(m)
        if d == 0 or m <= t:
            caps[s] = 0
        else:
            caps[s] = min(m, d, m if counterfeit_bound is None else counterfeit_bound * t)
    return caps


def real_count_bounds(counts: dict, rows: int, caps: dict) -> dict:
    """Exactly the real-row counts the adversary cannot rule out, per value: ``{value: (lo, hi)}``.

    The real counts r satisfy Σ_s r_s = ``rows`` and ``m_s − caps[s] ≤ r_s ≤ m_s``; the projection
    of that set on one value is ``[max(L_s, n − Σ_{t≠s} m_t), min(m_s, n − Σ_{t≠s} L_t)]`` with
    L = m − caps (a box cut by one equation: every integer in the range is reachable).

    Raises
    ------
    InvalidParameterError
        No real counts fit (Σ L > rows): the class needs more counterfeits than ``caps`` allow
        (the multiset and row count are named), e.g. a release of an older version audited with
        a counterfeit bound.
    """
    from fragrelease.errors import InvalidParameterError

    m = {s: int(c) for s, c in counts.items()}
    low = {s: m[s] - int(caps.get(s, 0)) for s in m}
    sl, sm = sum(low.values()), sum(m.values())
    if sl > rows or sm < rows:
        raise InvalidParameterError(
            f"a class with {rows} rows and multiset {m} holds more counterfeits than the counterfeit bound allows "
            f"(caps {dict(caps)}); audit releases of older versions with counterfeit_bound=None")
    return {s: (max(low[s], rows - (sm - m[s])), min(m[s], rows - (sl - low[s]))) for s in m}


def class_candidates(counts: dict, rows: int, *, counterfeit_bound: Optional[int] = 1) -> dict:
    """The values a real row of the class can hold, each with the most real rows it can have.

    ``{value: hi_s}`` for the values with ``hi_s ≥ 1`` (:func:`real_count_bounds` under
    :func:`counterfeit_caps`); equal to ``counts`` when the class has no counterfeit.
    """
    bounds = real_count_bounds(counts, rows, counterfeit_caps(counts, rows, counterfeit_bound=counterfeit_bound))
    return {s: hi for s, (lo, hi) in bounds.items() if hi >= 1}


def release_totals(release: pd.DataFrame, *, sensitive: str) -> dict:
    """The published sensitive multiset of a whole release, ``{value: count}`` (both layouts)."""
    if release_layout(release.columns, sensitive) == "generalized":
        return {str(k): int(v) for k, v in release[sensitive].astype(str).value_counts().items()}
    out: dict = {}
    first = release.drop_duplicates("eq_class")
    for vs, cs in zip(first[f"{sensitive}_values"], first[f"{sensitive}_counts"]):
        for v, c in zip(vs, cs):
            out[str(v)] = out.get(str(v), 0) + int(c)
    return out


def adversary_confidence(counts_p: dict, counts_q: dict, prior: Optional[dict] = None
                         ) -> tuple[int, Optional[str], float]:
    """Remaining values, the adversary's top value and its confidence for one person (module docstring).

    ``prior`` maps each value to its pooled count in the two releases (π up to a constant; None
    means a uniform prior). Returns ``(|R|, top value or None, top confidence)``; ``|R| = 0``
    (contradictory releases) gives ``(0, None, 0.0)``. Ties go to the smallest value string.
    """
    remaining = sorted(set(counts_p) & set(counts_q))
    if not remaining:
        return 0, None, 0.0
    tp, tq = sum(counts_p.values()), sum(counts_q.values())
    if prior:
        n = sum(prior.values())
        w = np.array([((counts_p[s] / tp) * (counts_q[s] / tq)) / (prior[s] / n) for s in remaining])
    else:
        w = np.array([(counts_p[s] / tp) * (counts_q[s] / tq) for s in remaining])
    i = int(np.argmax(w))
    return len(remaining), remaining[i], float(w[i] / w.sum())


def _with_candidates(ms: pd.DataFrame, counterfeit_bound: Optional[int]) -> pd.DataFrame:
    per_class = {}
    for eq, counts, rows in zip(ms["eq_class"], ms["counts"], ms["rows"]):
        if eq not in per_class:
            per_class[eq] = class_candidates(counts, int(rows), counterfeit_bound=counterfeit_bound)
    # one dict per row (an object column); pandas-stubs accepts only scalars or arrays here
    return ms.assign(counts=[per_class[eq] for eq in ms["eq_class"]])  # type: ignore[misc]


def audit_pair(p: pd.DataFrame, q: pd.DataFrame, *, person: str, sensitive: str,
               counterfeit_bound: Optional[int] = 1) -> pd.DataFrame:
    """Composition attack on every person present in both releases.

    Each class's candidates are the values a real row can hold (:func:`class_candidates`, under
    ``counterfeit_bound``: see :func:`counterfeit_caps`); R is the intersection of the person's two
    classes' candidates, weighted by the most real rows each value can have.

    Returns one row per overlapping person: ``person``, ``remaining`` (number of sensitive values
    left), ``top_value``, ``confidence`` (float in [0, 1]), ``risky`` (bool, remaining == 1).

    Raises
    ------
    InvalidParameterError
        A class needs more counterfeits than ``counterfeit_bound`` allows (multiset named).
    """
    mp = _with_candidates(person_multisets(p, person=person, sensitive=sensitive), counterfeit_bound)
    mq = _with_candidates(person_multisets(q, person=person, sensitive=sensitive), counterfeit_bound)
    prior = release_totals(p, sensitive=sensitive)
    for v, c in release_totals(q, sensitive=sensitive).items():
        prior[v] = prior.get(v, 0) + c
    both = mp.merge(mq, on="person", suffixes=("_p", "_q"))
    res = [adversary_confidence(a, b, prior) for a, b in zip(both["counts_p"], both["counts_q"])]
    out = pd.DataFrame({
        "person": both["person"].to_numpy(),
        "remaining": np.array([r[0] for r in res], dtype=np.int64),
        "top_value": [r[1] for r in res],
        "confidence": np.array([r[2] for r in res], dtype=float),
    })
    out["risky"] = out["remaining"] == 1
    return out


def confidence_histogram(confidence: np.ndarray) -> dict[str, int]:
    """Counts of top confidences in [0, .1), …, [.9, 1) and exactly 1 (keys like ``"[0.1,0.2)"``, ``"1"``)."""
    c = np.asarray(confidence, dtype=float)
    out = {}
    for lo, hi in zip(CONFIDENCE_BINS[:-1], CONFIDENCE_BINS[1:]):
        out[f"[{lo:.1f},{hi:.1f})"] = int(((c >= lo) & (c < hi)).sum())
    out["1"] = int((c >= 1.0).sum())
    return out


def split_with_overlap(n: int, *, publishers: int, base: int, pool: int, overlap: int,
                       permutation=None) -> list[np.ndarray]:
    """Row indices of ``publishers`` independent publications with a shared overlap pool (Baig et al. (CIKM 2011) §7).

    The rows ``0 .. n-1`` are put in random order; publisher i gets ``base`` rows of its own
    (disjoint from every other publisher's) plus ``overlap`` rows drawn without replacement from a
    pool of ``pool`` further rows, independently per publisher. Returns one int64 array per
    publisher (own rows first).

    Parameters
    ----------
    permutation : ``size -> permutation of 0..size-1``; default :func:`fragrelease.rng.secure.secure_permutation`
        (tests and experiments may pass a seeded one).

    Raises
    ------
    InvalidParameterError
        ``publishers·base + pool > n`` or ``overlap > pool`` (values named).
    """
    from fragrelease.errors import InvalidParameterError
    from fragrelease.rng.secure import secure_permutation

    permutation = permutation or secure_permutation
    if publishers < 1 or base < 0 or pool < 0 or overlap < 0:
        raise InvalidParameterError(f"publishers, base, pool, overlap must be >= 0 (publishers >= 1), not "
                                    f"{publishers}, {base}, {pool}, {overlap}")
    if publishers * base + pool > n:
        raise InvalidParameterError(f"{publishers} publishers x {base} rows + a pool of {pool} exceed the {n} rows")
    if overlap > pool:
        raise InvalidParameterError(f"overlap {overlap} exceeds the pool of {pool} rows")
    order = permutation(n)
    pool_rows = order[publishers * base: publishers * base + pool]
    out = []
    for i in range(publishers):
        own = order[i * base:(i + 1) * base]
        out.append(np.concatenate([own, pool_rows[permutation(pool)[:overlap]]]).astype(np.int64))
    return out
