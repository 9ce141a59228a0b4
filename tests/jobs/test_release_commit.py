"""One commit and provenance contract for every system (issue 25 step 4).

:func:`fragrelease.jobs.storage.commit_release` commits any system's release to a path or a
catalog table and stamps the system, the fragrelease version and the guarantee; ``inspect`` and
every system read it back through :func:`fragrelease.jobs.storage.table_history`.
"""
import pytest

from fragrelease.errors import ConfigError, OutputConflictError, ReleaseExistsError
from fragrelease.jobs.storage import (
    IF_EXISTS,
    SYSTEMS,
    commit_release,
    refuse_existing,
    stamp_provenance,
    table_history,
    table_provenance,
)
from fragrelease.version import __version__


def test_stamp_adds_system_version_and_guarantee_and_keeps_the_facts():
    out = stamp_provenance({"k": 5, "epsilon": "1/2"}, system="tiers", guarantee="below the threshold 1/4")
    assert out == {"k": 5, "epsilon": "1/2", "system": "tiers", "fragrelease_version": __version__,
                   "guarantee": "below the threshold 1/4"}
    assert set(SYSTEMS) == {"idpir", "publications", "tiers", "diffgen"}


@pytest.mark.parametrize("kwargs,match", [
    (dict(system="other", guarantee="x"), "system"),
    (dict(system="diffgen", guarantee=""), "guarantee"),
])
def test_stamp_refuses_an_unknown_system_or_a_missing_guarantee(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        stamp_provenance({}, **kwargs)


def test_refuse_existing_checks_the_target_and_if_exists(tmp_path):
    with pytest.raises(ConfigError, match="exactly one"):
        refuse_existing(if_exists="error")
    with pytest.raises(ConfigError, match="if_exists"):
        refuse_existing(path=str(tmp_path / "r"), if_exists="overwrite")
    refuse_existing(path=str(tmp_path / "r"), if_exists="error")  # nothing there yet: no error
    (tmp_path / "f").write_text("mine")
    for mode in IF_EXISTS:  # a file is no release folder, whatever if_exists says
        with pytest.raises(OutputConflictError) as info:
            refuse_existing(path=str(tmp_path / "f"), if_exists=mode)
        assert str(info.value) == (f"output {str(tmp_path / 'f')!r} is a file, not a release folder; nothing was "
                                   "written: choose an output path that does not exist")
    assert (tmp_path / "f").read_text() == "mine"


def test_every_commit_is_stamped_and_read_back(spark, tmp_path):
    path = str(tmp_path / "release")
    df = spark.createDataFrame([(1, 2.5), (2, 3.5)], "id long, x double")
    location, v0 = commit_release(df, system="publications", provenance={"kind": "test"}, guarantee="g0", path=path)
    assert (location, v0) == (path, 0)
    with pytest.raises(ReleaseExistsError, match="already exists"):
        refuse_existing(path=path, if_exists="error")
    refuse_existing(path=path, if_exists="new-version")
    _, v1 = commit_release(df, system="diffgen", provenance={"kind": "test"}, guarantee={"public": "g1"},
                           path=path, if_exists="new-version")
    assert v1 == 1
    history = {entry["version"]: prov for entry, prov in table_history(path)}
    assert history[0] == {"kind": "test", "system": "publications", "fragrelease_version": __version__,
                          "guarantee": "g0"}
    assert history[1]["system"] == "diffgen" and history[1]["guarantee"] == {"public": "g1"}
    assert table_provenance(path) == history[1] and table_provenance(path, 0) == history[0]


def test_a_small_new_version_is_committed_in_fewer_jobs_with_the_same_rows(spark, tmp_path):
    """Issue 41, session 5: a new version of an existing table, its rows in one task (``small``), is
    committed without adaptive execution for Delta's own log queries: fewer Spark jobs, none of them an
    adaptive stage job; the version holds exactly the new rows and the session's setting is restored."""
    from deltalake import DeltaTable
    from spark_jobs import job_ids, job_names

    from fragrelease.jobs.session import delta_available

    if not delta_available(spark):
        pytest.skip("the setting acts on Delta's Spark commits only")
    before_setting = spark.conf.get("spark.sql.adaptive.enabled")
    jobs = {}
    for small in (False, True):
        path = str(tmp_path / f"t-{small}")
        for version in range(3):
            df = spark.range(100).selectExpr("id", f"id * {version + 1} AS x").coalesce(1)
            before = job_ids(spark)
            _, got = commit_release(df, system="tiers", guarantee="g", provenance={}, path=path,
                                    if_exists="new-version", small=small)
            jobs[small] = job_names(spark, job_ids(spark) - before)
            assert got == version
        rows = DeltaTable(path).to_pandas().sort_values("id")
        assert rows["x"].tolist() == [i * 3 for i in range(100)]  # the last version's rows only
        assert spark.conf.get("spark.sql.adaptive.enabled") == before_setting
    assert len(jobs[True]) < len(jobs[False]), jobs
    assert not any("withThreadLocalCaptured" in j for j in jobs[True]), jobs
