"""Spark's own record of the jobs a test ran (status tracker; test only)."""
import threading


def job_ids(spark) -> set:
    """Every Spark job so far, once the session's Python worker warm-up, whose jobs run in a thread of
    their own (:func:`fragrelease.jobs.session.warm_python_workers`), has ended."""
    for thread in threading.enumerate():
        if thread.name == "fragrelease-warm-python-workers":
            thread.join(120)
    return set(spark.sparkContext.statusTracker().getJobIdsForGroup(None))


def job_names(spark, jobs) -> list:
    """The name of each job's last stage (its call site), in job order: for failure messages."""
    tracker = spark.sparkContext.statusTracker()
    out = []
    for j in sorted(jobs):
        info = tracker.getJobInfo(j)
        stage = tracker.getStageInfo(max(info.stageIds)) if info is not None and info.stageIds else None
        out.append(stage.name if stage is not None else "?")
    return out
