"""Mondrian multidimensional partitioning with k-anonymity and distinct ℓ-diversity (docs/specification.md §8).

LeFevre, DeWitt, Ramakrishnan, "Mondrian Multidimensional K-Anonymity", ICDE 2006, §4: a partition
is split on the quasi-identifier of widest **normalized** extent, numeric attributes at the median
(``x <= median`` / ``x > median``), categorical attributes into the children of the lowest taxonomy
node covering the partition's values; a split is kept only when every non-empty side is
*allowable* (at least k records and at least ℓ distinct sensitive values, i.e. distinct
ℓ-diversity, Machanavajjhala et al. 2007). When no attribute allows a split the partition is an
equivalence class. Widths: numeric ``(max - min) / (domain hi - domain lo)`` with the declared
public domain; categorical ``(leaves under the covering node - 1) / (leaves of the taxonomy - 1)``.

Each equivalence class is published with the range statistics of its members: numeric
``[min, max]``, categorical the lowest common taxonomy ancestor of the values present.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np
import pandas as pd

from fragrelease.errors import DomainError, InvalidParameterError, SchemaMismatchError
from fragrelease.rng.secure import secure_permutation
from fragrelease.taxonomy import QuasiIdentifier, check_positive_int


def encode_quasi_identifiers(df: pd.DataFrame, qis: Sequence[QuasiIdentifier]) -> list[np.ndarray]:
    """Numeric QIs as float arrays, categorical QIs as leaf ids of their taxonomy.

    Raises
    ------
    SchemaMismatchError
        A quasi-identifier column is missing.
    DomainError
        A null value, a numeric value outside the declared domain, or an unknown category (named).
    """
    out = []
    for q in qis:
        if q.name not in df.columns:
            raise SchemaMismatchError(f"quasi-identifier column {q.name!r} is missing; columns are {list(df.columns)}")
        col = df[q.name]
        if col.isna().any():
            raise DomainError(f"quasi-identifier {q.name!r} has null values")
        if q.kind == "numeric":
            v = pd.to_numeric(col, errors="coerce").to_numpy(dtype=float)
            if np.isnan(v).any():
                bad = col[np.isnan(v)].iloc[0]
                raise DomainError(f"value {bad!r} of numeric quasi-identifier {q.name!r} is not a number")
            lo, hi = q.require_domain()
            outside = (v < lo) | (v > hi)
            if outside.any():
                raise DomainError(f"value {v[outside][0]} of {q.name!r} lies outside its domain [{lo}, {hi}]")
            out.append(v)
        else:
            out.append(q.require_taxonomy().leaf_codes(col.astype(str).to_numpy()))
    return out


def sensitive_codes(df: pd.DataFrame, sensitive: str) -> tuple[np.ndarray, np.ndarray]:
    """Distinct sensitive values (sorted, as str) and each row's index into them."""
    if sensitive not in df.columns:
        raise SchemaMismatchError(f"sensitive column {sensitive!r} is missing; columns are {list(df.columns)}")
    col = df[sensitive]
    if col.isna().any():
        raise DomainError(f"sensitive attribute {sensitive!r} has null values")
    values, codes = np.unique(col.astype(str).to_numpy(), return_inverse=True)
    return values, codes.reshape(-1).astype(np.int64)


def _widths(idx, codes, qis) -> np.ndarray:
    w = np.zeros(len(qis))
    for a, q in enumerate(qis):
        x = codes[a][idx]
        if q.kind == "numeric":
            lo, hi = q.require_domain()
            w[a] = (x.max() - x.min()) / (hi - lo)
        else:
            t = q.require_taxonomy()
            node = t.lca_of(x)
            w[a] = (t.leaf_count[node] - 1) / max(t.n_leaves - 1, 1)
    return w


def _candidate_split(idx, codes, a, q) -> Optional[list[np.ndarray]]:
    x = codes[a][idx]
    if q.kind == "numeric":
        s = np.sort(x)
        median = s[(len(s) - 1) // 2]
        left = x <= median
        if left.all():
            left = x < median
        if not left.any() or left.all():
            return None
        return [idx[left], idx[~left]]
    t = q.require_taxonomy()
    node = t.lca_of(x)
    h = int(t.height[node])
    if h == 0:
        return None
    child = t.ancestor[x, h - 1]
    groups = np.unique(child)
    if len(groups) < 2:
        return None
    return [idx[child == g] for g in groups]


def mondrian_partition(codes: list[np.ndarray], qis: Sequence[QuasiIdentifier], sens: Optional[np.ndarray],
                       *, k: int, l: int = 1) -> list[np.ndarray]:
    """Mondrian partitions of rows ``0 .. n-1`` as index arrays (each ≥ k rows, ≥ ℓ distinct values).

    Parameters
    ----------
    codes : per quasi-identifier, shape (n,) (from :func:`encode_quasi_identifiers`).
    sens : sensitive codes, shape (n,), or None when ℓ = 1.
    k, l : k ≥ 1 and ℓ ≥ 1.

    Raises
    ------
    InvalidParameterError
        The whole input is not allowable (fewer than k rows or fewer than ℓ distinct values).
    """
    n = len(codes[0]) if codes else 0
    if n < k:
        raise InvalidParameterError(f"k = {k} exceeds the number of records {n}")
    if l > 1:
        if sens is None:
            raise InvalidParameterError(f"l = {l} needs the sensitive codes, but sens is None")
        if len(np.unique(sens)) < l:
            raise InvalidParameterError(f"l = {l} exceeds the {len(np.unique(sens))} distinct sensitive values")

    def allowable(part: np.ndarray) -> bool:
        if len(part) < k:
            return False
        return l <= 1 or (sens is not None and len(np.unique(sens[part])) >= l)

    done: list[np.ndarray] = []
    stack = [np.arange(n)]
    while stack:
        idx = stack.pop()
        if len(idx) < 2 * k:
            done.append(idx)
            continue
        widths = _widths(idx, codes, qis)
        split = None
        for a in np.argsort(-widths, kind="stable"):
            if widths[a] <= 0:
                break
            parts = _candidate_split(idx, codes, int(a), qis[int(a)])
            if parts is not None and all(allowable(p) for p in parts):
                split = parts
                break
        if split is None:
            done.append(idx)
        else:
            stack.extend(split)
    return done


def mondrian_anonymize(df: pd.DataFrame, qis: Sequence[QuasiIdentifier], sensitive: str, *, k: int, l: int,
                       keep: Sequence[str] = (),
                       permutation: Callable[[int], np.ndarray] = secure_permutation) -> pd.DataFrame:
    """An ℓ-diverse, k-anonymous generalization of ``df`` (one row per input row).

    Parameters
    ----------
    df : rows with the quasi-identifier columns and ``sensitive``.
    qis : the quasi-identifiers (numeric with declared domains, categorical with taxonomies).
    sensitive : the sensitive attribute's column (any type; compared as strings).
    k : minimum equivalence-class size, ≥ 1. l : distinct ℓ-diversity, ≥ 1.
    keep : extra columns copied unchanged (e.g. an audit key; never publish ids by default).
    permutation : the output's random row order (CSPRNG; tests may pass a seeded one), so rows
        cannot be lined up with the input's order.

    Returns
    -------
    DataFrame with ``eq_class`` (int64, 0-based), for each numeric QI ``<name>_lo``/``<name>_hi``
    (float64, the class's [min, max]), for each categorical QI ``<name>`` (str, the lowest common
    taxonomy ancestor of the class's values), ``sensitive`` (str) and ``keep``; rows in random order.

    Raises
    ------
    InvalidParameterError, SchemaMismatchError, DomainError
        Bad k or ℓ, missing columns, values outside domains or taxonomies (named in the message).

    References
    ----------
    LeFevre et al. (ICDE 2006) §4; docs/specification.md §8.
    """
    k = check_positive_int("k", k)
    l = check_positive_int("l", l)
    for c in keep:
        if c not in df.columns:
            raise SchemaMismatchError(f"column {c!r} to keep is missing; columns are {list(df.columns)}")
    codes = encode_quasi_identifiers(df, qis)
    values, sens = sensitive_codes(df, sensitive)
    parts = mondrian_partition(codes, qis, sens, k=k, l=l)
    order = np.concatenate(parts)
    eq = np.concatenate([np.full(len(p), i, dtype=np.int64) for i, p in enumerate(parts)])
    out = {"eq_class": eq}
    for a, q in enumerate(qis):
        if q.kind == "numeric":
            lo = np.concatenate([np.full(len(p), codes[a][p].min()) for p in parts])
            hi = np.concatenate([np.full(len(p), codes[a][p].max()) for p in parts])
            out[f"{q.name}_lo"], out[f"{q.name}_hi"] = lo, hi
        else:
            t = q.require_taxonomy()
            out[q.name] = np.concatenate([np.full(len(p), t.nodes[t.lca_of(codes[a][p])], dtype=object) for p in parts])
    out[sensitive] = values[sens[order]].astype(object)
    res = pd.DataFrame(out)
    for c in keep:
        res[c] = df[c].to_numpy()[order]
    return res.iloc[permutation(len(res))].reset_index(drop=True)
