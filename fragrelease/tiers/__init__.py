"""Tiered releases with increasing privacy along a propagation chain (docs/specification.md §6).

Source: W. Chang and J. Wu, "Strengthening Data Privacy During Propagation", SPME 2014.
A table ``T_0`` travels along a chain of ``l`` recipients; recipient
``v_i`` receives ``T_i``, a *sanitization* of ``T_{i-1}`` (every equivalence class of ``T_i`` is a
union of equivalence classes of ``T_{i-1}``), and ``P(T_i) < (l - i + 1)·δ``: the deepest tier gets
the strongest protection. Everything here is Spark-free; ``fragrelease.jobs.tiers.runner`` applies it.

Terms and formulas (docs/specification.md §6, paper §2 and §5):

- quasi-identifiers ``A_1..A_{n-1}`` (numeric), sensitive attribute ``A_n``, weights ``w`` (Σ = 1);
- an equivalence class is a set of rows with identical quasi-identifier values;
- disclosure ``P(T) = max over classes of JS(p(table), p(class))`` over the sensitive values,
  Jensen–Shannon divergence with log base 2 (so ``P`` lies in [0, 1]);
- row distance ``d(t, t') = sqrt(Σ_k w_k (t[k] - t'[k])²)``; table distance = the sum of the row
  distances of the same rows (paper §2, ``U(T)``);
- sanitization replaces the quasi-identifiers of a class's members by the class mean;
- utility ``U(T') = d(T', T~)`` and utility loss ``UL = 1 - d(T', T~) / d(T, T~)`` where ``T~`` is
  the source table merged into one class (every row recoded to the table mean).

Class means are size-weighted, so every sanitization keeps the table mean: ``T~`` is the same for
every tier and can be computed from any tier. ``UL`` lies in [0, 1] and never decreases along a
chain (by the triangle inequality, merging classes cannot increase ``d(·, T~)``).

Internally the algorithms work on *atoms*: the equivalence classes of their input table. They only
ever group atoms, never split one, which is what makes the output a sanitization of the input (a
recipient cannot tell the members of a class apart, paper §3.2). Order-dependent choices are broken
by the atom's smallest row number (paper §4, Theorem 2), so the same input gives the same output.
In a release the row numbers are CSPRNG surrogates drawn once before ``T_1`` (docs/specification.md
§6): the tiers carry no linkage key back to the input, and the chain is deterministic given them.
A threshold at or above the disclosure of singleton classes is refused (:func:`refuse_loose_thresholds`).

Modules (everything public is re-exported here, so callers import :mod:`fragrelease.tiers`):

- :mod:`~fragrelease.tiers.measures`: disclosure (JS divergence), weighted distance, utility, utility loss;
- :mod:`~fragrelease.tiers.algorithms`: atoms and the table context, TDA, PLSA, BUA, FLA, :func:`solve`;
- :mod:`~fragrelease.tiers.chain`: thresholds, surrogate ids, table validation, :func:`sanitize`, :func:`run_chain`;
- :mod:`~fragrelease.tiers.params`: a release's parameters (:class:`TiersParams`) and result (:class:`TiersResult`).
"""
from __future__ import annotations

from fragrelease.tiers.algorithms import (
    ALGORITHMS,
    DEFAULT_MAX_NODE_ROWS,
    PLSA_MAX_EXHAUSTIVE,
    UTILITY_TIE_RTOL,
    Atoms,
    TableContext,
    bua,
    build_atoms,
    fla_choose,
    fla_tree,
    plsa,
    plsa_split,
    prefer_first,
    solve,
    tda,
    tda_phase1,
    tda_split,
)
from fragrelease.tiers.chain import (
    Tier,
    TierColumns,
    draw_surrogate_ids,
    encode_sensitive,
    is_sanitization,
    node_step,
    parse_delta,
    refuse_loose_thresholds,
    run_chain,
    sanitize,
    sanitize_rows,
    sensitive_values,
    singleton_disclosure,
    standardize,
    table_context,
    table_disclosure,
    thresholds,
    validate_table,
    with_surrogate_ids,
)
from fragrelease.tiers.measures import (
    class_means,
    disclosure,
    js_divergence,
    table_distance,
    utility,
    utility_loss,
    weighted_distance,
)
from fragrelease.tiers.params import BUILTIN_DATASETS, TierRelease, TiersParams, TiersResult

__all__ = [
    "ALGORITHMS", "Atoms", "BUILTIN_DATASETS", "bua", "build_atoms", "class_means", "DEFAULT_MAX_NODE_ROWS", "disclosure",
    "draw_surrogate_ids", "encode_sensitive", "fla_choose", "fla_tree", "is_sanitization", "js_divergence",
    "node_step", "parse_delta", "plsa", "PLSA_MAX_EXHAUSTIVE", "plsa_split", "prefer_first",
    "refuse_loose_thresholds", "run_chain", "sanitize", "sanitize_rows", "sensitive_values",
    "singleton_disclosure", "solve", "standardize", "table_context", "table_disclosure", "table_distance",
    "TableContext", "tda", "tda_phase1", "tda_split", "thresholds", "Tier", "TierColumns", "TierRelease", "TiersParams", "TiersResult", "utility",
    "utility_loss", "UTILITY_TIE_RTOL", "validate_table", "weighted_distance", "with_surrogate_ids",
]
