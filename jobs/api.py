"""The Python API: one owner's protection of a DataFrame, and a whole fragmented release.

Also reachable as ``fragrelease.protect`` and ``fragrelease.Release`` (a lazy facade: importing
``fragrelease`` alone stays Spark-free).

- :func:`protect` runs one data owner's step on a DataFrame: validate, split the budget, (optionally)
  record the spend in the owner's ledger, microaggregate and add noise, exactly as the owner job
  does (:func:`fragrelease.jobs.idpir.owner_round.protect_attributes`), and return the protected DataFrame
  with a typed :class:`ProtectResult`.
- :class:`Release` plays the whole protocol for several owners and returns a typed
  :class:`ReleaseResult`; they are defined in :mod:`fragrelease.jobs.release_api` and
  :mod:`fragrelease.jobs.api_common` and served from here.

Everything that can be checked without data (ε, k, mechanism, names, the schema, the
configuration) is checked before any Spark action. Results hold public parameters only (plus the
protected or released DataFrame); nothing data-dependent is logged.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Optional, Sequence, Union

try:
    from pyspark.sql import DataFrame
except ImportError:  # pyspark is not a wheel dependency: one clear line instead of the bare import error
    from . import require_pyspark

    require_pyspark()
    raise

from fragrelease.budget import format_epsilon, parse_epsilon
from fragrelease.errors import InvalidParameterError
from fragrelease.idpir.category_order import (
    AttributeBudget,
)
from fragrelease.idpir.mechanisms import get_mechanism
from fragrelease.idpir.microaggregation import check_k
from fragrelease.idpir.spec import protection_spec
from fragrelease.protocol.config import LedgerConfig, OwnerConfig
from fragrelease.protocol.fragmentation import HORIZONTAL
from fragrelease.protocol.kind import release_kind
from fragrelease.protocol.messages import MIN_K, Manifest
from fragrelease.protocol.options import OPTION_NAMES, ReleaseOptions
from fragrelease.rng.laplace import NoiseSource, refuse_injected_noise
from fragrelease.schemas.base import Attribute, DatasetSchema
from fragrelease.schemas.datasets import resolve_schema

from . import require_pyspark
from .api_common import Guarantee, SchemaLike, _from_pandas, _is_pandas
from .idpir.owner_round import protect_attributes
from .protocol.digests import content_digest
from .protocol.fragment import FragmentContext, check_columns, conform_id, validate_fragment
from .protocol.shuffle import shuffle_rows
from .release_api import OwnerResult, Release, ReleaseResult

__all__ = ["Guarantee", "OwnerResult", "ProtectResult", "Release", "ReleaseResult", "protect"]



@dataclass(frozen=True)
class ProtectResult:
    """What :func:`protect` returns.

    Attributes
    ----------
    dataframe : the protected fragment, columns ``(id_column, *attributes)``, one row per input row
        (``n_records``) in a random order (CSPRNG keys, not the input's or the ids' order); numeric
        attributes as doubles within their declared domains, categorical ones as declared labels.
        Its noise is materialized: every action on it sees the same values. While the id column is
        present it shows which identified records share a cluster: no ε bound holds against
        anyone who sees it (see :func:`protect`).
    manifest : the public manifest of the step (:class:`fragrelease.protocol.messages.Manifest`): plan id
        ``standalone:<uuid>`` (no aggregator), fragmentation ``horizontal`` (one owner holding every
        record: the centralized case), k, ε, each attribute's budget split and the content digest.
    epsilon_spent : ε spent by this step (exact): the sum of ``budgets``' totals.
    epsilon_per_attribute : ε / l, what each attribute gets (sequential composition over attributes).
    budgets : each attribute's split between its category-order histogram and its centroids.
    guarantee : the statement for ``dataframe``: per column once the id column is dropped; while the
        ids are present no ε bound holds (``against`` says so).
    """

    dataframe: DataFrame
    manifest: Manifest
    epsilon_spent: Fraction
    epsilon_per_attribute: Fraction
    budgets: tuple[AttributeBudget, ...]
    guarantee: Guarantee

    @property
    def n_records(self) -> int:
        return self.manifest.n_records

    @property
    def k(self) -> int:
        return self.manifest.k

    @property
    def mechanism(self) -> str:
        return self.manifest.mechanism


def _declared_id_type(schema: SchemaLike, id_column: str) -> Optional[str]:
    """The declared type of ``id_column`` when ``schema`` declares it (None for a list of attributes)."""
    if isinstance(schema, str):
        schema = resolve_schema(schema)
    if isinstance(schema, DatasetSchema):
        return next((a.type for a in schema.attributes if a.name == id_column), None)
    return None


def _resolve(schema: SchemaLike, id_column: Optional[str]) -> tuple[str, list[Attribute], str]:
    """(dataset name, attributes, id column) from a schema name/YAML, a DatasetSchema or attributes."""
    if isinstance(schema, str):
        schema = resolve_schema(schema)
    if isinstance(schema, DatasetSchema):
        attrs, name, ids = list(schema.protected), schema.name, id_column or schema.id_column
    else:
        attrs = list(schema)
        if not attrs or not all(isinstance(a, Attribute) for a in attrs):
            raise InvalidParameterError(f"schema must be a dataset name, a DatasetSchema or a list of Attribute, "
                                        f"not {schema!r}")
        not_released = [a.name for a in attrs if not a.protected]
        if not_released:
            raise InvalidParameterError(f"attributes {not_released} have roles that are not released")
        name, ids = "custom", id_column
    if not ids:
        raise InvalidParameterError("protect needs an id column: give id_column= or a schema with a role: id column")
    return name, attrs, ids


def _declared_columns(schema: SchemaLike, id_column: Optional[str]) -> list[Attribute]:
    """Every declared column of ``schema`` (a DatasetSchema's own, or the id plus the given attributes)."""
    if isinstance(schema, str):
        schema = resolve_schema(schema)
    if isinstance(schema, DatasetSchema):
        return list(schema.attributes)
    attrs = [a for a in schema if isinstance(a, Attribute)]
    if id_column and all(a.name != id_column for a in attrs):
        attrs.insert(0, Attribute(name=id_column, type="long", role="id"))
    return attrs


def _protect_options(options: Optional[ReleaseOptions], option_values: dict[str, Any]) -> ReleaseOptions:
    """The options of :func:`protect`: the model, or the model built from its fields by name; linked only.

    Raises
    ------
    TypeError
        A keyword that is no option (as for any unexpected keyword argument).
    InvalidParameterError
        Both given, a value the model refuses (one line naming the option), ``options`` not the
        model, or a linkage other than ``linked``.
    """
    moved = [name for name in ("ledger", "owner_name") if name in option_values]
    if moved:  # the keywords of fragrelease 0.11 and earlier
        raise TypeError(f"protect() got an unexpected keyword argument {moved[0]!r}: since 0.12 the owner is "
                        "owner='name' or owner=OwnerConfig(name=..., ledger=LedgerConfig(...))")
    unknown = [name for name in option_values if name not in OPTION_NAMES]
    if unknown:
        raise TypeError(f"protect() got an unexpected keyword argument {unknown[0]!r}")
    if options is not None and option_values:
        raise InvalidParameterError(f"protect: give options or the option keywords {sorted(option_values)}, not both")
    if options is None:
        options = ReleaseOptions.of(**option_values)
    elif not isinstance(options, ReleaseOptions):
        raise InvalidParameterError(f"protect: options must be ReleaseOptions, not {type(options).__name__}")
    if not release_kind(options.linkage).single_owner:  # one owner's DataFrame: its released rows are its records
        raise InvalidParameterError(f"protect: a single owner's DataFrame keeps its rows linked; linkage "
                                    f"{options.linkage!r} is for a Release")
    return options.options


#: The fields of an :class:`OwnerConfig` that :func:`protect` uses (the rest belong to configured releases).
_PROTECT_OWNER_FIELDS = frozenset({"name", "ledger"})


def _protect_owner(owner: Union[str, OwnerConfig]) -> tuple[str, Optional[LedgerConfig]]:
    """The owner's name and ledger from :func:`protect`'s ``owner`` (a name, or an ``OwnerConfig``).

    Raises
    ------
    InvalidParameterError
        ``owner`` is neither, or an ``OwnerConfig`` that sets a field other than ``name`` and ``ledger``.
    """
    if isinstance(owner, str):
        return owner, None
    if not isinstance(owner, OwnerConfig):
        raise InvalidParameterError(f"protect: owner must be a name or an OwnerConfig, not {type(owner).__name__}")
    extra = sorted(f for f in OwnerConfig.model_fields if f not in _PROTECT_OWNER_FIELDS and getattr(owner, f) is not None)
    if extra:
        raise InvalidParameterError(f"protect: owner {owner.name!r} sets {', '.join(extra)}: protect() uses only an "
                                    "OwnerConfig's name and ledger (the rest belong to a configured release)")
    return owner.name, owner.ledger


def protect(
    df: Any,
    schema: SchemaLike,
    *,
    epsilon: Union[str, float, int, Fraction],
    k: int,
    mechanism: str = "idp-ir",
    id_column: Optional[str] = None,
    attributes: Optional[Sequence[str]] = None,
    options: Optional[ReleaseOptions] = None,
    owner: Union[str, OwnerConfig] = "owner",
    _noise: Optional[NoiseSource] = None,
    **option_values: Any,
) -> ProtectResult:
    """Protect one owner's DataFrame with IR microaggregation and Laplace noise (one owner's step).

    What holds for the returned DataFrame (neighbours differ by the substitution of one record):

    - **With the id column** (as returned): each row pairs a record's id with its cluster's noisy
      values, so whoever sees it learns which identified records share a cluster without noise.
      No ε bound holds against such a reader, not even for one column (a substitution moves a
      record into another cluster, which the ids show; measured on six records, DP-IR, k = 3,
      claimed ε = 1/2: an ε lower bound of about 5). Keep it for the owner's own eyes.
    - **After** ``dataframe.drop(id_column)``: the rows are in a random order (CSPRNG keys,
      :func:`fragrelease.jobs.protocol.shuffle.shuffle_rows`), never in id or input order, so each
      column, as a multiset, is ε_attr-DP (DP-IR) or ε_attr-iDP (iDP-IR, plain iDP) with
      ε_attr = ε / l; the rows still link a record's values across attributes, so the joint table
      has no ε bound (the guarantee's ``table`` text). Unlink the columns for an ε bound on the table.

    The budget is spent exactly as the owner job spends a plan's ε_j
    (:func:`fragrelease.jobs.idpir.owner_round.protect_attributes`): ε / l per attribute (sequential
    composition over the l attributes), each categorical attribute's share split between its
    ``dp-frequency`` histogram and its centroids. Sources: Del Vasto-Terrientes et al. (ICISSP 2025)
    §3-4 (IR microaggregation, iDP-IR); docs/specification.md §1-2.

    Parameters
    ----------
    df : the owner's raw fragment, a Spark or a pandas DataFrame: ``id_column`` (unique, non-null) and
        every released attribute; other columns are ignored. Values must lie in the declared domains
        (numeric) or categories. A pandas DataFrame is converted with the declared column types
        (a custom attribute list's id column: ``long``) in the active or a new local session.
    schema : a built-in dataset name (``"adult"``, ``"wine"``), a schema YAML path, a
        :class:`~fragrelease.schemas.base.DatasetSchema`, or a list of
        :class:`~fragrelease.schemas.base.Attribute` (then ``id_column`` is required).
    epsilon : the owner's total ε (> 0; exact text such as ``"1/2"`` is kept exact).
    k : cluster size, ≥ 3 and ≤ the number of records (plain ``idp`` always uses k = 1).
    mechanism : ``idp-ir`` (default), ``dp-ir`` or ``idp``.
    id_column : the record id; default the schema's ``role: id`` column.
    attributes : names of the attributes to protect (default: every released attribute of ``schema``).
    options : the release options (:class:`fragrelease.protocol.options.ReleaseOptions`; default every
        option at its default: ``dp-frequency`` with share 1/10, ``isotonic``). Their ``linkage``
        must be ``linked`` (a single owner's frame keeps its rows; unlinking is a ``Release``'s).
    **option_values : instead of ``options``, its fields by name as in the release configuration
        (``category_order="declared"``, ``category_order_share="1/5"``, ``postprocess="none"``):
        :meth:`ReleaseOptions.of <fragrelease.protocol.options.ReleaseOptions.of>` builds the model; a
        keyword that is no option raises TypeError.
    owner : the owner: its name in the manifest and the ledger (a string), or an
        :class:`~fragrelease.protocol.config.OwnerConfig` with its ``name`` and ``ledger`` (the owner's
        budget ledger, a path or a catalog table with the lifetime ε; the spend is recorded before any
        noise is drawn). An ``OwnerConfig`` that sets anything else (a source, rows, attributes, keys,
        a private folder: the fields of a configured release) is refused.
    _noise : private, tests only: a seeded noise source (production draws from the CSPRNG, :mod:`fragrelease.rng`);
        refused outside a pytest run (InvalidParameterError, before any Spark action).

    Returns
    -------
    ProtectResult

    Raises
    ------
    InvalidParameterError
        ε ≤ 0, unknown mechanism, order or post-processing, k < 3, k > n, a share outside (0, 1),
        an unknown attribute or option, both ``options`` and option keywords, a linkage other than
        ``linked``, an ``owner`` that is neither a string nor an ``OwnerConfig`` of a name and a
        ledger; all but k > n before any Spark action.
    ConfigError
        Unknown dataset name or a schema file that does not validate.
    SchemaMismatchError, DomainError, IdentifierError
        The DataFrame lacks a column, has a value outside a declared domain or category, or ids that
        are null or not unique (:func:`fragrelease.jobs.idpir.protect.validate_fragment`); a pandas
        value that is not of its column's declared type.
    BudgetExceededError
        The ledger has no room for ε on this dataset.
    """
    # --- checks without data -------------------------------------------------------------------
    require_pyspark()
    refuse_injected_noise(_noise, parameter="_noise")  # tests only
    eps = parse_epsilon(epsilon)
    # a single owner's rows stay linked (it is its own plan; the id column is returned for the owner)
    options = _protect_options(options, option_values)
    owner_name, ledger = _protect_owner(owner)
    mech = get_mechanism(mechanism)
    if mech.fixed_k is not None:
        k = mech.fixed_k
    else:
        check_k(k, minimum=MIN_K)
    dataset, attrs, id_col = _resolve(schema, id_column)
    if _is_pandas(df):
        from .session import get_spark

        df = _from_pandas(get_spark(), df, _declared_columns(schema, id_col), owner=owner_name)
    elif not isinstance(df, DataFrame):
        raise InvalidParameterError(f"df must be a Spark or a pandas DataFrame, not {type(df).__name__}")
    if attributes is not None:
        by_name = {a.name: a for a in attrs}
        unknown = [a for a in attributes if a not in by_name]
        if unknown or not attributes:
            raise InvalidParameterError(f"attributes {list(attributes)!r}: {unknown or 'empty'} not released by the schema "
                                        f"(released: {sorted(by_name)})")
        attrs = [by_name[a] for a in attributes]
    context = FragmentContext(owner_name, "DataFrame")
    check_columns(df, attrs, id_col, context)  # column names and types: analysis only, no job
    plan_id = f"standalone:{uuid.uuid4()}"
    # --- the owner's step -------------------------------------------------------------------------
    id_type = _declared_id_type(schema, id_col)
    check = validate_fragment(df, attrs, id_col, context, id_type=id_type)
    df = conform_id(df, id_col, id_type)
    # the one spec of this step (a single owner is its own plan): public parameters and the row count
    spec = protection_spec(owner=owner_name, dataset=dataset, plan_id=plan_id, attributes=[(a.name, a.categorical) for a in attrs],
                           mechanism=mech, k=k, epsilon=eps, options=options, n_records=check.n_records)
    protected = protect_attributes(df.sparkSession, df, attrs, spec, id_column=id_col, ledger=ledger, noise=_noise)
    protected = shuffle_rows(protected, id_col)  # never in id order: the values are materialized, the order is random
    manifest = Manifest(
        plan_id=plan_id, owner=owner_name, dataset=dataset, fragmentation=HORIZONTAL.name, mechanism=mechanism, k=k,
        epsilon=spec.epsilon, epsilon_per_attribute=spec.epsilon_per_attribute,
        attributes=tuple(a.public_spec() for a in attrs), n_records=check.n_records, id_column=id_col,
        budgets=spec.budgets, **options.option_values(), content_digest=content_digest(protected), created_at=_now(),
    )
    statement = release_kind(options.linkage).guarantee(mechanism=mechanism, epsilon=format_epsilon(eps),
                                                        composition="sequential", category_order=options.category_order)
    statement["against"] = (f"with the id column {id_col!r} present, nobody: the ids show which identified records "
                            "share a cluster, so no epsilon bound holds; after dropping it (rows are in a random "
                            "order), the per-column statements hold against anyone who reads the rest")
    guarantee = Guarantee.from_dict(statement)
    return ProtectResult(dataframe=protected, manifest=manifest, epsilon_spent=spec.epsilon,
                         epsilon_per_attribute=spec.epsilon_per_attribute, budgets=spec.budgets, guarantee=guarantee)


def _now() -> str:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).isoformat()
