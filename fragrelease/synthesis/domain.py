"""The public coding of a synthesis release: every protected attribute as a small integer domain.

A marginal-synthesis release (docs/specification.md §10) measures contingency tables, so every
protected attribute becomes a column of integer codes ``0 .. size-1``:

- a categorical attribute: the index of its value in the declared category order;
- a numeric attribute: the index of its bin. The bins are public: ``bins`` equal-width bins of the
  declared domain [lo, hi] (integer-typed attributes: edges rounded up to integers, so every bin
  holds whole numbers) or declared cuts, never derived from the data. Bins are left-open, as
  OpenDP's ``cuts`` are: bin 0 is [lo, e₁], bin i is (eᵢ, eᵢ₊₁].

Decoding is post-processing of released codes: a category code gives its label; a bin code gives a
value drawn uniformly inside the bin (a whole number for integer-typed attributes), from the
randomness the caller passes (the OS CSPRNG in a release; seeds only in tests).

Everything in this module is public: declared names, categories, domains and bin counts.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Optional, Sequence

import numpy as np
import pandas as pd

from fragrelease.errors import InvalidParameterError

#: Default number of equal-width bins of a numeric attribute's declared domain (public).
DEFAULT_BINS = 10

#: Uniform draws in the open interval (0, 1): ``uniforms(size) -> float64 array of shape (size,)``.
UniformSource = Callable[[int], np.ndarray]


def _as_written(value):
    """A numpy scalar as its Python value (so a message shows ``120``, not ``np.int64(120)``)."""
    return value.item() if isinstance(value, np.generic) else value


@dataclass(frozen=True)
class CodedAttribute:
    """One protected attribute as integer codes (all fields public, declared).

    Attributes
    ----------
    name : the column name.
    categories : the declared categories in order (categorical), or ``()`` (numeric).
    edges : numeric only: the ``size + 1`` increasing bin edges, ``edges[0] = lo`` and
        ``edges[-1] = hi``; bin 0 is ``[lo, edges[1]]``, bin ``i ≥ 1`` is ``(edges[i], edges[i+1]]``
        (left-open, as OpenDP's ``cuts``).
    integer : numeric only: the column holds whole numbers (decoded values are whole numbers).
    """

    name: str
    categories: tuple[str, ...] = ()
    edges: tuple[float, ...] = ()
    integer: bool = False

    @property
    def categorical(self) -> bool:
        return bool(self.categories)

    @property
    def size(self) -> int:
        """The number of codes: categories, or bins."""
        return len(self.categories) if self.categorical else len(self.edges) - 1

    @classmethod
    def numeric(cls, name: str, lo: float, hi: float, *, bins: int = DEFAULT_BINS,
                integer: bool = False, cuts: Optional[Sequence[float]] = None) -> CodedAttribute:
        """Equal-width bins of the declared [lo, hi] (integer attributes: whole-number edges, fewer bins if the
        domain holds fewer whole numbers than ``bins``), or the declared ``cuts``: bins
        ``[lo, c₁], (c₁, c₂], …, (c_m, hi]`` (cuts outside (lo, hi) are ignored).

        Raises
        ------
        InvalidParameterError
            ``lo >= hi``, a bound that is not finite, ``bins < 1`` or cuts that are not increasing.
        """
        if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
            raise InvalidParameterError(f"attribute {name!r}: the declared domain must have finite lo < hi, "
                                        f"not [{lo}, {hi}]")
        if cuts is not None:
            inner = [float(c) for c in cuts if lo < c < hi]
            if any(b <= a for a, b in zip(inner, inner[1:])):
                raise InvalidParameterError(f"attribute {name!r}: cuts must be increasing, not {list(cuts)}")
            return cls(name, (), tuple([float(lo), *inner, float(hi)]), integer)
        if bins < 1:
            raise InvalidParameterError(f"attribute {name!r}: bins must be >= 1, not {bins}")
        edges = np.linspace(lo, hi, bins + 1)
        if integer:  # whole-number inner edges, each bin holding at least one whole number
            inner = np.unique(np.floor(edges[1:-1]))
            inner = inner[(inner >= np.ceil(lo)) & (inner < np.floor(hi))]
            edges = np.concatenate([[lo], inner, [hi]])
        return cls(name, (), tuple(float(e) for e in edges), integer)

    def encode(self, values: pd.Series, *, source: str = "") -> np.ndarray:
        """Codes of one column, shape (n,) int64.

        Raises
        ------
        InvalidParameterError
            A null, an undeclared category or a number outside the declared domain; the message names
            the source, the column and one bad value as written.
        """
        where = f"{source}: " if source else ""
        if self.categorical:
            index = {c: i for i, c in enumerate(self.categories)}
            codes = values.map(index)
            bad = codes.isna()
            if bad.any():
                raise InvalidParameterError(f"{where}column {self.name!r}: value {_as_written(values[bad].iloc[0])!r} is not "
                                            f"one of the declared categories")
            return codes.to_numpy(np.int64)
        x = pd.to_numeric(values, errors="coerce").to_numpy(float)
        lo, hi = self.edges[0], self.edges[-1]
        bad = ~np.isfinite(x) | (x < lo) | (x > hi)
        if bad.any():
            raise InvalidParameterError(f"{where}column {self.name!r}: value {_as_written(values.iloc[int(np.argmax(bad))])!r} "
                                        f"lies outside the declared domain [{lo:g}, {hi:g}]")
        # the number of inner edges strictly below x: bin 0 is [lo, e1], bin i is (e_i, e_i+1]
        return np.searchsorted(np.asarray(self.edges[1:-1]), x, side="left").astype(np.int64)

    def decode(self, codes: np.ndarray, uniforms: UniformSource) -> np.ndarray:
        """Values of codes, shape (m,): labels (object) or numbers (float64) drawn uniformly inside each bin.

        Raises
        ------
        InvalidParameterError
            A code outside ``[0, size)``.
        """
        codes = np.asarray(codes, dtype=np.int64)
        if codes.size and (codes.min() < 0 or codes.max() >= self.size):
            raise InvalidParameterError(f"column {self.name!r}: a code lies outside [0, {self.size})")
        if self.categorical:
            return np.asarray(self.categories, dtype=object)[codes]
        edges = np.asarray(self.edges)
        lo, hi = edges[codes], edges[codes + 1]
        u = uniforms(codes.size)
        if self.integer:
            # the whole numbers of bin (lo, hi] (bin 0: [lo, hi])
            first = np.where(codes == 0, np.ceil(lo), np.floor(lo) + 1)
            top = np.floor(hi)
            count = np.maximum(top - first + 1, 1)
            return np.minimum(first + np.floor(u * count), top)
        return lo + u * (hi - lo)


@dataclass(frozen=True)
class SynthesisDomain:
    """The coded attributes of one release, in column order (public).

    Raises
    ------
    InvalidParameterError
        (on construction) no attribute or a name used twice.
    """

    attributes: tuple[CodedAttribute, ...]

    def __post_init__(self) -> None:
        names = [a.name for a in self.attributes]
        if not names:
            raise InvalidParameterError("a synthesis domain needs at least one attribute")
        if len(set(names)) != len(names):
            raise InvalidParameterError(f"attribute names must be distinct, not {names}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes)

    @property
    def sizes(self) -> dict[str, int]:
        """Codes per attribute, by name."""
        return {a.name: a.size for a in self.attributes}

    def __getitem__(self, name: str) -> CodedAttribute:
        for a in self.attributes:
            if a.name == name:
                return a
        raise InvalidParameterError(f"no attribute {name!r} in the synthesis domain {list(self.names)}")

    @classmethod
    def from_schema(cls, protected: Sequence, *, bins: Optional[Mapping[str, int]] = None,
                    cuts: Optional[Mapping[str, Sequence[float]]] = None) -> SynthesisDomain:
        """From :class:`fragrelease.schemas.base.Attribute` objects (the schema's protected attributes).

        ``bins``: per numeric attribute, its public bin count (default :data:`DEFAULT_BINS`); ``cuts``:
        per numeric attribute, its declared bin edges instead (:meth:`CodedAttribute.numeric`).
        """
        bins = dict(bins or {})
        cuts = dict(cuts or {})
        out = []
        for a in protected:
            if a.categorical:
                out.append(CodedAttribute(a.name, tuple(a.categories)))
            else:
                lo, hi = a.bounds()
                out.append(CodedAttribute.numeric(a.name, lo, hi, bins=bins.get(a.name, DEFAULT_BINS),
                                                  integer=a.type in ("integer", "long"), cuts=cuts.get(a.name)))
        return cls(tuple(out))

    def encode(self, table: pd.DataFrame, *, source: str = "") -> pd.DataFrame:
        """Codes of every attribute: (n, l) int64 frame with the attributes' names, in domain order.

        Raises
        ------
        InvalidParameterError
            A missing column or a bad value (:meth:`CodedAttribute.encode`).
        """
        missing = [n for n in self.names if n not in table.columns]
        if missing:
            raise InvalidParameterError(f"{source + ': ' if source else ''}missing column(s) {missing}")
        return pd.DataFrame({a.name: a.encode(table[a.name], source=source) for a in self.attributes},
                            index=table.index)

    def decode(self, codes: pd.DataFrame, uniforms: UniformSource) -> pd.DataFrame:
        """Values of a code table (post-processing): same shape, labels and numbers (:meth:`CodedAttribute.decode`)."""
        return pd.DataFrame({a.name: a.decode(codes[a.name].to_numpy(), uniforms) for a in self.attributes})


def contingency(codes: pd.DataFrame, clique: Sequence[str], sizes: Mapping[str, int]) -> np.ndarray:
    """Exact counts of one marginal: float64 array of shape ``(sizes[a] for a in clique)``.

    ``codes``: a code table (:meth:`SynthesisDomain.encode`). The numpy counterpart of the Spark
    job's ``groupBy(clique).count()`` (tests check them equal).
    """
    shape = tuple(int(sizes[a]) for a in clique)
    if len(codes) == 0:
        return np.zeros(shape)
    flat = np.ravel_multi_index(tuple(codes[a].to_numpy(np.int64) for a in clique), shape)
    return np.bincount(flat, minlength=int(np.prod(shape))).reshape(shape).astype(float)
