"""What the protocol asks of a release kind without Spark: its configuration checks, its guarantee, its
provenance terms, its checks before Spark starts and what the command line shows of it.

A release kind is a plug-in (docs/architecture.md, "Release kinds"): the one registry
(:mod:`fragrelease.kinds`) names, for each wire name (the ``linkage`` release option), its Spark-free half
(:class:`ReleaseKind`, found by :func:`release_kind`) and its Spark half
(:class:`fragrelease.jobs.protocol.kind.KindJobs`). The protocol's modules (``fragrelease/protocol``,
``jobs/protocol``, the API and the command line) ask these objects and import no kind: they never
compare a linkage with a kind's name. The IR kinds (``linked``, ``unlinked``) implement this interface
in :mod:`fragrelease.idpir.kind`, the synthetic kind in :mod:`fragrelease.synthesis.kind`.

What the command line prints of a kind is data (:class:`Line`, :class:`TextTable`): the kind writes the
text, the command line only renders it, so the texts stay the kind's and the command line imports no
kind. Everything here is public; nothing here reads data.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Protocol, Sequence, Union

from fragrelease.kinds import entry_of, resolve


class KindConfig(Protocol):
    """What a kind reads of a release configuration (:class:`fragrelease.protocol.config.ReleaseConfig`
    has it; that module imports this one, so this one names it structurally)."""

    @property
    def name(self) -> str: ...

    @property
    def dataset(self) -> str: ...

    @property
    def fragmentation(self) -> str: ...

    @property
    def linkage(self) -> str: ...

    @property
    def keep_id(self) -> bool: ...

    @property
    def risk_check(self) -> Optional[Any]: ...

    @property
    def owners(self) -> Sequence[Any]: ...

    @property
    def epsilon(self) -> Any: ...

    @property
    def mechanism(self) -> str: ...

    @property
    def k(self) -> Optional[int]: ...

    @property
    def category_order(self) -> str: ...

    @property
    def synthesis_target(self) -> Optional[str]: ...

    @property
    def synthesis_bins(self) -> int: ...

    @property
    def synthesis_collusion(self) -> Optional[int]: ...


class ReleaseFigures(Protocol):
    """What a run's summary reads of its result (:class:`fragrelease.jobs.api_common.ReleaseResult`):
    public figures and the provenance, each owner's (``name``, ``records``, ``attributes``, ``epsilon``:
    :class:`fragrelease.jobs.api_common.OwnerResult`), and MeanSSE (private: from the originals) when
    evaluated."""

    @property
    def provenance(self) -> Mapping[str, Any]: ...

    @property
    def owners(self) -> Sequence[Any]: ...

    @property
    def rows(self) -> int: ...

    @property
    def epsilon(self) -> Any: ...

    @property
    def composition(self) -> str: ...

    @property
    def mean_sse(self) -> Optional[float]: ...


@dataclass(frozen=True)
class Line:
    """One printed line: ``text`` with rich markup, highlighted (``highlight``) and left to the terminal to
    wrap (``soft_wrap``), exactly as ``rich.Console.print`` takes them (None: the console's default)."""

    text: str
    highlight: Optional[bool] = False
    soft_wrap: Optional[bool] = None


@dataclass(frozen=True)
class TextTable:
    """A printed table: its header, its rows (text cells), the columns aligned left (the rest right).

    ``style``: ``"preview"`` (a light rule under the header, never squeezed below its natural width, as
    the accuracy previews print) or ``"summary"`` (a titled table with rich's default box: ``title``).
    """

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    left: tuple[str, ...] = ()
    style: str = "preview"
    title: Optional[str] = None


#: What a kind gives the command line to print, in order.
Block = Union[Line, TextTable]


def warning_line(text: str) -> Line:
    """The line of a preview's warning (``warning: ...``, the word in bold yellow)."""
    return Line(f"[bold yellow]warning:[/bold yellow] {text}")


class ReleaseKind(ABC):
    """A release kind's Spark-free half (see the module docstring). Instances are stateless and shared.

    Attributes
    ----------
    name : the wire name (the ``linkage`` release option).
    single_owner : :func:`fragrelease.protect` of one owner's DataFrame can release this kind (its
        released rows are the owner's records).
    owner_preview : ``"module:function"`` of the Spark step that previews one owner's own fragment
        (``fragrelease owner preview``, ``Release.owner_preview``), called as ``f(spark, ctx, runs=runs)``;
        None when the kind offers none (:meth:`owner_preview_refusal` says why).
    unused_keys : configuration key → why this kind does not act on it; a configuration that gives one a
        value other than its default is refused with that reason (the default is accepted, so that a
        configuration dumped with every field reads back).
    """

    name: str
    single_owner: bool = False
    owner_preview: Optional[str] = None
    #: the configuration keys this kind does not act on, each with the reason: refused when a configuration
    #: gives them (:class:`fragrelease.protocol.config.ReleaseConfig`), so a configuration says what applies
    unused_keys: Mapping[str, str] = {}

    # -- configuration and plan ------------------------------------------------------------------
    @abstractmethod
    def config_problems(self, cfg: KindConfig) -> list[str]:
        """The problems of ``cfg`` this kind refuses, one line each naming the key and the value as
        written (empty when none); no data. :class:`fragrelease.protocol.config.ReleaseConfig` reports
        them with its own (ConfigError, one line each)."""

    def check_plan_options(self, *, keep_id: bool) -> None:
        """Refuse plan terms this kind cannot release (default: none), before the plan is issued
        (:func:`fragrelease.protocol.messages.issue_plan`). Raises InvalidParameterError."""
        return None

    # -- what the release states -----------------------------------------------------------------
    @abstractmethod
    def guarantee(self, *, mechanism: str, epsilon: str, composition: str, category_order: str,
                  keep_id: bool = False, fragmentation: str = "horizontal", single_process: bool = False,
                  risk_check: bool = False) -> dict[str, str]:
        """The exact privacy statement of a release of this kind from its public parameters: a dict of
        plain sentences, keys ``neighbouring``, ``notion``, ``per_column``, ``table``, ``against`` (and
        ``hand_over`` when the kind takes ``risk_check``). docs/privacy.md; docs/specification.md §2, §10.
        Raises InvalidParameterError for an unknown mechanism."""

    @abstractmethod
    def provenance_terms(self, prov: Mapping[str, Any], owners: Sequence[Any]) -> dict[str, Any]:
        """The release's provenance ``prov`` (every term of the plan, :func:`fragrelease.jobs.protocol.
        aggregator.provenance`) without the terms that do not act on this kind, and with its owners'
        entries as this kind records them; ``owners`` are the plan's owners
        (:class:`fragrelease.protocol.messages.PlanOwner`). Returns a new dict; public terms only."""

    # -- checks before Spark starts (jobs/protocol/preflight.py) --------------------------------
    def check_party(self, cfg: KindConfig, party: str) -> None:
        """Refuse, before the schema is read, what this kind needs on the machine of ``party`` (``run``,
        ``split``, ``owner``, ``aggregator``); default: nothing. Raises ConfigError."""
        return None

    @abstractmethod
    def check_schema(self, cfg: KindConfig, attributes: Sequence[Any]) -> None:
        """Refuse, before Spark starts, what the schema's released attributes
        (:class:`fragrelease.schemas.base.Attribute`) show of ``cfg`` under this kind. Raises ConfigError."""

    def check_table_size(self, cfg: KindConfig, records: int) -> None:
        """Refuse, before Spark starts, terms a simulated built-in table of ``records`` records cannot
        carry (default: none). Raises ConfigError naming the key and the value."""
        return None

    # -- what the command line and the API show -------------------------------------------------
    @abstractmethod
    def preview(self, cfg: KindConfig, attributes: Sequence[Any], *, rows: Optional[int], builtin_rows: Optional[int],
                threshold: float, suggestions: bool = True) -> Any:
        """The kind's preview of ``cfg`` from public terms only (no data, no Spark, no budget): what
        ``fragrelease plan`` prints and ``Release.preview()`` returns. ``attributes``: the schema's
        released attributes; ``rows``: the record count of owners that declare none; ``builtin_rows``: the
        public size of the built-in table a simulation cuts (None otherwise); ``threshold``: warn at that
        multiple of the kind's reference error. Raises ConfigError, InvalidParameterError."""

    @abstractmethod
    def preview_blocks(self, pv: Any, *, suggestions: bool = True) -> list[Block]:
        """The printed form of a preview from :meth:`preview`: its table, its warning, suggestions and notes."""

    @abstractmethod
    def plan_heading(self, cfg: KindConfig, config_path: str) -> str:
        """The first line of ``fragrelease plan`` (the release's public terms)."""

    def resolved_terms(self, cfg: KindConfig) -> dict[str, Any]:
        """Public terms this kind derives from ``cfg`` where the configuration leaves a default (e.g. the
        synthetic kind's collusion bound t), by name, as JSON values; default: none."""
        return {}

    def run_warning(self, cfg: KindConfig, attributes: Sequence[Any], *, builtin_rows: Optional[int]) -> Optional[str]:
        """The warning ``fragrelease run`` logs before any data is read (public quantities only), or None
        (default)."""
        return None

    @abstractmethod
    def terms_text(self, cfg: KindConfig) -> str:
        """The kind's terms in ``fragrelease validate``'s line (``k 50, idp-ir``)."""

    @abstractmethod
    def summary_blocks(self, cfg: KindConfig, result: ReleaseFigures, *,
                       owner_reports: Sequence[tuple[str, str]] = ()) -> list[Block]:
        """The run's summary after the release's location (public terms and noised values; MeanSSE marked
        private). ``owner_reports``: (owner, path) of each owner's private report when the run wrote them."""

    def owner_preview_refusal(self) -> str:
        """Why this kind offers no owner preview (:attr:`owner_preview` is None): the reason, one clause
        (the command line adds the configuration and where to look instead)."""
        return f"linkage {self.name} offers no owner preview"

    def owner_preview_blocks(self, pv: Any, cfg: Any, runs: int) -> list[Block]:
        """The printed form of an owner preview (:attr:`owner_preview`); default: none."""
        return []


def release_kind(name: str) -> ReleaseKind:
    """The Spark-free half of the release kind ``name`` (:data:`fragrelease.kinds.KINDS`).

    Raises
    ------
    InvalidParameterError
        Unknown name (the message lists the known kinds).
    """
    terms = resolve(entry_of(name).terms)
    assert isinstance(terms, ReleaseKind), f"{entry_of(name).terms} is not a ReleaseKind"
    return terms
