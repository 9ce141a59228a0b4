"""A small release in few Spark jobs (issue 41, session 4): one-task passes gated by public or own record counts.

The small fragment's protection (:func:`fragrelease.jobs.idpir.cluster_noise.draw_small_fragment`),
the row shuffles of a small table (:func:`fragrelease.jobs.protocol.shuffle.shuffle_rows` with
``single_task``), the aggregator's disjointness check and the driver's MeanSSE, each without an
exchange; the same rows, orders and messages as the parallel plans.
"""

import numpy as np
import pandas as pd
import pytest
from spark_jobs import job_ids, job_names

from fragrelease.errors import IdentifierError
from fragrelease.jobs.idpir.combine import check_disjoint_pseudonyms
from fragrelease.jobs.protocol import shuffle


def _plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def test_the_one_task_gate_counts_rows_times_columns():
    assert shuffle.one_task(1_000, 1_000) and shuffle.one_task(1_000_000, 1) and shuffle.one_task(1_000_000, 0)
    assert not shuffle.one_task(1_001, 1_000) and not shuffle.one_task(1_000_001, 1)


def test_a_small_table_is_shuffled_in_one_task_into_a_random_order(spark):
    df = spark.createDataFrame(pd.DataFrame({"id": np.arange(600), "x": np.arange(600) * 0.5}))  # two partitions
    one = shuffle.shuffle_rows(df, "id", single_task=True)
    assert "Exchange" not in _plan(one)
    assert "Exchange" in _plan(shuffle.shuffle_rows(df, "id"))  # the parallel plan: range partitioning
    before = job_ids(spark)
    first = one.toPandas()
    assert len(job_ids(spark) - before) == 1
    second = one.toPandas()
    for got in (first, second):  # the same rows, each with its own values, in a random order
        assert sorted(got["id"]) == list(range(600))
        assert (got["x"] == got["id"] * 0.5).all()
        assert not (np.diff(got["id"]) > 0).all()
    assert not (first["id"].to_numpy() == second["id"].to_numpy()).all()  # fresh CSPRNG keys per run


@pytest.mark.parametrize("single_task", [True, False])
def test_the_disjointness_check_in_one_task_says_the_same(spark, single_task):
    a = spark.createDataFrame([(f"p{i}",) for i in range(40)], "pseudonym string")
    b = spark.createDataFrame([(f"p{i}",) for i in range(37, 60)], "pseudonym string")
    c = spark.createDataFrame([(f"q{i}",) for i in range(30)], "pseudonym string")
    check_disjoint_pseudonyms({"a": a, "c": c}, single_task=single_task)  # disjoint: no error
    before = job_ids(spark)
    with pytest.raises(IdentifierError) as e:
        check_disjoint_pseudonyms({"a": a, "b": b, "c": c}, single_task=single_task)
    assert str(e.value) == ("owners 'a' and 'b' hold 3 records with the same pseudonym; horizontal owners must hold "
                            "disjoint records (a record held twice would be released twice under parallel composition)")
    if single_task:
        assert len(job_ids(spark) - before) == 1


def _small_config(tmp_path):
    """A two-owner horizontal release of 300 records each (reports off), signed manifests."""
    import yaml
    from signing_keys import with_keys  # tests/helpers: the owners sign their manifests

    from fragrelease.protocol.config import config_from_dict

    schema = {"name": "clinic", "attributes": [
        {"name": "record_id", "type": "long", "role": "id"},
        {"name": "age", "type": "integer", "role": "quasi-identifier", "kind": "numeric", "domain": [0, 100]},
        {"name": "sex", "type": "string", "role": "quasi-identifier", "kind": "categorical",
         "categories": ["Female", "Male"]},
    ]}
    (tmp_path / "schema.yaml").write_text(yaml.safe_dump(schema))
    src = tmp_path / "src"
    src.mkdir()
    for name, first in (("a", 1000), ("b", 5000)):
        (src / f"{name}.csv").write_text("record_id,age,sex\n" + "".join(
            f"{first + n},{20 + n % 60},{'Male' if n % 3 else 'Female'}\n" for n in range(300)))
    keyfile = tmp_path / "keys" / "k"
    keyfile.parent.mkdir()
    keyfile.write_bytes(b"0123456789abcdef0123456789abcdef-small-release")
    keyfile.chmod(0o600)
    owners = [{"name": f"clinic-{n}", "source": {"path": str(src / f"{n}.csv"), "format": "csv"},
               "pseudonym_key": {"file": str(keyfile)}, "private_dir": str(tmp_path / "private" / n)}
              for n in ("a", "b")]
    cfg = with_keys(config_from_dict(dict(
        name="small", dataset=str(tmp_path / "schema.yaml"), fragmentation="horizontal", mechanism="idp-ir",
        epsilon="1", k=5, owners=owners, work_dir=str(tmp_path / "work"), output=str(tmp_path / "release"),
        reports=False)), tmp_path / "signing")
    return cfg


@pytest.mark.slow  # a whole two-owner release end to end; CI runs it
def test_a_small_release_protects_and_scores_without_exchanges(spark, tmp_path, monkeypatch):
    """Per step of a two-owner release of 300 records each (reports off): each owner's protection draws
    in one job and no step of the owners' protection, the aggregator's checks or the MeanSSE runs an
    adaptive stage job (no exchange); MeanSSE is one job; the plan's checks are one job, and so are the
    aggregator's digests and disjointness check together."""
    from fragrelease.jobs.protocol.release import run_local_release

    cfg = _small_config(tmp_path)
    steps: dict[str, list[str]] = {}
    current: list = []

    def progress(event):
        if event.status == "started":
            current[:] = [event.action if event.owner is None else f"{event.owner}: {event.action}", job_ids(spark)]
        else:
            steps[current[0]] = job_names(spark, job_ids(spark) - current[1])

    import threading

    from fragrelease.jobs.idpir import evaluate
    from fragrelease.jobs.protocol import aggregator

    real_score, real_release, committed = evaluate.owners_mean_sse, aggregator.release, threading.Event()

    def grouped(*args, **kwargs):
        # tests only: MeanSSE's jobs in a group of their own, after the aggregator's step, so that each step's
        # jobs below are its own (the overlap itself: the test after this one)
        assert committed.wait(120)
        spark.sparkContext.setJobGroup("mean-sse", "MeanSSE")
        try:
            return real_score(*args, **kwargs)
        finally:
            spark.sparkContext.setJobGroup("", "")

    def releasing(*args, **kwargs):
        try:
            return real_release(*args, **kwargs)
        finally:
            committed.set()

    monkeypatch.setattr(evaluate, "owners_mean_sse", grouped)
    monkeypatch.setattr(aggregator, "release", releasing)
    result = run_local_release(spark, cfg, progress=progress)
    assert result.rows == 600 and result.mean_sse is not None and result.mean_sse > 0
    protect_steps = {s: j for s, j in steps.items() if "protecting" in s}
    assert len(protect_steps) == 2
    for step, jobs in protect_steps.items():
        assert sum("localCheckpoint" in j for j in jobs) == 1, (step, jobs)  # the draw, every attribute in one task
        assert not any("withThreadLocalCaptured" in j for j in jobs), (step, jobs)  # no adaptive stage job
    # MeanSSE (in a thread of its own since issue 41, session 6) is one job, no adaptive stage job
    scored = spark.sparkContext.statusTracker().getJobIdsForGroup("mean-sse")
    assert len(scored) == 1 and not any("withThreadLocalCaptured" in j for j in job_names(spark, set(scored))), scored
    # issue 41, session 5: the plan's id-digest checks and disjointness in one job; the aggregator's two
    # owners' content and pseudonym-set digests and disjointness in one job (digests.set_checks)
    planned = steps["validating metadata and issuing the plan"]
    assert len(planned) == 1 and "digests.py" in planned[0], planned
    verified = steps["verifying fragments and committing the release"]
    checks = [j for j in verified if "digests.py" in j or "aggregator.py" in j or "combine.py" in j]
    assert len(checks) == 1, verified
    assert not any("withThreadLocalCaptured" in j for j in verified), verified  # a new table: no state rebuild


@pytest.mark.slow  # three two-owner releases end to end; CI runs them
def test_mean_sse_runs_beside_the_aggregator_and_its_error_comes_after_the_commit(spark, tmp_path, monkeypatch):
    """Issue 41, session 6: the local driver's MeanSSE runs while the aggregator verifies and commits (each
    waits at a barrier for the other to have started: one after the other would time out), its error is
    raised after the release is committed, and an aggregator's error is raised as it was, with no MeanSSE
    thread left running."""
    import threading

    from deltalake import DeltaTable

    from fragrelease.errors import InvalidParameterError, ProtocolError
    from fragrelease.jobs.idpir import evaluate
    from fragrelease.jobs.protocol import aggregator, release

    real_release, real_score = aggregator.release, evaluate.owners_mean_sse

    def case(name: str, *, score_error=None, aggregator_error=None):
        together = threading.Barrier(2, timeout=60)

        def scoring(*args, **kwargs):
            together.wait()
            if score_error is not None:
                raise score_error
            return real_score(*args, **kwargs)

        def releasing(*args, **kwargs):
            together.wait()
            out = real_release(*args, **kwargs)
            if aggregator_error is not None:
                raise aggregator_error
            return out

        monkeypatch.setattr(evaluate, "owners_mean_sse", scoring)
        monkeypatch.setattr(aggregator, "release", releasing)
        (tmp_path / name).mkdir()
        return release.run_local_release(spark, _small_config(tmp_path / name))

    result = case("both")
    assert result.mean_sse is not None and result.mean_sse > 0 and result.version == 0

    with pytest.raises(InvalidParameterError, match="^attribute 'age' has zero spread"):
        case("score-fails", score_error=InvalidParameterError("attribute 'age' has zero spread in the original data"))
    assert DeltaTable(str(tmp_path / "score-fails" / "release")).version() == 0  # committed before the error

    with pytest.raises(ProtocolError, match="^the aggregator failed$"):
        case("aggregator-fails", aggregator_error=ProtocolError("the aggregator failed"))
    assert not [t for t in threading.enumerate() if t.name.startswith("fragrelease-mean-sse")]
