"""One driver plays every party: the local (laptop) run of a whole fragmented release.

Steps, each the same function a separate party runs on a cluster:
simulate owners' fragments if the configuration asks for it (:mod:`.simulate`) → every owner writes
its metadata (:func:`.owner.describe_fragment`) → the aggregator issues the plan
(:func:`.aggregator.issue_plan`) → every owner protects its fragment
(:func:`.owner.protect_owner_fragment`) → the aggregator verifies, combines and commits
(:func:`.aggregator.release`) → the driver, which holds the originals here, reports MeanSSE.
"""
from __future__ import annotations

import shutil
from typing import Callable, Optional

from fragrelease.idpir.config import ReleaseConfig
from fragrelease.jobs.idpir import aggregator, owner, simulate
from fragrelease.jobs.idpir.evaluate import mean_sse
from fragrelease.jobs.idpir.layout import fragment_source, protected_path
from fragrelease.jobs.storage import absolute, read_delta, read_source
from fragrelease.rng import NoiseSource
from fragrelease.schemas.datasets import resolve_schema


def _union(frames):
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    return out


def run_local_release(spark, cfg: ReleaseConfig, *, noise: Optional[NoiseSource] = None,
                      progress: Callable[[str], None] = lambda msg: None, fresh_work_dir: bool = True) -> dict:
    """Run every step of the release in this driver; return a summary (path, version, owners, ε, k, MeanSSE).

    ``fresh_work_dir`` clears the work folder first (protected fragments of an earlier run are
    never reused: each run spends a new budget).
    """
    schema = resolve_schema(cfg.dataset)
    if fresh_work_dir:
        shutil.rmtree(absolute(cfg.work_dir), ignore_errors=True)
    if cfg.simulated:
        progress("simulating the owners' fragments")
        data = simulate.load_dataset(spark, cfg, schema)
        simulate.split_fragments(spark, cfg, schema, data)
    for o in cfg.owners:
        progress(f"owner {o.name}: validating its fragment and sending metadata")
        owner.describe_fragment(spark, cfg, o.name)
    progress("aggregator: validating metadata and issuing the plan")
    plan = aggregator.issue_plan(cfg)
    for o in cfg.owners:
        progress(f"owner {o.name}: protecting {len(plan.owner(o.name).attributes)} attributes")
        owner.protect_owner_fragment(spark, cfg, o.name, noise=noise)
    progress("aggregator: verifying fragments and committing the release")
    result = aggregator.release(spark, cfg)

    progress("evaluating information loss (MeanSSE) against the originals")
    attrs = [schema.attribute(a["name"]) for a in plan.attributes]
    id_col = schema.id_column
    originals, protecteds = [], []
    for o in cfg.owners:
        src = fragment_source(cfg, o)
        originals.append(read_source(spark, src.path, src.format, src.options))
        protecteds.append(read_delta(spark, protected_path(cfg, o.name)))
    if cfg.fragmentation == "horizontal":
        names = [id_col, *[a.name for a in attrs]]
        original = _union([f.select(*names) for f in originals])
        protected = _union([f.select(*names) for f in protecteds])
    else:
        original, protected = originals[0], protecteds[0]
        for f in originals[1:]:
            original = original.join(f.drop(*[c for c in f.columns if c in original.columns and c != id_col]), id_col)
        for f in protecteds[1:]:
            protected = protected.join(f, id_col)
    result["mean_sse"] = mean_sse(original, protected, attrs, id_col)
    result["owners"] = [{"name": o.name, "records": o.n_records, "epsilon": o.epsilon,
                         "attributes": len(o.attributes)} for o in plan.owners]
    result["plan"] = plan
    return result
