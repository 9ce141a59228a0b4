"""Progress in any log: each step's start and end with its elapsed time (issue: "Long runs are silent")."""
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fragrelease.jobs.progress import LOGGER, ProgressEvent, Steps

ROOT = Path(__file__).resolve().parents[2]


def test_steps_report_start_and_end_with_elapsed_time():
    events, ticks = [], iter([10.0, 22.4, 30.0, 31.5])
    steps = Steps(2, events.append, clock=lambda: next(ticks))
    with steps.step("owner", "protecting 10 attributes", "clinic-a"):
        pass
    with pytest.raises(RuntimeError):
        with steps.step("aggregator", "verifying fragments and committing the release"):
            raise RuntimeError("boom")
    assert [str(e) for e in events] == [
        "step 1/2 owner clinic-a: protecting 10 attributes …",
        "step 1/2 owner clinic-a: protecting 10 attributes … done in 12.4 s",
        "step 2/2 aggregator: verifying fragments and committing the release …",
        "step 2/2 aggregator: verifying fragments and committing the release … failed after 1.5 s"]
    assert [e.done for e in events] == [False, True, False, True]
    assert events[1] == ProgressEvent(1, 2, "owner", "clinic-a", "protecting 10 attributes", "done",
                                      events[1].seconds)


def test_without_a_callback_ended_steps_go_to_the_progress_logger(caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER.name)
    steps = Steps(1, clock=iter([0.0, 2.25]).__next__)
    with steps.step("driver", "simulating the owners' fragments"):
        pass
    records = [(r.name, r.levelno, r.getMessage()) for r in caplog.records]
    assert records == [
        ("fragrelease.progress", logging.DEBUG, "step 1/1 driver: simulating the owners' fragments …"),
        ("fragrelease.progress", logging.INFO, "step 1/1 driver: simulating the owners' fragments … done in 2.2 s")]


def _small_conf(spark, wine_pdf, tmp_path) -> Path:
    from fragrelease.schemas.wine import SCHEMA

    src = str(tmp_path / "src")
    spark.createDataFrame(wine_pdf.head(300), SCHEMA.struct_type()).write.parquet(src)
    conf = tmp_path / "conf.yaml"
    conf.write_text(yaml.safe_dump(dict(
        name="progress", dataset="wine", fragmentation="horizontal", epsilon="1", k=10, reports=False,
        source={"path": src, "format": "parquet"}, owners=[{"name": "a", "rows": 100}, {"name": "b", "rows": 200}],
        work_dir=str(tmp_path / "work"), output=str(tmp_path / "release"))))
    return conf


LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ INFO fragrelease\.progress: "
                  r"step (\d)/8 (owner a|owner b|aggregator|driver): (.+) … done in (\d+\.\d) s$")


@pytest.mark.slow  # a whole release in a subprocess with its own Spark session
def test_a_redirected_run_prints_one_line_per_step_with_elapsed_time(spark, wine_pdf, tmp_path):
    conf = _small_conf(spark, wine_pdf, tmp_path)
    env = {**os.environ, "FRAGRELEASE_SPARK_MASTER": "local[2]", "FRAGRELEASE_DRIVER_MEMORY": "1g"}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    proc = subprocess.run([sys.executable, "-m", "fragrelease.jobs.cli", "run", str(conf)], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=900)  # stdout and stderr are pipes, no terminal
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln for ln in proc.stderr.splitlines() if "fragrelease.progress" in ln]
    matched = [LINE.match(ln) for ln in lines]
    assert all(matched) and len(matched) == 8, "\n".join(lines)
    assert [int(m.group(1)) for m in matched] == list(range(1, 9))
    assert [m.group(2) for m in matched] == ["driver", "owner a", "owner b", "aggregator", "owner a", "owner b",
                                             "aggregator", "driver"]
    assert matched[4].group(3) == "protecting 11 attributes"
    assert "Release written" in proc.stdout and "…" not in proc.stdout  # no live status line in a pipe
