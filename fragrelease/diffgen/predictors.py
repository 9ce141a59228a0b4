"""DiffGen's predictors, their value × class counts and the two scores (docs/specification.md §7).

Source: Mohammed, Chen, Fung and Yu, "Differentially private data release for data mining" (KDD
2011), Sections 4.1-4.2. A categorical predictor is a taxonomy tree (:class:`SpecializationTaxonomy`),
a numeric one a declared domain (:class:`NumericDomain`). A candidate's score depends only on the
records generalized to it, i.e. on its attribute's value × class counts (:class:`AttributeCounts`):
the whole specialization process (:mod:`fragrelease.diffgen.engine`) runs on these marginals.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from fragrelease.errors import ConfigError, DomainError, InvalidParameterError

#: Score functions of docs/specification.md §7.
SCORES = ("max", "infogain")
#: Sensitivity Δu of both scores (docs/specification.md §7: Δu = 1; log2 |classes| = 1 for a binary class).
SCORE_SENSITIVITY = 1.0


# ----------------------------------------------------------------------------------------------
# Predictors: taxonomy trees (categorical) and declared domains (numeric)
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SpecializationTaxonomy:
    """A categorical predictor's taxonomy tree.

    ``children[node]`` lists a node's children in file order (leaves have none); ``leaves[node]``
    lists the leaf values (the data's categories) under each node. Node labels are unique.
    """

    attribute: str
    root: str
    children: Mapping[str, tuple[str, ...]]
    leaves: Mapping[str, tuple[str, ...]]

    @property
    def kind(self) -> str:
        return "categorical"

    def is_leaf(self, node: str) -> bool:
        return not self.children.get(node)


@dataclass(frozen=True)
class NumericDomain:
    """A numeric predictor with its declared public domain [lo, hi] (not the observed range)."""

    attribute: str
    lo: float
    hi: float
    integer: bool = True

    @property
    def kind(self) -> str:
        return "numeric"


Predictor = SpecializationTaxonomy | NumericDomain


def taxonomy_from_paths(attribute: str, paths: Sequence[Sequence[str]]) -> SpecializationTaxonomy:
    """Build a :class:`SpecializationTaxonomy` from root-ward paths ``[leaf, level 1, ..., root]``.

    This is the shape of ARX hierarchy files (``load_adult_taxonomy``). A label used at two places
    of the tree gets a ``"<label>@<level>"`` suffix so that node labels stay unique.

    Raises
    ------
    ConfigError
        No paths, paths of unequal length, several roots, or a node with two parents.
    """
    if not paths:
        raise ConfigError(f"taxonomy of {attribute!r} has no paths")
    depth = len(paths[0])
    if depth < 2 or any(len(p) != depth for p in paths):
        raise ConfigError(f"taxonomy of {attribute!r}: all paths must have the same length >= 2")
    roots = {p[-1] for p in paths}
    if len(roots) != 1:
        raise ConfigError(f"taxonomy of {attribute!r} must have one root, has {sorted(roots)}")
    # label per (level, path prefix from the root) so equal labels under different parents stay apart
    label_levels: dict[str, set[int]] = {}
    for p in paths:
        for level, label in enumerate(p):
            label_levels.setdefault(label, set()).add(level)
    def name(label: str, level: int) -> str:
        return label if len(label_levels[label]) == 1 else f"{label}@{level}"

    children: dict[str, list[str]] = {}
    parent: dict[str, str] = {}
    leaves: dict[str, list[str]] = {}
    for p in paths:
        names = [name(label, level) for level, label in enumerate(p)]
        leaf = p[0]
        for level in range(depth - 1, 0, -1):
            par, child = names[level], names[level - 1]
            if parent.setdefault(child, par) != par:
                raise ConfigError(f"taxonomy of {attribute!r}: node {child!r} has two parents")
            kids = children.setdefault(par, [])
            if child not in kids:
                kids.append(child)
        for n in names:
            leaves.setdefault(n, [])
            if leaf not in leaves[n]:
                leaves[n].append(leaf)
    root = name(paths[0][-1], depth - 1)
    # a leaf is a node whose label is a data value: its leaves list is itself
    return SpecializationTaxonomy(attribute, root, {k: tuple(v) for k, v in children.items()},
                    {k: tuple(v) for k, v in leaves.items()})


def flat_taxonomy(attribute: str, values: Sequence[str], root: str = "*") -> SpecializationTaxonomy:
    """A one-level taxonomy (root → every value), for attributes without a published hierarchy."""
    return taxonomy_from_paths(attribute, [[v, root] for v in values])


# ----------------------------------------------------------------------------------------------
# Marginal counts and scores
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AttributeCounts:
    """Value × class record counts of one predictor: what Spark's ``groupBy(attr, class).count()`` gives.

    ``values``: shape (m,), the distinct values (numeric: sorted ascending floats; categorical:
    leaf labels); ``counts``: int64 array (m, |classes|) with the number of records per value and class.
    """

    values: np.ndarray
    counts: np.ndarray


def counts_from_pairs(values, classes, counts, class_values: Sequence[str], numeric: bool) -> AttributeCounts:
    """Assemble :class:`AttributeCounts` from aggregated rows ``(value, class, count)``.

    Raises
    ------
    DomainError
        A class value not in ``class_values``.
    """
    values = np.asarray(values)
    classes = np.asarray(classes).astype(str)
    counts = np.asarray(counts, dtype=np.int64)
    cidx = {c: i for i, c in enumerate(class_values)}
    bad = [c for c in np.unique(classes) if c not in cidx]
    if bad:
        raise DomainError(f"class value {bad[0]!r} is not one of {list(class_values)}")
    uniq = np.unique(values.astype(float) if numeric else values.astype(str))
    pos = np.searchsorted(uniq, values.astype(float) if numeric else values.astype(str))
    mat = np.zeros((uniq.size, len(class_values)), dtype=np.int64)
    np.add.at(mat, (pos, np.array([cidx[c] for c in classes], dtype=np.int64)), counts)
    return AttributeCounts(uniq, mat)


def _entropy_rows(mat: np.ndarray) -> np.ndarray:
    """Class entropy in bits of each row of a count matrix (0 for empty rows)."""
    mat = np.asarray(mat, dtype=float)
    tot = mat.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(tot > 0, mat / np.where(tot > 0, tot, 1), 0.0)
        h = -np.where(p > 0, p * np.log2(np.where(p > 0, p, 1)), 0.0).sum(axis=-1)
    return h


def score_children(child_counts: np.ndarray, score: str) -> np.ndarray:
    """Score of specializations given their children's class counts.

    Parameters
    ----------
    child_counts : array (..., k, |classes|)
        Records per child and class; leading axes index alternative specializations.
    score : "max" or "infogain"

    Returns
    -------
    array (...,): Max = Σ_child max_class count (records); InfoGain in bits, in [0, log2 |classes|].
    """
    k = np.asarray(child_counts, dtype=float)
    if score == "max":
        return k.max(axis=-1).sum(axis=-1)
    if score == "infogain":
        parent = k.sum(axis=-2)
        n_v = parent.sum(axis=-1)
        n_c = k.sum(axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            w = np.where(n_v[..., None] > 0, n_c / np.where(n_v > 0, n_v, 1)[..., None], 0.0)
        return _entropy_rows(parent) - (w * _entropy_rows(k)).sum(axis=-1)
    raise InvalidParameterError(f"score must be one of {SCORES}, not {score!r}")


def marginal_counts(p: Predictor, values, classes, class_values: Sequence[str]) -> AttributeCounts:
    """Value × class counts of one predictor from in-memory records (the pandas twin of the Spark groupBy).

    Raises
    ------
    DomainError
        A value outside the declared domain or not a leaf of the taxonomy.
    """
    numeric = isinstance(p, NumericDomain)
    v = np.asarray(values, dtype=float) if numeric else np.asarray(values).astype(str)
    if isinstance(p, NumericDomain):
        outside = ~((v >= p.lo) & (v <= p.hi))
        if outside.any():
            raise DomainError(f"{p.attribute} value {v[outside][0]} outside its declared domain [{p.lo}, {p.hi}]")
    else:
        leaves = set(p.leaves[p.root])
        unknown = [u for u in np.unique(v) if u not in leaves]
        if unknown:
            raise DomainError(f"{p.attribute} value {unknown[0]!r} is not a leaf of its taxonomy")
    cls = np.asarray(classes).astype(str)
    uniq, inv = np.unique(v, return_inverse=True)
    cidx = {c: i for i, c in enumerate(class_values)}
    cu, cinv = np.unique(cls, return_inverse=True)
    bad = [c for c in cu if c not in cidx]
    if bad:
        raise DomainError(f"class value {bad[0]!r} is not one of {list(class_values)}")
    mat = np.zeros((uniq.size, len(class_values)), dtype=np.int64)
    np.add.at(mat, (inv, np.array([cidx[c] for c in cu], dtype=np.int64)[cinv]), 1)
    return AttributeCounts(uniq, mat)
