"""Run by tests/jobs/test_output_recovery.py in its own interpreter: the aggregator's release step of the
configuration in ``argv[1]`` (JSON) and the plan id in ``argv[2]``, SIGKILLed during the Spark Delta commit.

The released frame is passed through a Python step that hands Spark its first batch and then waits,
so the commit's write task has opened its part file and stays in the middle of the write; a watcher
thread then kills the JVM and this interpreter with SIGKILL (no handler runs, as for an OOM kill or
a lost machine). What is left on disk is what an aggregator killed during the commit leaves.
"""
import glob
import json
import os
import signal
import sys
import threading
import time

from fragrelease.jobs.protocol.context import aggregator_context


def main(cfg_path: str, plan_id: str) -> None:
    from fragrelease.jobs.protocol import aggregator
    from fragrelease.jobs.session import get_spark
    from fragrelease.protocol.config import config_from_dict

    with open(cfg_path, encoding="utf-8") as f:
        cfg = config_from_dict(json.load(f))
    spark = get_spark("killed-aggregator", "local[1]")
    jvm_pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    real = aggregator.commit_release

    def hang_after_first_batch(batches):
        for batch in batches:
            yield batch
            time.sleep(3600)

    def watch(output: str) -> None:
        while not glob.glob(os.path.join(output, "part-*")):
            time.sleep(0.01)
        time.sleep(0.5)  # the task is in the middle of its write
        os.kill(jvm_pid, signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)

    def killed_commit(df, **kwargs):
        threading.Thread(target=watch, args=(kwargs["path"],), daemon=True).start()
        return real(df.mapInPandas(hang_after_first_batch, schema=df.schema), **kwargs)

    aggregator.commit_release = killed_commit
    # the plan the driver issued, read back from work_dir and held to its id (aggregator release --plan-id)
    aggregator.release(spark, aggregator_context(cfg), plan=aggregator.pinned_plan(aggregator_context(cfg), plan_id))
    print("the release committed: it was not killed")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
