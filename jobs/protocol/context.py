"""What one party owns, resolved once per party step: :class:`OwnerContext` and :class:`AggregatorContext`.

A party step (an owner's metadata, protection, synthesis round or preview; the aggregator's plan or
release) builds its context once from the release configuration, with :func:`owner_context` or
:func:`aggregator_context`, and hands it to every function it calls: the owner's configuration
section, the resolved dataset schema and the attributes it offers, its paths in the shared
``work_dir`` and in its private folder (:mod:`.layout`), where its generated pseudonym key lives
(:mod:`.keys`) and its ledger. The release-wide public terms (name, dataset, fragmentation, ε, k,
mechanism, options) stay in :attr:`OwnerContext.config`, the configuration every party verifies the
plan against (:func:`fragrelease.protocol.plan_check.verified_spec`).

The builders do the checks that need no data and no Spark; building a context writes nothing.
"""
from __future__ import annotations

import posixpath
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping, Optional

from fragrelease.errors import ConfigError
from fragrelease.protocol.config import LedgerConfig, OwnerConfig, ReleaseConfig, SourceConfig
from fragrelease.protocol.fragmentation import fragmentation_of
from fragrelease.schemas.base import Attribute, DatasetSchema
from fragrelease.schemas.datasets import resolve_schema

from . import layout


@dataclass(frozen=True)
class OwnerPaths:
    """Where one owner reads and writes (:mod:`.layout`), resolved once.

    ``owner``: the owner's name. Shared, under ``work_dir``: the aggregator's ``plan``, the owner's ``metadata``, ``protected``, ``pseudonyms``, ``manifest`` and the
    owner's folder ``owner_dir`` (its synthesis rounds), the id digests of a metadata round
    (:meth:`id_digests`). Private: ``private_dir``, the ``fragment`` source (its own table, or the
    simulated fragment there), the metadata ``nonce``, the utility ``report`` and the generated
    pseudonym key file ``generated_key``.
    """

    owner: str
    work_dir: str
    plan: str
    private_dir: str
    fragment: SourceConfig
    nonce: str
    report: str
    generated_key: str
    metadata: str
    protected: str
    pseudonyms: str
    manifest: str

    @property
    def owner_dir(self) -> str:
        """``owners/<owner>`` under ``work_dir`` (the folder of the protected fragment and the manifest)."""
        return posixpath.dirname(self.manifest)

    def id_digests(self, nonce: str) -> str:
        """The id digests table of the metadata round with ``nonce`` (:func:`.layout.id_digests_path`)."""
        return layout.id_digests_path(self.work_dir, self.owner, nonce)


def owner_paths(config: ReleaseConfig, owner: OwnerConfig) -> OwnerPaths:
    """Every path of ``owner`` in release ``config`` (:mod:`.layout`; no check, no write)."""
    release, work = config.name, config.work_dir
    return OwnerPaths(
        owner=owner.name, work_dir=work, plan=layout.plan_path(work),
        private_dir=layout.owner_private_dir(release, owner), fragment=layout.fragment_source(release, owner),
        nonce=layout.nonce_path(release, owner), report=layout.owner_report_path(release, owner),
        generated_key=layout.generated_key_path(config, owner), metadata=layout.metadata_path(work, owner.name),
        protected=layout.protected_path(work, owner.name), pseudonyms=layout.pseudonyms_path(work, owner.name),
        manifest=layout.manifest_path(work, owner.name))


@dataclass(frozen=True)
class OwnerContext:
    """One owner's view of a release, built once per owner step by :func:`owner_context`.

    Attributes
    ----------
    config : the release configuration (its public terms: the plan is verified against it).
    owner : this owner's section of it.
    index : the owner's position in ``config.owners`` (configuration keys ``owners[<index>]``).
    schema : the resolved dataset schema.
    offered : the attributes this owner protects (horizontal: every protected attribute; vertical: its own).
    paths : where it reads and writes (:class:`OwnerPaths`).
    shares_key_root : True when the owners share one private root (no ``private_dir`` set), so an owner
        step may create the release's pseudonym key itself (:mod:`.keys`).
    """

    config: ReleaseConfig
    owner: OwnerConfig
    index: int
    schema: DatasetSchema
    offered: tuple[Attribute, ...]
    paths: OwnerPaths
    shares_key_root: bool

    @property
    def name(self) -> str:
        return self.owner.name

    @property
    def ledger(self) -> Optional[LedgerConfig]:
        """The owner's budget ledger (``{path or table, lifetime_epsilon}``), or None."""
        return self.owner.ledger

    @property
    def id_type(self) -> Optional[str]:
        """The declared type of the schema's id column (``integer``, ``long``, ``double``, ``string``), or None."""
        id_column = self.schema.id_column
        return self.schema.attribute(id_column).type if id_column is not None else None


def _find(config: ReleaseConfig, name: str) -> tuple[int, OwnerConfig]:
    for i, o in enumerate(config.owners):
        if o.name == name:
            return i, o
    raise ConfigError(f"owner {name!r} is not in configuration {config.name!r}; "
                      f"owners: {[o.name for o in config.owners]}")


def _offered(config: ReleaseConfig, schema: DatasetSchema, owner: OwnerConfig) -> tuple[Attribute, ...]:
    if not fragmentation_of(config.fragmentation).by_attributes:
        return tuple(schema.protected)
    assert owner.attributes is not None  # a vertical owner declares its attributes (configuration check)
    attrs = tuple(schema.attribute(a) for a in owner.attributes)
    for a in attrs:
        if not a.protected:
            raise ConfigError(f"owner {owner.name!r} lists {a.name!r}, whose role {a.role!r} is not released")
    return attrs


def owner_context(config: ReleaseConfig, owner_name: str, *, schema: Optional[DatasetSchema] = None) -> OwnerContext:
    """The context of owner ``owner_name`` in release ``config``; no data, no Spark, no write.

    ``schema``: the resolved dataset schema when the caller holds it already (default: resolved here).

    Raises
    ------
    ConfigError
        ``owner '<name>' is not in configuration '<release>'; owners: [...]``; a vertical owner that
        lists an attribute whose role is not released.
    """
    index, owner = _find(config, owner_name)
    schema = schema if schema is not None else resolve_schema(config.dataset)
    return OwnerContext(config=config, owner=owner, index=index, schema=schema,
                        offered=_offered(config, schema, owner), paths=owner_paths(config, owner),
                        shares_key_root=layout.shared_private_root(config) is not None)


@dataclass(frozen=True)
class AggregatorContext:
    """The aggregator's view of a release, built once per aggregator step by :func:`aggregator_context`.

    Attributes
    ----------
    config : the release configuration.
    schema : the resolved dataset schema.
    private_dir : the aggregator's private folder (:func:`.layout.aggregator_private_dir`).
    plan : ``plan.json`` under ``work_dir``.
    plan_pin : the private pin of the plan it issued into this ``work_dir`` (:func:`.layout.plan_pin_path`).
    owners : every owner's paths by name, in configuration order (read-only mapping).
    """

    config: ReleaseConfig
    schema: DatasetSchema
    private_dir: str
    plan: str
    plan_pin: str
    owners: Mapping[str, OwnerPaths]


def aggregator_context(config: ReleaseConfig, *, schema: Optional[DatasetSchema] = None) -> AggregatorContext:
    """The aggregator's context in release ``config``; no data, no Spark, no write.

    ``schema``: the resolved dataset schema when the caller holds it already (default: resolved here).
    """
    schema = schema if schema is not None else resolve_schema(config.dataset)
    return AggregatorContext(config=config, schema=schema, private_dir=layout.aggregator_private_dir(config.name),
                             plan=layout.plan_path(config.work_dir),
                             plan_pin=layout.plan_pin_path(config.name, config.work_dir),
                             owners=MappingProxyType({o.name: owner_paths(config, o) for o in config.owners}))
