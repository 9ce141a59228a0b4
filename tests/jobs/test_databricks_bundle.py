"""The Databricks bundle (databricks.yml; docs/databricks.md), checked offline.

Each target's jobs are the top-level jobs with the target's ``resources`` merged over them the way
the Databricks CLI merges them (maps key by key; ``tasks``, ``job_clusters`` and ``environments`` by
their keys), with ``${var.X}`` filled from the variables' defaults. Every job of every target is
loaded into the typed model of ``databricks-bundles`` (``Job.from_dict`` refuses an unknown or
misplaced field). Then each python_wheel_task's entry point gets the argument list it receives on
Databricks after job parameter pushdown: a task with ``parameters`` (a JSON array) gets exactly that
array with ``{{job.parameters.X}}`` and ``{{input.KEY}}`` filled in; a task with ``named_parameters``
(keyword arguments) gets them as ``--key=value`` plus every job parameter as ``--name=value``
(Databricks, "Configure task parameters": job parameters are pushed down to tasks with key-value
parameters, not to tasks with a JSON array). The CLI's own command tree parses that list with each
command's body replaced by a recorder, so the check needs no Spark and no data. The slow tests run
the jobs' tasks locally in dependency order (a Run Job task runs its job with the job parameters
pushed down; a for_each task runs its nested task once per element of its ``inputs``).
"""
import copy
import json
import re
from importlib.metadata import entry_points
from pathlib import Path

import pytest
import yaml
from deltalake import DeltaTable
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
TARGETS = ("classic", "serverless")
#: List fields the Databricks CLI merges element by element (by this key) when a target overrides a job.
MERGE_KEYS = {"tasks": "task_key", "job_clusters": "job_cluster_key", "environments": "environment_key"}


def _bundle() -> dict:
    return yaml.safe_load((ROOT / "databricks.yml").read_text())


def _merge(base, override, field=None):
    if isinstance(base, dict) and isinstance(override, dict):
        out = dict(base)
        for k, v in override.items():
            out[k] = _merge(base[k], v, k) if k in base else copy.deepcopy(v)
        return out
    if isinstance(base, list) and isinstance(override, list) and field in MERGE_KEYS:
        key, out = MERGE_KEYS[field], [copy.deepcopy(x) for x in base]
        for item in override:
            match = [i for i, x in enumerate(out) if x[key] == item[key]]
            if match:
                out[match[0]] = _merge(out[match[0]], item)
            else:
                out.append(copy.deepcopy(item))
        return out
    return copy.deepcopy(override)


def _variables(bundle: dict, target: str) -> dict[str, str]:
    values = {k: str(v.get("default", "")) for k, v in bundle["variables"].items()}
    values.update({k: str(v) for k, v in bundle["targets"][target].get("variables", {}).items()})
    return values


def _fill_vars(value, variables: dict, target: str):
    if isinstance(value, dict):
        return {k: _fill_vars(v, variables, target) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill_vars(v, variables, target) for v in value]
    if not isinstance(value, str):
        return value
    value = value.replace("${bundle.target}", target)
    whole = re.fullmatch(r"\$\{var\.([a-z0-9_]+)\}", value)
    if whole:
        return variables[whole.group(1)]
    return re.sub(r"\$\{var\.([a-z0-9_]+)\}", lambda m: variables[m.group(1)], value)


def target_jobs(target: str) -> dict[str, dict]:
    """The jobs of ``target`` as deployed: top-level jobs, the target's overrides merged in, variables filled."""
    bundle = _bundle()
    jobs = bundle["resources"]["jobs"]
    override = bundle["targets"][target].get("resources", {}).get("jobs", {})
    merged = {name: _merge(job, override.get(name, {})) for name, job in jobs.items()}
    return _fill_vars(merged, _variables(bundle, target), target)


def typed_jobs(target: str) -> dict:
    """``target``'s jobs loaded into databricks-bundles' typed model (``databricks.bundles.jobs.Job``)."""
    from databricks.bundles.jobs import Job

    return {name: Job.from_dict(job) for name, job in target_jobs(target).items()}


def _wheel_tasks(job):
    """(task, the for_each task around it or None) for every python_wheel_task of a typed job."""
    for task in job.tasks:
        if task.for_each_task is not None:
            yield task.for_each_task.task, task
        elif task.python_wheel_task is not None:
            yield task, None


def _defaults(job) -> dict[str, str]:
    return {p.name: p.default for p in job.parameters}


def _fill(text: str, params: dict, item=None) -> str:
    """Databricks' run-time references: ``{{job.parameters.X}}`` and, in a for_each task, ``{{input.KEY}}``."""
    text = re.sub(r"\{\{job\.parameters\.([a-z0-9_]+)\}\}", lambda m: params[m.group(1)], text)

    def element(m):
        assert item is not None, f"{{{{input}}}} outside a for_each task: {text!r}"
        return str(item[m.group(1)]) if m.group(1) else (item if isinstance(item, str) else json.dumps(item))

    return re.sub(r"\{\{input(?:\.([a-z0-9_]+))?\}\}", element, text)


def received(wheel, params: dict, item=None) -> list[str]:
    """The argument list a python_wheel_task's entry point receives after job parameter pushdown."""
    if wheel.named_parameters:
        named = {k: _fill(v, params, item) for k, v in wheel.named_parameters.items()}
        # every job parameter pushed down (a job parameter wins over a task parameter of the same name)
        return [f"--{k}={v}" for k, v in {**named, **params}.items()]
    return [_fill(a, params, item) for a in wheel.parameters]


def cli_argv(entry_point: str, args: list[str], monkeypatch) -> list[str]:
    """The ``fragrelease`` command line the console script ``entry_point`` runs for ``args``."""
    import fragrelease.jobs.cli as cli

    seen: list[list[str]] = []
    with monkeypatch.context() as m:
        m.setattr(cli, "run_cli", lambda argv, prog_name=None: seen.append(list(argv)) or 0)
        scripts = {ep.name: ep for ep in entry_points(group="console_scripts")}
        scripts[entry_point].load()(args)
    return seen[0]


def parsed(argv: list[str]) -> tuple[tuple[str, ...], dict]:
    """(command path, parameters) the CLI's command tree parses ``argv`` into, the command's body not run.
    A usage error (unknown option, missing value) raises as it does in the CLI."""
    from typer.main import get_command

    from fragrelease.jobs.cli import app

    root, calls = get_command(app), []

    def record(cmd, path):
        for name, sub in getattr(cmd, "commands", {}).items():
            if getattr(sub, "commands", None):
                record(sub, (*path, name))
            else:
                sub.callback = (lambda p: lambda **kw: calls.append((p, kw)))((*path, name))

    record(root, ())
    root.main(args=argv, prog_name="fragrelease", standalone_mode=False)
    assert len(calls) == 1, calls
    return calls[0]


# ---------------------------------------------------------------- offline checks of the bundle


def synthesis_requirement() -> str:
    """The ``synthesis`` extra of the installed fragrelease's metadata (setup.py), as one pip requirement."""
    from importlib.metadata import requires

    from packaging.requirements import Requirement

    reqs = [Requirement(r) for r in requires("fragrelease") or ()]
    extra = [r for r in reqs if r.marker is not None and r.marker.evaluate({"extra": "synthesis"})
             and not r.marker.evaluate({"extra": ""})]
    assert len(extra) == 1, extra
    r = extra[0]
    return f"{r.name}[{','.join(sorted(r.extras))}]{r.specifier}"


def installs(target: str, job) -> list[str]:
    """What each wheel task of ``job`` has installed beside the runtime, as pip arguments (``./dist/*.whl`` for
    the wheel; one list for the whole job, every wheel task of it asserted to install the same)."""
    seen = []
    for task, _ in _wheel_tasks(job):
        if target == "serverless":
            spec = next(e.spec for e in job.environments if e.environment_key == task.environment_key)
            seen.append(list(spec.dependencies))
        else:
            seen.append([lib.whl or lib.pypi.package for lib in task.libraries])
    assert seen and all(s == seen[0] for s in seen), seen
    return seen[0]


@pytest.mark.parametrize("target", TARGETS)
def test_every_job_of_every_target_loads_into_the_typed_model(target):
    jobs = typed_jobs(target)
    assert sorted(jobs) == ["fragrelease_demo", "fragrelease_release", "fragrelease_synthetic",
                            "fragrelease_synthetic_demo"]
    for name, job in jobs.items():
        keys = {e.environment_key for e in job.environments}
        clusters = {c.job_cluster_key for c in job.job_clusters}
        wheels = list(_wheel_tasks(job))
        assert wheels, name
        for task, _ in wheels:
            assert task.python_wheel_task.package_name == "fragrelease"
            if target == "serverless":  # the wheel is a dependency of the task's environment; no cluster
                assert task.environment_key in keys and not task.job_cluster_key and not task.libraries, task
                spec = next(e.spec for e in job.environments if e.environment_key == task.environment_key)
                assert spec.dependencies[0] == "./dist/*.whl" and spec.environment_version == "4"
            else:  # a job cluster of the job, the wheel as its library
                assert task.job_cluster_key in clusters and not task.environment_key, task
                assert task.libraries[0].whl == "./dist/*.whl"
        if target == "serverless":
            assert not job.job_clusters
        else:
            assert not job.environments
            for cluster in job.job_clusters:
                assert cluster.new_cluster.node_type_id == "i3.xlarge"  # the variable's default (AWS)
                assert cluster.new_cluster.spark_version == "17.3.x-scala2.13"


@pytest.mark.parametrize("target", TARGETS)
def test_every_synthetic_task_installs_the_synthesis_extra_and_no_other_does(target):
    """mbi (Private-PGM) comes only with the wheel's synthesis extra: every task of the synthetic jobs installs
    it beside the wheel, as setup.py declares it; the other jobs install the bare wheel (no JAX on their
    clusters). In a runtime-shaped venv the bare wheel refuses a synthetic configuration
    (tests/test_wheel_install.py)."""
    want = synthesis_requirement()
    assert want == "opendp[mbi]<0.17,>=0.16"  # setup.py's extras_require["synthesis"], as its metadata writes it
    for name, job in typed_jobs(target).items():
        got = installs(target, job)
        if "synthetic" in name:
            assert got[0] == "./dist/*.whl" and len(got) == 2, (name, got)
            assert Requirement(got[1]) == Requirement(want), (name, got)  # the same package, extras and range
        else:
            assert got == ["./dist/*.whl"], (name, got)


def test_the_typed_model_refuses_a_misplaced_field():
    """The load is a check: a wheel task's field at the job level, or a misspelt one, is refused."""
    from databricks.bundles.jobs import Job

    job = target_jobs("serverless")["fragrelease_release"]
    with pytest.raises(ValueError, match="Unexpected field 'environment_key' for class Job"):
        Job.from_dict({**job, "environment_key": "fragrelease"})
    task = {**job["tasks"][1], "python_wheel_task": {**job["tasks"][1]["python_wheel_task"], "named_parameter": {}}}
    with pytest.raises(ValueError, match="Unexpected field 'named_parameter' for class PythonWheelTask"):
        Job.from_dict({**job, "tasks": [task]})


def test_node_types_and_runtime_are_bundle_variables():
    """One bundle for every cloud: the classic target's cluster takes its node type from a variable."""
    bundle = _bundle()
    for cluster in (c for job in bundle["targets"]["classic"]["resources"]["jobs"].values()
                    for c in job["job_clusters"]):
        assert cluster["new_cluster"]["node_type_id"] == "${var.node_type_id}"
        assert cluster["new_cluster"]["spark_version"] == "${var.spark_version}"
    assert {"node_type_id", "spark_version", "environment_version"} <= set(bundle["variables"])
    assert "i3.xlarge" not in json.dumps(bundle["resources"])  # AWS's type is only the variable's default


def test_the_bundle_targets_a_runtime_in_the_supported_spark_range():
    """Databricks Runtime 17.x runs Spark 4.0 (16.4 LTS runs Spark 3.5, outside the range)."""
    from fragrelease.jobs import SUPPORTED_PYSPARK

    version = _bundle()["variables"]["spark_version"]["default"]
    assert int(version.split(".")[0]) >= 17 and SUPPORTED_PYSPARK[0] == (4, 0), version


@pytest.mark.parametrize("target", TARGETS)
def test_the_task_graphs(target):
    """The release job: owners' metadata, plan, owners' protection, release (no simulation); the demo job
    simulates the owners, then runs the release job."""
    jobs = typed_jobs(target)
    release, demo = jobs["fragrelease_release"], jobs["fragrelease_demo"]
    graph = {t.task_key: [d.task_key for d in t.depends_on] for t in release.tasks}
    assert graph == {"owners_metadata": [], "aggregator_plan": ["owners_metadata"],
                     "owners_protect": ["aggregator_plan"], "aggregator_release": ["owners_protect"]}
    steps = [t.python_wheel_task.entry_point for t, _ in _wheel_tasks(release)]
    assert steps == ["fragrelease-owner-metadata", "fragrelease-aggregator-plan", "fragrelease-owner-protect",
                     "fragrelease-aggregator-release"]
    assert [(t.task_key, [d.task_key for d in t.depends_on]) for t in demo.tasks] == [
        ("simulate_owners", []), ("release", ["simulate_owners"])]
    assert demo.tasks[0].python_wheel_task.parameters == ["split", "{{job.parameters.config}}"]
    assert demo.tasks[1].run_job_task.job_id.path == "resources.jobs.fragrelease_release.id"
    assert _defaults(demo) == _defaults(release)  # pushed down whole to the release job


@pytest.mark.parametrize("target", TARGETS)
def test_the_synthetic_task_graphs(target):
    """The synthetic job: owners' metadata, plan, each owner's protect step three times (each round once every
    owner has written the round before: docs/protocol.md), release; its demo simulates, then runs it."""
    jobs = typed_jobs(target)
    synthetic, demo = jobs["fragrelease_synthetic"], jobs["fragrelease_synthetic_demo"]
    graph = {t.task_key: [d.task_key for d in t.depends_on] for t in synthetic.tasks}
    assert graph == {"owners_metadata": [], "aggregator_plan": ["owners_metadata"],
                     "owners_round_1": ["aggregator_plan"], "owners_round_2": ["owners_round_1"],
                     "owners_round_3": ["owners_round_2"], "aggregator_release": ["owners_round_3"]}
    steps = [t.python_wheel_task.entry_point for t, _ in _wheel_tasks(synthetic)]
    assert steps == ["fragrelease-owner-metadata", "fragrelease-aggregator-plan", "fragrelease-owner-protect",
                     "fragrelease-owner-protect", "fragrelease-owner-protect", "fragrelease-aggregator-release"]
    assert [t.task_key for t in synthetic.tasks if t.for_each_task] == ["owners_metadata", "owners_round_1",
                                                                         "owners_round_2", "owners_round_3"]
    assert [(t.task_key, [d.task_key for d in t.depends_on]) for t in demo.tasks] == [
        ("simulate_owners", []), ("release", ["simulate_owners"])]
    assert demo.tasks[0].python_wheel_task.parameters == ["split", "{{job.parameters.config}}"]
    assert demo.tasks[1].run_job_task.job_id.path == "resources.jobs.fragrelease_synthetic.id"
    assert _defaults(demo) == _defaults(synthetic)
    assert _defaults(synthetic)["config"].endswith("/adult-synthetic.yaml")
    assert {k: v for k, v in _defaults(synthetic).items() if k != "config"} == {
        k: v for k, v in _defaults(jobs["fragrelease_release"]).items() if k != "config"}


def test_owners_sources_and_output_are_job_parameters_not_tasks():
    """No owner name or table is written into a task: they come from the job's parameters."""
    for job in typed_jobs("classic").values():
        assert set(_defaults(job)) == {"config", "owners", "output_table"}
        assert "owner-1" not in json.dumps([t.as_dict() for t in job.tasks])
        defaults = json.loads(_defaults(job)["owners"])
        assert [o["owner"] for o in defaults] == ["owner-1", "owner-2", "owner-3", "owner-4"]
    loops = [t for t in typed_jobs("classic")["fragrelease_release"].tasks if t.for_each_task]
    assert [t.task_key for t in loops] == ["owners_metadata", "owners_protect"]
    for t in loops:
        assert t.for_each_task.inputs == "{{job.parameters.owners}}"
        assert "{{input.owner}}" in t.for_each_task.task.python_wheel_task.parameters


#: What each step's command receives, for the job parameters {config: C, owners: [owner-1 ...],
#: output_table: ""} and the for_each element {"owner": "owner-1", "source_table": ""}.
EXPECTED = {
    "fragrelease": (("split",), {"config": "C"}),
    "fragrelease-owner-metadata": (("owner", "metadata"), {"config": "C", "owner": "owner-1", "source_table": ""}),
    "fragrelease-aggregator-plan": (("aggregator", "plan"), {"config": "C", "output_table": ""}),
    "fragrelease-owner-protect": (("owner", "protect"), {"config": "C", "owner": "owner-1", "source_table": ""}),
    "fragrelease-aggregator-release": (("aggregator", "release"), {"config": "C", "output_table": ""}),
}


@pytest.mark.parametrize("target", TARGETS)
def test_each_entry_point_accepts_what_it_receives_after_pushdown(target, monkeypatch):
    for job in typed_jobs(target).values():
        params = {**_defaults(job), "config": "C"}
        for task, loop in _wheel_tasks(job):
            wheel = task.python_wheel_task
            item = json.loads(_fill(loop.for_each_task.inputs, params))[0] if loop else None
            args = received(wheel, params, item)
            assert not wheel.named_parameters  # a JSON array: no job parameter is pushed down to it
            path, values = parsed(cli_argv(wheel.entry_point, args, monkeypatch))
            want_path, want = EXPECTED[wheel.entry_point]
            assert path == want_path
            assert {k: v for k, v in values.items() if v is not None} == want, (task.task_key, args)


def test_named_parameters_would_receive_the_job_parameters_and_be_refused(monkeypatch, capsys):
    """Why the wheel tasks take positional parameters: with keyword arguments, Databricks also passes
    every job parameter (``--owners=…``, ``--output_table=…``), which no entry point takes."""
    from databricks.bundles.jobs import PythonWheelTask

    from fragrelease.jobs.cli import metadata_main

    wheel = PythonWheelTask.from_dict({"package_name": "fragrelease", "entry_point": "fragrelease-owner-metadata",
                                       "named_parameters": {"config": "C", "owner": "{{input.owner}}"}})
    params = _defaults(typed_jobs("classic")["fragrelease_release"])
    args = received(wheel, params, {"owner": "owner-1", "source_table": ""})
    assert [a.split("=")[0] for a in args] == ["--config", "--owner", "--owners", "--output_table"]
    assert metadata_main(args) == 2
    assert re.search(r"Error: No such option:? '?--owners\b", capsys.readouterr().err)


# ---------------------------------------------------------------- the tasks run locally


def _ordered(tasks):
    done, order = set(), []
    while len(order) < len(tasks):
        for t in tasks:
            deps = {d.task_key for d in t.depends_on}
            if t.task_key not in done and deps <= done:
                order.append(t)
                done.add(t.task_key)
    return order


def _run_wheel_task(task, params: dict, item=None) -> None:
    scripts = {ep.name: ep for ep in entry_points(group="console_scripts")}
    wheel = task.python_wheel_task
    status = scripts[wheel.entry_point].load()(received(wheel, params, item))
    assert status in (0, None), (task.task_key, item, status)


def run_job(name: str, params: dict, target: str = "classic") -> list[str]:
    """Every task of job ``name`` in dependency order, as a run with ``params`` over the job parameters'
    defaults. Returns the run's task keys (for_each iterations as ``key[owner]``; a Run Job task's job
    inline, its job parameters pushed down)."""
    jobs = typed_jobs(target)
    job = jobs[name]
    values = _defaults(job)
    unknown = set(params) - set(values)
    assert not unknown, f"not job parameters: {unknown}"
    values.update(params)
    ran = []
    for task in _ordered(job.tasks):
        if task.for_each_task is not None:
            loop = task.for_each_task
            for item in json.loads(_fill(loop.inputs, values)):
                _run_wheel_task(loop.task, values, item)
                ran.append(f"{loop.task.task_key}[{item.get('owner')}]")
        elif task.run_job_task is not None:
            child = re.fullmatch(r"resources\.jobs\.([a-z0-9_]+)\.id", task.run_job_task.job_id.path).group(1)
            ran += run_job(child, values, target)  # job parameter pushdown to a Run Job task
        else:
            _run_wheel_task(task, values)
            ran.append(task.task_key)
    return ran


def _keys(tmp_path, owner):
    """The owner's signing key pair (the owner and aggregator tasks run apart: keys come from the config)."""
    from fragrelease.signing import write_key_pair

    path, public = write_key_pair(str(tmp_path / "keys"), owner)
    return {"signing_key": path, "public_key": public}


def _conf(spark, wine_pdf, tmp_path, owners=tuple(f"owner-{i}" for i in range(1, 5))):
    from fragrelease.schemas.wine import SCHEMA

    src = str(tmp_path / "src")
    spark.createDataFrame(wine_pdf.head(100 * len(owners)), SCHEMA.struct_type()).write.parquet(src)
    conf = tmp_path / "conf.yaml"
    conf.write_text(yaml.safe_dump(dict(
        name="bundle", dataset="wine", fragmentation="horizontal", epsilon="1", k=10, reports=False,
        source={"path": src, "format": "parquet"},
        owners=[{"name": name, "rows": 100, **_keys(tmp_path, name)} for name in owners],
        work_dir=str(tmp_path / "work"), output=str(tmp_path / "release"))))
    return conf


@pytest.mark.slow  # whole releases end to end (minutes with the suite's load); CI runs it
def test_the_demo_job_runs_locally(spark, wine_pdf, tmp_path):
    ran = run_job("fragrelease_demo", {"config": str(_conf(spark, wine_pdf, tmp_path))})  # default owners
    assert ran == ["simulate_owners", *(f"owner_metadata[owner-{i}]" for i in range(1, 5)), "aggregator_plan",
                   *(f"owner_protect[owner-{i}]" for i in range(1, 5)), "aggregator_release"]
    table = DeltaTable(str(tmp_path / "release"))
    assert table.version() == 0 and table.to_pyarrow_table().num_rows == 400


@pytest.mark.slow  # whole releases end to end (minutes with the suite's load); CI runs it
def test_the_release_job_takes_catalog_table_names(spark, wine_pdf, tmp_path):
    """Owners with their own sources (three, with other names) and the release given as table names, all
    through the job's parameters: the release job, no simulation, no task changed."""
    from fragrelease.schemas.wine import SCHEMA

    names = ("north", "south", "east")
    spark.sql(f"CREATE DATABASE IF NOT EXISTS fr_bundle LOCATION '{tmp_path / 'warehouse'}'")
    try:
        whole = spark.createDataFrame(wine_pdf.head(300), SCHEMA.struct_type())
        ids = SCHEMA.id_column
        for i, name in enumerate(names):
            whole.where(f"{ids} % 3 = {i}").write.saveAsTable(f"fr_bundle.{name}")
        owners = [{"owner": name, "source_table": f"fr_bundle.{name}"} for name in names]
        ran = run_job("fragrelease_release", {"config": str(_conf(spark, wine_pdf, tmp_path, names)),
                                              "owners": json.dumps(owners), "output_table": "fr_bundle.release"})
        assert ran == [*(f"owner_metadata[{n}]" for n in names), "aggregator_plan",
                       *(f"owner_protect[{n}]" for n in names), "aggregator_release"]
        assert not (tmp_path / "release").exists()  # the configuration's path was replaced by the table
        released = spark.table("fr_bundle.release")
        assert released.count() == 300
        from fragrelease.jobs.storage import table_location  # either commit path (tests/jobs/test_lakehouse.py)

        assert DeltaTable(table_location(spark, "fr_bundle.release")).version() == 0
        plan = json.loads((tmp_path / "work" / "plan.json").read_text())
        assert sorted(o["name"] for o in plan["owners"]) == sorted(names)
        assert sorted(o["n_records"] for o in plan["owners"]) == [100, 100, 100]
    finally:
        spark.sql("DROP DATABASE IF EXISTS fr_bundle CASCADE")


def synthetic_conf(tmp_path, owners=("owner-1", "owner-2"), rows=400) -> Path:
    """A small synthetic configuration: the first rows of Adult with income (a Parquet file) simulated as the
    owners' fragments by ``rows``, owners keyed."""
    from fragrelease.schemas.datasets import load_builtin_pandas

    source = tmp_path / "adult-income.parquet"
    load_builtin_pandas("adult-income").head(rows * len(owners)).to_parquet(source, index=False)
    conf = tmp_path / "synthetic.yaml"
    conf.write_text(yaml.safe_dump(dict(
        name="bundle-synthetic", dataset="adult-income", fragmentation="horizontal", linkage="synthetic",
        synthesis_target="income", epsilon="1", reports=False,
        source={"path": str(source), "format": "parquet"},
        owners=[{"name": name, "rows": rows, **_keys(tmp_path, name)} for name in owners],
        work_dir=str(tmp_path / "work"), output=str(tmp_path / "release"))))
    return conf


@pytest.mark.slow  # a whole synthetic release end to end, three rounds (a minute or more with the suite's load)
def test_the_synthetic_demo_job_runs_locally(spark, tmp_path):
    pytest.importorskip("mbi")
    owners = [{"owner": name, "source_table": ""} for name in ("owner-1", "owner-2")]
    ran = run_job("fragrelease_synthetic_demo", {"config": str(synthetic_conf(tmp_path)),
                                                 "owners": json.dumps(owners)})
    assert ran == ["simulate_owners", "owner_metadata[owner-1]", "owner_metadata[owner-2]", "aggregator_plan",
                   "owner_round_1[owner-1]", "owner_round_1[owner-2]", "owner_round_2[owner-1]",
                   "owner_round_2[owner-2]", "owner_round_3[owner-1]", "owner_round_3[owner-2]", "aggregator_release"]
    for name in ("owner-1", "owner-2"):  # each owner's three signed rounds, one per run of its protect step
        assert sorted(p.name for p in (tmp_path / "work" / "owners" / name).glob("synthesis-round-*.json")) == [
            "synthesis-round-1.json", "synthesis-round-2.json", "synthesis-round-3.json"]
    table = DeltaTable(str(tmp_path / "release"))
    assert table.version() == 0 and table.metadata().configuration["fragrelease.linkage"] == "synthetic"
    assert table.to_pyarrow_table().num_rows > 0
