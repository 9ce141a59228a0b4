"""Tier chains: thresholds, surrogate ids, tables and :func:`run_chain` (docs/specification.md §6).

Source: W. Chang and J. Wu, "Strengthening Data Privacy During Propagation", SPME 2014, §2 and §4;
see :mod:`fragrelease.tiers` for the terms. ``fragrelease.jobs.tiers`` applies the same steps on Spark.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from fragrelease.errors import DomainError, InvalidParameterError, SchemaMismatchError, ThresholdTooLooseError
from fragrelease.rng.secure import secure_random_keys
from fragrelease.tiers.algorithms import (
    ALGORITHMS,
    DEFAULT_MAX_NODE_ROWS,
    Atoms,
    TableContext,
    _group_mean,
    build_atoms,
    fla_choose,
    plsa,
    solve,
    tda_split,
)
from fragrelease.tiers.measures import _js_rows, disclosure, utility, utility_loss


def thresholds(delta, hops: int) -> list[Fraction]:
    """The chain's thresholds ``(l - i + 1)·δ`` for tiers ``i = 1..l`` (docs/specification.md §6), exact.

    Raises
    ------
    InvalidParameterError
        ``δ`` not a positive finite number or ``hops`` not an integer ≥ 1.
    """
    d = parse_delta(delta)
    if isinstance(hops, bool) or not isinstance(hops, (int, np.integer)) or hops < 1:
        raise InvalidParameterError(f"hops (chain length l) must be an integer >= 1, not {hops!r}")
    return [(hops - i + 1) * d for i in range(1, int(hops) + 1)]


def parse_delta(delta) -> Fraction:
    """δ as an exact positive Fraction (accepts ``0.05``, ``"0.05"``, ``"1/20"``).

    Raises
    ------
    InvalidParameterError
        Not a number, not finite, or ≤ 0.
    """
    try:
        if isinstance(delta, float) and not math.isfinite(delta):
            raise ValueError
        d = Fraction(str(delta)) if not isinstance(delta, Fraction) else delta
    except (ValueError, ZeroDivisionError, TypeError):
        raise InvalidParameterError(f"delta must be a positive number, not {delta!r}") from None
    if d <= 0:
        raise InvalidParameterError(f"delta must be > 0, not {delta!r}")
    return d


def singleton_disclosure(p: Sequence[float] | np.ndarray) -> float:
    """``P`` of the table in which every record is its own class: ``max_v JS(p, e_v)`` over present values.

    A class of one record with sensitive value ``v`` has the point distribution ``e_v``; because JS
    is convex in its second argument, no class of any table with the distribution ``p`` has a larger
    divergence, so ``P(T) ≤`` this value for every table (``T_0`` included).

    Parameters
    ----------
    p : the table's sensitive-value distribution (1-D, non-negative, non-zero; normalized here).

    Returns
    -------
    float in [0, 1]; 0 when the sensitive attribute has one value (0.493 on German Credit).

    Raises
    ------
    InvalidParameterError
        Negative entries or an all-zero vector.

    References
    ----------
    docs/specification.md §6 (the refusal of thresholds at or above it); Chang & Wu (SPME 2014) §2.
    """
    p = np.asarray(p, dtype=float)
    if p.ndim != 1 or (p < 0).any() or p.sum() <= 0:
        raise InvalidParameterError(f"a distribution must be 1-D, non-negative and non-zero, not {p.tolist()}")
    p = p / float(p.sum())
    present = np.flatnonzero(p > 0)
    return float(_js_rows(p, np.eye(len(p))[present]).max())


def refuse_loose_thresholds(ths: Sequence[Fraction], singleton: float) -> None:
    """Refuse a chain whose loosest threshold ``l·δ`` (tier 1) is not below the singleton disclosure.

    Every tier ``i`` needs ``(l - i + 1)·δ < singleton`` (:func:`singleton_disclosure`): at a
    threshold at or above it the input table may already satisfy ``P < θ`` (``P(T) ≤ singleton`` for
    every table), so the tier could equal ``T_0`` unchanged. The thresholds decrease with ``i``, so
    the check is on tier 1, i.e. on δ and the chain length together.

    Parameters
    ----------
    ths : the chain's thresholds, tier 1 first (:func:`thresholds`).
    singleton : the source's singleton disclosure, in [0, 1].

    Raises
    ------
    ThresholdTooLooseError
        Naming tier 1's threshold, the tiers affected and the singleton disclosure. The singleton
        disclosure is an aggregate of the data (it fixes the rarest sensitive value's share when
        there are two values): this error is shown to the operator only and is never written into
        any tier's provenance, manifest or log (the check runs before anything is committed).

    References
    ----------
    docs/specification.md §6.
    """
    bad = [i for i, th in enumerate(ths, start=1) if float(th) >= singleton]
    if not bad:
        return
    hops = len(ths)
    th = ths[0]
    which = "tier 1" if bad == [1] else f"tiers {bad[0]}..{bad[-1]}"
    raise ThresholdTooLooseError(
        f"tier 1's threshold l·δ = {float(th):g} (l = {hops}, δ = {float(th) / hops:g}) is at or above the "
        f"disclosure of singleton classes, {singleton:.4f} ({which} of {hops} affected): such a tier could equal "
        f"the source unchanged; choose δ < {singleton / hops:.4g} for l = {hops}",
        tier=1, threshold=th, singleton_disclosure=singleton)


def draw_surrogate_ids(n: int) -> np.ndarray:
    """``n`` distinct row ids drawn from the OS CSPRNG (:func:`fragrelease.rng.secure.secure_random_keys`).

    Uniform in [0, 2**63), int64; redrawn in the (probability < n² / 2⁶⁴) event of a collision.
    Their order is a uniformly random permutation of the rows, so they carry nothing of the input's
    ids or row order (docs/specification.md §6).

    Raises
    ------
    InvalidParameterError
        ``n`` < 0.
    """
    while True:
        ids = secure_random_keys(n)
        if len(np.unique(ids)) == n:
            return ids


def with_surrogate_ids(pdf: pd.DataFrame, cols: TierColumns) -> pd.DataFrame:
    """A copy of ``pdf`` whose row-id column holds CSPRNG surrogates (:func:`draw_surrogate_ids`).

    Row ``j`` of the copy is row ``j`` of ``pdf`` with a fresh id; the map from surrogates back to
    the input's ids is not returned or kept anywhere (docs/tiers.md, Limits).
    """
    out = pdf.copy()
    out[cols.row_id] = draw_surrogate_ids(len(out))
    return out


# --------------------------------------------------------------------------------------------------
# Tables (pandas) and chains
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TierColumns:
    """Which columns of a table play which role.

    ``quasi_identifiers``: numeric columns; ``sensitive``: the sensitive attribute; ``row_id``: the
    row number (unique integers: the paper's row numbers, which break ties; :func:`run_chain` and
    the Spark job replace the input's values by CSPRNG surrogates before ``T_1``, and the tiers
    carry only those); ``weights``: one per quasi-identifier, Σ = 1.
    """

    quasi_identifiers: tuple[str, ...]
    sensitive: str
    row_id: str
    weights: tuple[float, ...]

    @staticmethod
    def make(quasi_identifiers: Sequence[str], sensitive: str, row_id: str,
             weights: Optional[Sequence[float]] = None) -> TierColumns:
        """Validated columns; ``weights`` default uniform, otherwise normalized to sum 1.

        Raises
        ------
        InvalidParameterError
            No quasi-identifier, duplicates, the sensitive or row-id column among them, a weight
            count that differs, or negative / non-finite / all-zero weights.
        """
        qi = tuple(quasi_identifiers)
        if not qi:
            raise InvalidParameterError("at least one quasi-identifier is needed, not none")
        if len(set(qi)) != len(qi):
            raise InvalidParameterError(f"quasi-identifiers must be distinct, not {list(qi)}")
        for col in (sensitive, row_id):
            if col in qi:
                raise InvalidParameterError(f"column {col!r} cannot be both a quasi-identifier and the sensitive/row-id column")
        if sensitive == row_id:
            raise InvalidParameterError(f"the sensitive attribute and the row id must differ, not both {sensitive!r}")
        if weights is None:
            w = np.full(len(qi), 1.0 / len(qi))
        else:
            w = np.asarray(list(weights), dtype=float)
            if w.shape != (len(qi),):
                raise InvalidParameterError(f"need one weight per quasi-identifier ({len(qi)}), not {len(w)}")
            if not np.isfinite(w).all() or (w < 0).any() or w.sum() <= 0:
                raise InvalidParameterError(f"weights must be finite, >= 0 and not all 0, not {w.tolist()}")
            w = w / w.sum()
        return TierColumns(qi, sensitive, row_id, tuple(float(v) for v in w))


def validate_table(pdf: pd.DataFrame, cols: TierColumns) -> None:
    """Check a pandas table for a tier chain.

    Raises
    ------
    SchemaMismatchError
        A named column is missing, or a quasi-identifier is not numeric.
    DomainError
        Nulls or non-finite values in a used column, or duplicate row ids.
    """
    for c in (*cols.quasi_identifiers, cols.sensitive, cols.row_id):
        if c not in pdf.columns:
            raise SchemaMismatchError(f"column {c!r} is not in the table (columns: {list(pdf.columns)})")
    for c in cols.quasi_identifiers:
        if not pd.api.types.is_numeric_dtype(pdf[c]) or pd.api.types.is_bool_dtype(pdf[c]):
            raise SchemaMismatchError(f"quasi-identifier {c!r} must be numeric, not {pdf[c].dtype}")
    for c in (*cols.quasi_identifiers, cols.sensitive, cols.row_id):
        n_null = int(pdf[c].isna().sum())
        if n_null:
            raise DomainError(f"column {c!r} has {n_null} null value(s)")
    x = pdf[list(cols.quasi_identifiers)].to_numpy(float)
    if not np.isfinite(x).all():
        bad = [c for c in cols.quasi_identifiers if not np.isfinite(pdf[c].to_numpy(float)).all()]
        raise DomainError(f"quasi-identifier(s) {bad} have non-finite values")
    if not pd.api.types.is_integer_dtype(pdf[cols.row_id]):
        raise SchemaMismatchError(f"row id {cols.row_id!r} must be integer, not {pdf[cols.row_id].dtype}")
    if pdf[cols.row_id].duplicated().any():
        raise DomainError(f"row id {cols.row_id!r} has duplicate values")


def sensitive_values(series: pd.Series) -> tuple:
    """The sensitive attribute's distinct values in a fixed order (sorted by their string form)."""
    return tuple(sorted(pd.unique(series).tolist(), key=lambda v: (str(type(v)), str(v))))


def standardize(pdf: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """Copy of ``pdf`` with ``columns`` as z-scores (population standard deviation; constant columns → 0).

    The experiment's preprocessing (docs/specification.md §6: German Credit attributes standardized).
    """
    out = pdf.copy()
    for c in columns:
        v = out[c].to_numpy(float)
        mu, sd = float(np.mean(v)), float(np.std(v))
        out[c] = (v - mu) / sd if sd > 0 else np.zeros(len(v))
    return out


def table_context(pdf: pd.DataFrame, cols: TierColumns, values: tuple) -> TableContext:
    """The :class:`TableContext` of a pandas table (the pure-python reference path)."""
    x = pdf[list(cols.quasi_identifiers)].to_numpy(float)
    return TableContext.from_arrays(x, encode_sensitive(pdf[cols.sensitive], values), values, np.array(cols.weights))


def encode_sensitive(series: pd.Series, values: tuple) -> np.ndarray:
    """Sensitive values as indices into ``values``.

    Raises
    ------
    DomainError
        A value that is not in ``values``.
    """
    index = {v: i for i, v in enumerate(values)}
    try:
        return np.array([index[v] for v in series.tolist()], dtype=np.int64)
    except KeyError as exc:
        raise DomainError(f"sensitive value {exc.args[0]!r} is not among the table's values {list(values)}") from None


def _atoms_of(pdf: pd.DataFrame, cols: TierColumns, ctx: TableContext) -> tuple[pd.DataFrame, Atoms]:
    pdf = pdf.sort_values(cols.row_id, kind="stable").reset_index(drop=True)
    x = pdf[list(cols.quasi_identifiers)].to_numpy(float)
    codes = encode_sensitive(pdf[cols.sensitive], ctx.values)
    return pdf, build_atoms(x, codes, pdf[cols.row_id].to_numpy(), len(ctx.values))


def _recoded(pdf: pd.DataFrame, a: Atoms, groups: list[np.ndarray], cols: TierColumns) -> pd.DataFrame:
    atom_group = np.empty(len(a.size), dtype=np.int64)
    for gi, g in enumerate(groups):
        atom_group[g] = gi
    means = np.array([_group_mean(a, g) for g in groups])
    recoded = means[atom_group[a.row_atom]]
    out = pdf.copy()
    for k, c in enumerate(cols.quasi_identifiers):
        out[c] = recoded[:, k]
    return out


def sanitize_rows(pdf: pd.DataFrame, cols: TierColumns, ctx: TableContext, theta: float, algorithm: str,
                  max_node_rows: int = DEFAULT_MAX_NODE_ROWS, reading: str = "tree") -> pd.DataFrame:
    """Sanitize ``pdf`` (a whole table, or one node of its phase-I tree) at θ: one call of :func:`solve`.

    Parameters
    ----------
    pdf : rows with the columns of ``cols`` (quasi-identifiers numeric, no nulls).
    ctx : the :class:`TableContext` of the *whole* input table.
    theta : the threshold, in (0, 1]; classes of the output have ``P < θ``.
    algorithm : ``bua``, ``tda`` or ``fla`` (one FLA step, without the look-ahead).

    Returns
    -------
    ``pdf`` sorted by row id, quasi-identifiers replaced by their class means (float64).
    """
    pdf, a = _atoms_of(pdf, cols, ctx)
    groups = solve(a, np.arange(len(a.size)), ctx, theta, algorithm, max_node_rows, reading)
    return _recoded(pdf, a, groups, cols)


def node_step(pdf: pd.DataFrame, cols: TierColumns, ctx: TableContext, theta: float, algorithm: str,
              max_node_rows: int = DEFAULT_MAX_NODE_ROWS, reading: str = "tree") -> tuple[pd.DataFrame, bool]:
    """One step of :func:`solve` on the rows of one node, as the Spark job runs it per group.

    A node with more than ``max_node_rows`` rows (never for ``bua``) is split once by TDA phase I:
    the rows come back with a ``node`` column (smallest row number of their half) and ``False``;
    if it cannot be split, it is finished by PLSA. Any other node is solved whole. Finished rows
    come back recoded (quasi-identifiers = class means) with ``True``.
    """
    pdf, a = _atoms_of(pdf, cols, ctx)
    everything = np.arange(len(a.size))
    if algorithm != "bua" and a.size.sum() > max_node_rows:
        split = tda_split(a, everything, ctx, theta)
        if split is None:
            return _recoded(pdf, a, plsa(a, [everything], ctx, theta), cols), True
        atom_node = np.empty(len(a.size), dtype=np.int64)
        for half in split:
            atom_node[half] = int(a.first[half].min())
        out = pdf.copy()
        out["node"] = atom_node[a.row_atom]
        return out, False
    groups = solve(a, everything, ctx, theta, algorithm, max_node_rows, reading)
    return _recoded(pdf, a, groups, cols), True


@dataclass(frozen=True)
class Tier:
    """One tier of a chain: the table, its threshold, its disclosure and its utility loss."""

    index: int
    threshold: Fraction
    table: pd.DataFrame
    disclosure: float
    utility_loss: float


def table_disclosure(pdf: pd.DataFrame, cols: TierColumns, values: Optional[tuple] = None) -> float:
    """``P(T)`` of a pandas table, classes = rows with identical quasi-identifiers (docs/specification.md §6)."""
    values = values or sensitive_values(pdf[cols.sensitive])
    codes = encode_sensitive(pdf[cols.sensitive], values)
    x = pdf[list(cols.quasi_identifiers)].to_numpy(float)
    key = pd.DataFrame(x).groupby(list(range(x.shape[1])), sort=False).ngroup().to_numpy()
    counts = np.zeros((key.max() + 1, len(values)))
    np.add.at(counts, (key, codes), 1)
    return disclosure(counts)


def sanitize(pdf: pd.DataFrame, cols: TierColumns, theta: float, algorithm: str,
             next_theta: Optional[float] = None, values: Optional[tuple] = None,
             max_node_rows: int = DEFAULT_MAX_NODE_ROWS, reading: str = "tree") -> pd.DataFrame:
    """One hop: sanitize ``pdf`` (the previous tier) so that ``P < θ``.

    For ``fla`` with ``next_theta`` (every hop but the last) the look-ahead of §3.3 is applied:
    ``T_1 = step(T, θ_next)``, ``T_2 = step(T, θ)``, ``T_3 = step(T_2, θ_next)``; the output is
    ``T_1`` when ``2·U(T_1) > U(T_2) + U(T_3)``, else ``T_2``. ``bua`` and ``tda`` ignore
    ``next_theta``. Columns in = columns out (quasi-identifiers as float64), rows sorted by row id.
    Source: Chang & Wu (SPME 2014) §3.1–3.3.
    """
    values = values or sensitive_values(pdf[cols.sensitive])
    pdf = pdf.sort_values(cols.row_id, kind="stable").reset_index(drop=True)
    pdf = pdf.astype({c: float for c in cols.quasi_identifiers})
    ctx = table_context(pdf, cols, values)
    if algorithm not in ALGORITHMS:
        raise InvalidParameterError(f"algorithm must be one of {list(ALGORITHMS)}, not {algorithm!r}")
    if algorithm != "fla" or next_theta is None:
        return sanitize_rows(pdf, cols, ctx, theta, algorithm, max_node_rows, reading)
    qi = list(cols.quasi_identifiers)
    strict = sanitize_rows(pdf, cols, ctx, next_theta, "fla", max_node_rows, reading)
    current = sanitize_rows(pdf, cols, ctx, theta, "fla", max_node_rows, reading)
    ctx_current = table_context(current, cols, values)
    following = sanitize_rows(current, cols, ctx_current, next_theta, "fla", max_node_rows, reading)
    w = ctx.weights
    u = [utility(t[qi].to_numpy(float), w, ctx.mean) for t in (strict, current, following)]
    return strict if fla_choose(*u) else current


def run_chain(source: pd.DataFrame, cols: TierColumns, delta, hops: int, algorithm: str = "fla", *,
              max_node_rows: int = DEFAULT_MAX_NODE_ROWS, reading: str = "tree",
              surrogate_ids: bool = True) -> list[Tier]:
    """Tiers ``T_1..T_l`` of ``source`` with ``P(T_i) < (l - i + 1)·δ``, each computed from ``T_{i-1}`` only.

    Before ``T_1`` the row ids are replaced by CSPRNG surrogates (:func:`with_surrogate_ids`), so no
    tier carries a linkage key back to the input; the chain is then deterministic given those
    surrogates (ties go to the smallest surrogate, a random row order). ``surrogate_ids=False``
    keeps the input's ids and so the paper's tie order: for tests and the reproducible evaluation
    only, never for a release (the Spark job :mod:`fragrelease.jobs.tiers.runner` has no such switch).

    Parameters
    ----------
    source : ``T_0`` with the columns of ``cols`` (others are dropped).
    delta : δ > 0 (number or string such as ``"1/20"``); hops : l ≥ 1; ``l·δ`` must be below the
        source's :func:`singleton_disclosure`.
    algorithm : ``bua``, ``tda`` or ``fla``.
    max_node_rows, reading : see :func:`solve` and :func:`fla_tree`.

    Returns
    -------
    list of :class:`Tier`; ``utility_loss`` relative to the source (docs/specification.md §6).

    Raises
    ------
    ThresholdTooLooseError
        ``l·δ`` at or above the singleton disclosure (:func:`refuse_loose_thresholds`).
    InvalidParameterError, SchemaMismatchError, DomainError
        Bad δ, hops, algorithm, columns or values (see :func:`validate_table`).
    """
    ths = thresholds(delta, hops)
    if algorithm not in ALGORITHMS:
        raise InvalidParameterError(f"algorithm must be one of {list(ALGORITHMS)}, not {algorithm!r}")
    validate_table(source, cols)
    keep = [cols.row_id, *cols.quasi_identifiers, cols.sensitive]
    prev = source[keep]
    values = sensitive_values(prev[cols.sensitive])
    # the singleton disclosure is computed from the data: the refusal is for the caller only
    refuse_loose_thresholds(ths, singleton_disclosure(table_context(prev, cols, values).p))
    if surrogate_ids:
        prev = with_surrogate_ids(prev, cols)  # before T_1: no tier carries the input's ids
    prev = prev.sort_values(cols.row_id, kind="stable").reset_index(drop=True)
    prev = prev.astype({c: float for c in cols.quasi_identifiers})
    x0 = prev[list(cols.quasi_identifiers)].to_numpy(float)
    tiers = []
    for i, th in enumerate(ths, start=1):
        nxt = float(ths[i]) if i < len(ths) else None
        table = sanitize(prev, cols, float(th), algorithm, nxt, values, max_node_rows, reading)
        p = table_disclosure(table, cols, values)
        ul = utility_loss(table[list(cols.quasi_identifiers)].to_numpy(float), x0, cols.weights)
        tiers.append(Tier(i, th, table, p, ul))
        prev = table
    return tiers


def is_sanitization(previous: pd.DataFrame, current: pd.DataFrame, cols: TierColumns) -> bool:
    """True when every equivalence class of ``current`` is a union of classes of ``previous``.

    Rows are matched by row id; classes are rows with identical quasi-identifiers.
    """
    qi = list(cols.quasi_identifiers)
    a = previous.sort_values(cols.row_id).reset_index(drop=True)
    b = current.sort_values(cols.row_id).reset_index(drop=True)
    if not np.array_equal(a[cols.row_id].to_numpy(), b[cols.row_id].to_numpy()):
        return False
    ka = a[qi].groupby(qi, sort=False).ngroup().to_numpy()
    kb = b[qi].groupby(qi, sort=False).ngroup().to_numpy()
    # each previous class must map to exactly one current class
    pairs = pd.DataFrame({"a": ka, "b": kb}).drop_duplicates()
    return not pairs["a"].duplicated().any()
