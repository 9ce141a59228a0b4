"""One driver plays every party: the local (laptop) run of a whole fragmented release.

Steps, each the same function a separate party runs on a cluster:
simulate owners' fragments if the configuration asks for it (:mod:`.simulate`) → every owner writes
its metadata (:func:`.owner.describe_fragment`) → the aggregator issues the plan
(:func:`.aggregator.issue_plan`) → every owner plays the release kind's rounds (IR: protects its
fragment; :meth:`.kind.KindJobs.play_round`) → the aggregator verifies, combines and commits
(:func:`.aggregator.release`) → the driver, which holds the originals here, reports MeanSSE
(:meth:`.kind.KindJobs.mean_sse`, a kind that :attr:`~.kind.KindJobs.evaluates`). A run
after a killed or failed attempt resumes that attempt's plan instead of the first three steps
(:mod:`.resume`; owners that kept their draw re-publish it without spending).

This module sits below the Python API: :func:`run_local_release` (the CLI's ``fragrelease run``) and
:meth:`fragrelease.jobs.api.Release.run` both call :func:`prepare_work_dir` then :func:`play_release`;
it imports the party modules, the storage layer and the shared result types
(:mod:`fragrelease.jobs.api_common`), never :mod:`fragrelease.jobs.api` or
:mod:`fragrelease.jobs.release_api` (tests/test_architecture.py, ``JOBS_LAYERS``).
"""
from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from types import MappingProxyType
from typing import Callable, Mapping, Optional

from fragrelease.protocol.config import ReleaseConfig
from fragrelease.protocol.messages import Plan
from fragrelease.rng.laplace import NoiseSource, refuse_injected_noise
from fragrelease.schemas.datasets import resolve_schema

from ..api_common import Guarantee, OwnerResult, ReleaseResult
from ..progress import ProgressEvent, Steps
from ..storage import absolute
from . import aggregator, owner, simulate
from .context import OwnerContext, aggregator_context, owner_context
from .keys import generate_release_key
from .kind import kind_jobs
from .resume import cost_line, run_decision
from .signatures import with_release_keys
from .workspace import claim_work_dir, clear_work_dir


def prepare_work_dir(cfg: ReleaseConfig, *, fresh: bool = False, config_path: Optional[str] = None) -> None:
    """Claim the release's work folder (or, ``fresh``, clear it first); no Spark (:mod:`.workspace`).

    The single-command run claims it as it is: :func:`play_release` decides whether to resume the
    plan an earlier attempt left there or to clear it for a new plan (:mod:`.resume`). ``fresh``
    removes what an earlier run of this release left in ``work_dir`` (its metadata, plan and owners'
    entries) and only that. ``config_path``, the configuration file, must not lie inside
    ``work_dir``. Raises ConfigError naming the key and the path (:func:`.workspace.check_work_dir`).
    """
    if fresh:
        clear_work_dir(cfg, config_path)
    else:
        claim_work_dir(cfg, config_path)


def run_local_release(spark, cfg: ReleaseConfig, *, noise: Optional[NoiseSource] = None,
                      progress: Optional[Callable[[ProgressEvent], None]] = None, new_plan: bool = False,
                      config_path: Optional[str] = None,
                      announce: Optional[Callable[[str], None]] = None) -> ReleaseResult:
    """Run every step of the release in this driver; return its typed result (path, version, owners, ε, MeanSSE).

    The same path as the Python API's ``Release.from_config(cfg).run(evaluate=True)``
    (:class:`fragrelease.jobs.api.Release`): :func:`prepare_work_dir` then :func:`play_release`; the
    CLI prints the :class:`~fragrelease.jobs.api_common.ReleaseResult` as it is. An earlier attempt's
    plan is resumed unless ``new_plan`` (:mod:`.resume`); ``announce`` receives the run's cost line
    before anything is spent. ``config_path``, the configuration file, must not lie inside ``work_dir``.
    ``progress`` receives each step's start and end (:class:`~fragrelease.jobs.progress.ProgressEvent`);
    default: the logger ``fragrelease.progress``, one INFO line per finished step.
    """
    prepare_work_dir(cfg, config_path=config_path)
    return play_release(spark, cfg, noise=noise, progress=progress, evaluate=True, new_plan=new_plan,
                        announce=announce)


def _announce(line: str) -> None:
    logging.getLogger("fragrelease.progress").info("%s", line)


def play_release(spark, cfg: ReleaseConfig, *, noise: Optional[NoiseSource] = None,
                 progress: Optional[Callable[[ProgressEvent], None]] = None,
                 evaluate: bool = False, new_plan: bool = False,
                 announce: Optional[Callable[[str], None]] = None) -> ReleaseResult:
    """Play every party's step in this driver on a claimed work folder; return the typed result.

    ``cfg`` is the validated configuration; its ``work_dir`` must already be claimed
    (:func:`prepare_work_dir`). ``noise``: tests only (seeded; refused outside pytest). ``progress``: see
    :meth:`fragrelease.jobs.api.Release.run`. ``evaluate``: also compute MeanSSE against the
    originals (skipped for a kind without protected fragments, and for a resumed plan). Raises what the steps raise
    (ConfigError, ProtocolError, ManifestMismatchError, ReleaseExistsError, BudgetExceededError,
    SchemaMismatchError, DomainError, IdentifierError).

    Resume, don't respend (:mod:`.resume`): the plan an earlier attempt left in ``work_dir`` is resumed
    (owners that kept their draw re-publish it without spending, the others draw, the aggregator
    commits) unless the configuration changed or ``new_plan``; a plan already committed is refused
    (ReleaseExistsError) unless ``new_plan``. A new plan clears the earlier attempt's entries of
    ``work_dir`` first (:func:`.workspace.clear_work_dir`). ``announce`` receives the cost line
    (:func:`.resume.cost_line`) before any owner spends (default: the logger ``fragrelease.progress``, INFO).

    Spend last across owners: before each round (an IR release has one, a synthetic release two), every
    owner runs, in configuration order, its checks that need no noise up to its ledger's check of the
    spend (the kind's :meth:`fragrelease.jobs.protocol.kind.KindJobs.check_before_spend`; no progress step
    of their own).
    When one refuses (no room in a ledger, a replayed plan, a damaged ledger, a bad key or plan term),
    its error is raised unchanged and no owner has spent. A failure after the checks (Spark, storage)
    stops the owners after it; the owners before it have spent, and the next run resumes the plan
    without spending their ε again. The owners' risk check (``risk_check``) is advisory and stops nothing.
    """
    # signed manifests: a key pair per owner and run where none is configured (private keys in the
    # owners' private folders; the public keys reach the aggregator step in this in-memory cfg)
    refuse_injected_noise(noise, parameter="noise")  # seeded noise: tests only
    cfg = with_release_keys(cfg)
    schema = resolve_schema(cfg.dataset)
    # every party's context, once, from the configuration with the release's keys
    owners = {o.name: owner_context(cfg, o.name, schema=schema) for o in cfg.owners}
    agg = aggregator_context(cfg, schema=schema)
    decision = run_decision(spark, agg, owners, new_plan=new_plan)
    resumed = decision.plan is not None
    kind = kind_jobs(cfg.linkage)  # the release kind: what its owners do in their rounds, how it combines
    evaluate = evaluate and kind.evaluates and not resumed
    first = 0 if resumed else int(cfg.simulated) + len(cfg.owners) + 1
    steps = Steps(first + kind.rounds_per_owner * len(cfg.owners) + 1 + int(evaluate), progress)
    if decision.plan is not None:
        plan = decision.plan
    else:
        plan = _new_plan(spark, cfg, owners, agg, steps)
    (announce or _announce)(cost_line(spark, decision, plan, owners))
    manifests: dict = {o.name: None for o in cfg.owners}
    protecteds = {}
    for number in range(1, kind.rounds_per_owner + 1):  # every owner's round one, then every owner's round two
        for o in cfg.owners:  # every owner's checks that need no noise before any owner spends
            kind.check_before_spend(spark, owners[o.name], number)
        for o in cfg.owners:
            doing = kind.rounds(owners[o.name], plan)[number - 1].doing
            with steps.step("owner", doing, o.name):
                _, result = kind.play_round(spark, owners[o.name], number, noise=noise)
            if result.manifest is not None:
                manifests[o.name] = result.manifest
            if result.protected is not None:
                protecteds[o.name] = result.protected
    what = kind.combining
    # MeanSSE needs the originals and this driver's own copies of the protected values only, not the release:
    # its one Spark job runs while the aggregator verifies and commits (mostly driver-side work: Delta's
    # commit), and its result is taken, or its error raised, after the aggregator's step as before. Leaving
    # the block waits for it, also when the aggregator fails (whose error is then the one raised).
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="fragrelease-mean-sse") as pool:
        scoring = pool.submit(kind.mean_sse, spark, plan, list(owners.values()), protecteds) if evaluate else None
        with steps.step("aggregator", what):
            out = aggregator.release(spark, agg, plan=plan, single_process=True)  # the plan it issued, never read back from work_dir
        score = None
        if scoring is not None:
            with steps.step("driver", "evaluating information loss (MeanSSE) against the originals"):
                score = scoring.result()
    prov = dict(out.provenance)
    return ReleaseResult(
        path=absolute(out.path), table=out.table, version=out.version, rows=out.rows, plan=plan,
        owners=tuple(OwnerResult(name=o.name, records=o.n_records, epsilon=o.epsilon,
                                 attributes=tuple(o.attributes), manifest=manifests[o.name]) for o in plan.owners),
        epsilon=plan.epsilon, composition=plan.composition,
        guarantee=Guarantee.from_dict(prov["guarantee"]), provenance=MappingProxyType(prov), report=out.report,
        mean_sse=score,
    )


def _new_plan(spark, cfg: ReleaseConfig, owners: Mapping[str, OwnerContext], agg, steps: Steps) -> Plan:
    """A new plan: the earlier attempt's entries of ``work_dir`` cleared, a fresh pseudonym key, the simulated
    fragments (if configured), every owner's metadata, then the plan, pinned in the aggregator's private folder
    so that a later run can resume it (:mod:`.resume`)."""
    clear_work_dir(cfg)  # the earlier attempt's metadata, plan and owners' entries only (none of its draws is reused)
    schema = agg.schema
    # every party plays on this machine: one fresh pseudonym key per release for the owners whose
    # configuration names none, kept in their private folders (0600), never under work_dir
    generate_release_key(cfg)
    if cfg.simulated:
        with steps.step("driver", "simulating the owners' fragments"):
            simulate.split_fragments(spark, cfg, schema, simulate.load_dataset(spark, cfg, schema))
    for o in cfg.owners:
        with steps.step("owner", "validating its fragment and sending metadata", o.name):
            owner.describe_fragment(spark, owners[o.name])
    with steps.step("aggregator", "validating metadata and issuing the plan"):
        return aggregator.issue_plan(agg, spark)  # pinned, and handed to the release step in memory
