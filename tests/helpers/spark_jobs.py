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


class StepJobs:
    """A ``progress=`` callback recording the names of the Spark jobs each step started (test only).

    The local driver runs the owners' steps of a phase at the same time, each in its own thread, and
    reports each step's events from that thread (:class:`fragrelease.jobs.progress.Steps`): each step
    gets a job group of its own in that thread at its start (PySpark's pinned threads), cleared at its
    end, so each step's jobs are told apart while steps overlap. Jobs that a step starts from threads
    of its own are not counted (the owners' reports do: use reports off). ``steps`` maps
    ``owner: action`` (or ``action`` for other parties) to the job names, in job order."""

    def __init__(self, spark) -> None:
        self.spark, self.steps = spark, {}

    @staticmethod
    def key(event) -> str:
        return event.action if event.owner is None else f"{event.owner}: {event.action}"

    def __call__(self, event) -> None:
        sc = self.spark.sparkContext
        group = f"fragrelease-test-step-{event.step}"
        if event.status == "started":
            sc.setJobGroup(group, self.key(event))
            return
        tracker = sc.statusTracker()
        self.steps[self.key(event)] = job_names(self.spark, tracker.getJobIdsForGroup(group))
        sc.setLocalProperty("spark.jobGroup.id", None)
        sc.setLocalProperty("spark.job.description", None)
