"""Generalization taxonomies and quasi-identifier descriptions (docs/specification.md §5 and §8).

A :class:`Taxonomy` is a tree over the values of one attribute, built from one root-ward path per
leaf (``[leaf, level 1, ..., "*"]``, the format of the vendored ARX hierarchies, which
:mod:`fragrelease.schemas.taxonomies` loads). Every leaf sits at the same depth, so the
number of **generalization steps** from a leaf to an ancestor is the ancestor's height (leaves have
height 0). The Distortion of a generalization is the sum of those steps over the attributes
(Li, Wong, Fu, Pei, "Anonymization by local recoding in data with attribute hierarchical
taxonomies", IEEE TKDE 20(9), 2008, §3, with unit weights per level).

Two generalized values of one taxonomy intersect in the more specific of the two when one is an
ancestor of the other and are disjoint otherwise (Baig et al. (CIKM 2011) Definition 2): in a tree, the leaf sets
of two nodes are nested or disjoint.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Literal, Optional, Sequence

import numpy as np

from .errors import ConfigError, DomainError, InvalidParameterError


class Taxonomy:
    """A generalization tree over one attribute's values.

    Nodes are identified by name (a value or a generalized value such as ``"Higher education"``);
    integer node ids index the arrays below. Leaves come first (ids ``0 .. n_leaves - 1``, in file
    order).

    Attributes
    ----------
    name : attribute name.
    nodes : tuple of node names, length n_nodes.
    parent : int array (n_nodes,), -1 for the root.
    height : int array (n_nodes,), generalization steps from a leaf (leaves 0, root = depth).
    n_leaves : number of leaves.

    Raises
    ------
    ConfigError
        Paths of different lengths, a path not ending in the same root, or a name that appears with
        two different parents or at two levels.
    """

    def __init__(self, name: str, paths: Sequence[Sequence[str]]):
        if not paths:
            raise ConfigError(f"taxonomy {name!r} has no paths")
        depth = len(paths[0])
        roots = {p[-1] for p in paths}
        if len(roots) != 1:
            raise ConfigError(f"taxonomy {name!r} has several roots: {sorted(roots)}")
        self.name = name
        index: dict[str, int] = {}
        names: list[str] = []
        level: list[int] = []
        for p in paths:
            if len(p) != depth:
                raise ConfigError(f"taxonomy {name!r}: path {list(p)} has {len(p)} levels, expected {depth}")
            if p[0] in index:
                raise ConfigError(f"taxonomy {name!r}: leaf {p[0]!r} listed twice")
            index[p[0]] = len(names)
            names.append(p[0])
            level.append(0)
        self.n_leaves = len(names)
        parent_of: dict[int, int] = {}
        for p in paths:
            for h in range(1, depth):
                node = p[h]
                if node not in index:
                    index[node] = len(names)
                    names.append(node)
                    level.append(h)
                elif level[index[node]] != h:
                    raise ConfigError(f"taxonomy {name!r}: {node!r} appears at levels {level[index[node]]} and {h}")
            for h in range(depth - 1):
                child, par = index[p[h]], index[p[h + 1]]
                if parent_of.setdefault(child, par) != par:
                    raise ConfigError(f"taxonomy {name!r}: {p[h]!r} has two parents")
        self.nodes = tuple(names)
        self._index = index
        self.parent = np.array([parent_of.get(i, -1) for i in range(len(names))], dtype=np.int64)
        self.height = np.array(level, dtype=np.int64)
        self.depth = depth - 1
        # ancestor[leaf, h] = the leaf's ancestor at height h
        anc = np.empty((self.n_leaves, depth), dtype=np.int64)
        anc[:, 0] = np.arange(self.n_leaves)
        for h in range(1, depth):
            anc[:, h] = self.parent[anc[:, h - 1]]
        self.ancestor = anc
        # leaf membership and lowest common ancestors of every node pair
        n = len(names)
        member = np.zeros((n, self.n_leaves), dtype=bool)
        for h in range(depth):
            member[anc[:, h], np.arange(self.n_leaves)] = True
        self.member = member
        self.leaf_count = member.sum(axis=1)
        self.lca = self._lca_matrix()

    def _lca_matrix(self) -> np.ndarray:
        n = len(self.nodes)
        chain = []
        for i in range(n):
            path, j = [], i
            while j != -1:
                path.append(j)
                j = int(self.parent[j])
            chain.append(path)
        lca = np.empty((n, n), dtype=np.int64)
        for i in range(n):
            anc_i = set(chain[i])
            for j in range(i, n):
                common = next(a for a in chain[j] if a in anc_i)
                lca[i, j] = lca[j, i] = common
        return lca

    # ----------------------------------------------------------------- lookups
    @property
    def root(self) -> int:
        return int(np.flatnonzero(self.parent == -1)[0])

    @property
    def leaves(self) -> tuple[str, ...]:
        return self.nodes[: self.n_leaves]

    def node_id(self, value: str) -> int:
        """Node id of a value or generalized value; :class:`DomainError` naming it if unknown."""
        try:
            return self._index[str(value)]
        except KeyError:
            raise DomainError(f"value {value!r} is not in the taxonomy of {self.name!r}") from None

    def leaf_codes(self, values: Iterable) -> np.ndarray:
        """Leaf ids of raw values, int64 array; :class:`DomainError` naming the first unknown value."""
        arr = np.asarray(list(values) if not isinstance(values, np.ndarray) else values).astype(str)
        uniq, inv = np.unique(arr, return_inverse=True)
        codes = np.empty(len(uniq), dtype=np.int64)
        for i, u in enumerate(uniq):
            c = self._index.get(u)
            if c is None or c >= self.n_leaves:
                raise DomainError(f"value {u!r} of {self.name!r} is not a leaf of its taxonomy")
            codes[i] = c
        return codes[inv.reshape(-1)]

    def lca_of(self, node_ids: np.ndarray) -> int:
        """Lowest common ancestor of a non-empty set of node ids."""
        ids = np.unique(np.asarray(node_ids, dtype=np.int64))
        acc = int(ids[0])
        for i in ids[1:]:
            acc = int(self.lca[acc, int(i)])
        return acc

    def steps(self, leaf: int, node: int) -> int:
        """Generalization steps from a leaf to one of its ancestors (the ancestor's height)."""
        if not self.member[node, leaf]:
            raise DomainError(f"{self.nodes[node]!r} does not generalize {self.nodes[leaf]!r} in {self.name!r}")
        return int(self.height[node])

    def leaves_of(self, value: str) -> tuple[str, ...]:
        """The leaves a (generalized) value covers, in leaf order."""
        return tuple(self.nodes[i] for i in np.flatnonzero(self.member[self.node_id(value)]))

    def intersect(self, a: str, b: str) -> Optional[str]:
        """Intersection of two generalized values: the more specific one if nested, else ``None``."""
        ia, ib = self.node_id(a), self.node_id(b)
        common = self.lca[ia, ib]
        if common == ia:
            return b
        if common == ib:
            return a
        return None

    def __repr__(self) -> str:
        return f"Taxonomy({self.name!r}, leaves={self.n_leaves}, depth={self.depth})"


@dataclass(frozen=True)
class QuasiIdentifier:
    """One quasi-identifier: name, kind, taxonomy (required for categorical) and numeric domain.

    ``numeric`` attributes are generalized to ranges (Mondrian) or to an average plus an indicative
    range (cloning); their ``domain`` [lo, hi] (public, declared) normalizes Mondrian's widths and
    their taxonomy, when given, measures Distortion (values must then be integers whose decimal
    strings are the leaves, as in Adult's age hierarchy ``"1"`` … ``"100"``). ``categorical``
    attributes are generalized along their taxonomy.
    """

    name: str
    kind: Literal["numeric", "categorical"]
    taxonomy: Optional[Taxonomy] = field(default=None, compare=False)
    domain: Optional[tuple[float, float]] = None

    def __post_init__(self):
        if self.kind not in ("numeric", "categorical"):
            raise ConfigError(f"kind of {self.name!r} must be 'numeric' or 'categorical', not {self.kind!r}")
        if self.kind == "categorical" and self.taxonomy is None:
            raise ConfigError(f"categorical quasi-identifier {self.name!r} needs a taxonomy")
        if self.kind == "numeric":
            if self.domain is None:
                raise ConfigError(f"numeric quasi-identifier {self.name!r} needs a domain [lo, hi]")
            lo, hi = self.domain
            if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
                raise ConfigError(f"domain of {self.name!r} must be finite with lo < hi, not {self.domain}")

    def leaf_codes(self, values) -> np.ndarray:
        """Leaf ids of this attribute's values in its taxonomy (numeric: integer decimal strings)."""
        if self.taxonomy is None:
            raise ConfigError(f"quasi-identifier {self.name!r} has no taxonomy to measure Distortion")
        if self.kind == "numeric":
            v = np.asarray(values, dtype=float)
            if np.any(v != np.round(v)):
                bad = v[v != np.round(v)][0]
                raise DomainError(f"numeric value {bad} of {self.name!r} is not an integer leaf of its taxonomy")
            values = [str(int(x)) for x in v]
        return self.taxonomy.leaf_codes(values)

    def require_taxonomy(self) -> Taxonomy:
        """This attribute's taxonomy (always present for a categorical quasi-identifier).

        Raises
        ------
        ConfigError
            The attribute was declared without one (a numeric quasi-identifier may be).
        """
        if self.taxonomy is None:
            raise ConfigError(f"quasi-identifier {self.name!r} has no taxonomy")
        return self.taxonomy

    def require_domain(self) -> tuple[float, float]:
        """This attribute's declared domain (lo, hi), lo < hi (always present for a numeric quasi-identifier).

        Raises
        ------
        ConfigError
            The attribute was declared without one (a categorical quasi-identifier may be).
        """
        if self.domain is None:
            raise ConfigError(f"quasi-identifier {self.name!r} has no domain [lo, hi]")
        return self.domain


def check_positive_int(name: str, value, minimum: int = 1) -> int:
    """``value`` as int ≥ minimum, else :class:`InvalidParameterError` naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise InvalidParameterError(f"{name} must be an integer >= {minimum}, not {value!r}")
    return int(value)
