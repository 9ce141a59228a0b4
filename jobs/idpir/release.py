"""One driver plays every party: the local (laptop) run of a whole fragmented release.

Steps, each the same function a separate party runs on a cluster:
simulate owners' fragments if the configuration asks for it (:mod:`.simulate`) → every owner writes
its metadata (:func:`.owner.describe_fragment`) → the aggregator issues the plan
(:func:`.aggregator.issue_plan`) → every owner protects its fragment
(:func:`.owner.protect_owner_fragment`) → the aggregator verifies, combines and commits
(:func:`.aggregator.release`) → the driver, which holds the originals here, reports MeanSSE. The
owners' steps of one phase run at the same time, one thread each (:func:`play_release`).

This module sits below the Python API: :func:`run_local_release` (the CLI's ``fragrelease run``) and
:meth:`fragrelease.jobs.api.Release.run` both call :func:`prepare_work_dir` then :func:`play_release`;
it imports the party modules, the storage layer and the shared result types
(:mod:`fragrelease.jobs.api_common`), never :mod:`fragrelease.jobs.api` or
:mod:`fragrelease.jobs.release_api` (tests/test_architecture.py, ``JOBS_LAYERS``).
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from types import MappingProxyType
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from pyspark.sql import DataFrame

from fragrelease.idpir.config import ReleaseConfig
from fragrelease.idpir.fragmentation import fragmentation_of, linkage_of
from fragrelease.idpir.protocol import Plan
from fragrelease.rng.laplace import NoiseSource
from fragrelease.schemas.datasets import resolve_schema

from ..api_common import Guarantee, OwnerResult, ReleaseResult
from ..progress import ProgressEvent, Steps
from ..storage import absolute, read_configured
from . import aggregator, owner, simulate
from .context import OwnerContext, aggregator_context, owner_context
from .evaluate import mean_sse
from .fragment import conform_attributes, conform_id
from .keys import generate_release_key
from .shuffle import ONE_TASK_VALUES, one_task
from .signatures import with_release_keys
from .workspace import claim_work_dir, clear_work_dir


def prepare_work_dir(cfg: ReleaseConfig, *, fresh: bool = True, config_path: Optional[str] = None) -> None:
    """Clear (``fresh``) or claim the release's work folder; no Spark (:mod:`.workspace`).

    ``fresh`` removes what an earlier run of this release left in ``work_dir`` (its metadata, plan and
    owners' entries; an earlier run's fragments are never reused: each run spends a new budget) and
    only that; otherwise the folder is claimed as it is. ``config_path``, the configuration file,
    must not lie inside ``work_dir``. Raises ConfigError naming the key and the path
    (:func:`.workspace.check_work_dir`).
    """
    if fresh:
        clear_work_dir(cfg, config_path)
    else:
        claim_work_dir(cfg, config_path)


def run_local_release(spark, cfg: ReleaseConfig, *, noise: Optional[NoiseSource] = None,
                      progress: Optional[Callable[[ProgressEvent], None]] = None, fresh_work_dir: bool = True,
                      config_path: Optional[str] = None) -> ReleaseResult:
    """Run every step of the release in this driver; return its typed result (path, version, owners, ε, MeanSSE).

    The same path as the Python API's ``Release.from_config(cfg).run(evaluate=True)``
    (:class:`fragrelease.jobs.api.Release`): :func:`prepare_work_dir` then :func:`play_release`; the
    CLI prints the :class:`~fragrelease.jobs.api_common.ReleaseResult` as it is. ``fresh_work_dir``
    removes what an earlier run of this release left in the work folder first (protected fragments of
    an earlier run are never reused: each run spends a new budget), and only that (:mod:`.workspace`);
    ``config_path``, the configuration file, must not lie inside ``work_dir``.
    ``progress`` receives each step's start and end (:class:`~fragrelease.jobs.progress.ProgressEvent`);
    default: the logger ``fragrelease.progress``, one INFO line per finished step.
    """
    prepare_work_dir(cfg, fresh=fresh_work_dir, config_path=config_path)
    return play_release(spark, cfg, noise=noise, progress=progress, evaluate=True)


def play_release(spark, cfg: ReleaseConfig, *, noise: Optional[NoiseSource] = None,
                 progress: Optional[Callable[[ProgressEvent], None]] = None,
                 evaluate: bool = False) -> ReleaseResult:
    """Play every party's step in this driver on a claimed work folder; return the typed result.

    ``cfg`` is the validated configuration; its ``work_dir`` must already be claimed or cleared
    (:func:`prepare_work_dir`). ``noise``: tests only (seeded). ``progress``: see
    :meth:`fragrelease.jobs.api.Release.run`. ``evaluate``: also compute MeanSSE against the
    originals (skipped for a synthetic release). Raises what the steps raise (ConfigError,
    ProtocolError, ManifestMismatchError, ReleaseExistsError, BudgetExceededError, SchemaMismatchError,
    DomainError, IdentifierError).

    The owners at the same time: the owners' steps of one phase run together, one thread of this
    driver per owner (the owners are separate parties, which in a deployment run at the same time);
    the phases run one after another: every owner's metadata step, the plan, every owner's protection
    (a synthetic release: every owner's round one, then every owner's round two), the aggregator's
    release, MeanSSE. Step numbers follow the configuration's owner order whatever the threads' timing
    (:class:`fragrelease.jobs.progress.Steps`: ``progress`` is called from the thread that runs the
    step, one call at a time). Before any owner of a protection phase (or synthesis round) spends,
    every owner of it runs the checks that need no noise, up to its ledger's check of the spend
    (:func:`fragrelease.jobs.idpir.owner.check_before_spend`,
    :func:`fragrelease.jobs.synthesis.owner.check_round_before_spend`); when one fails, no owner of
    the phase spends. A phase ends when every owner's step has ended, then raises the failure of the
    first owner in configuration order whose step failed, unchanged. Budgets: a failure after the
    checks (Spark, storage, the risk check's gate) no longer stops the owners after it from
    spending: when owner 1's protection fails there, owner 2 may have spent and published its
    fragment, as owner 1 had when owner 2 failed in a sequential run (docs/architecture.md, "The local
    driver"). With a ``noise`` source (tests), a synthetic release's rounds, which draw on this driver,
    run one owner after another.
    """
    # signed manifests: a key pair per owner and release where none is configured (private keys in
    # the owners' private folders; the public keys reach the aggregator step in this in-memory cfg)
    cfg = with_release_keys(cfg)
    schema = resolve_schema(cfg.dataset)
    # every party's context, once, from the configuration with the release's keys
    owners = {o.name: owner_context(cfg, o.name, schema=schema) for o in cfg.owners}
    agg = aggregator_context(cfg, schema=schema)
    synthetic = linkage_of(cfg.linkage).synthesized  # two owner rounds, no protected fragment to evaluate
    evaluate = evaluate and not synthetic
    steps = Steps(int(cfg.simulated) + (3 if synthetic else 2) * len(cfg.owners) + 2 + int(evaluate), progress)
    # every party plays on this machine: one fresh pseudonym key per release for the owners whose
    # configuration names none, kept in their private folders (0600), never under work_dir
    generate_release_key(cfg)
    if cfg.simulated:
        with steps.step("driver", "simulating the owners' fragments"):
            simulate.split_fragments(spark, cfg, schema, simulate.load_dataset(spark, cfg, schema))
    names = [o.name for o in cfg.owners]  # configuration order: the steps' numbers and the error raised
    _owners_together(spark, steps, "validating its fragment and sending metadata", names,
                     lambda name: owner.describe_fragment(spark, owners[name]))
    with steps.step("aggregator", "validating metadata and issuing the plan"):
        plan = aggregator.issue_plan(agg, spark, pin=False)  # held here and handed to the release step
    manifests: dict = {o.name: None for o in cfg.owners}
    protecteds = {}
    if synthetic:  # docs/specification.md §10: every owner's round one, then every owner's round two
        from ..synthesis.owner import check_round_before_spend, measure_owner_round

        for what in ("1-way marginals and tree edges", "clique marginals"):
            # a test's seeded noise source draws on this driver (the rounds' noise): one owner at a
            # time then, so its draws come in configuration order whatever the threads' timing
            _owners_together(spark, steps, f"measuring noisy {what}", names,
                             lambda name: measure_owner_round(spark, owners[name], noise=noise),
                             checks=lambda name: check_round_before_spend(spark, owners[name]),
                             at_once=noise is None)
    else:
        outs = _owners_together(spark, steps, {n: f"protecting {len(plan.owner(n).attributes)} attributes"
                                               for n in names}, names,
                                lambda name: owner.protect_and_write(spark, owners[name], noise=noise),
                                checks=lambda name: owner.check_before_spend(spark, owners[name]))
        for name, (manifest, protected) in zip(names, outs):
            manifests[name], protecteds[name] = manifest, protected
    what = "verifying measurements, fitting the model and committing" if synthetic else \
        "verifying fragments and committing the release"
    with steps.step("aggregator", what):
        out = aggregator.release(spark, agg, plan=plan, single_process=True)  # the plan it issued, never read back from work_dir
    score = None
    if evaluate:
        with steps.step("driver", "evaluating information loss (MeanSSE) against the originals"):
            score = _mean_sse(spark, plan, list(owners.values()), protecteds)
    prov = dict(out.provenance)
    return ReleaseResult(
        path=absolute(out.path), table=out.table, version=out.version, rows=out.rows, plan=plan,
        owners=tuple(OwnerResult(name=o.name, records=o.n_records, epsilon=o.epsilon,
                                 attributes=tuple(o.attributes), manifest=manifests[o.name]) for o in plan.owners),
        epsilon=plan.epsilon, composition=plan.composition,
        guarantee=Guarantee.from_dict(prov["guarantee"]), provenance=MappingProxyType(prov), report=out.report,
        mean_sse=score,
    )


def _nothing() -> None:
    """The target :func:`pyspark.inheritable_thread_target` wraps: it only applies what it inherits."""


class _Stopped(Exception):
    """An owner's step stopped after its checks, before its spend, because another owner's checks of
    the same phase failed; never raised out of the phase (the failed owner's error is)."""


class _Gate:
    """Every owner of a phase passes its checks that need no noise before any owner of it goes on to
    its spend: each owner's thread arrives once, with or without a failure; when one failed, the
    others stop (:class:`_Stopped`) instead of spending."""

    def __init__(self, parties: int) -> None:
        self._barrier = threading.Barrier(parties)
        self._failed = False

    def arrive(self, ok: bool) -> None:
        if not ok:
            self._failed = True  # set before the wait: every thread reads it after the last one arrived
        self._barrier.wait()
        if ok and self._failed:
            raise _Stopped()


def _owners_together(spark, steps: Steps, action: Union[str, Mapping[str, str]], names: Sequence[str],
                     run: Callable[[str], Any], *, checks: Optional[Callable[[str], Any]] = None,
                     at_once: bool = True) -> list:
    """One phase of the owners' steps: ``run(name)`` for every owner in ``names`` (configuration order)
    at the same time, one thread of this driver each; returns their results in ``names``' order.

    The steps' numbers are taken here, in ``names``' order, before any starts (``action``: the step's
    text, or one per owner). With ``checks``, every owner first runs ``checks(name)`` (the step's checks
    that need no noise, up to its ledger's check of the spend) inside its step, and no owner goes on
    to ``run`` until every owner's checks have passed: when one fails, the others' steps stop before
    their spend (reported ``failed``). The phase ends when every owner's step has ended (no thread
    outlives it, so none of its Spark jobs still runs); then the failure of the first owner in
    ``names`` whose step failed is raised, the exception object its step raised. The threads inherit
    this thread's Spark local properties and tags (:func:`pyspark.inheritable_thread_target`; PySpark's
    pinned threads, one SparkSession). One owner, or ``at_once=False``: the steps run one after
    another in this thread, without the separate checks (each step runs its own).
    """
    numbers = [steps.number() for _ in names]
    actions = [action if isinstance(action, str) else action[name] for name in names]
    if len(names) == 1 or not at_once:
        out = []
        for number, what, name in zip(numbers, actions, names):
            with steps.step("owner", what, name, number=number):
                out.append(run(name))
        return out
    from pyspark import inheritable_thread_target

    gate = _Gate(len(names)) if checks is not None else None

    def one(inherit: Callable[[], None], number: int, what: str, name: str):
        # the caller's Spark local properties and tags, applied to this thread, whose pinned JVM thread
        # keeps them; called and returned before the step, so no PySpark frame sits below the step's
        # Spark calls (Spark names a job after the caller of the first PySpark frame it finds)
        inherit()
        arrived = gate is None
        try:
            with steps.step("owner", what, name, number=number):
                if gate is not None and checks is not None:
                    try:
                        checks(name)
                    except BaseException:
                        arrived = True
                        gate.arrive(False)
                        raise
                    arrived = True
                    gate.arrive(True)
                return run(name)
        finally:
            if not arrived and gate is not None:  # the step failed before its checks (its progress callback)
                gate.arrive(False)

    with ThreadPoolExecutor(max_workers=len(names), thread_name_prefix="fragrelease-owner") as pool:
        # one wrapper per owner, made here: each thread gets its own copy of this thread's local properties
        futures = [pool.submit(one, inheritable_thread_target(spark)(_nothing), number, what, name)
                   for number, what, name in zip(numbers, actions, names)]
    # leaving the block waited for every owner's step
    for future in futures:
        exc = future.exception()
        if exc is not None and not isinstance(exc, _Stopped):
            raise exc
    return [future.result() for future in futures]


def _mean_sse(spark, plan: Plan, owners: Sequence[OwnerContext], by_owner: Mapping[str, DataFrame]) -> float:
    """MeanSSE of the owners' protected fragments (with raw ids, this driver's own copies, never
    the pseudonymized ones under ``work_dir``) against the originals; ``owners`` in configuration order.
    One Spark job when the release is small (:func:`fragrelease.jobs.idpir.shuffle.one_task` of the
    plan's record counts), else the join's and the aggregation's stages."""
    cfg, schema = owners[0].config, owners[0].schema
    attrs = [schema.attribute(a["name"]) for a in plan.attributes]
    id_col = schema.id_column
    assert id_col is not None  # a release's schema names its id column (checked with the configuration)
    # read as the owners read them (CSV as text, no inference pass), ids and numbers cast as the owners
    # cast them once their validation passed
    id_type = schema.attribute(id_col).type
    originals = [conform_attributes(conform_id(read_configured(spark, o.paths.fragment, text=True), id_col,
                                               id_type), attrs) for o in owners]
    if cfg.risk_check is not None:  # the owners' held-out control records were not released: not scored
        from .keys import owner_pseudonym_key
        from .risk_check import split_control

        originals = [split_control(df, id_col, owner_pseudonym_key(o), cfg.name, cfg.risk_check.control_share)[0]
                     for df, o in zip(originals, owners)]
    protecteds = [by_owner[o.name] for o in owners]
    names = [a.name for a in attrs]
    # the same assembly as the release's (fragrelease.jobs.idpir.aggregator.combine), on raw ids
    original = aggregator.assemble(originals, cfg.fragmentation, names, key=id_col)
    protected = aggregator.assemble(protecteds, cfg.fragmentation, names, key=id_col)
    rows = fragmentation_of(cfg.fragmentation).released_rows([o.n_records for o in plan.owners])
    if one_task(rows, len(names) + 1):
        # a small release (the plan's public record counts): each side one partition (no rows move),
        # so the join and its aggregation plan no exchange and MeanSSE is one Spark job. The limit
        # drops nothing (at least the plan's record count; a row too many would show as unmatched):
        # it gives the planner the stored protected values' size, which it otherwise shuffles
        cap = ONE_TASK_VALUES // (len(names) + 1)
        original, protected = original.coalesce(1), protected.coalesce(1).limit(cap)
    return mean_sse(original, protected, attrs, id_col)
