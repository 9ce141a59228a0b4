"""A Spark job that fails mid-step (a lost executor, a task error) exits 2 with one line naming Spark's cause."""
import pytest
from pyspark.sql import functions as F


def _fail_with(spark, how: str):
    def failing(*_args, **_kwargs):
        if how == "raise_error":
            spark.range(3).select(F.raise_error(F.lit("stand-in for a lost checkpoint block"))).collect()
        else:  # an exception inside a Python worker
            def boom(it):
                for _ in it:
                    raise RuntimeError("stand-in for a worker failure")
                yield from ()
            spark.range(3).mapInPandas(boom, "id long").collect()
        raise AssertionError("the Spark job did not fail")
    return failing


@pytest.mark.parametrize("how,cause", [("raise_error", "stand-in for a lost checkpoint block"),
                                       ("python worker", "stand-in for a worker failure")])
def test_a_failed_spark_job_exits_2_with_one_line(spark, monkeypatch, capsys, tmp_path, how, cause):
    import fragrelease.jobs.protocol.release as release
    from fragrelease.jobs.cli import run_cli

    monkeypatch.setattr(release, "run_local_release", _fail_with(spark, how))
    assert run_cli(["--quiet", "run", "conf/wine-vertical.yaml", "--output", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("error: a Spark job failed: ") and cause in err[0], err[0]
