"""δ-cloning by micro-statistics (Baig et al. (CIKM 2011) §6, Algorithm 1; docs/specification.md §5 steps 1-6).

Every equivalence class receives, from each sensitive value's sub-dataset, a number of tuples
proportional to that value's frequency, so every class holds every sensitive value with almost the
distribution of the whole table: an adversary who intersects a person's classes from several
independent publications is left with (almost) every sensitive value. Steps:

1. **Division**: one sub-dataset W_j per distinct sensitive value s_j.
2. **Key sub-dataset**: ``b = min_j |W_j|``; b empty equivalence classes.
3. **Counts**: ``λ_j = |W_j| / b`` (exact fraction), ``c_j = round(λ_j)``. Fractional part > 1/2:
   ``c_j·b - |W_j|`` counterfeit tuples (sensitive value s_j, every quasi-identifier ``*``); < 1/2:
   ``|W_j| - c_j·b`` tuples of W_j are suppressed (those left after the assignment); exactly 1/2:
   of the m such sub-datasets, taken in sensitive-value order, the first ``m // 2`` counterfeit
   (round up) and the others suppress (round down).
4. **Assignment**: sub-datasets in order of size (the key first, ties by value), each in a random
   order (:func:`fragrelease.rng.secure.secure_permutation`); for each class E_r in turn, the c_j tuples with
   the least Distortion among the first max(μ, c_j) tuples still unassigned move into E_r. Distortion
   (Li, Wong, Fu, Pei, TKDE 2008) of a class = Σ over its tuples and quasi-identifiers of the
   generalization steps from the tuple's value to the class's generalized value (the lowest common
   taxonomy ancestor of its members); a candidate's cost is the increase of that sum when it joins.
   The cf_j counterfeit slots of W_j are spread first (:func:`counterfeit_slots`): at most
   ⌈cf_j / b⌉ (= 1) per class, in classes drawn at random, so every class that publishes s_j holds
   at least c_j − 1 ≥ 1 real tuple of it (docs/specification.md §5 step 4). Stacking them in the
   last classes, as earlier versions of this module did, lets a class publish c_j copies of a
   value it holds no real tuple of, visibly (multiset size − rows).
5. **Split / merge by k** (real tuples only; counterfeits have no quasi-identifiers): a class with
   fewer than k real tuples merges with the class of minimum merge Distortion (repeated, smallest
   class first); a class with ≥ 2k real tuples is split on its quasi-identifiers only (Mondrian with
   k, ℓ = 1) into sub-classes, **each keeping the class's whole sensitive multiset**.
   The published class and sub-class ids are random permutations of 0..classes−1 and
   0..sub-classes−1, so an id tells nothing about the order in which classes were filled.
6. **Micro-statistics** per sub-class: numeric QI → average and an *indicative range* [min, max] of
   the η values nearest the average (η ≤ k); categorical QI → the number of distinct values,
   published beside the lowest common taxonomy ancestor of the values (this project's reading:
   the ancestor is the generalization whose steps the Distortion counts, and without it no
   predicate on a categorical QI could be estimated; see docs/publications.md).

The achieved per-value bound (the paper's adaptive δ, Definition 4) is
``δ = max_E max_s |f_P(s) - f_E(s)|`` with f_P the frequencies of the input and f_E those of the
class's published multiset (counterfeits included); it is returned in :class:`CloningReport`.
It is data-dependent: report it to the publisher, never in public table properties.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from fragrelease.errors import InvalidParameterError, SchemaMismatchError
from fragrelease.publications.mondrian import encode_quasi_identifiers, mondrian_partition, sensitive_codes
from fragrelease.rng.secure import secure_permutation
from fragrelease.taxonomy import QuasiIdentifier, check_positive_int


@dataclass(frozen=True)
class SubDatasetCount:
    """Step 3 for one sensitive value: |W_j|, c_j and the distortion it needs."""

    value: str
    size: int
    c: int
    counterfeit: int
    suppressed: int


def clone_counts(sizes: Mapping[str, int]) -> tuple[int, list[SubDatasetCount]]:
    """Steps 2-3: b and, per sensitive value (sorted), c_j with counterfeit/suppressed tuple counts.

    Parameters
    ----------
    sizes : |W_j| per sensitive value, every size ≥ 1.

    Returns
    -------
    (b, counts) with ``counts`` in sensitive-value order.

    Raises
    ------
    InvalidParameterError
        No values, or a size < 1 (named).

    Examples
    --------
    The paper's worked example (docs/specification.md §5 step 3): J:5, B:4, G:3, L:7 gives b = 3, c = 2, 1, 1, 2,
    one counterfeit J and one suppressed B and L.
    """
    if not sizes:
        raise InvalidParameterError("there are no sensitive values to clone")
    for v, s in sizes.items():
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1:
            raise InvalidParameterError(f"size of sub-dataset {v!r} must be an integer >= 1, not {s!r}")
    b = int(min(sizes.values()))
    values = sorted(sizes, key=str)
    halves = [v for v in values if Fraction(int(sizes[v]), b) % 1 == Fraction(1, 2)]
    round_up_halves = set(halves[: len(halves) // 2])
    out = []
    for v in values:
        lam = Fraction(int(sizes[v]), b)
        frac = lam % 1
        if frac > Fraction(1, 2) or (frac == Fraction(1, 2) and v in round_up_halves):
            c = int(lam) + 1
        else:
            c = int(lam)
        out.append(SubDatasetCount(str(v), int(sizes[v]), c, max(c * b - int(sizes[v]), 0),
                                   max(int(sizes[v]) - c * b, 0)))
    return b, out


@dataclass
class CloningReport:
    """What one cloned release achieved (data-dependent: for the publisher, not for table properties).

    ``delta`` is the achieved per-value bound; ``distorted`` = suppressed + counterfeit tuples.
    """

    records: int
    published: int
    b: int
    counts: list[SubDatasetCount]
    suppressed: int
    counterfeit: int
    classes: int
    sub_classes: int
    delta: float
    mu_candidates: int
    frequencies: dict[str, float] = field(default_factory=dict)

    @property
    def distorted(self) -> int:
        return self.suppressed + self.counterfeit

    @property
    def distorted_fraction(self) -> float:
        return self.distorted / self.records if self.records else 0.0

    def as_dict(self) -> dict:
        return {
            "records": self.records, "published": self.published, "b": self.b,
            "counts": [c.__dict__ for c in self.counts], "suppressed": self.suppressed,
            "counterfeit": self.counterfeit, "distorted": self.distorted,
            "distorted_fraction": self.distorted_fraction, "classes": self.classes,
            "sub_classes": self.sub_classes, "delta": self.delta, "mu_candidates": self.mu_candidates,
        }


def counterfeit_slots(counterfeit: int, b: int, permutation: Callable[[int], np.ndarray] = secure_permutation
                      ) -> np.ndarray:
    """Step 4's counterfeit places of one sub-dataset, spread over the b classes.

    Every class gets ``counterfeit // b`` counterfeit slots and ``counterfeit % b`` classes, chosen
    uniformly at random (the first entries of ``permutation(b)``), get one more: at most
    ⌈cf_j / b⌉ per class (docs/specification.md §5 step 4). Because step 3 only counterfeits when
    the fractional part of λ_j is ≥ ½, cf_j ≤ b/2 and c_j ≥ 2, so the bound is 1 and every class
    keeps at least c_j − 1 ≥ 1 real tuple of s_j. Returns an int64 array of length b.

    Raises
    ------
    InvalidParameterError
        ``counterfeit < 0`` or ``b < 1`` (named).
    """
    if counterfeit < 0 or b < 1:
        raise InvalidParameterError(f"need counterfeit >= 0 and b >= 1, not counterfeit={counterfeit}, b={b}")
    out = np.full(b, counterfeit // b, dtype=np.int64)
    extra = counterfeit % b
    if extra:
        out[np.asarray(permutation(b))[:extra]] += 1
    return out


def _merge_cost(G, sizes, r, others, heights, lcas):
    cost = np.zeros(len(others))
    for a in range(G.shape[1]):
        h, L = heights[a], lcas[a]
        g_new = L[G[r, a], G[others, a]]
        cost += (sizes[r] + sizes[others]) * h[g_new] - sizes[r] * h[G[r, a]] - sizes[others] * h[G[others, a]]
    return cost


def cloning_anonymize(df: pd.DataFrame, qis: Sequence[QuasiIdentifier], sensitive: str, *, k: int,
                      mu: float = 0.2, eta: int = 1, keep: Sequence[str] = (),
                      permutation: Callable[[int], np.ndarray] = secure_permutation,
                      ) -> tuple[pd.DataFrame, CloningReport]:
    """Micro-statistics anonymization achieving δ-cloning (module docstring, steps 1-6).

    Parameters
    ----------
    df : rows with the quasi-identifier columns and ``sensitive``.
    qis : quasi-identifiers, each with a taxonomy (numeric ones: integer values whose decimal
        strings are leaves, e.g. Adult age) and numeric ones with a declared domain.
    sensitive : the sensitive attribute's column (values compared as strings).
    k : minimum number of real tuples per class and sub-class, ≥ 1.
    mu : distortion control, the number of candidate tuples as a fraction of |P|, in (0, 1]
        (μ = max(1, ceil(mu·|P|)); the paper's default is 20%).
    eta : indicative-range width η, 1 ≤ η ≤ k.
    keep : extra columns copied unchanged (an audit key; ids are not published by default).
    permutation : the random order of each sub-dataset, the classes receiving counterfeits, the
        class and sub-class ids and the output rows; production uses the CSPRNG. Tests may pass a
        seeded function (never in a release).

    Returns
    -------
    (release, report). ``release`` has one row per published (non-suppressed) input row:
    ``eq_class``, ``sub_class`` (int64), per numeric QI ``<a>_avg``, ``<a>_lo``, ``<a>_hi`` (float64,
    the average and indicative range of the sub-class), per categorical QI ``<a>`` (str, lowest
    common ancestor) and ``<a>_distinct`` (int64), ``<sensitive>_values`` (list of str) and
    ``<sensitive>_counts`` (list of int, the class's multiset including counterfeits), and ``keep``.

    Raises
    ------
    InvalidParameterError
        k, μ or η out of range (named), or fewer than k published tuples.
    SchemaMismatchError, DomainError
        Missing columns, values outside the taxonomies or domains (named).

    References
    ----------
    Baig et al. (CIKM 2011) §6 and Algorithm 1; docs/specification.md §5.
    """
    k = check_positive_int("k", k)
    eta = check_positive_int("eta", eta)
    if eta > k:
        raise InvalidParameterError(f"eta must be <= k = {k}, not {eta}")
    if isinstance(mu, bool) or not isinstance(mu, (int, float)) or not (0 < mu <= 1):
        raise InvalidParameterError(f"mu must be a fraction of the data in (0, 1], not {mu!r}")
    for c in keep:
        if c not in df.columns:
            raise SchemaMismatchError(f"column {c!r} to keep is missing; columns are {list(df.columns)}")
    n = len(df)
    if n < k:
        raise InvalidParameterError(f"k = {k} exceeds the number of records {n}")
    raw = encode_quasi_identifiers(df, qis)
    leaves = [q.leaf_codes(df[q.name].to_numpy()) for q in qis]
    heights = [q.require_taxonomy().height for q in qis]
    lcas = [q.require_taxonomy().lca for q in qis]
    values, sens = sensitive_codes(df, sensitive)
    sizes = np.bincount(sens, minlength=len(values))
    b, counts = clone_counts({str(v): int(s) for v, s in zip(values, sizes)})
    mu_n = max(1, int(np.ceil(mu * n)))
    d = len(qis)

    G = np.full((b, d), -1, dtype=np.int64)        # generalized value (node id) per class, -1 = empty
    real = np.zeros(b, dtype=np.int64)             # real tuples per class
    multiset = np.zeros((b, len(values)), dtype=np.int64)
    members: list[list[np.ndarray]] = [[] for _ in range(b)]
    suppressed = counterfeit = 0
    order_j = sorted(range(len(values)), key=lambda j: (sizes[j], str(values[j])))
    for j in order_j:
        c_j = counts[j].c
        rows = np.flatnonzero(sens == j)
        remaining = rows[permutation(len(rows))]
        fake = counterfeit_slots(counts[j].counterfeit, b, permutation)
        for r in range(b):
            places = c_j - int(fake[r])               # real tuples of W_j this class takes
            cand = remaining[:max(mu_n, places)]  # never fewer candidates than places
            if len(cand) <= places:
                pick = np.arange(len(cand))
            else:
                cost = np.zeros(len(cand))
                if real[r] > 0:
                    for a in range(d):
                        g_new = lcas[a][G[r, a], leaves[a][cand]]
                        cost += heights[a][g_new] * (1 + real[r]) - real[r] * heights[a][G[r, a]]
                pick = np.argsort(cost, kind="stable")[:places]
            chosen = cand[pick]
            remaining = np.delete(remaining, pick)
            if len(chosen):
                for a in range(d):
                    g = G[r, a] if real[r] > 0 else leaves[a][chosen[0]]
                    for leaf in np.unique(leaves[a][chosen]):
                        g = lcas[a][g, leaf]
                    G[r, a] = g
                real[r] += len(chosen)
                members[r].append(chosen)
            multiset[r, j] += c_j
            counterfeit += c_j - len(chosen)
        suppressed += len(remaining)

    # step 5a: merge classes with fewer than k real tuples
    alive = np.ones(b, dtype=bool)
    while True:
        small = np.flatnonzero(alive & (real < k))
        if len(small) == 0:
            break
        others = np.flatnonzero(alive)
        if len(others) == 1:
            raise InvalidParameterError(f"k = {k} exceeds the {int(real[others[0]])} tuples that can be published")
        r = int(small[np.argmin(real[small])])
        others = others[others != r]
        o = int(others[np.argmin(_merge_cost(G, real, r, others, heights, lcas))])
        for a in range(d):
            G[o, a] = lcas[a][G[o, a], G[r, a]]
        real[o] += real[r]
        multiset[o] += multiset[r]
        members[o].extend(members[r])
        alive[r] = False

    # step 5b-6: split on quasi-identifiers, micro-statistics per sub-class
    freq_p = sizes / n
    delta = 0.0
    blocks = []
    sub_id = 0
    kept = np.flatnonzero(alive)
    class_number = np.asarray(permutation(len(kept)), dtype=np.int64)  # public ids in random order
    for i, r in enumerate(kept):
        eq = int(class_number[i])
        rows = np.concatenate(members[r])
        ms = multiset[r]
        delta = max(delta, float(np.max(np.abs(freq_p - ms / ms.sum()))))
        parts = mondrian_partition([x[rows] for x in raw], qis, None, k=k, l=1)
        sv = [str(values[j]) for j in np.flatnonzero(ms)]
        sc = [int(ms[j]) for j in np.flatnonzero(ms)]
        for p in parts:
            sub = rows[p]
            block: dict[str, Any] = {"eq_class": np.full(len(sub), eq, dtype=np.int64),
                     "sub_class": np.full(len(sub), sub_id, dtype=np.int64)}
            for a, q in enumerate(qis):
                if q.kind == "numeric":
                    x = raw[a][sub]
                    avg = float(x.mean())
                    near = x[np.argsort(np.abs(x - avg), kind="stable")[:eta]]
                    block[f"{q.name}_avg"] = np.full(len(sub), avg)
                    block[f"{q.name}_lo"] = np.full(len(sub), float(near.min()))
                    block[f"{q.name}_hi"] = np.full(len(sub), float(near.max()))
                else:
                    t = q.require_taxonomy()
                    block[q.name] = np.full(len(sub), t.nodes[t.lca_of(leaves[a][sub])], dtype=object)
                    block[f"{q.name}_distinct"] = np.full(len(sub), len(np.unique(leaves[a][sub])), dtype=np.int64)
            block[f"{sensitive}_values"] = [sv] * len(sub)
            block[f"{sensitive}_counts"] = [sc] * len(sub)
            for c in keep:
                block[c] = df[c].to_numpy()[sub]
            blocks.append(pd.DataFrame(block))
            sub_id += 1
    release = pd.concat(blocks, ignore_index=True)
    sub_number = np.asarray(permutation(sub_id), dtype=np.int64)  # sub-class ids in random order too
    release["sub_class"] = sub_number[release["sub_class"].to_numpy()]
    release = release.iloc[permutation(len(release))].reset_index(drop=True)  # no input order in the output
    report = CloningReport(
        records=n, published=len(release), b=b, counts=counts, suppressed=int(suppressed),
        counterfeit=int(counterfeit), classes=int(alive.sum()), sub_classes=sub_id, delta=delta,
        mu_candidates=mu_n, frequencies={str(v): float(f) for v, f in zip(values, freq_p)},
    )
    return release, report
