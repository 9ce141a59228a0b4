"""Building the class-data-sharing archive of :mod:`fragrelease.jobs.class_archive` (``scripts/setup.sh`` runs it).

``python -m fragrelease.jobs.class_archive_build [--force]``: a child process runs one small
two-owner release (the public Wine sample shipped with the package, reports and evaluation on, in
a temporary folder it removes) in an embedded session whose JVM dumps the classes it loaded at exit
(``-XX:ArchiveClassesAtExit``); the archive is moved into place only when complete, with a stamp
of the JVM build and pyspark version beside it. Without Java, or if the build fails, nothing is
written and sessions start without an archive, as before.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Mapping, Optional

from .class_archive import archive_path


def _stamp() -> Mapping[str, str]:
    """What the archive depends on: the JVM's build and pyspark's version (its jars are the class path)."""
    import pyspark

    from .session import ensure_java

    home = ensure_java()
    java = os.path.join(home, "bin", "java") if os.path.isdir(home) else home
    out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    return {"java": (out.stderr or out.stdout).strip(), "pyspark": pyspark.__version__}


def _workload(dump_to: str) -> None:
    """In a child process: a session whose JVM dumps its loaded classes at exit, one small release, a clean exit."""
    from pyspark.core.context import SparkContext

    import fragrelease.jobs.session as session
    import fragrelease.jobs.session_workers as session_workers
    from fragrelease.schemas.datasets import load_builtin_pandas
    from fragrelease.schemas.wine import SCHEMA

    from .api import Release

    session_workers.WARM_PYTHON_WORKERS = False
    session.driver_java_options = lambda: f"-XX:ArchiveClassesAtExit={dump_to}"  # this JVM writes the archive
    work = tempfile.mkdtemp(prefix="fragrelease-class-archive-")
    os.environ["FRAGRELEASE_PRIVATE_ROOT"] = os.path.join(work, "private")  # the owners' reports and keys, removed below
    spark = session.get_spark("fragrelease-class-archive", "local[2]")
    try:
        # the public Wine sample shipped with the package; the archive keeps classes, not values
        df = spark.createDataFrame(load_builtin_pandas("wine").head(300), SCHEMA.struct_type())
        release = Release("wine", epsilon="1", k=10, output=os.path.join(work, "release"), reports=True,
                          work_dir=os.path.join(work, "work"), spark=spark)
        release.add_owner("a", df.where("record_id < 100")).add_owner("b", df.where("record_id >= 100"))
        release.run(evaluate=True)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None) if gateway is not None else None
    if proc is not None and proc.stdin is not None:  # the gateway JVM exits on EOF, dumping the archive first
        proc.stdin.close()
        proc.wait(timeout=600)


def _read_stamp(stamp_path: str) -> Optional[Mapping[str, str]]:
    """The stamp this tool wrote (keys ``java`` and ``pyspark``), or None when there is none or it is not one."""
    try:
        with open(stamp_path, encoding="utf-8") as f:
            stamp = json.load(f)
    except (OSError, ValueError):
        return None
    return stamp if isinstance(stamp, dict) and set(stamp) == {"java", "pyspark"} else None


def build(force: bool = False) -> Optional[str]:
    """Build the archive (in a child process) unless one for this JVM and pyspark exists; return its path or None.

    The new archive is written in a temporary folder this run creates beside the final one and moved
    into place only when complete. An existing archive is replaced only when its stamp (the JVM build
    and pyspark version, ``spark-classes.json`` beside it, written by this function) says it is stale;
    a file at the archive's path without such a stamp is not this tool's and is left alone (nothing
    is built).
    Never raises for a failed build: the embedded session then runs without an archive, as before.
    """
    path = archive_path()
    stamp_path = os.path.splitext(path)[0] + ".json"
    if os.path.exists(path) and _read_stamp(stamp_path) is None:
        print(f"class archive: not built ({path} exists and was not built by this tool; left as it is)",
              file=sys.stderr)
        return None
    try:
        stamp = _stamp()
    except Exception as e:  # noqa: BLE001 - no Java: nothing to build for
        print(f"class archive: not built ({e})", file=sys.stderr)
        return None
    if not force and os.path.isfile(path) and _read_stamp(stamp_path) == stamp:
        return path
    os.makedirs(os.path.dirname(path), exist_ok=True)
    scratch = tempfile.mkdtemp(prefix=".spark-classes-", dir=os.path.dirname(path))  # this run's own folder
    tmp = os.path.join(scratch, "spark-classes.jsa")
    try:
        done = subprocess.run([sys.executable, "-m", "fragrelease.jobs.class_archive_build", "--workload", tmp],
                              capture_output=True, text=True, timeout=1800)
        if done.returncode != 0 or not os.path.isfile(tmp) or os.path.getsize(tmp) == 0:
            tail = (done.stderr or "").strip().splitlines()[-1:] or ["no archive written"]
            print(f"class archive: not built ({tail[0]})", file=sys.stderr)
            return None
        os.replace(tmp, path)
        with open(stamp_path, "w", encoding="utf-8") as f:
            json.dump(stamp, f)
        return path
    finally:
        shutil.rmtree(scratch, ignore_errors=True)  # the folder this run created, with what is left in it


if __name__ == "__main__":
    if sys.argv[1:2] == ["--workload"]:
        _workload(sys.argv[2])
    else:
        built = build(force="--force" in sys.argv)
        print(f"class archive: {built}" if built else "class archive: none (sessions start without one)")
