"""The four party steps on a real Spark standalone cluster, and an executor killed during a protect step.

A master and two workers (1 core, 1 GB each, loopback only) are started with
``scripts/standalone-cluster.sh`` from the installed pyspark; every party step that runs Spark jobs
is its own ``./spark-submit.sh --master spark://127.0.0.1:PORT`` application (the aggregator's plan
step, which reads metadata files only, is a plain command), so the driver, the executors
(separate JVMs, children of the workers) and the wheel shipped with ``--py-files`` behave as on a
real cluster. Small data: 400 Wine rows, two owners (150 and 250 rows), k = 10.

One cluster and one release cover both checks (each submission starts a JVM and a driver): the
four party steps complete as separate applications, and the owner step whose executor is killed
never redraws. The test observes every noise draw the executors make (``tests/helpers/executor_hook``,
which only logs) and kills (SIGKILL) the executor JVM that drew the noise, after the noisy
centroids were materialized and before anything was written. The property
(docs/specification.md §2; docs/cluster.md): no cluster's
noise is ever drawn twice; the step either completes with exactly the values drawn first or fails
with nothing committed (no Delta table, no manifest); a rerun completes.
"""
from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from fragrelease.jobs.protocol.context import aggregator_context

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "scripts" / "standalone-cluster.sh"
SUBMIT = ROOT / "spark-submit.sh"
HOOK = ROOT / "tests" / "helpers" / "executor_hook"
OWNERS = {"a": 150, "b": 250}

pytestmark = [pytest.mark.cluster, pytest.mark.spark]  # needs Java: deselected by -m "not spark" too


def _java() -> bool:
    home = os.environ.get("JAVA_HOME")
    return bool((home and os.path.exists(os.path.join(home, "bin", "java"))) or shutil.which("java"))


if not _java():
    if os.environ.get("CI") == "true":
        raise RuntimeError("CI=true but no Java runtime: the standalone-cluster tests must run in CI "
                           "(scripts/setup.sh installs openjdk-17-jre-headless)")
    pytest.skip("no Java runtime (JAVA_HOME or java on PATH): a Spark standalone cluster needs Java 17 or 21",
                allow_module_level=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    def __init__(self, folder: Path):
        self.dir = folder
        self.port = _free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.env = dict(os.environ, FRAGRELEASE_CLUSTER_DIR=str(folder), SPARK_MASTER_PORT=str(self.port),
                        SPARK_MASTER_WEBUI_PORT=str(_free_port()), SPARK_WORKER_INSTANCES="2",
                        SPARK_WORKER_CORES="1", SPARK_WORKER_MEMORY="1g")
        self.built = False

    def script(self, action: str, timeout: float = 240) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(CLUSTER), action], env=self.env, capture_output=True, text=True,
                              timeout=timeout)

    def worker_pids(self) -> set[int]:
        return {int(Path(p).read_text()) for p in glob.glob(str(self.dir / "worker-*.pid"))}

    def submit_cmd(self, *args: str, conf: tuple[str, ...] = ()) -> list[str]:
        cmd = ["bash", str(SUBMIT), "--master", self.url, "--conf", "spark.ui.enabled=false"]
        if self.built:
            cmd.append("--no-build")
        self.built = True  # the first submit builds the wheel into dist/
        for c in conf:
            cmd += ["--conf", c]
        return [*cmd, "--", *args]

    def submit(self, log: Path, *args: str, conf: tuple[str, ...] = (), timeout: float = 400) -> int:
        with open(log, "w") as out:
            return subprocess.run(self.submit_cmd(*args, conf=conf), cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                  timeout=timeout).returncode


def _tail(path: Path, n: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-n:])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("standalone"))
    t0 = time.monotonic()
    started = c.script("start")
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        assert len(c.worker_pids()) == 2
        print(f"\ncluster start: {time.monotonic() - t0:.1f} s")
        yield c
    finally:
        stopped = c.script("stop")
        assert stopped.returncode == 0, stopped.stderr
        assert c.script("status").returncode == 3


@pytest.fixture(scope="module")
def planned(cluster, tmp_path_factory, wine_pdf):
    """Two owners' own Parquet fragments; their metadata made on the cluster, then the plan."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import to_arrow_schema

    from fragrelease.schemas.wine import SCHEMA

    base = tmp_path_factory.mktemp("parties")
    rows = wine_pdf.sample(sum(OWNERS.values()), random_state=16).reset_index(drop=True)
    start = 0
    for name, n in OWNERS.items():
        (base / "src" / name).mkdir(parents=True)
        pq.write_table(pa.Table.from_pandas(rows.iloc[start:start + n], schema=to_arrow_schema(SCHEMA.struct_type()),
                                            preserve_index=False), base / "src" / name / "part-0.parquet")
        start += n
    config = write_config(base, "planned")
    t0 = time.monotonic()
    for name in OWNERS:
        rc = cluster.submit(base / f"metadata-{name}.log", "owner", "metadata", "--config", str(config), "--owner", name)
        assert rc == 0, _tail(base / f"metadata-{name}.log")
    # the plan step reads the owners' metadata files and compares their id digests in one small
    # Spark job: a plain command with a local session (a spark-submit would start a driver JVM and
    # an executor on each worker)
    with open(base / "plan.log", "w") as out:
        rc = subprocess.run([sys.executable, "-m", "fragrelease.jobs.cli", "aggregator", "plan", "--config", str(config)],
                            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, timeout=300).returncode
    assert rc == 0, _tail(base / "plan.log")
    print(f"\nmetadata (2 owners) and plan: {time.monotonic() - t0:.1f} s")
    return base


def write_config(base: Path, name: str) -> Path:
    lines = ["name: cluster-release", "dataset: wine", "fragmentation: horizontal", 'epsilon: "1"', "k: 10",
             "owners:"]
    from fragrelease.signing import write_key_pair

    # the owners' shared pseudonym key (each owner has its own private_dir, so no key is generated)
    pkey = base / "keys" / "pseudonym.key"
    if not pkey.exists():
        pkey.parent.mkdir(parents=True, exist_ok=True)
        pkey.write_bytes(os.urandom(32))
        pkey.chmod(0o600)
    for o in OWNERS:
        key, pub = write_key_pair(str(base / "keys" / name), o)  # signed manifests: the owners' key pairs
        lines.append(f"  - {{name: {o}, source: {{path: {base / 'src' / o}, format: parquet}}, "
                     f"private_dir: {base / 'private' / name / o}, signing_key: {key}, public_key: '{pub}', "
                     f"pseudonym_key: {{file: {pkey}}}}}")
    lines += [f"work_dir: {base / name / 'work'}", f"output: {base / name / 'release'}", "reports: false"]
    path = base / f"{name}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def from_plan(planned: Path, name: str) -> Path:
    """A new release folder holding the shared metadata and plan (public messages, no noise)."""
    shutil.copytree(planned / "planned" / "work", planned / name / "work")
    config = write_config(planned, name)
    # the aggregator pins the plan it issued per work folder: the copy's plan is that plan
    from fragrelease.jobs.protocol.aggregator import pin_plan
    from fragrelease.jobs.protocol.layout import nonce_path
    from fragrelease.protocol.config import load_config
    from fragrelease.protocol.messages import Plan

    cfg, source = load_config(config), load_config(planned / "planned.yaml")
    pin_plan(aggregator_context(cfg), Plan.model_validate_json((planned / name / "work" / "plan.json").read_text()))
    # and each owner's own record of the nonce it sent in that metadata round (its private folder)
    for o, src in zip(cfg.owners, source.owners, strict=True):
        target = Path(nonce_path(cfg.name, o))
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        shutil.copy2(nonce_path(source.name, src), target)
    return config


def read_table(path: Path):
    from deltalake import DeltaTable

    return DeltaTable(str(path)).to_pandas()


def check_release_is_committed_fragments(release, work: Path) -> None:
    """The release holds exactly the owners' committed protected fragments (rows in any order)."""
    from fragrelease.schemas.wine import SCHEMA

    parts = [read_table(work / "owners" / o / "protected") for o in OWNERS]
    for a in SCHEMA.protected:
        assert sorted(release[a.name]) == sorted(v for p in parts for v in p[a.name]), a.name


def read_log(folder: Path, prefix: str) -> list[dict]:
    out = []
    for path in sorted(folder.glob(f"{prefix}-*.jsonl")):
        out += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return out


def check_no_redraw_and_committed(log_dir: Path, table: Path | None, shipped_to: Path) -> list[dict]:
    """Every (attribute, cluster) drawn once; isotonic ran on exactly those draws; the table holds its output."""
    draws = read_log(log_dir, "draws")
    assert draws, "no draw was observed (the executor hook did not load)"
    keys = Counter((a, c) for d in draws for a, c in zip(d["attribute"], d["cluster"], strict=True))
    twice = [k for k, n in keys.items() if n > 1]
    assert not twice, f"noise drawn more than once for (attribute, cluster) {twice[:5]}"
    assert len({a for a, _ in keys}) == 11
    # the executors ran the package spark-submit.sh shipped (fetched into their work folders), not
    # the development install that this machine's Python also has
    assert all((d["package_file"] or "").startswith(str(shipped_to)) and ".zip/fragrelease/" in d["package_file"]
               for d in draws), {d["package_file"] for d in draws}
    finishes = read_log(log_dir, "finish")
    drawn = sorted(v for d in draws for v in d["value"])
    # a retried post-processing task may run twice, but only on the same draws (same input and output)
    distinct = {json.dumps(f, sort_keys=True): f for f in
                ({"input": sorted(f["input"]), "output": f["output"]} for f in finishes)}.values()
    if table is not None:
        assert sorted(v for f in distinct for v in f["input"]) == drawn  # every draw post-processed once
        protected = read_table(table)
        outputs = [set(f["output"]) for f in distinct]
        for col in protected.columns:
            if col in ("record_id", "pseudonym"):  # the owner writes keyed pseudonyms, not ids
                continue
            values = set(protected[col])
            assert any(values <= out for out in outputs), f"column {col}: values not from the first draws"
    return draws


def test_party_steps_on_the_cluster_and_an_executor_killed_during_protect(cluster, planned):
    """One release on the cluster covers both checks (each ``spark-submit`` costs a JVM and a driver):
    the four party steps complete as separate applications, and owner a's protect step, whose
    executor is killed after its noise was drawn, never redraws."""
    from deltalake import DeltaTable

    config = from_plan(planned, "fault")
    work = planned / "fault" / "work"
    logs = planned / "fault-draws-1"
    hook = (f"spark.executorEnv.PYTHONPATH={HOOK}", f"spark.executorEnv.FRAGRELEASE_TEST_DRAW_LOG={logs}")
    t0 = time.monotonic()
    out = planned / "fault-protect-a.log"
    with open(out, "w") as f:
        proc = subprocess.Popen(cluster.submit_cmd("owner", "protect", "--config", str(config), "--owner", "a",
                                                   conf=(*hook, "spark.executorEnv.FRAGRELEASE_TEST_PAUSE_AFTER_NOISE=1")),
                                cwd=ROOT, stdout=f, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while not (logs / "noise-done").exists():
            assert proc.poll() is None, "protect ended before its noise was drawn:\n" + _tail(out)
            assert time.monotonic() < deadline, "the noise stage did not finish in 300 s"
            time.sleep(0.2)
        first = read_log(logs, "draws")
        victims = sorted({d["executor_pid"] for d in first})
        victim = victims[0]
        # our own executor: a CoarseGrainedExecutorBackend JVM whose parent is one of this cluster's workers
        cmdline = Path(f"/proc/{victim}/cmdline").read_bytes()
        parent = int(next(line.split()[1] for line in Path(f"/proc/{victim}/status").read_text().splitlines()
                          if line.startswith("PPid:")))
        assert b"CoarseGrainedExecutorBackend" in cmdline and parent in cluster.worker_pids()
        os.kill(victim, signal.SIGKILL)
        while Path(f"/proc/{victim}").exists() and b"Executor" in Path(f"/proc/{victim}/cmdline").read_bytes():
            time.sleep(0.1)
        (logs / "go").write_text("")
        rc = proc.wait(timeout=400)
    finally:
        if proc.poll() is None:
            proc.kill()
    print(f"\nprotect with the executor killed: {time.monotonic() - t0:.1f} s, exit status {rc}")

    table = work / "owners" / "a" / "protected"
    manifest = work / "owners" / "a" / "manifest.json"
    draws = check_no_redraw_and_committed(logs, table if rc == 0 else None, cluster.dir)
    # nothing drawn after the kill by the lost executor's replacements: the draws are the first ones
    assert {(a, c) for d in draws for a, c in zip(d["attribute"], d["cluster"], strict=True)} == \
        {(a, c) for d in first for a, c in zip(d["attribute"], d["cluster"], strict=True)}
    if rc != 0:
        # failed: nothing committed, nothing for the aggregator to read
        assert not DeltaTable.is_deltatable(str(table)), "a failed protect step left a Delta table"
        assert not manifest.exists(), "a failed protect step left a manifest"
        text = out.read_text(errors="replace")
        assert rc == 2, f"a failed step exits 2, not {rc}:\n" + _tail(out)
        # one line naming Spark's cause, not a traceback: a failed job, or the protected table's write (the
        # small-fragment plan's stored draws are read first by that write), each naming the lost block
        errors = [ln for ln in text.splitlines() if ln.startswith("error: ")]
        assert len(errors) == 1 and "Traceback" not in text, _tail(out)
        assert errors[0].startswith(("error: a Spark job failed: ", "error: writing Delta table ")), errors
        assert "Checkpoint block" in errors[0] or "lost" in errors[0], errors
        # the rerun (same work folder) completes, again drawing every cluster's noise once
        logs2 = planned / "fault-draws-2"
        hook2 = (f"spark.executorEnv.PYTHONPATH={HOOK}", f"spark.executorEnv.FRAGRELEASE_TEST_DRAW_LOG={logs2}")
        rerun = planned / "fault-protect-a-rerun.log"
        assert cluster.submit(rerun, "owner", "protect", "--config", str(config), "--owner", "a", conf=hook2) == 0, \
            _tail(rerun)
        check_no_redraw_and_committed(logs2, table, cluster.dir)
    assert manifest.exists()
    log = planned / "fault-protect-b.log"
    assert cluster.submit(log, "owner", "protect", "--config", str(config), "--owner", "b") == 0, _tail(log)
    log = planned / "fault-release.log"
    assert cluster.submit(log, "aggregator", "release", "--config", str(config)) == 0, _tail(log)
    print(f"executor-loss test total: {time.monotonic() - t0:.1f} s")
    check_released_on_the_cluster(cluster, planned / "fault" / "release", work)


def check_released_on_the_cluster(cluster: Cluster, path: Path, work: Path) -> None:
    """The release the four party steps committed on the cluster: every record, every protected
    attribute within its declared domain, exactly the owners' committed fragments, role ``release``;
    and the steps really ran on the cluster: every worker launched executors for the applications,
    each of which fetched the shipped wheel into its working folder."""
    from fragrelease.jobs.storage import table_provenance
    from fragrelease.schemas.wine import SCHEMA

    release = read_table(path)
    names = [a.name for a in SCHEMA.protected]
    assert len(release) == sum(OWNERS.values())
    assert set(names) <= set(release.columns)
    for a in SCHEMA.protected:
        lo, hi = a.bounds()
        assert release[a.name].between(lo, hi).all(), a.name
    check_release_is_committed_fragments(release, work)
    assert table_provenance(str(path))["role"] == "release"
    for w in (1, 2):
        executors = glob.glob(str(cluster.dir / f"worker-{w}" / "work" / "app-*" / "*"))
        assert executors, f"worker {w} ran no executor"
        assert any(glob.glob(os.path.join(e, "fragrelease-*.zip")) for e in executors), f"worker {w}: no wheel shipped"
