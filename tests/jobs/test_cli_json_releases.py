"""``run --json`` and ``inspect --json`` on one small release of each kind (issue 53, items 3-4), in a new
process each: the whole of standard output (the JVM's included) is one JSON document, and ``inspect`` of a
synthetic release prints its own terms, no ``?``."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest
import yaml

CLI = "import sys; from fragrelease.jobs.cli import main; sys.exit(main(sys.argv[1:]))"
#: Wine (6,497 records) cut among two owners: the smallest built-in table.
OWNERS = [{"name": "owner-1", "rows": 200}, {"name": "owner-2", "rows": 6297}]


def _cli(tmp_path, *args):
    env = {**os.environ, "FRAGRELEASE_PRIVATE_ROOT": str(tmp_path / "private")}
    return subprocess.run([sys.executable, "-c", CLI, *args], capture_output=True, text=True, cwd=tmp_path,
                          env=env, timeout=900)


def _release(tmp_path, **terms):
    conf = {"name": f"json-{terms['linkage']}", "dataset": "wine", "fragmentation": "horizontal", "epsilon": "1",
            "owners": OWNERS, "work_dir": "work", "output": "release", "reports": False, **terms}
    if terms["linkage"] != "synthetic":
        conf["k"] = 10  # microaggregation's cluster size: refused by a synthetic configuration
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(conf))
    run = _cli(tmp_path, "run", "c.yaml", "--json")
    assert run.returncode == 0, run.stderr
    inspect = _cli(tmp_path, "inspect", "release", "--json")
    assert inspect.returncode == 0, inspect.stderr
    return json.loads(run.stdout), inspect, json.loads(inspect.stdout)


@pytest.mark.slow  # a whole release in a new process (about a minute)
def test_run_and_inspect_json_of_a_linked_release(tmp_path):
    run, inspect, doc = _release(tmp_path, linkage="linked", mechanism="idp-ir")
    assert run["ok"] is True and run["kind"] == "linked" and run["table"]["version"] == 0
    assert run["table"]["path"] == str(tmp_path / "release") and run["rows"] == 6497
    assert run["release_terms"] == {"k": 10} and run["guarantee"]["table"]
    assert [(o["name"], o["records"], o["epsilon"]) for o in run["owners"]] == [("owner-1", 200, "1"),
                                                                               ("owner-2", 6297, "1")]
    assert doc["kind"] == "linked" and doc["location"] == str(tmp_path / "release")
    version = doc["versions"][0]
    assert (version["version"], version["mechanism"], version["epsilon"], version["terms"]) == (0, "idp-ir", "1", {"k": 10})
    assert "provenance" not in version  # only with --full
    assert "horizontal idp-ir, ε 1 (parallel), k 10" in inspect.stderr  # the human text: standard error


@pytest.mark.slow  # a whole synthetic release in a new process (one to two minutes)
@pytest.mark.skipif(importlib.util.find_spec("mbi") is None, reason="could not import 'mbi'")
def test_run_and_inspect_json_of_a_synthetic_release(tmp_path):
    run, inspect, doc = _release(tmp_path, linkage="synthetic")
    assert run["ok"] is True and run["kind"] == "synthetic" and run["table"]["version"] == 0
    terms = run["release_terms"]
    assert terms["owners"] == 2 and terms["collusion"] == 1 and terms["bins"] == 10 and terms["target"] is None
    assert run["rows"] == terms["rows"] > 0 and len(terms["cliques"]) >= 10  # the drawn (noised) count
    assert run["guarantee"]["table"].startswith("whole table ε-DP, ε = 1")
    assert doc["kind"] == "synthetic" and "synthetic release of dataset wine" in doc["description"]
    version = doc["versions"][0]
    assert version["kind"] == "synthetic" and version["terms"] == terms and version["mechanism"] is None
    line = next(x for x in inspect.stderr.splitlines() if x.startswith("version 0 "))
    assert "?" not in line, line
    assert (f"horizontal synthetic, ε 1 (parallel), owners 2, collusion bound t = 1, target none, bins 10, "
            f"rows {terms['rows']:,}, cliques ") in line
    plain = _cli(tmp_path, "inspect", "release")  # without --json: the same line on standard output
    assert plain.returncode == 0 and line in plain.stdout.splitlines()
