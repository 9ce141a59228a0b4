"""What the protocol asks of a release kind on Spark: its owners' rounds and its aggregator's combination.

The protocol's drivers (:mod:`.release`, :mod:`.resume`, :mod:`.aggregator`, the command line) call a kind
only through :class:`KindJobs`, found by wire name in the one registry (:mod:`fragrelease.kinds`); they
import no kind and never ask which kind they hold. The shape follows scikit-learn's estimator interface
(a few methods, checked by one common test: ``tests/jobs/test_kind_interface.py``) and Spark's
DataSource V2 (a provider registered by name).

A round is one draw of an owner (docs/specification.md §3; draw once, :mod:`.draws`): it is checked
without noise before any owner spends (:meth:`KindJobs.check_before_spend`), then played
(:meth:`KindJobs.play_round`): claimed, spent, drawn, kept privately and published, or re-published
from the owner's private records without a spend.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence

from fragrelease.kinds import entry_of, resolve

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from pyspark.sql import DataFrame

    from fragrelease.protocol.messages import Manifest, Plan
    from fragrelease.rng.laplace import NoiseSource
    from fragrelease.schemas.base import Attribute

    from .context import AggregatorContext, OwnerContext
    from .draws import Spend
    from .report_html import ReportSection


@dataclass(frozen=True)
class Round:
    """One round an owner plays in a plan: its number (1-based), its draw step's name in the owner's
    private records (:func:`.draws.draw_step`), its spend (None: the round draws no noise and spends
    nothing, e.g. a key round), the cost line's label (``its fragment``,
    ``round 1``) and the progress text of its step (``protecting 3 attributes``)."""

    number: int
    step: str
    spend: Optional[Spend]
    label: str
    doing: str


@dataclass(frozen=True)
class RoundResult:
    """What a played round leaves this process: the signed manifest of a protected table (None when the
    round publishes another message) and the owner's own protected values for MeanSSE (None when the
    kind releases no protected fragment)."""

    manifest: Optional[Manifest] = None
    protected: Optional[DataFrame] = None


@dataclass(frozen=True)
class Combined:
    """The aggregator's combination: the release's rows, their count (public: the plan's counts, or
    computed from noised values only), the entries the kind adds to the release's provenance (public,
    or computed from noised values only), and whether the rows are few enough to commit without an
    exchange."""

    rows: DataFrame
    count: int
    provenance: Mapping[str, Any] = field(default_factory=dict)
    small: bool = False


#: What a kind's owner-report score returns: its result (passed to the kind's sections) and, when asked
#: for them, the quantiles of the original and of the stored values (attribute name -> list; None: not computed).
Scored = tuple[Any, Optional[Mapping[str, list[float]]], Optional[Mapping[str, list[float]]]]


@dataclass(frozen=True)
class OwnerReportParts:
    """What a release kind adds to an owner's private report
    (:meth:`KindJobs.owner_report_parts`; default: nothing).

    ``score(original, stored, quantiles)``: a Spark pass over the owner's original fragment and its values as
    the table stores them, run beside the page's summaries (an IR release: MeanSSE over the id join);
    ``quantiles`` is None (the page has them exactly) or ``(probabilities, accuracy)``, which the pass may
    compute too (else it returns None for them and the page computes them). Returns :data:`Scored`.
    ``sections(result, original_stats, released_stats)``: the kind's :class:`ReportSection` objects, each
    where its ``place`` says (the stats as :func:`.report_stats.table_summary` gives them). ``disclosed``:
    what the page's warning says is computed from the original data."""

    score: Optional[Callable[[DataFrame, DataFrame, Optional[tuple[list[float], int]]], Scored]] = None
    sections: Callable[[Any, Mapping[str, Any], Mapping[str, Any]], Sequence[ReportSection]] = lambda *_: ()
    disclosed: str = "the original statistics and the differences"


class KindJobs(ABC):
    """A release kind's Spark half (see the module docstring). Instances are stateless and shared."""

    #: The wire name (the ``linkage`` release option) this half serves.
    name: str
    #: How many rounds each owner plays in a plan (:meth:`rounds` lists them).
    rounds_per_owner: int = 1
    #: The progress text of the aggregator's step (``verifying fragments and committing the release``).
    combining: str = "verifying the owners' messages and committing the release"
    #: Whether the driver can score MeanSSE of the owners' protected values against their originals
    #: (:meth:`mean_sse`).
    evaluates: bool = False

    @abstractmethod
    def rounds(self, ctx: OwnerContext, plan: Plan) -> Sequence[Round]:
        """Every round the owner of ``ctx`` plays in ``plan``, in order, with its spend (public terms only)."""

    @abstractmethod
    def check_before_spend(self, spark, ctx: OwnerContext, number: Optional[int] = None) -> int:
        """Run the checks of round ``number`` (None: the round that is due) that need no noise, up to the
        ledger's check of its spend; record nothing. Returns the round's number. Raises what the round
        would refuse before its spend (ConfigError, ProtocolError, BudgetExceededError, ...)."""

    @abstractmethod
    def play_round(self, spark, ctx: OwnerContext, number: Optional[int] = None, *,
                   noise: Optional[NoiseSource] = None) -> tuple[int, RoundResult]:
        """Play round ``number`` (None: the round that is due, from the owner's private records): re-publish
        every round kept for the plan, draw the due one once. Returns ``(number, result)``."""

    def held_out(self, ctx: OwnerContext, df: DataFrame, key: bytes) -> Optional[tuple[DataFrame, DataFrame]]:
        """The owner's validated records (``df``, with its id column) split into ``(kept, held out)``
        when the kind holds some out of the release, else None (default). The metadata step counts and
        digests the kept records only (:func:`.owner.describe_fragment`); ``key``: the owners' pseudonym key."""
        return None

    def mean_sse(self, spark, plan: Plan, owners: Sequence[OwnerContext], protected: Mapping[str, DataFrame]) -> float:
        """MeanSSE (docs/specification.md §4) of the owners' protected values against their originals, for
        the single-machine driver that played every party (:func:`.release.play_release`): ``owners`` in
        configuration order, ``protected`` the :attr:`RoundResult.protected` of each. Only a kind that
        :attr:`evaluates` implements it; the default raises NotImplementedError."""
        raise NotImplementedError(f"release kind {self.name!r} has no MeanSSE")

    def check_written(self, ctx: AggregatorContext, plan: Plan) -> None:
        """Refuse, before Spark starts, a release whose owners' messages are not all written (default:
        the verification in :meth:`combine` names a missing table)."""
        return None

    @abstractmethod
    def combine(self, spark, ctx: AggregatorContext, plan: Plan,
                keys: Optional[Mapping[str, Ed25519PublicKey]]) -> Combined:
        """Verify every owner's messages against their signatures and the plan, and combine them into the
        release's rows. Raises ManifestMismatchError, IdentifierError, ConfigError."""

    def table_columns(self, plan: Plan) -> Optional[Sequence[str]]:
        """The release table's columns when they are not the plan's attributes (default None: the plan's
        attributes, and the pseudonym when kept). A kind that names its own columns gets no per-attribute
        summary in the public report (its columns are not the schema's attributes)."""
        return None

    def report_sections(self, provenance: Mapping[str, Any], attributes: Sequence[Attribute]) -> tuple:
        """The kind's own sections of the public report (default: none): :class:`.report_html.ReportSection`
        objects, each where its ``place`` says (``lead``, ``parameters``, ``end``). Public terms only."""
        return ()

    def owner_report_parts(self, attributes: Sequence[Attribute], id_column: str, manifest: Mapping[str, Any],
                           **options: Any) -> OwnerReportParts:
        """What the kind adds to an owner's private report (:func:`.report.owner_report`): a Spark pass
        beside the page's summaries and its sections (default: nothing). ``options``: what the owner's
        step passes on (``mean_sse_value``, ``risk``), each kind reading those it knows."""
        return OwnerReportParts()


def kind_jobs(name: str) -> KindJobs:
    """The Spark half of the release kind ``name`` (:data:`fragrelease.kinds.KINDS`). Raises
    InvalidParameterError for an unknown name."""
    jobs = resolve(entry_of(name).jobs)
    assert isinstance(jobs, KindJobs), f"{entry_of(name).jobs} is not a KindJobs"
    return jobs
