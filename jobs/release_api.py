"""The Python API's whole fragmented release: :class:`Release` (its typed :class:`ReleaseResult` is defined in
:mod:`fragrelease.jobs.api_common` and served from here).

:class:`Release` plays the whole protocol (docs/specification.md §3; Del Vasto-Terrientes et al.
(ICISSP 2025) §4.2) for several owners whose fragments are DataFrames or catalog table names. Each
step is the function a separate party runs on a cluster (:mod:`fragrelease.jobs.protocol.owner`,
:mod:`fragrelease.jobs.protocol.aggregator`), played by the local driver
(:func:`fragrelease.jobs.protocol.release.play_release`), which the CLI's ``fragrelease run`` calls too
(:func:`fragrelease.jobs.protocol.release.run_local_release`); this module sits above that driver. Also reachable
as ``fragrelease.jobs.api.Release`` and ``fragrelease.Release``. Results hold public parameters only
(plus the released DataFrame); nothing data-dependent is logged.
"""
from __future__ import annotations

import shutil
import tempfile
import uuid
import weakref
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence, Union

try:
    from pyspark.sql import DataFrame
except ImportError:  # pyspark is not a wheel dependency: one clear line instead of the bare import error
    from . import require_pyspark

    require_pyspark()
    raise

from fragrelease.budget import format_epsilon
from fragrelease.errors import ConfigError, InvalidParameterError
from fragrelease.protocol.config import LedgerConfig, ReleaseConfig, config_from_dict, load_config
from fragrelease.rng.laplace import NoiseSource, refuse_injected_noise
from fragrelease.schemas.base import DatasetSchema
from fragrelease.schemas.datasets import resolve_schema
from fragrelease.validation import check_table_name

from . import require_pyspark
from .api_common import OwnerResult, ReleaseResult, _from_pandas, _is_pandas
from .progress import ProgressEvent
from .protocol.release import play_release, prepare_work_dir

__all__ = ["OwnerResult", "Release", "ReleaseResult"]


def _source_dict(source, views: list[str]) -> Mapping[str, Any]:
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
    epsilon, k, mechanism : the release's total ε, cluster size and mechanism (default ``idp-ir``); ``k``
        is required by the IR kinds and refused, like ``mechanism``, by ``linkage="synthetic"``.
    output / output_table : where the release is committed: a Delta folder or a catalog table name.
    work_dir : the folder the parties share (metadata, plan, protected fragments, manifests); it
        must hold nothing but a release's own entries (:mod:`fragrelease.jobs.protocol.workspace`).
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
                 epsilon: Union[str, float, int, Fraction], k: Optional[int] = None, mechanism: Optional[str] = None,
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
            cfg = config_from_dict({**config.model_dump(mode="json", exclude_none=True, exclude_unset=True), **overrides})
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
            from .session import get_spark

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
            # user's declaration, never an entry of work_dir (fragrelease.jobs.protocol.workspace)
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

    def preview(self, *, rows: Optional[int] = None, threshold: float = 0.5):
        """The release kind's preview before any data is read (:meth:`fragrelease.protocol.kind.ReleaseKind.preview`;
        no Spark action). For the IR kinds (``linked``, ``unlinked``) the accuracy preview
        (:func:`fragrelease.idpir.preview.preview`):

        Per released attribute: ε_attr, the Laplace scale b = E|noise| (exact for DP-IR, an upper bound for
        iDP-IR), the 95 % interval ±b·ln 20 and the share of the domain it covers, the categorical rank-move
        chance, the expected released error after post-processing (simulated on data drawn from the declared
        domain) beside the error of releasing the mean or most frequent category; warnings when the first is at
        least ``threshold`` times the second, and the smallest k, ε or attribute subset that fits. ``rows``:
        the record count of owners that declare none. Returns a
        :class:`~fragrelease.idpir.preview.ReleasePreview` (``linkage: synthetic``: a
        :class:`~fragrelease.synthesis.preview.SynthesisPreview` of each measurement's noise, ``threshold`` unused). Raises ConfigError or InvalidParameterError
        naming the bad key or value.
        """
        from .protocol.preflight import kind_preview

        return kind_preview(self.config(), rows=rows, threshold=threshold)

    def owner_preview(self, owner: str, *, runs: int = 32):
        """One owner's private preview of its own fragment (:func:`fragrelease.jobs.idpir.owner_preview.owner_preview`).

        Reads and validates that owner's fragment, then simulates ``runs`` releases of it: per attribute its
        local Laplace scale and the expected released error after post-processing beside the error of
        releasing its own mean or most frequent category. Returns an
        :class:`~fragrelease.jobs.idpir.owner_preview.OwnerPreview`; it is computed from the owner's data, so
        show it to that owner only. Nothing is written and no budget is spent; DataFrame owners stay usable
        for :meth:`run`. Raises ConfigError for an unknown owner or a release kind that offers no owner preview
        (``linkage: synthetic``: its noise depends on public terms only), and the fragment's validation errors.
        """
        require_pyspark()
        from fragrelease.kinds import resolve
        from fragrelease.protocol.kind import release_kind

        from .protocol.context import owner_context
        from .protocol.preflight import find_owner

        if self._spent_views:
            raise ConfigError("this release already ran with DataFrame owners, whose temporary views are gone; "
                              "build a new Release")
        cfg = self.config()
        kind = release_kind(cfg.linkage)
        if kind.owner_preview is None:
            raise ConfigError(f"owner_preview: {kind.owner_preview_refusal()}: see preview()")
        find_owner(cfg, owner)  # before any Spark action
        return resolve(kind.owner_preview)(self.spark, owner_context(cfg, owner), runs=runs)

    def run(self, *, _noise: Optional[NoiseSource] = None, progress: Optional[Callable[[ProgressEvent], None]] = None,
            evaluate: bool = False, new_plan: bool = False, config_path: Optional[str] = None,
            announce: Optional[Callable[[str], None]] = None) -> ReleaseResult:
        """Play every party's step in this driver and commit the release.

        Steps: simulate owners if the configuration asks for it → each owner validates its fragment
        and writes public metadata (:func:`~fragrelease.jobs.protocol.owner.describe_fragment`) → the
        aggregator issues the plan (:func:`~fragrelease.jobs.protocol.aggregator.issue_plan`) → each
        owner protects its fragment (:func:`~fragrelease.jobs.idpir.owner_round.protect_owner_fragment`)
        → the aggregator verifies, combines and commits (:func:`~fragrelease.jobs.protocol.aggregator.release`).

        Parameters
        ----------
        _noise : private, tests only (seeded noise); production noise comes from the CSPRNG. Outside a
            pytest run it is refused with InvalidParameterError before anything runs.
        progress : called twice per step with a :class:`~fragrelease.jobs.progress.ProgressEvent`:
            when the step starts (``event.status == "started"``) and when it ends (``"done"`` or
            ``"failed"``, with ``event.seconds``); ``str(event)`` is a one-line description such as
            ``step 4/8 owner clinic-a: protecting 10 attributes … done in 12.4 s``. Default: the
            logger ``fragrelease.progress`` (ended steps at INFO, started ones at DEBUG).
            Steps: simulation (if configured), each owner's metadata, the plan, each owner's
            protection, the release, the evaluation (if ``evaluate``). docs/python-api.md.
        evaluate : also compute MeanSSE of the protected fragments against the originals (the
            driver reads every owner's original: for simulations and experiments).
        new_plan : spend again on a new plan even when ``work_dir`` holds an earlier attempt's plan to
            resume (the CLI's ``--new-plan``). By default a killed or failed attempt's plan is resumed: the
            owners that kept their draw re-publish it without spending, the others draw, the aggregator
            commits (:mod:`fragrelease.jobs.protocol.resume`); a plan already committed is refused
            (ReleaseExistsError) unless ``new_plan``; a changed configuration makes a new plan. A new plan
            first removes what the earlier attempt left in ``work_dir`` (``metadata/``, ``plan.json``,
            ``owners/``) and nothing else (:func:`fragrelease.jobs.protocol.workspace.clear_work_dir`).
            Resuming needs a ``work_dir`` that outlives the run: the default temporary one does not.
        announce : receives the run's cost line before anything is spent (``resuming plan <id>: ...`` or
            ``new plan <id> (...): ...``); default: the logger ``fragrelease.progress`` at INFO.
        config_path : the configuration file the release was read from, if any (it must not lie
            inside ``work_dir``).

        Before any Spark action, ``work_dir`` is checked
        (:func:`fragrelease.jobs.protocol.workspace.check_work_dir`): a source, the output, a ledger, a
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
        refuse_injected_noise(_noise, parameter="_noise")  # tests only, before anything runs
        if self._spent_views:
            raise ConfigError("this release already ran with DataFrame owners, whose temporary views are gone; "
                              "build a new Release (each run spends a new budget)")
        try:
            cfg = self.config()
            # no Spark yet: refuse a work folder holding user files or another release's
            prepare_work_dir(cfg, config_path=config_path)
            spark = self.spark
            self._spent_views = bool(self._views)
            try:
                return play_release(spark, cfg, noise=_noise, progress=progress, evaluate=evaluate, new_plan=new_plan,
                                    announce=announce)
            finally:
                for view in self._views:
                    spark.catalog.dropTempView(view)
                self._views.clear()
        finally:
            self._remove_tmp()
