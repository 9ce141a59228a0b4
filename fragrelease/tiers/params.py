"""The parameters and the result of one tiers release, typed (docs/specification.md §6; Chang & Wu (SPME 2014)).

:class:`TiersParams` is what ``fragrelease tiers run`` and :func:`fragrelease.jobs.tiers.runner.run_tiers`
agree on: one frozen model (unknown fields refused) built once by the command line (or a caller)
and read by the job. :class:`TiersResult` is what the job returns: one :class:`TierRelease` per
committed tier and the public provenance every tier's commit carried.

The model checks types only; the values are checked where they were checked before, with the same
one-line errors (δ and the chain length by :func:`fragrelease.tiers.thresholds`, the algorithm and
the FLA reading by the job). Everything here is public: parameters the operator chose, never
derived from the data, except ``disclosure`` and ``utility_loss`` of a result, which are for the
operator (``UL`` is never written into a release).
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Mapping, Optional

from pydantic import field_validator

from fragrelease.tiers.algorithms import DEFAULT_MAX_NODE_ROWS
from fragrelease.validation import FrozenParams

#: The built-in sources of a tiers release (anything else is a table path).
BUILTIN_DATASETS = ("german", "adult")


class TiersParams(FrozenParams):
    """The public parameters of one tiers release (frozen; unknown fields refused).

    Fields
    ------
    dataset : ``german``, ``adult`` or a table path read as ``fmt`` (parquet, delta or csv).
    delta : δ > 0 as written (``"0.05"``, ``"1/20"``; a number or Fraction is kept as its exact text).
    hops : the chain length l ≥ 1; tier i gets ``P(T_i) < (l - i + 1)·δ``.
    output : the folder of the Delta tables ``tier_1 .. tier_l``.
    algorithm : ``fla`` (default), ``tda`` or ``bua``; reading : FLA's ``tree`` or ``leaves``.
    sensitive, quasi_identifiers, row_id : the source's roles (defaults per built-in dataset).
    weights : quasi-identifier → weight (missing ones get 0); default uniform.
    standardize : z-score the quasi-identifiers first; max_node_rows : nodes above it are split.
    if_exists : ``error`` or ``new-version``.

    Raises
    ------
    pydantic.ValidationError
        (on construction) an unknown field or a value of the wrong type; :meth:`of` raises
        :class:`~fragrelease.errors.InvalidParameterError` instead.
    """


    dataset: str = "german"
    delta: str
    hops: int
    output: str
    algorithm: str = "fla"
    sensitive: Optional[str] = None
    quasi_identifiers: Optional[tuple[str, ...]] = None
    row_id: str = "record_id"
    weights: Optional[dict[str, float]] = None
    standardize: bool = True
    fmt: str = "parquet"
    max_node_rows: int = DEFAULT_MAX_NODE_ROWS
    reading: str = "tree"
    if_exists: str = "error"

    @field_validator("delta", mode="before")
    @classmethod
    def _delta_text(cls, value: Any) -> Any:
        # a number or a Fraction keeps its exact text (0.05 -> "0.05", Fraction(1, 20) -> "1/20")
        return str(value) if isinstance(value, (int, float, Fraction)) and not isinstance(value, bool) else value

    @property
    def builtin(self) -> bool:
        """True for a built-in source (``german`` or ``adult``), False for a table path."""
        return self.dataset in BUILTIN_DATASETS


@dataclass(frozen=True)
class TierRelease:
    """One committed tier: its number, Delta folder and version, threshold and measures.

    ``threshold`` is the public ``(l - i + 1)·δ``; ``disclosure`` is ``P(T_i)`` (also in the tier's
    provenance); ``utility_loss`` is ``UL(T_i)`` against the source (operator only, never written).
    """

    tier: int
    path: str
    version: int
    threshold: Fraction
    disclosure: float
    utility_loss: float


@dataclass(frozen=True)
class TiersResult:
    """What a tiers release returns: every committed tier, in order, and the provenance they share.

    ``provenance`` holds the public facts common to every tier (as stamped into each commit through
    :func:`fragrelease.jobs.storage.commit_release`, without the per-tier ``tier``,
    ``threshold`` and ``disclosure``).
    """

    tiers: tuple[TierRelease, ...]
    provenance: Mapping[str, Any]
