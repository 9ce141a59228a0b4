"""The fragmented-release protocol's messages and checks, Spark-free (docs/specification.md §3).

Steps (Del Vasto-Terrientes et al. (ICISSP 2025) §4.2.1-4.2.2): the aggregator κ requests each
owner's attributes → owners send :class:`OwnerMetadata` → κ validates (:func:`validate_metadata`)
→ κ sends a :class:`Plan` with (ε_j, k) (:func:`make_plan`) → owners microaggregate and add noise,
and write their protected fragment with a :class:`Manifest` → κ checks every manifest against the
plan (:func:`check_manifest`) and combines the fragments.

Only public parameters travel: attribute names, kinds and declared domains, record counts (n is
public under substitution neighbourhood), k, ε, the mechanism, ids of the plan, and digests. Local
sensitivities, observed minima/maxima and category frequencies never appear in these messages.
"""
from __future__ import annotations

import uuid
from datetime import datetime, timezone
from fractions import Fraction
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict

from fragrelease.budget import Epsilon, parse_epsilon
from fragrelease.errors import InvalidParameterError, ManifestMismatchError, ProtocolError
from fragrelease.idpir.category_order import AttributeBudget
from fragrelease.idpir.mechanisms import get_mechanism
from fragrelease.idpir.microaggregation import check_k
from fragrelease.idpir.spec import ProtectionSpec, attribute_budgets, protection_spec, required_k
from fragrelease.protocol.fragmentation import FragmentationName, fragmentation_of
from fragrelease.protocol.kind import release_kind
from fragrelease.protocol.options import DEFAULT_OPTIONS, ReleaseOptions

#: Smallest k of a fragmented IR release (Del Vasto-Terrientes et al. (ICISSP 2025) §4.2: "k ≥ 3").
MIN_K = 3


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)


class OwnerMetadata(_Message):
    """What owner φ_j tells κ before any budget is spent.

    ``id_digest`` (vertical owners) is the digest of the owner's set of record **pseudonyms**
    (context ``metadata``, :mod:`fragrelease.pseudonyms`), never of raw ids: κ can compare owners'
    sets but cannot test guessed ids against it. ``pseudonym_key_check`` is the public fingerprint
    of the owner's pseudonym key (:func:`fragrelease.pseudonyms.key_check`): owners must share one key.

    ``nonce`` is a fresh CSPRNG value the owner drew for this metadata round
    (:func:`fragrelease.pseudonyms.new_nonce`); the plan copies every owner's, and the release's
    pseudonym context is the plan id with all of them (:meth:`Plan.pseudonym_context`). Horizontal
    owners also publish their ids' keyed digests (context ``metadata``) as a Delta table in
    ``work_dir`` (``metadata/ids/<owner>/<nonce>``); ``id_digest`` is then the digest of that set,
    so κ can check the table and refuse owners sharing a record before the plan (docs/specification.md §3).
    """

    owner: str
    dataset: str
    fragmentation: FragmentationName
    attributes: tuple[dict, ...]
    n_records: int
    id_column: Optional[str] = None
    id_digest: Optional[str] = None
    pseudonym_key_check: Optional[str] = None
    nonce: Optional[str] = None


class PlanOwner(_Message):
    """One owner's part of the plan; ``budgets`` splits each attribute's ε into the category
    histogram (``epsilon_order``) and the centroids (``epsilon_centroids``), exactly."""

    name: str
    epsilon: Epsilon
    epsilon_per_attribute: Epsilon
    attributes: tuple[str, ...]
    n_records: int
    budgets: tuple[AttributeBudget, ...]
    #: the owner's metadata-round nonce, copied from its metadata (:meth:`Plan.pseudonym_context`)
    nonce: Optional[str] = None


class Plan(_Message, ReleaseOptions):
    """κ's instructions: who protects which attributes with which (k, ε_j) and mechanism, under which
    release options (:class:`~fragrelease.protocol.options.ReleaseOptions`, inherited: flat on the wire)."""

    plan_id: str
    dataset: str
    fragmentation: FragmentationName
    mechanism: str
    #: None for a kind without microaggregation (linkage: synthetic)
    k: Optional[int] = None
    epsilon: Epsilon
    epsilon_split: str
    composition: Literal["parallel", "sequential"]
    attributes: tuple[dict, ...]
    owners: tuple[PlanOwner, ...]
    id_column: Optional[str] = None
    keep_id: bool = False
    created_at: str

    def owner(self, name: str) -> PlanOwner:
        for o in self.owners:
            if o.name == name:
                return o
        raise ManifestMismatchError(f"owner {name!r} is not part of plan {self.plan_id}")

    def pseudonym_context(self) -> str:
        """The context of this release's pseudonyms: the plan id with every owner's nonce, sorted
        (:func:`fragrelease.pseudonyms.release_context`)."""
        from fragrelease.pseudonyms import release_context

        return release_context(self.plan_id, (o.nonce for o in self.owners))

    def attribute_specs(self, names) -> tuple[dict, ...]:
        wanted = set(names)
        return tuple(a for a in self.attributes if a["name"] in wanted)

    def spec_for(self, name: str) -> ProtectionSpec:
        """Owner ``name``'s frozen :class:`~fragrelease.idpir.spec.ProtectionSpec`, read from the plan
        as it stands (the budgets are the plan's, not recomputed). An owner uses it only after
        :func:`fragrelease.protocol.plan_check.check_plan_for_owner` has compared the plan with its own
        configuration (:func:`fragrelease.protocol.plan_check.verified_spec` does both).

        Raises
        ------
        ManifestMismatchError
            ``name`` is not part of the plan.
        InvalidParameterError
            The plan's budgets for the owner do not add up to its ε_j, or k exceeds its records, or the plan
            has no k (a plan of a kind without microaggregation, :func:`fragrelease.idpir.spec.required_k`).
        """
        po = self.owner(name)
        return ProtectionSpec(owner=name, dataset=self.dataset, plan_id=self.plan_id,
                              mechanism=get_mechanism(self.mechanism), k=required_k(self.k, linkage=self.linkage),
                              epsilon=po.epsilon,
                              budgets=tuple(po.budgets), options=self.options, n_records=po.n_records)


class Manifest(_Message, ReleaseOptions):
    """What an owner publishes beside its protected fragment; public parameters only, the release
    options (:class:`~fragrelease.protocol.options.ReleaseOptions`) included.

    Binding to the owner (docs/known-limitations.md #7): ``table_version`` is the Delta version the
    owner committed, ``files`` its table's active data files at that version (``{"path"`` relative
    to the table as in the Delta log, ``"size"`` in bytes, ``"sha256"`` of the file's bytes``}``,
    sorted by path), ``delta_log`` the SHA-256 of each commit file ``_delta_log/<version>.json``
    up to ``table_version``, and ``signature`` the owner's Ed25519 signature (base64) of every other
    field (:meth:`signed_fields`, :func:`fragrelease.signing.manifest_payload`).
    """

    plan_id: str
    owner: str
    dataset: str
    fragmentation: FragmentationName
    mechanism: str
    k: int
    epsilon: Epsilon
    epsilon_per_attribute: Epsilon
    attributes: tuple[dict, ...]
    n_records: int
    id_column: Optional[str] = None
    budgets: tuple[AttributeBudget, ...]
    content_digest: str
    created_at: str
    #: digest of the owner's set of pseudonyms under this plan (``count:sum``; the ``pseudonym``
    #: column of the protected table, or, with ``linkage: unlinked``, of ``owners/<owner>/pseudonyms``)
    pseudonym_digest: Optional[str] = None
    #: the public check of the pseudonym key the fragment was written under (:func:`fragrelease.pseudonyms.key_check`)
    pseudonym_key_check: Optional[str] = None
    table_version: Optional[int] = None
    files: tuple[dict, ...] = ()
    delta_log: tuple[dict, ...] = ()
    #: with ``linkage: unlinked``, the same three facts of the owner's pseudonym-set table
    pseudonym_table_version: Optional[int] = None
    pseudonym_files: tuple[dict, ...] = ()
    pseudonym_delta_log: tuple[dict, ...] = ()
    signature: Optional[str] = None

    def signed_fields(self) -> dict[str, Any]:
        """Every field but ``signature``, as JSON values: what the owner signs."""
        return self.model_dump(mode="json", exclude={"signature"})


def _names(meta: OwnerMetadata) -> list[str]:
    return [a["name"] for a in meta.attributes]


def validate_metadata(metas: list[OwnerMetadata], fragmentation: str) -> None:
    """κ's validation of the owners' metadata (docs/specification.md §3).

    Shared rules here; the fragmentation's own through its object
    (:meth:`fragrelease.protocol.fragmentation.Fragmentation.check_metadata`). Horizontal: identical
    attribute names, kinds and declared domains everywhere. Vertical: pairwise-disjoint attribute
    sets, one id column, the same record count and id set (compared through the owners' id digests).

    Raises
    ------
    ProtocolError
        Fewer than two owners, a fragmentation that differs from the release's, or the rules above;
        the message names the owners and attributes involved.
    IdentifierError
        Vertical fragments without ids or with different id sets.
    """
    if len(metas) < 2:
        raise ProtocolError(f"a fragmented release needs at least 2 owners, got {len(metas)}")
    for m in metas:
        if m.fragmentation != fragmentation:
            raise ProtocolError(f"owner {m.owner!r} reports fragmentation {m.fragmentation!r}, expected {fragmentation!r}")
        if not m.attributes:
            raise ProtocolError(f"owner {m.owner!r} offers no attribute to protect")
    datasets = {m.dataset for m in metas}
    if len(datasets) > 1:
        raise ProtocolError(f"owners describe different datasets: {sorted(datasets)}")
    first = metas[0]
    for m in metas[1:]:
        if m.pseudonym_key_check != first.pseudonym_key_check:
            raise ProtocolError(f"owners {first.owner!r} and {m.owner!r} use different pseudonym keys (their key checks "
                                "differ); the owners of a release must share one pseudonym key")
    fragmentation_of(fragmentation).check_metadata(metas)


def make_plan(
    metas: list[OwnerMetadata],
    *,
    fragmentation: str,
    mechanism: str,
    k: Optional[int],
    epsilon: object,
    epsilon_split: str = "equal",
    keep_id: bool = False,
    options: ReleaseOptions = DEFAULT_OPTIONS,
) -> Plan:
    """Validate the metadata and issue the plan (docs/specification.md §3).

    Horizontal: every owner the full ε (parallel composition), ε/l per attribute.
    Vertical: ε_j by ``epsilon_split`` ("equal": ε/m; "by-attributes": ε·l_j/l), ε_j/l_j per attribute.
    Each categorical attribute's ε_j/l_j is split between its category order and its centroids
    (:func:`fragrelease.idpir.category_order.split_attribute_budget`; docs/specification.md §1).
    k must be ≥ 3 and ≤ every owner's n (plain iDP uses k = 1 by definition); None for a kind without
    microaggregation (the configuration refuses it for the IR kinds). ``options`` are the
    release options (validated when built: :meth:`fragrelease.protocol.options.ReleaseOptions.of`); the
    plan states every one of them.

    Raises
    ------
    InvalidParameterError
        ε ≤ 0, unknown mechanism, k < 3 or k > n (the message names the owner and n), ``keep_id``
        with ``linkage: unlinked``.
    ProtocolError, IdentifierError
        From :func:`validate_metadata`.
    """
    eps = parse_epsilon(epsilon)
    release_kind(options.linkage).check_plan_options(keep_id=keep_id)  # keep_id with unlinked rows
    mech = get_mechanism(mechanism)
    if mech.fixed_k is not None:
        k = mech.fixed_k
    elif k is not None:
        check_k(k, minimum=MIN_K)
    validate_metadata(metas, fragmentation)
    for m in metas:
        if k is not None and k > m.n_records:
            raise InvalidParameterError(f"k = {k} exceeds the {m.n_records} records of owner {m.owner!r}")
    def owner_part(m: OwnerMetadata, eps_j: Fraction) -> PlanOwner:
        # the one split of ε_j over the owner's attributes and of each between histogram and centroids
        attrs = [(a["name"], a["kind"] == "categorical") for a in m.attributes]
        if k is None:  # no microaggregation: the split only (a kind that measures otherwise reads ε_j)
            budgets = attribute_budgets(attrs, eps_j, options=options)
            return PlanOwner(name=m.owner, epsilon=eps_j, epsilon_per_attribute=eps_j / len(budgets),
                             attributes=tuple(b.attribute for b in budgets), n_records=m.n_records, budgets=budgets,
                             nonce=m.nonce)
        spec = protection_spec(owner=m.owner, dataset=m.dataset, plan_id="", mechanism=mech, k=k, epsilon=eps_j,
                               attributes=attrs, options=options, n_records=m.n_records)
        return PlanOwner(name=m.owner, epsilon=spec.epsilon, epsilon_per_attribute=spec.epsilon_per_attribute,
                         attributes=spec.attributes, n_records=m.n_records, budgets=spec.budgets, nonce=m.nonce)

    frag = fragmentation_of(fragmentation)
    by_owner = {m.owner: _names(m) for m in metas}
    budget = frag.budget(eps, by_owner, epsilon_split)
    eps_owner = frag.owner_epsilons(eps, by_owner, epsilon_split)
    owners = tuple(owner_part(m, eps_owner[m.owner]) for m in metas)
    specs = frag.plan_attributes(metas)
    if budget.spent() != eps:
        raise AssertionError(f"budget accounting drifted: spent {budget.spent()} of {eps}")
    for po in owners:
        # the plan's per-attribute split equals the composition's steps, exactly
        steps = {s.attribute: s.epsilon for s in budget.steps if s.owner == po.name}
        if {b.attribute: b.total for b in po.budgets} != steps:
            raise AssertionError(f"budget split drifted for owner {po.name!r}: {po.budgets} against {steps}")
    return Plan(
        plan_id=str(uuid.uuid4()),
        dataset=metas[0].dataset,
        # fragmentation equals every owner's (validate_metadata); the pydantic model validates it again
        fragmentation=frag.name,
        mechanism=mechanism,
        k=k,
        epsilon=eps,
        epsilon_split=frag.epsilon_split(epsilon_split),
        composition=budget.composition,
        attributes=tuple(specs),
        owners=owners,
        id_column=metas[0].id_column,
        keep_id=keep_id,
        **options.option_values(),
        created_at=datetime.now(timezone.utc).isoformat(),
    )


def manifest_for(plan: Plan, owner: str, n_records: int, content_digest: str,
                 pseudonym_digest: Optional[str] = None, pseudonym_key_check: Optional[str] = None, *,
                 table_version: Optional[int] = None, files: tuple[dict, ...] = (),
                 delta_log: tuple[dict, ...] = (),
                 pseudonym_table: Optional[tuple[int, Any, Any]] = None) -> Manifest:
    """The (unsigned) manifest an owner writes after protecting its fragment under ``plan``.

    ``table_version``, ``files`` and ``delta_log`` describe the owner's committed table (see
    :class:`Manifest`), ``pseudonym_table`` the same ``(version, files, delta_log)`` of its
    pseudonym-set table (``linkage: unlinked``); the owner then signs it (:func:`fragrelease.signing.sign_manifest_fields`).
    """
    po = plan.owner(owner)
    return Manifest(
        plan_id=plan.plan_id, owner=owner, dataset=plan.dataset, fragmentation=plan.fragmentation,
        mechanism=plan.mechanism, k=required_k(plan.k, linkage=plan.linkage), epsilon=po.epsilon,
        epsilon_per_attribute=po.epsilon_per_attribute,
        attributes=plan.attribute_specs(po.attributes), n_records=n_records, id_column=plan.id_column,
        budgets=po.budgets, **plan.option_values(), content_digest=content_digest, created_at=datetime.now(timezone.utc).isoformat(),
        table_version=table_version, files=tuple(files), delta_log=tuple(delta_log),
        pseudonym_table_version=None if pseudonym_table is None else pseudonym_table[0],
        pseudonym_files=() if pseudonym_table is None else tuple(pseudonym_table[1]),
        pseudonym_delta_log=() if pseudonym_table is None else tuple(pseudonym_table[2]),
        pseudonym_digest=pseudonym_digest, pseudonym_key_check=pseudonym_key_check,
    )


def check_manifest(manifest: Manifest, plan: Plan) -> None:
    """Refuse a protected fragment whose manifest does not match the plan.

    Raises
    ------
    ManifestMismatchError
        Naming the first field that differs, with the manifest's and the plan's values.
    """
    po = plan.owner(manifest.owner)
    expected: dict[str, Any] = {
        "plan_id": plan.plan_id, "dataset": plan.dataset, "fragmentation": plan.fragmentation,
        "mechanism": plan.mechanism, "k": plan.k, "epsilon": po.epsilon,
        "epsilon_per_attribute": po.epsilon_per_attribute,
        "attributes": plan.attribute_specs(po.attributes), "n_records": po.n_records, "id_column": plan.id_column,
        "budgets": po.budgets, **plan.option_values(),  # every release option, whatever it is
    }
    for field, want in expected.items():
        got = getattr(manifest, field)
        # typed fields: ε values are Fractions ("1/2" and "0.5" parse equal), budgets AttributeBudget models
        same = list(got) == list(want) if field in ("attributes", "budgets") else got == want
        if not same:
            raise ManifestMismatchError(
                f"manifest of owner {manifest.owner!r} does not match plan {plan.plan_id}: {field} is {got!r}, plan says {want!r}"
            )
