"""The composition attack on independent publications of overlapping people (paper 001 §3-4; SPEC.md §5).

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

Two release layouts are understood (both one row per published person):

- **generalized** (Mondrian, any k-anonymous/ℓ-diverse table): ``eq_class``, the generalized QIs
  and the person's sensitive value in ``<sensitive>``; a class's multiset is the count of its rows'
  values.
- **micro-statistics** (cloning): ``eq_class`` and the class's multiset as the list columns
  ``<sensitive>_values`` / ``<sensitive>_counts``.

This module is the Spark-free reference; ``fragrelease.jobs.publications`` runs the same audit on
Spark, and the tests check that both agree.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pandas as pd

from .errors import SchemaMismatchError
from .taxonomy import Taxonomy

CONFIDENCE_BINS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def release_layout(columns: Sequence[str], sensitive: str) -> str:
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

    Returns a DataFrame with columns ``person``, ``eq_class``, ``counts`` (dict str → int).

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
        for (eq, s), c in pairs.items():
            per_class.setdefault(eq, {})[s] = int(c)
        ms = pd.DataFrame({"eq_class": list(per_class), "counts": list(per_class.values())})
        out = release[[person, "eq_class"]].merge(ms, on="eq_class")
    else:
        out = release[[person, "eq_class"]].copy()
        out["counts"] = [dict(zip(map(str, v), map(int, c)))
                         for v, c in zip(release[f"{sensitive}_values"], release[f"{sensitive}_counts"])]
    return out.rename(columns={person: "person"})


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


def audit_pair(p: pd.DataFrame, q: pd.DataFrame, *, person: str, sensitive: str) -> pd.DataFrame:
    """Composition attack on every person present in both releases.

    Returns one row per overlapping person: ``person``, ``remaining`` (number of sensitive values
    left), ``top_value``, ``confidence`` (float in [0, 1]), ``risky`` (bool, remaining == 1).
    """
    mp = person_multisets(p, person=person, sensitive=sensitive)
    mq = person_multisets(q, person=person, sensitive=sensitive)
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


def intersect_ranges(lo1, hi1, lo2, hi2):
    """Interval intersection (elementwise); returns (lo, hi) with NaN where the intervals are disjoint."""
    lo = np.maximum(np.asarray(lo1, dtype=float), np.asarray(lo2, dtype=float))
    hi = np.minimum(np.asarray(hi1, dtype=float), np.asarray(hi2, dtype=float))
    empty = lo > hi
    return np.where(empty, np.nan, lo), np.where(empty, np.nan, hi)


def intersect_categorical(taxonomy: Taxonomy, a: Sequence[str], b: Sequence[str]) -> list[Optional[str]]:
    """Taxonomy intersection of generalized values, elementwise (``None`` where disjoint)."""
    return [taxonomy.intersect(x, y) for x, y in zip(a, b)]


def split_with_overlap(n: int, *, publishers: int, base: int, pool: int, overlap: int,
                       permutation=None) -> list[np.ndarray]:
    """Row indices of ``publishers`` independent publications with a shared overlap pool (paper 001 §7).

    The rows ``0 .. n-1`` are put in random order; publisher i gets ``base`` rows of its own
    (disjoint from every other publisher's) plus ``overlap`` rows drawn without replacement from a
    pool of ``pool`` further rows, independently per publisher. Returns one int64 array per
    publisher (own rows first).

    Parameters
    ----------
    permutation : ``size -> permutation of 0..size-1``; default :func:`fragrelease.rng.secure_permutation`
        (tests and experiments may pass a seeded one).

    Raises
    ------
    InvalidParameterError
        ``publishers·base + pool > n`` or ``overlap > pool`` (values named).
    """
    from .errors import InvalidParameterError
    from .rng import secure_permutation

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
