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


def test_steps_of_threads_keep_their_numbers_and_the_callback_runs_one_event_at_a_time():
    """Numbers taken in order before the threads start; the events come from each step's own thread,
    never two callbacks at once (a second one entering while one runs would find the lock taken)."""
    import threading
    import time

    inside, events, overlaps = threading.Lock(), [], []

    def callback(event):
        if not inside.acquire(blocking=False):
            overlaps.append(event)
            return
        try:
            events.append((event, threading.current_thread().name))
            time.sleep(0.01)  # widen the window for a concurrent call
        finally:
            inside.release()

    steps = Steps(9, callback)
    numbers = [steps.number() for _ in range(8)]
    start = threading.Barrier(8)

    def run(n):
        start.wait()
        with steps.step("owner", "protecting", f"o{n}", number=n):
            time.sleep(0.02)

    threads = [threading.Thread(target=run, args=(n,), name=f"t{n}") for n in numbers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with steps.step("aggregator", "committing"):
        pass
    assert numbers == list(range(1, 9)) and not overlaps
    assert sorted((e.step, e.status) for e, _ in events) == sorted(
        [(n, s) for n in range(1, 10) for s in ("started", "done")])
    assert all(name == f"t{e.step}" for e, name in events if e.step <= 8)  # reported from the step's own thread
    assert all(e.owner == f"o{e.step}" for e, _ in events if e.step <= 8)
    assert events[-1][0].step == 9 and events[-1][0].total == 9


def test_the_status_line_shows_every_step_running_now():
    from fragrelease.jobs.cli._common import StatusLine

    line = StatusLine()
    a, b = (ProgressEvent(n, 7, "owner", o, "protecting 3 attributes", "started") for n, o in ((4, "a"), (5, "b")))
    assert line.text(b) == "step 5/7 owner b: protecting 3 attributes …"
    assert line.text(a) == ("step 4/7 owner a: protecting 3 attributes …; "
                            "step 5/7 owner b: protecting 3 attributes …")
    done = ProgressEvent(5, 7, "owner", "b", "protecting 3 attributes", "done", 2.0)
    assert line.text(done) == "step 4/7 owner a: protecting 3 attributes …"
    last = ProgressEvent(4, 7, "owner", "a", "protecting 3 attributes", "failed", 2.5)
    assert line.text(last) == "step 4/7 owner a: protecting 3 attributes … failed after 2.5 s"


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
    # the owners' steps of a phase run at the same time: either may end first, both before the next step
    order = [int(m.group(1)) for m in matched]
    assert order[0] == 1 and sorted(order[1:3]) == [2, 3] and order[3] == 4 and sorted(order[4:6]) == [5, 6]
    assert order[6:] == [7, 8]
    by_step = sorted((int(m.group(1)), m.group(2), m.group(3)) for m in matched)
    assert [party for _, party, _ in by_step] == ["driver", "owner a", "owner b", "aggregator", "owner a", "owner b",
                                                  "aggregator", "driver"]
    assert by_step[4][2] == "protecting 11 attributes"
    assert "Release written" in proc.stdout and "…" not in proc.stdout  # no live status line in a pipe
