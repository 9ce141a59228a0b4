"""Fragmentations and linkages as objects: the one place their wire strings are looked up.

A **fragmentation** says what the owners hold and everything that follows from it
(docs/specification.md §3; Del Vasto-Terrientes et al. (ICISSP 2025) §4.2):

- ``horizontal``: disjoint records, the same attributes. Parallel composition: every owner spends
  the full ε; the metadata must declare the same attributes alike; the fragments are assembled by a
  union; the released rows are the sum of the owners' records; a simulation deals the records.
- ``vertical``: disjoint attributes of the same records. Sequential composition: ε is split over
  the owners (``epsilon_split``); the metadata must hold disjoint attributes, one id column and the
  same id set; the fragments are joined by id; the released rows are one owner's records; a
  simulation deals the columns; the guarantee adds that a vertical owner's id digest repeats.

A **linkage** (the ``linkage`` release option) names the release kind: what the released table's
rows are and how they are made (docs/privacy.md): ``linked`` (the paper's rows, one per record),
``unlinked`` (every column shuffled on its own) or ``synthetic`` (rows drawn from a model of the
owners' noisy marginals, docs/specification.md §10). The kinds are registered in
:mod:`fragrelease.kinds`; code asks the kind (:func:`fragrelease.protocol.kind.release_kind`), never
its name. :data:`LINKAGES` lists their wire names.

Each fragmentation is a frozen object in a registry (:data:`FRAGMENTATIONS`); code asks the object
(:func:`fragmentation_of`) rather than comparing its name. The wire strings and YAML values are the
objects' names, unchanged. Everything here is public.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Literal, Mapping, Optional, Protocol, Sequence

from fragrelease.budget import ReleaseBudget, horizontal_budget, split_epsilon_vertical, vertical_budget
from fragrelease.errors import IdentifierError, ProtocolError
from fragrelease.kinds import KINDS
from fragrelease.protocol.difference import first_difference
from fragrelease.validation import registered

#: The fragmentations' wire names (the ``fragmentation`` field of configurations, plans, manifests).
FragmentationName = Literal["horizontal", "vertical"]
#: The release kinds' wire names, in the registry's order (:data:`fragrelease.kinds.KINDS`).
LINKAGES: tuple[str, ...] = tuple(KINDS)
if TYPE_CHECKING:  # a name of the registry, whichever kinds it holds
    LinkageName = str
else:  #: The linkages' wire names (the ``linkage`` release option): exactly the registry's kinds, read from it
    LinkageName = Literal[LINKAGES]


class OwnerFacts(Protocol):
    """What the fragmentations read of an owner's metadata (:class:`fragrelease.protocol.messages.OwnerMetadata`
    has it; that module imports this one, so this one names it structurally)."""

    @property
    def owner(self) -> str: ...

    @property
    def attributes(self) -> Sequence[dict]: ...

    @property
    def n_records(self) -> int: ...

    @property
    def id_column(self) -> Optional[str]: ...

    @property
    def id_digest(self) -> Optional[str]: ...


def _names(meta: OwnerFacts) -> list[str]:
    return [a["name"] for a in meta.attributes]


@dataclass(frozen=True)
class Fragmentation:
    """What the owners hold, and what follows from it (base of :data:`HORIZONTAL` and :data:`VERTICAL`).

    Attributes
    ----------
    name : the wire string.
    composition : ``"parallel"`` (disjoint records) or ``"sequential"`` (the same records).
    assembly : ``"union"`` (stack the fragments' rows) or ``"join"`` (line them up by id); the Spark
        side maps it to its function (IR: :func:`fragrelease.jobs.idpir.combine.assemble`).
    by_attributes : owners declare their own ``attributes`` (vertical) rather than ``rows``.
    """

    name: FragmentationName
    composition: Literal["parallel", "sequential"]
    assembly: Literal["union", "join"]
    by_attributes: bool

    def epsilon_split(self, split: str) -> str:
        """The plan's ``epsilon_split`` term: the configured split, or ``"none"`` when ε is not split."""
        return split if self.by_attributes else "none"

    def owner_epsilons(self, epsilon: Fraction, attributes: Mapping[str, Sequence[str]],
                       split: str) -> dict[str, Fraction]:
        """Each owner's ε_j from the release's ε and each owner's protected attributes (names, in order).

        Raises InvalidParameterError for an unknown split or an owner without attributes (vertical).
        """
        if not self.by_attributes:
            return {o: epsilon for o in attributes}  # parallel composition: the full ε each
        return split_epsilon_vertical(epsilon, {o: len(a) for o, a in attributes.items()}, split)

    def budget(self, epsilon: Fraction, attributes: Mapping[str, Sequence[str]], split: str) -> ReleaseBudget:
        """The release's composition account (:mod:`fragrelease.budget`): one step per owner and attribute."""
        if not self.by_attributes:
            owners = list(attributes)
            return horizontal_budget(epsilon, owners, list(attributes[owners[0]]))
        return vertical_budget(epsilon, attributes, split)

    def owner_attributes(self, protected: Sequence[Any], declared: Sequence[Any] | None) -> list[Any]:
        """The attributes an owner protects: every protected one (horizontal) or its ``declared`` ones."""
        return list(declared or ()) if self.by_attributes else list(protected)

    def released_rows(self, n_records: Sequence[int]) -> int:
        """The released table's rows from the owners' record counts (public): their sum, or one owner's."""
        return n_records[0] if self.by_attributes else sum(n_records)

    def plan_attributes(self, metas: Sequence[OwnerFacts]) -> tuple[dict, ...]:
        """The plan's attribute specs: the first owner's (horizontal) or every owner's in order (vertical)."""
        return tuple(a for m in metas for a in m.attributes) if self.by_attributes else tuple(metas[0].attributes)

    def owner_config_problems(self, at: str, owner: Any, *, k: int | None, min_k: int, fixed_k: int | None) -> list[str]:
        """The configuration's problems with one owner's ``rows``/``attributes`` (one line each, ``at`` = its path;
        ``k`` None: a kind without microaggregation, no k to check the rows against)."""
        problems = []
        if not self.by_attributes:
            if owner.attributes is not None:
                problems.append(f"{at}.attributes: for vertical releases only (owner {owner.name!r})")
            if (owner.rows is None) == (owner.source is None):
                problems.append(f"{at}: give exactly one of 'rows' (simulated split) or 'source' (owner {owner.name!r})")
            if owner.rows is not None and fixed_k is None and k is not None and k >= min_k and owner.rows < k:
                problems.append(f"{at}.rows: {owner.rows} rows are fewer than k = {k} (owner {owner.name!r}); "
                                "every owner needs at least k records")
        else:
            if owner.rows is not None:
                problems.append(f"{at}.rows: for horizontal releases only (owner {owner.name!r})")
            if not owner.attributes:
                problems.append(f"{at}.attributes: required for a vertical owner (owner {owner.name!r})")
        return problems

    def check_metadata(self, metas: Sequence[OwnerFacts]) -> None:
        """This fragmentation's own rules on the owners' metadata (the shared ones: :func:`fragrelease.protocol.messages.validate_metadata`).

        Raises ProtocolError or IdentifierError naming the owners and attributes involved.
        """
        raise NotImplementedError

    def guarantee_sentence(self) -> str:
        """This fragmentation's clause of the guarantee's ``against`` text (empty when it adds none)."""
        return ""


@dataclass(frozen=True)
class _Horizontal(Fragmentation):
    def check_metadata(self, metas: Sequence[OwnerFacts]) -> None:
        """Identical attribute names, kinds and declared domains, in the same order, everywhere."""
        first = metas[0]
        for m in metas[1:]:
            if list(m.attributes) != list(first.attributes):
                a, b = set(_names(first)), set(_names(m))
                if a != b:
                    raise ProtocolError(
                        f"horizontal fragments must hold the same attributes: {first.owner!r} has "
                        f"{sorted(a - b)} that {m.owner!r} lacks, {m.owner!r} has {sorted(b - a)} that {first.owner!r} lacks"
                    )
                for x, y in zip(sorted(first.attributes, key=lambda s: s["name"]), sorted(m.attributes, key=lambda s: s["name"]), strict=False):
                    diff = first_difference(y, x)
                    if diff is not None:
                        raise ProtocolError(
                            f"attribute {x['name']!r} is declared differently by {first.owner!r} and {m.owner!r}: "
                            f"{diff.where or 'its spec'} is {diff.want} for {first.owner!r}, {diff.got} for {m.owner!r}"
                        )
                raise ProtocolError(f"owners {first.owner!r} and {m.owner!r} list their attributes in different orders")


@dataclass(frozen=True)
class _Vertical(Fragmentation):
    def check_metadata(self, metas: Sequence[OwnerFacts]) -> None:
        """Pairwise-disjoint attributes, one id column, the same record count and id set (their digests)."""
        first = metas[0]
        seen: dict[str, str] = {}
        for m in metas:
            for name in _names(m):
                if name in seen:
                    raise ProtocolError(
                        f"vertical fragments must have disjoint attributes: {name!r} is held by {seen[name]!r} and {m.owner!r}"
                    )
                seen[name] = m.owner
        for m in metas:
            if not m.id_column or not m.id_digest:
                raise IdentifierError(f"vertical owner {m.owner!r} did not provide a record id column")
            if m.id_column != first.id_column:
                raise IdentifierError(f"owners use different id columns: {first.id_column!r} ({first.owner!r}) and {m.id_column!r} ({m.owner!r})")
            if m.n_records != first.n_records:
                raise IdentifierError(
                    f"vertical fragments must hold the same records: {first.owner!r} has {first.n_records}, {m.owner!r} has {m.n_records}"
                )
            if m.id_digest != first.id_digest:
                raise IdentifierError(f"owners {first.owner!r} and {m.owner!r} hold different sets of record ids "
                                      "(the digests of their pseudonym sets differ)")

    def guarantee_sentence(self) -> str:
        return ("; a vertical owner's metadata carries a digest of its pseudonymised id set that is the same in every "
                "release under one key, so the aggregator sees which releases under one key cover the same records")


#: Disjoint records, the same attributes (parallel composition).
HORIZONTAL: Fragmentation = _Horizontal("horizontal", "parallel", "union", by_attributes=False)
#: Disjoint attributes of the same records (sequential composition, ε split over the owners).
VERTICAL: Fragmentation = _Vertical("vertical", "sequential", "join", by_attributes=True)
#: The registry, by wire name.
FRAGMENTATIONS: Mapping[str, Fragmentation] = {f.name: f for f in (HORIZONTAL, VERTICAL)}


def fragmentation_of(name: str) -> Fragmentation:
    """The registered fragmentation called ``name`` (the wire string looked up in one place).

    Raises
    ------
    InvalidParameterError
        Unknown name (the message lists the known ones).
    """
    return registered(FRAGMENTATIONS, name, "fragmentation")
