"""DiffGen's release: noisy leaf × class counts, the sparse-domain filter and synthetic cells.

Source: Mohammed, Chen, Fung and Yu, "Differentially private data release for data mining" (KDD
2011), Section 4 step 5, as docs/specification.md §7 fixes it: every leaf × class count of the
final cut (:mod:`fragrelease.diffgen.engine`) gets Lap(2/ε), empty leaves included, which spends
ε/2 (a record changes one leaf count by 1). Everything after the noise is post-processing.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Mapping, Sequence

import numpy as np

from fragrelease.diffgen.engine import BudgetSpend, Cut, DiffGenResult, specialize_cut
from fragrelease.diffgen.predictors import Predictor, SpecializationTaxonomy, marginal_counts
from fragrelease.errors import DomainError, InvalidParameterError
from fragrelease.rng.diffgen import DiffGenRandomness
from fragrelease.rng.laplace import LaplaceNoise


def leaf_shape(cut: Cut, n_classes: int) -> tuple[int, ...]:
    return tuple(cut.size(a) for a in cut.attributes) + (n_classes,)


def leaf_codes(cut: Cut, columns: Mapping[str, np.ndarray], classes, class_values: Sequence[str]) -> np.ndarray:
    """Flat leaf × class index of every record (row-major over :func:`leaf_shape`); shape (n,) int64.

    Raises
    ------
    DomainError
        A value outside its domain or taxonomy, or an unknown class value.
    """
    shape = leaf_shape(cut, len(class_values))
    cidx = {c: i for i, c in enumerate(class_values)}
    cls = np.asarray(classes).astype(str)
    uniq, inv = np.unique(cls, return_inverse=True)
    bad = [u for u in uniq if u not in cidx]
    if bad:
        raise DomainError(f"class value {bad[0]!r} is not one of {list(class_values)}")
    codes = [cut.cell_codes(a, columns[a]) for a in cut.attributes] + [np.array([cidx[u] for u in uniq])[inv]]
    return np.asarray(np.ravel_multi_index(codes, shape)).astype(np.int64)


#: A record changes one leaf × class count by 1 (add/remove neighbours): the counts' L1 sensitivity.
LEAF_COUNT_SENSITIVITY = 1.0


def leaf_count_noise(epsilon) -> LaplaceNoise:
    """The Laplace noise of every leaf × class count: sensitivity 1, budget ε/2, so ``b = 2 / ε``.

    docs/specification.md §7. The one definition of DiffGen's count noise: the single-owner release
    (numpy and Spark), the two-party protocol's shares, the evaluation and the sparse-domain filter
    all use it. OpenDP's exact measurement (``size=None``: granularity 2**-1074, no rounding slack),
    so ``b`` is the smallest float with OpenDP's map ``1 / b ≤ ε/2``: ``2 / ε`` itself whenever that
    is a float (ε = 1, 1/2, 2, ...). ε is public.

    Raises
    ------
    InvalidParameterError
        ε ≤ 0 (the message repeats it).
    """
    eps = Fraction(epsilon)
    if eps <= 0:
        raise InvalidParameterError(f"epsilon must be > 0, not {eps}")
    return LaplaceNoise.calibrate(sensitivity=LEAF_COUNT_SENSITIVITY, epsilon=eps / 2, size=None)


def leaf_count_scale(epsilon) -> float:
    """The Laplace scale of every leaf × class count, ``b = 2 / ε``: :func:`leaf_count_noise` ``.scale``."""
    return leaf_count_noise(epsilon).scale


def noisy_leaf_counts(*, true_counts: np.ndarray, epsilon, randomness: DiffGenRandomness) -> np.ndarray:
    """Every leaf × class count plus Lap(2/ε) (docs/specification.md §7), empty leaves included; same shape, float64."""
    flat = np.asarray(true_counts, dtype=float).ravel()
    return randomness.laplace(flat, leaf_count_noise(epsilon).scale).reshape(np.shape(true_counts))


def sparse_min_count(n_cells: int, epsilon) -> int:
    """Threshold of the sparse-domain filter used when noisy counts are expanded into records.

    ``t = max(1, ceil(b·ln(n_cells / 2) + 1/2))`` with ``b = 2/ε`` (the leaf-count Laplace scale).
    A cell that holds no record has a rounded noisy count ``floor(Lap(b) + 1/2) >= t`` with probability
    ``exp(-(t - 1/2)/b) / 2 <= 1 / n_cells``, so in expectation at most one of the empty cells yields
    synthetic records, however many leaves the cut has. Without the filter (``t = 1``) each empty
    cell yields about ``b/2`` records on average, which swamps the real records once the cut has far
    more cells than the table has records (e.g. 2.5M cells, ε = 0.1: ~25M synthetic records from
    empty cells against 30,162 real ones). The price: real cells whose noisy count falls below t
    yield no records either.

    The threshold depends only on the public cut size and ε, and the filter reads only released noisy
    counts, so it is post-processing: no privacy cost (the high-pass filter idea of Cormode,
    Procopiuc, Srivastava and Tran, "Differentially private summaries for sparse data", ICDT 2012).
    The generalized table itself is released unfiltered (docs/specification.md §7).

    Parameters
    ----------
    n_cells : number of leaf × class cells of the cut (≥ 1).
    epsilon : total ε of the release (> 0).

    Raises
    ------
    InvalidParameterError
        ``n_cells < 1`` or ε ≤ 0.
    """
    b = leaf_count_scale(epsilon)
    if n_cells < 1:
        raise InvalidParameterError(f"number of leaf x class cells must be >= 1, not {n_cells}")
    return max(1, math.ceil(b * math.log(n_cells / 2) + 0.5))


def sparse_min_count_two_laplace(n_cells: int, epsilon) -> int:
    """Sparse-domain threshold when each released count carries Lap(b) + Lap(b), b = 2/ε (two-party ``laplace-each``).

    The smallest integer ``t >= 1`` with ``Pr[Lap(b) + Lap(b) >= t - 1/2] = exp(-x/b)(1 + x/(2b))/2 <= 1/n_cells``
    (``x = t - 1/2``), so in expectation at most one empty cell yields synthetic records, as
    :func:`sparse_min_count` ensures for one Lap(b). That single-Laplace threshold
    would let about ``1 + x/(2b)`` times more empty cells through (about 6 at 97,200 cells, ε = 1).
    Depends only on the public cut size and ε: post-processing, no privacy cost.

    Raises
    ------
    InvalidParameterError
        ``n_cells < 1`` or ε ≤ 0 (from :func:`sparse_min_count`).
    """
    t = sparse_min_count(n_cells, epsilon)  # validates; the single-Laplace threshold is a lower bound
    b = leaf_count_scale(epsilon)

    def tail(t_: int) -> float:
        x = t_ - 0.5
        return 0.5 * math.exp(-x / b) * (1 + x / (2 * b))

    while tail(t) > 1 / n_cells:
        t += 1
    return t


def release_counts(noisy: np.ndarray, min_count: int = 1) -> np.ndarray:
    """Record counts used to generate synthetic records: ``k = max(0, floor(x + 0.5))``, and 0 where ``k < min_count``.

    ``min_count = 1`` is the plain expansion (negatives clipped to 0); see :func:`sparse_min_count`
    for the filtered one. Returns int64 of the same shape as ``noisy``.

    Raises
    ------
    InvalidParameterError
        ``min_count < 1``.
    """
    if int(min_count) != min_count or min_count < 1:
        raise InvalidParameterError(f"min_count must be an integer >= 1, not {min_count}")
    k = np.maximum(np.floor(np.asarray(noisy) + 0.5), 0).astype(np.int64)
    k[k < min_count] = 0
    return k


def diffgen(predictors: Sequence[Predictor], columns: Mapping[str, np.ndarray], classes, class_values: Sequence[str],
            *, epsilon, specializations: int, score: str, randomness: DiffGenRandomness,
            max_leaves: int = 5_000_000) -> DiffGenResult:
    """Single-party DiffGen on in-memory columns (pandas/numpy), docs/specification.md §7.

    Parameters
    ----------
    columns : attribute -> array (n,) of the records' values (numeric or category labels).
    classes : array (n,) of class labels, each in ``class_values``.
    max_leaves : refuse to enumerate more leaf × class cells than this.

    Returns
    -------
    :class:`DiffGenResult` with ``noisy_counts`` of shape :func:`leaf_shape`.

    Raises
    ------
    InvalidParameterError
        Bad ε, h or score, or more leaves than ``max_leaves``.
    DomainError
        Values outside their domain or taxonomy.
    """
    counts = {p.attribute: marginal_counts(p, columns[p.attribute], classes, class_values) for p in predictors}
    cut, ledger = specialize_cut(predictors, counts, epsilon=epsilon, specializations=specializations, score=score,
                                 randomness=randomness)
    shape = leaf_shape(cut, len(class_values))
    total = math.prod(shape)
    if total > max_leaves:
        raise InvalidParameterError(f"the cut has {total} leaf x class cells, more than max_leaves = {max_leaves}")
    true = np.bincount(leaf_codes(cut, columns, classes, class_values), minlength=total).reshape(shape)
    eps = Fraction(epsilon)
    noisy = noisy_leaf_counts(true_counts=true, epsilon=eps, randomness=randomness)
    ledger = ledger + [BudgetSpend("Laplace noise on leaf counts", "leaves", eps / 2, "sequential")]
    return DiffGenResult(cut, tuple(class_values), eps, ledger, noisy)


def synthesize_cells(cut: Cut, codes: Mapping[str, np.ndarray], gen: np.random.Generator) -> dict[str, np.ndarray]:
    """Draw record values inside generalized cells (post-processing of the released counts).

    A categorical cell (a taxonomy node) gets a leaf value under it drawn uniformly; a numeric cell
    [a, b) gets an integer drawn uniformly among the integers in it (``integer`` domains; the top cell
    includes b) or a uniform real. ``codes`` maps attribute -> cell index per synthetic record.
    """
    out = {}
    for a in cut.attributes:
        p = cut.predictors[a]
        c = np.asarray(codes[a], dtype=np.int64)
        if isinstance(p, SpecializationTaxonomy):
            pools = [np.asarray(p.leaves[node]) for node in cut.nodes[a]]
            sizes = np.array([len(x) for x in pools])
            pick = np.floor(gen.random(c.size) * sizes[c]).astype(np.int64)
            offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
            flat = np.concatenate(pools) if pools else np.empty(0, dtype=str)
            out[a] = flat[offsets[c] + pick]
        else:
            b = np.asarray(cut.bounds[a])
            lo, hi = b[c], b[c + 1]
            if p.integer:
                top = c == b.size - 2
                ilo = np.ceil(lo)
                ihi = np.where(top, np.floor(hi), np.ceil(hi) - 1)
                empty = ihi < ilo  # a cell with no integer inside: take the nearest integer to its middle
                n_int = np.maximum(ihi - ilo + 1, 1)
                val = ilo + np.floor(gen.random(c.size) * n_int)
                val = np.where(empty, np.clip(np.round((lo + hi) / 2), p.lo, p.hi), val)
                out[a] = val.astype(np.int64)
            else:
                out[a] = lo + gen.random(c.size) * (hi - lo)
    return out
