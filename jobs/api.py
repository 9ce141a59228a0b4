"""The Python API: one owner's protection of a DataFrame, and a whole fragmented release.

Also reachable as ``fragrelease.protect`` and ``fragrelease.Release`` (a lazy facade: importing
``fragrelease`` alone stays Spark-free).

- :func:`protect` runs one data owner's step on a DataFrame: validate, split the budget, (optionally)
  record the spend in the owner's ledger, microaggregate and add noise, exactly as the owner job
  does (:func:`fragrelease.jobs.idpir.owner.protect_attributes`), and return the protected DataFrame
  with a typed :class:`ProtectResult`.
- :class:`Release` plays the whole protocol (docs/specification.md §3; Del Vasto-Terrientes et al.
  (ICISSP 2025) §4.2) for several owners whose fragments are DataFrames or catalog table names, and
  returns a typed :class:`ReleaseResult`. Each step is the function a separate party runs on a
  cluster (:mod:`fragrelease.jobs.idpir.owner`, :mod:`fragrelease.jobs.idpir.aggregator`); the CLI's
  ``fragrelease run`` goes through :meth:`Release.run` too (:func:`fragrelease.jobs.idpir.release.run_local_release`).

Everything that can be checked without data (ε, k, mechanism, names, the schema, the
configuration) is checked before any Spark action. Results hold public parameters only (plus the
protected or released DataFrame); nothing data-dependent is logged.
"""
from __future__ import annotations

import shutil
import tempfile
import uuid
import weakref
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Literal, Mapping, Optional, Sequence, Union, cast

try:
    from pyspark.sql import DataFrame
except ImportError:  # pyspark is not a wheel dependency: one clear line instead of the bare import error
    from fragrelease.jobs import require_pyspark

    require_pyspark()
    raise

from fragrelease.budget import format_epsilon, parse_epsilon, per_attribute_epsilon
from fragrelease.errors import ConfigError, InvalidParameterError
from fragrelease.idpir.category_order import (
    CATEGORY_ORDERS,
    DEFAULT_CATEGORY_ORDER,
    DEFAULT_ORDER_SHARE,
    AttributeBudget,
    parse_share,
)
from fragrelease.idpir.config import LedgerConfig, ReleaseConfig, config_from_dict, load_config
from fragrelease.idpir.guarantee import release_guarantee
from fragrelease.idpir.mechanisms import get_mechanism
from fragrelease.idpir.microaggregation import check_k
from fragrelease.idpir.postprocess import DEFAULT_POSTPROCESS, check_postprocess
from fragrelease.idpir.protocol import MIN_K, Manifest, Plan
from fragrelease.jobs import require_pyspark
from fragrelease.jobs.catalog import read_table
from fragrelease.jobs.idpir import aggregator, owner, simulate
from fragrelease.jobs.idpir.evaluate import mean_sse
from fragrelease.jobs.idpir.keys import generate_release_key
from fragrelease.jobs.idpir.layout import fragment_source
from fragrelease.jobs.idpir.protect import (
    FragmentContext,
    check_columns,
    conform_id,
    content_digest,
    validate_fragment,
)
from fragrelease.jobs.idpir.shuffle import shuffle_rows
from fragrelease.jobs.idpir.signatures import with_release_keys
from fragrelease.jobs.idpir.workspace import claim_work_dir, clear_work_dir
from fragrelease.jobs.progress import ProgressEvent, Steps
from fragrelease.jobs.storage import absolute, read_configured, read_delta
from fragrelease.rng.laplace import NoiseSource
from fragrelease.schemas.base import Attribute, DatasetSchema
from fragrelease.schemas.datasets import resolve_schema
from fragrelease.validation import check_table_name

__all__ = ["Guarantee", "OwnerResult", "ProtectResult", "Release", "ReleaseResult", "protect"]

SchemaLike = Union[str, DatasetSchema, Sequence[Attribute]]


@dataclass(frozen=True)
class Guarantee:
    """The exact privacy statement of a protected fragment or a release, in plain sentences.

    Source: :func:`fragrelease.idpir.guarantee.release_guarantee` (docs/privacy.md;
    docs/specification.md §2): ``per_column`` always holds; ``table`` says whether the joint table has
    an ε bound (only with ``linkage: unlinked``); ``against`` says against whom.
    """

    neighbouring: str
    notion: str
    per_column: str
    table: str
    against: str

    @classmethod
    def from_dict(cls, d: Mapping[str, str]) -> Guarantee:
        return cls(**{k: d[k] for k in ("neighbouring", "notion", "per_column", "table", "against")})


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
    manifest : the public manifest of the step (:class:`fragrelease.idpir.protocol.Manifest`): plan id
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


def _budget(d: Mapping[str, str]) -> AttributeBudget:
    return AttributeBudget(d["attribute"], parse_epsilon(d["epsilon"]), Fraction(d["epsilon_order"]),
                           parse_epsilon(d["epsilon_centroids"]))


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


def _is_pandas(obj) -> bool:
    import pandas as pd

    return isinstance(obj, pd.DataFrame)


def _from_pandas(spark, pdf, columns: Sequence[Attribute], *, owner: str) -> DataFrame:
    """A pandas fragment as a Spark DataFrame with the declared types (the dataset schema's columns).

    Every declared column that ``pdf`` has is converted to its declared type (``integer``/``long``:
    whole numbers; ``double``; ``string``: labels as text); other columns are dropped (they are never
    released). Missing columns, nulls and values outside a domain are left to the fragment's
    validation (:func:`fragrelease.jobs.idpir.protect.validate_fragment`), which names them.

    Raises
    ------
    SchemaMismatchError
        A value that is not of the declared type (names the owner, the column and the value as written).
    """
    import pandas as pd

    from fragrelease.errors import SchemaMismatchError

    present = [a for a in columns if a.name in pdf.columns]
    if not present:
        raise SchemaMismatchError(f"owner {owner!r}: the pandas DataFrame has none of the declared columns "
                                  f"{[a.name for a in columns]} (it has {list(pdf.columns)[:10]})")
    out = {}
    for a in present:
        col = pdf[a.name].reset_index(drop=True)
        given = col.notna()
        if a.type == "string":
            out[a.name] = pd.Series([v if isinstance(v, str) else str(v) if g else None for v, g in zip(col, given)],
                                    dtype=object)
            continue
        num = pd.to_numeric(col, errors="coerce")
        bad = given & num.isna()
        if a.type in ("integer", "long"):
            finite = num.where(num.abs() != float("inf"))
            bad |= given & ~num.isna() & (finite.isna() | (finite != finite.round()))
        if bad.any():
            value = col[bad].iloc[0]
            value = value.item() if hasattr(value, "item") else value  # numpy scalars as plain Python values
            raise SchemaMismatchError(f"owner {owner!r}, source pandas DataFrame, column {a.name!r}: declared "
                                      f"{a.type}, holds {value!r}")
        dtype = {"integer": "Int32", "long": "Int64", "double": "float64"}[a.type]
        out[a.name] = num.astype(dtype)
    from pyspark.sql import types as T

    spark_type = {"integer": T.IntegerType(), "long": T.LongType(), "double": T.DoubleType(), "string": T.StringType()}
    struct = T.StructType([T.StructField(a.name, spark_type[a.type], nullable=True) for a in present])
    return spark.createDataFrame(pd.DataFrame(out), schema=struct)


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


def protect(
    df: Any,
    schema: SchemaLike,
    *,
    epsilon: Union[str, float, int, Fraction],
    k: int,
    mechanism: str = "idp-ir",
    id_column: Optional[str] = None,
    attributes: Optional[Sequence[str]] = None,
    category_order: str = DEFAULT_CATEGORY_ORDER,
    category_order_share: Union[str, float, Fraction] = DEFAULT_ORDER_SHARE,
    postprocess: str = DEFAULT_POSTPROCESS,
    ledger: Optional[LedgerConfig] = None,
    owner_name: str = "owner",
    noise: Optional[NoiseSource] = None,
) -> ProtectResult:
    """Protect one owner's DataFrame with IR microaggregation and Laplace noise (one owner's step).

    What holds for the returned DataFrame (neighbours differ by the substitution of one record):

    - **With the id column** (as returned): each row pairs a record's id with its cluster's noisy
      values, so whoever sees it learns which identified records share a cluster without noise.
      No ε bound holds against such a reader, not even for one column (a substitution moves a
      record into another cluster, which the ids show; measured on six records, DP-IR, k = 3,
      claimed ε = 1/2: an ε lower bound of about 5). Keep it for the owner's own eyes.
    - **After** ``dataframe.drop(id_column)``: the rows are in a random order (CSPRNG keys,
      :func:`fragrelease.jobs.idpir.shuffle.shuffle_rows`), never in id or input order, so each
      column, as a multiset, is ε_attr-DP (DP-IR) or ε_attr-iDP (iDP-IR, plain iDP) with
      ε_attr = ε / l; the rows still link a record's values across attributes, so the joint table
      has no ε bound (the guarantee's ``table`` text). Unlink the columns for an ε bound on the table.

    The budget is spent exactly as the owner job spends a plan's ε_j
    (:func:`fragrelease.jobs.idpir.owner.protect_attributes`): ε / l per attribute (sequential
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
    category_order, category_order_share, postprocess : as in the release configuration
        (``dp-frequency`` with share 1/10, ``isotonic``).
    ledger : the owner's budget ledger (path or catalog table, lifetime ε); the spend is recorded
        before any noise is drawn.
    owner_name : the owner's name in the manifest and the ledger.
    noise : tests only: a seeded noise source (production draws from the CSPRNG, :mod:`fragrelease.rng`).

    Returns
    -------
    ProtectResult

    Raises
    ------
    InvalidParameterError
        ε ≤ 0, unknown mechanism, order or post-processing, k < 3, k > n, a share outside (0, 1),
        an unknown attribute; all but k > n before any Spark action.
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
    eps = parse_epsilon(epsilon)
    share = parse_share(category_order_share)
    mech = get_mechanism(mechanism)
    check_postprocess(postprocess)
    if category_order not in CATEGORY_ORDERS:
        raise InvalidParameterError(f"category_order must be one of {CATEGORY_ORDERS}, not {category_order!r}")
    if mech.fixed_k is not None:
        k = mech.fixed_k
    else:
        check_k(k, minimum=MIN_K)
    dataset, attrs, id_col = _resolve(schema, id_column)
    if _is_pandas(df):
        from fragrelease.jobs.session import get_spark

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
    eps_attr = per_attribute_epsilon(eps, len(attrs))
    plan_id = f"standalone:{uuid.uuid4()}"
    # --- the owner's step -------------------------------------------------------------------------
    id_type = _declared_id_type(schema, id_col)
    check = validate_fragment(df, attrs, id_col, context, id_type=id_type)
    df = conform_id(df, id_col, id_type)
    if k > check.n_records:
        raise InvalidParameterError(f"k = {k} exceeds the {check.n_records} records of owner {owner_name!r}")
    protected, budgets = owner.protect_attributes(
        df.sparkSession, df, attrs, id_column=id_col, k=k, epsilon=eps, epsilon_per_attribute=eps_attr,
        mechanism=mechanism, category_order=category_order, category_order_share=share, postprocess=postprocess,
        n_records=check.n_records, owner=owner_name, dataset=dataset, plan_id=plan_id, ledger=ledger, noise=noise)
    protected = shuffle_rows(protected, id_col)  # never in id order: the values are materialized, the order is random
    typed = tuple(_budget(b) for b in budgets)
    assert sum((b.total for b in typed), Fraction(0)) == eps
    manifest = Manifest(
        plan_id=plan_id, owner=owner_name, dataset=dataset, fragmentation="horizontal", mechanism=mechanism, k=k,
        epsilon=format_epsilon(eps), epsilon_per_attribute=format_epsilon(eps_attr),
        attributes=tuple(a.public_spec() for a in attrs), n_records=check.n_records, id_column=id_col,
        # both checked against their allowed values above
        category_order=cast(Literal["dp-frequency", "declared"], category_order),
        category_order_share=format_epsilon(share), budgets=budgets,
        postprocess=cast(Literal["isotonic", "none"], postprocess),
        content_digest=content_digest(protected), created_at=_now(),
    )
    statement = release_guarantee(mechanism=mechanism, epsilon=format_epsilon(eps), composition="sequential",
                                  linkage="linked", category_order=category_order)
    statement["against"] = (f"with the id column {id_col!r} present, nobody: the ids show which identified records "
                            "share a cluster, so no epsilon bound holds; after dropping it (rows are in a random "
                            "order), the per-column statements hold against anyone who reads the rest")
    guarantee = Guarantee.from_dict(statement)
    return ProtectResult(dataframe=protected, manifest=manifest, epsilon_spent=eps, epsilon_per_attribute=eps_attr,
                         budgets=typed, guarantee=guarantee)


def _now() -> str:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).isoformat()


@dataclass(frozen=True)
class OwnerResult:
    """One owner's part of a release: its name, record count, ε_j, attributes and manifest."""

    name: str
    records: int
    epsilon: Fraction
    attributes: tuple[str, ...]
    manifest: Manifest


@dataclass(frozen=True)
class ReleaseResult:
    """What :meth:`Release.run` returns.

    Attributes
    ----------
    path : the release's Delta table folder (absolute for local paths).
    table : its catalog name when the release went to ``output_table``, else None.
    version : the Delta version this run committed (0 for a new table).
    rows : released rows (horizontal: Σ n_j; vertical: n).
    plan : the aggregator's plan (k, each owner's ε_j and budget split, ...).
    owners : one :class:`OwnerResult` per owner, in plan order.
    epsilon : the release's total ε (exact); ``composition``: parallel (horizontal) or sequential.
    guarantee : the exact statement recorded in the provenance.
    provenance : the public facts recorded with the commit, as recorded (read-only mapping).
    report : path of the public report (statistics of the released table only), or None.
    mean_sse : MeanSSE of the protected fragments against the originals, when ``evaluate=True``
        (the driver holds the originals: simulations and experiments only), else None.
    """

    path: str
    table: Optional[str]
    version: int
    rows: int
    plan: Plan
    owners: tuple[OwnerResult, ...]
    epsilon: Fraction
    composition: str
    guarantee: Guarantee
    provenance: Mapping[str, Any]
    report: Optional[str] = None
    mean_sse: Optional[float] = None

    def dataframe(self, spark) -> DataFrame:
        """This version of the release as a DataFrame (columns in plan order; no id unless ``keep_id``)."""
        if self.table is not None:
            return read_table(spark, self.table, self.version)
        return read_delta(spark, self.path, self.version)


def _source_dict(source, views: list[str]) -> dict:
    """A configuration ``source`` for a DataFrame (a temporary view), a table name or a SourceConfig dict."""
    if isinstance(source, DataFrame):
        view = f"fragrelease_src_{uuid.uuid4().hex}"
        source.createOrReplaceTempView(view)
        views.append(view)
        return {"table": view}
    if isinstance(source, str):
        return {"table": check_table_name(source, key="owner source")}
    if isinstance(source, Mapping):
        return dict(source)
    raise InvalidParameterError(f"an owner's source must be a Spark or pandas DataFrame, a catalog table name or a mapping "
                                f"{{path, format}}, not {type(source).__name__}")


class Release:
    """A fragmented iDP-IR release over several owners, played in this driver.

    Build it from parameters and owners (DataFrames or catalog table names), or from a
    configuration (:meth:`from_config`), then :meth:`run` it::

        release = Release("adult", fragmentation="horizontal", epsilon="1", k=50,
                          output_table="analytics.adult_release")
        release.add_owner("clinic-a", df_a).add_owner("clinic-b", "raw.clinic_b")
        result = release.run()

    Parameters
    ----------
    dataset : built-in dataset name, a schema YAML path, or a :class:`DatasetSchema` (written as YAML
        into ``work_dir`` so that every party reads the same declaration).
    fragmentation : ``horizontal`` (owners hold disjoint records) or ``vertical`` (disjoint attributes).
    epsilon, k, mechanism : the release's total ε, cluster size and mechanism.
    output / output_table : where the release is committed: a Delta folder or a catalog table name.
    work_dir : the folder the parties share (metadata, plan, protected fragments, manifests); it
        must hold nothing but a release's own entries (:mod:`fragrelease.jobs.idpir.workspace`).
        Default: a new temporary folder (0700), removed when :meth:`run` ends or fails.
    spark : the session (default: the active one, or a new local one).
    options : any other release configuration key (``epsilon_split``, ``keep_id``, ``if_exists``,
        ``reports``, ``category_order``, ``category_order_share``, ``linkage``, ``postprocess``, ``name``).

    Raises
    ------
    ConfigError
        At :meth:`config` / :meth:`run`: a configuration that does not validate (names the key and value).
    """

    def __init__(self, dataset: Union[str, DatasetSchema], *, fragmentation: str = "horizontal",
                 epsilon: Union[str, float, int, Fraction], k: int, mechanism: str = "idp-ir",
                 output: Optional[str] = None, output_table: Optional[str] = None, work_dir: Optional[str] = None,
                 spark=None, **options: Any) -> None:
        self._spark = spark
        self._schema = dataset if isinstance(dataset, DatasetSchema) else None
        self._work_dir = work_dir
        self._given_work_dir = work_dir
        self._tmp: Optional[str] = None
        self._data: dict[str, Any] = {
            "name": options.pop("name", "release"), "dataset": dataset if isinstance(dataset, str) else None,
            "fragmentation": fragmentation,
            "epsilon": format_epsilon(epsilon) if isinstance(epsilon, Fraction) else epsilon,
            "k": k, "mechanism": mechanism, "output": output, "output_table": output_table, **options,
        }
        self._owners: list[dict] = []
        self._views: list[str] = []
        self._spent_views = False
        self._config: Optional[ReleaseConfig] = None

    @classmethod
    def from_config(cls, config: Union[ReleaseConfig, str, Path], *, spark=None,
                    overrides: Optional[dict] = None) -> Release:
        """A release from a validated configuration or a configuration YAML (``conf/*.yaml``).

        Raises
        ------
        ConfigError
            The file cannot be read or does not validate.
        """
        cfg = config if isinstance(config, ReleaseConfig) else load_config(config, overrides)
        if isinstance(config, ReleaseConfig) and overrides:
            cfg = config_from_dict({**config.model_dump(mode="json", exclude_none=True), **overrides})
        out = cls.__new__(cls)
        out._spark, out._schema, out._work_dir, out._data = spark, None, cfg.work_dir, {}
        out._given_work_dir, out._tmp = cfg.work_dir, None
        out._owners, out._views, out._config, out._spent_views = [], [], cfg, False
        return out

    def add_owner(self, name: str, source: Union[DataFrame, Any, str, Mapping[str, Any], None] = None, *,
                  attributes: Optional[Sequence[str]] = None, rows: Optional[int] = None,
                  ledger: Optional[Union[LedgerConfig, Mapping[str, Any]]] = None,
                  private_dir: Optional[str] = None) -> Release:
        """Add data owner ``name`` with its fragment; returns ``self`` (chainable).

        ``source``: a Spark DataFrame (registered as a session-scoped temporary view and read back with
        ``spark.table``), a pandas DataFrame (converted with the dataset's declared column types,
        then the same), a catalog table name (``db.table``), or ``{path, format}``. Vertical owners
        list their ``attributes``; ``rows`` without ``source`` simulates a horizontal owner from the
        dataset (local runs). ``ledger``: ``{path or table, lifetime_epsilon}``.

        Raises
        ------
        ConfigError
            The release was built from a configuration (its owners are fixed there).
        InvalidParameterError
            A source of another type, or an invalid table name.
        SchemaMismatchError
            A pandas value that is not of its column's declared type (names the owner, column and value).
        """
        if self._config is not None and not self._data:
            raise ConfigError("this release was built from a configuration; its owners are the configuration's")
        entry: dict[str, Any] = {"name": name}
        if _is_pandas(source):
            declared = self._schema if self._schema is not None else resolve_schema(self._data["dataset"])
            source = _from_pandas(self.spark, source, declared.attributes, owner=name)
        if source is not None:
            entry["source"] = _source_dict(source, self._views)
        if attributes is not None:
            entry["attributes"] = list(attributes)
        if rows is not None:
            entry["rows"] = rows
        if ledger is not None:
            entry["ledger"] = ledger.model_dump(exclude_none=True) if isinstance(ledger, LedgerConfig) else dict(ledger)
        if private_dir is not None:
            entry["private_dir"] = private_dir
        self._owners.append(entry)
        self._config = None
        return self

    @property
    def spark(self):
        if self._spark is None:
            from fragrelease.jobs.session import get_spark

            self._spark = get_spark()
        return self._spark

    def config(self) -> ReleaseConfig:
        """The validated release configuration (no Spark action).

        Raises
        ------
        ConfigError
            Naming the bad key and value.
        """
        if self._config is not None:
            return self._config
        if (self._given_work_dir is None or self._schema is not None) and self._tmp is None:
            self._make_tmp()
        if self._given_work_dir is not None:
            self._work_dir = self._given_work_dir
        else:
            assert self._tmp is not None  # made just above
            self._work_dir = str(Path(self._tmp) / "work")
        data = {**{k: v for k, v in self._data.items() if v is not None}, "work_dir": self._work_dir,
                "owners": self._owners}
        if self._schema is not None:
            import yaml

            # beside the work folder, in this release's own temporary folder: a schema file is the
            # user's declaration, never an entry of work_dir (fragrelease.jobs.idpir.workspace)
            assert self._tmp is not None  # made above whenever a schema is given
            path = Path(self._tmp) / "schema.yaml"
            path.write_text(yaml.safe_dump(self._schema.model_dump(mode="json", exclude_none=True)), encoding="utf-8")
            data["dataset"] = str(path)
        self._config = config_from_dict(data, source="Release(...)")
        return self._config

    def _make_tmp(self) -> None:
        """This release's own temporary folder (0700): the default work folder and a declared schema.

        Removed when :meth:`run` ends or fails, or when the release object is garbage collected.
        """
        self._tmp = tempfile.mkdtemp(prefix="fragrelease-work-")
        self._tmp_finalizer = weakref.finalize(self, shutil.rmtree, self._tmp, True)

    def _remove_tmp(self) -> None:
        """Remove the temporary folder this release created (only that one) and forget its paths."""
        if self._tmp is None:
            return
        self._tmp_finalizer()  # shutil.rmtree(self._tmp, ignore_errors=True), once
        self._tmp = None
        if self._data:  # built from parameters: the next config() makes a new temporary folder
            self._config = None

    def run(self, *, noise: Optional[NoiseSource] = None, progress: Optional[Callable[[ProgressEvent], None]] = None,
            evaluate: bool = False, fresh_work_dir: bool = True, config_path: Optional[str] = None) -> ReleaseResult:
        """Play every party's step in this driver and commit the release.

        Steps: simulate owners if the configuration asks for it → each owner validates its fragment
        and writes public metadata (:func:`~fragrelease.jobs.idpir.owner.describe_fragment`) → the
        aggregator issues the plan (:func:`~fragrelease.jobs.idpir.aggregator.issue_plan`) → each
        owner protects its fragment (:func:`~fragrelease.jobs.idpir.owner.protect_owner_fragment`)
        → the aggregator verifies, combines and commits (:func:`~fragrelease.jobs.idpir.aggregator.release`).

        Parameters
        ----------
        noise : tests only (seeded noise).
        progress : called twice per step with a :class:`~fragrelease.jobs.progress.ProgressEvent`:
            when the step starts (``event.status == "started"``) and when it ends (``"done"`` or
            ``"failed"``, with ``event.seconds``); ``str(event)`` is a one-line description such as
            ``step 4/8 owner clinic-a: protecting 10 attributes … done in 12.4 s``. Default: the
            logger ``fragrelease.progress`` (ended steps at INFO, started ones at DEBUG).
            Steps: simulation (if configured), each owner's metadata, the plan, each owner's
            protection, the release, the evaluation (if ``evaluate``). docs/python-api.md.
        evaluate : also compute MeanSSE of the protected fragments against the originals (the
            driver reads every owner's original: for simulations and experiments).
        fresh_work_dir : first remove what an earlier run of this release left in ``work_dir``
            (``metadata/``, ``plan.json``, ``owners/``; an earlier run's fragments are never reused) and
            nothing else (:func:`fragrelease.jobs.idpir.workspace.clear_work_dir`).
        config_path : the configuration file the release was read from, if any (it must not lie
            inside ``work_dir``).

        Before any Spark action, ``work_dir`` is checked
        (:func:`fragrelease.jobs.idpir.workspace.check_work_dir`): a source, the output, a ledger, a
        private folder or root, the configuration or schema file inside it, an entry no release
        wrote, or a marker of another release is refused with a ConfigError naming the key and the
        path. Without a ``work_dir``, the release works in a new temporary folder that is removed
        when the run ends or fails.

        Raises
        ------
        ConfigError, InvalidParameterError, ProtocolError, ManifestMismatchError, ReleaseExistsError,
        BudgetExceededError, SchemaMismatchError, DomainError, IdentifierError
            From the steps; see each step's documentation.
        """
        require_pyspark()
        if self._spent_views:
            raise ConfigError("this release already ran with DataFrame owners, whose temporary views are gone; "
                              "build a new Release (each run spends a new budget)")
        try:
            cfg = self.config()
            # no Spark yet: refuse a work folder holding user files or another release's
            if fresh_work_dir:
                clear_work_dir(cfg, config_path)
            else:
                claim_work_dir(cfg, config_path)
            spark = self.spark
            self._spent_views = bool(self._views)
            try:
                return _run(spark, cfg, noise=noise, progress=progress, evaluate=evaluate)
            finally:
                for view in self._views:
                    spark.catalog.dropTempView(view)
                self._views.clear()
        finally:
            self._remove_tmp()


def _run(spark, cfg: ReleaseConfig, *, noise, progress, evaluate: bool) -> ReleaseResult:
    # signed manifests: a key pair per owner and release where none is configured (private keys in
    # the owners' private folders; the public keys reach the aggregator step in this in-memory cfg)
    cfg = with_release_keys(cfg)
    schema = resolve_schema(cfg.dataset)
    steps = Steps(int(cfg.simulated) + 2 * len(cfg.owners) + 2 + int(evaluate), progress)
    # every party plays on this machine: one fresh pseudonym key per release for the owners whose
    # configuration names none, kept in their private folders (0600), never under work_dir
    generate_release_key(cfg)
    if cfg.simulated:
        with steps.step("driver", "simulating the owners' fragments"):
            simulate.split_fragments(spark, cfg, schema, simulate.load_dataset(spark, cfg, schema))
    for o in cfg.owners:
        with steps.step("owner", "validating its fragment and sending metadata", o.name):
            owner.describe_fragment(spark, cfg, o.name)
    with steps.step("aggregator", "validating metadata and issuing the plan"):
        plan = aggregator.issue_plan(cfg, spark)
    manifests, protecteds = {}, {}
    for o in cfg.owners:
        with steps.step("owner", f"protecting {len(plan.owner(o.name).attributes)} attributes", o.name):
            manifests[o.name], protecteds[o.name] = owner.protect_and_write(spark, cfg, o.name, noise=noise)
    with steps.step("aggregator", "verifying fragments and committing the release"):
        out = aggregator.release(spark, cfg)
    score = None
    if evaluate:
        with steps.step("driver", "evaluating information loss (MeanSSE) against the originals"):
            score = _mean_sse(spark, cfg, plan, schema, protecteds)
    prov = out["provenance"]
    return ReleaseResult(
        path=absolute(out["path"]), table=out["table"], version=out["version"], rows=out["rows"], plan=plan,
        owners=tuple(OwnerResult(name=o.name, records=o.n_records, epsilon=parse_epsilon(o.epsilon),
                                 attributes=tuple(o.attributes), manifest=manifests[o.name]) for o in plan.owners),
        epsilon=parse_epsilon(plan.epsilon), composition=plan.composition,
        guarantee=Guarantee.from_dict(prov["guarantee"]), provenance=MappingProxyType(prov), report=out["report"],
        mean_sse=score,
    )


def _mean_sse(spark, cfg: ReleaseConfig, plan: Plan, schema: DatasetSchema, by_owner: Mapping[str, DataFrame]) -> float:
    """MeanSSE of the owners' protected fragments (with raw ids, this driver's own copies, never
    the pseudonymized ones under ``work_dir``) against the originals."""
    attrs = [schema.attribute(a["name"]) for a in plan.attributes]
    id_col = schema.id_column
    assert id_col is not None  # a release's schema names its id column (checked with the configuration)
    originals = [read_configured(spark, fragment_source(cfg, o)) for o in cfg.owners]
    protecteds = [by_owner[o.name] for o in cfg.owners]
    names = [a.name for a in attrs]
    # the same assembly as the release's (fragrelease.jobs.idpir.aggregator.combine), on raw ids
    original = aggregator.assemble(originals, cfg.fragmentation, names, key=id_col)
    protected = aggregator.assemble(protecteds, cfg.fragmentation, names, key=id_col)
    return mean_sse(original, protected, attrs, id_col)
