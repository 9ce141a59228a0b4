"""Run in its own interpreter by tests/test_wheel_install.py (a venv holding the lowest supported pyspark, the
built wheel and the synthesis extra's requirement, as databricks.yml installs them for its synthetic jobs):
the steps of the bundle's ``fragrelease_synthetic_demo`` job, each through the installed wheel's console
script entry point with the arguments its task receives, in one process. ``argv[1]``: a JSON array of
``[console script, [arguments]]``; ``argv[2]``: the release folder. Prints one JSON line: each step's exit
status, the release's Delta version, rows, linkage (its provenance) and description, and where fragrelease was imported from."""
import json
import sys
from importlib.metadata import entry_points


def main(steps_json: str, release: str) -> None:
    from deltalake import DeltaTable

    import fragrelease

    scripts = {ep.name: ep for ep in entry_points(group="console_scripts")}
    statuses = []
    for name, args in json.loads(steps_json):
        status = scripts[name].load()(args)
        statuses.append(status)
        if status not in (0, None):
            break
    out = {"statuses": statuses, "fragrelease_file": fragrelease.__file__}
    if all(s in (0, None) for s in statuses):
        table = DeltaTable(release)
        # the provenance of the version in its commit's userMetadata (the table properties need Delta's Spark
        # classes, which a runtime without delta-spark lacks: fragrelease.jobs.storage.files)
        provenance = json.loads(table.history(1)[0]["userMetadata"])
        out.update(version=table.version(), rows=table.to_pyarrow_table().num_rows, linkage=provenance["linkage"],
                   guarantee=table.metadata().description)
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
