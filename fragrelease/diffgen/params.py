"""The parameters and the result of DiffGen and two-party DistDiffGen releases, typed (docs/specification.md §7).

- :class:`ProtocolParams`: what the two parties of DistDiffGen must agree on (ε, h, the score, the
  Paillier key size, the share noise); :func:`fragrelease.diffgen.two_party.run_party` takes it, and
  it is what the runner hands to each party's process.
- :class:`DiffGenParams` (single-party DiffGen) and :class:`TwoPartyParams` (DistDiffGen): what
  ``fragrelease diffgen run`` / ``two-party`` and :mod:`fragrelease.jobs.diffgen.runner` agree on.
- :class:`DiffGenResult`: what both releases return (the two Delta tables, the ε ledger, the cut).

Every model is frozen and refuses unknown fields. The models check types only; the values are
checked where they were checked before, with the same one-line errors (the command line's checks
before Spark starts, the runner's and the protocol's own). Everything in a model is public.
Sources: Mohammed et al. (KDD 2011); Sameera K. M. et al. (IJIRST 2015).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Mapping, Optional

from fragrelease.diffgen.paillier_ops import MIN_RELEASE_KEY_BITS
from fragrelease.diffgen.share_noise import DEFAULT_NOISE
from fragrelease.validation import FrozenParams


class _Params(FrozenParams):
    """The params of this system (:class:`fragrelease.validation.FrozenParams`)."""


class ProtocolParams(_Params):
    """What both DistDiffGen parties must agree on (checked in the protocol's ``hello``).

    Fields
    ------
    epsilon : the total ε (exact; ``1``, ``"1/4"``).
    specializations : the number of specializations h; score : ``max`` or ``infogain``.
    key_bits : the Paillier modulus size (≥ 2048 unless ``allow_small_key``, for tests only).
    noise : the share noise (:data:`fragrelease.diffgen.share_noise.NOISE_MODES`; default
        ``laplace-each``, DP against the other party too; ``gaussian-squares`` is not).
    """

    epsilon: Fraction
    specializations: int
    score: str = "max"
    key_bits: int = MIN_RELEASE_KEY_BITS
    allow_small_key: bool = False
    noise: str = DEFAULT_NOISE


class DiffGenParams(_Params):
    """A single-party DiffGen release of the built-in Adult table.

    Fields
    ------
    epsilon : the total ε as written (``"1"``, ``"1/4"``); checked by :func:`fragrelease.budget.parse_epsilon`.
    specializations, score : h and the score (``max`` or ``infogain``).
    output : the folder of the ``generalized`` and ``synthetic`` Delta tables; if_exists : ``error`` or ``new-version``.
    attributes : the Adult predictors (None: all of them).
    max_leaves : the most leaf × class cells accepted.
    synthetic_min_count : ``"auto"`` or an integer ≥ 1 as text (the synthetic expansion's threshold).
    """

    epsilon: str
    specializations: int
    score: str = "max"
    output: str
    attributes: Optional[tuple[str, ...]] = None
    if_exists: str = "error"
    max_leaves: int = 5_000_000
    synthetic_min_count: str = "auto"


class TwoPartyParams(_Params):
    """A two-party DistDiffGen release of Adult (hospital and insurer in separate processes).

    Fields
    ------
    hospital_attributes, insurer_attributes : each party's own Adult attributes (disjoint).
    epsilon, specializations, score, key_bits, noise : as :class:`ProtocolParams` (ε as written).
    output, if_exists, synthetic_min_count : as :class:`DiffGenParams`.
    rows : only the cleaned Adult rows ``(start, stop)`` (None: all).
    backend : ``spark`` (each party its own SparkSession on ``party_master``) or ``pandas``.
    """

    hospital_attributes: tuple[str, ...]
    insurer_attributes: tuple[str, ...]
    epsilon: str
    specializations: int
    score: str = "max"
    output: str
    key_bits: int = 2048
    rows: Optional[tuple[int, int]] = None
    if_exists: str = "error"
    backend: str = "spark"
    party_master: str = "local[1]"
    synthetic_min_count: str = "auto"
    noise: str = DEFAULT_NOISE

    def protocol(self, epsilon: Fraction, *, allow_small_key: bool = False) -> ProtocolParams:
        """The parties' shared parameters, with ε as parsed (exact)."""
        return ProtocolParams(epsilon=epsilon, specializations=self.specializations, score=self.score,
                              key_bits=self.key_bits, allow_small_key=allow_small_key, noise=self.noise)


@dataclass(frozen=True)
class DiffGenResult:
    """A committed DiffGen or DistDiffGen release.

    ``generalized`` / ``synthetic``: the two Delta folders, ``versions`` their table versions;
    ``cells``: leaf × class cells of the generalized table; ``synthetic_min_count``: the threshold the
    expansion used; ``synthetic_rows``: records in the synthetic table; ``cut``: the released cut's
    labels per attribute; ``ledger``: the ε spends (step, attribute, epsilon, composition);
    ``spent``: their sum; ``seconds``: wall time. Two-party only: ``protocol_cost`` (messages,
    bytes and seconds per party; for the operator, never written), ``winners``, ``share_noise``
    and its ``guarantee`` (:func:`fragrelease.diffgen.share_noise.share_noise_guarantee`).
    """

    generalized: str
    synthetic: str
    versions: tuple[int, int]
    cells: int
    synthetic_min_count: int
    synthetic_rows: int
    cut: Mapping[str, list[str]]
    ledger: tuple[Mapping[str, Any], ...]
    spent: Fraction
    seconds: float
    protocol_cost: Mapping[str, Any] = field(default_factory=dict)
    winners: tuple[str, ...] = ()
    share_noise: Optional[str] = None
    guarantee: Optional[Mapping[str, Any]] = None
