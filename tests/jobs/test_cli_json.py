"""``--json`` (issue 53, items 3-4): one JSON document on standard output, the human text on standard error, a
failure's document with its class; both release kinds named by ``--help`` and ``inspect``. No Spark here
(``plan``, ``validate`` and ``ledger`` need none); whole releases: tests/jobs/test_cli_json_releases.py."""
from __future__ import annotations

import importlib.util
import inspect as pyinspect
import json
import os
from fractions import Fraction
from pathlib import Path

import pytest
import yaml

from fragrelease import errors
from fragrelease.jobs.cli import _common, main
from fragrelease.jobs.cli.history import version_line
from fragrelease.jobs.cli.machine import CLASSES, ERROR_CLASSES, error_class

ROOT = Path(__file__).resolve().parents[2]
needs_mbi = pytest.mark.skipif(importlib.util.find_spec("mbi") is None, reason="could not import 'mbi'")


def _call(capsys, *argv):
    """(status, the one JSON document of standard output, standard error) of ``fragrelease ARGV``."""
    capsys.readouterr()
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, json.loads(out), err  # the whole of standard output is one document


def _conf(tmp_path, name: str, **changes) -> str:
    """conf/NAME.yaml with its work_dir and output moved under ``tmp_path``."""
    data = yaml.safe_load((ROOT / "conf" / f"{name}.yaml").read_text())
    data.update(work_dir=str(tmp_path / "work"), output=str(tmp_path / "release"), **changes)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


# ------------------------------------------------------------------------------------------- error classes
def _error_classes_of_the_module():
    return [c for _, c in pyinspect.getmembers(errors, pyinspect.isclass)
            if issubclass(c, errors.FragReleaseError) and c.__module__ == errors.__name__]


def test_every_error_class_of_fragrelease_errors_has_its_class_in_the_one_table():
    found = _error_classes_of_the_module()
    assert len(found) >= 24 and errors.FragReleaseError in found
    missing = [c.__name__ for c in found if c not in ERROR_CLASSES]
    assert missing == [], f"add these to jobs/cli/machine.py ERROR_CLASSES: {missing}"
    assert set(ERROR_CLASSES.values()) == set(CLASSES)
    expected = {errors.ConfigError: "configuration", errors.InvalidParameterError: "configuration",
                errors.SchemaMismatchError: "data", errors.DomainError: "data", errors.IdentifierError: "data",
                errors.BudgetExceededError: "budget", errors.PlanAlreadySpentError: "budget",
                errors.LedgerStorageError: "storage", errors.StorageError: "storage",
                errors.ManifestMismatchError: "tamper", errors.SignatureError: "tamper",
                errors.LedgerDamagedError: "tamper", errors.ProtocolError: "tamper",
                errors.ReleaseExistsError: "exists"}
    assert {c: ERROR_CLASSES[c] for c in expected} == expected
    # a class defined elsewhere takes its nearest listed base's class
    assert error_class(type("Later", (errors.LedgerDamagedError,), {})("x")) == "tamper"
    assert error_class(ValueError("x")) == "configuration"


@pytest.mark.parametrize("exc, cls", [
    (errors.ConfigError("epsilon: must be > 0, not 0"), "configuration"),
    (errors.DomainError("owner 'a': age = 130 outside [0, 100]"), "data"),
    (errors.BudgetExceededError("owner 'a' would spend 2 of a lifetime 1"), "budget"),
    (errors.TableWriteError("release '/x': disk full"), "storage"),
    (errors.SignatureError("owner 'a': the manifest's signature does not verify"), "tamper"),
    (errors.ReleaseExistsError("release '/x' exists (if_exists: error)"), "exists"),
])
def test_a_failure_exits_2_with_its_one_line_and_its_json_document(capsys, monkeypatch, exc, cls):
    def refuse(*args, **kwargs):
        raise exc

    monkeypatch.setattr(_common, "_config", refuse)
    status, doc, err = _call(capsys, "validate", "c.yaml", "--json")
    assert status == 2 and err == f"error: {exc}\n"
    assert doc["ok"] is False and doc["error"] == {"class": cls, "type": type(exc).__name__, "message": str(exc)}
    assert doc["fragrelease_version"]


def test_a_bad_epsilon_is_a_configuration_error_on_stdout_and_stderr(capsys, tmp_path):
    status, doc, err = _call(capsys, "plan", _conf(tmp_path, "adult-horizontal"), "--epsilon", "0", "--json")
    assert status == 2 and len(err.splitlines()) == 1 and err.startswith("error: ")
    assert doc["error"]["class"] == "configuration" and doc["error"]["message"] == err[len("error: "):-1]
    assert doc["error"]["type"] in ("ConfigError", "InvalidParameterError")
    status, doc, err = _call(capsys, "plan", "--json")  # a usage error: no configuration given
    assert status == 2 and doc["ok"] is False and doc["error"]["class"] == "configuration"
    assert "CONFIG" in doc["error"]["message"]


def test_without_json_a_failure_prints_nothing_on_stdout(capsys):
    capsys.readouterr()
    assert main(["plan", "--epsilon", "0", "conf/adult-horizontal.yaml"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("error: ")


# ------------------------------------------------------------------------------------------- plan, validate
def test_plan_json_of_an_ir_release(capsys, tmp_path):
    status, doc, err = _call(capsys, "plan", _conf(tmp_path, "adult-horizontal"), "--json")
    assert status == 0 and doc["ok"] is True and doc["command"] == "plan" and doc["kind"] == "linked"
    assert doc["epsilon"] == "1" and [o["name"] for o in doc["owners"]] == [f"owner-{i}" for i in range(1, 5)]
    assert doc["terms"]["k"] == 50 and doc["terms"]["mechanism"] == "idp-ir"
    assert "synthesis_target" not in doc["terms"]  # the synthesis options do not act on an IR release
    assert set(doc["guarantee"]) >= {"neighbouring", "notion", "per_column", "table", "against"}
    age = next(a for a in doc["preview"]["attributes"] if a["attribute"] == "age")
    assert age["epsilon"] == "1/10" and age["half_width_95"] == pytest.approx(59.91, abs=0.01)  # as printed
    table = next(b for b in doc["blocks"] if isinstance(b, dict))  # the printed table, row by row
    assert any(r.get("attribute") == "age" for r in table["rows"]), table["rows"][0]
    assert "idp-ir" in doc["heading"] and "age" in err  # the human table went to standard error


@needs_mbi
def test_plan_and_validate_json_of_a_synthetic_release(capsys, tmp_path):
    conf = _conf(tmp_path, "adult-synthetic")
    status, doc, err = _call(capsys, "plan", conf, "--json")
    assert status == 0 and doc["kind"] == "synthetic" and doc["dataset"] == "adult-income-train"
    assert doc["terms"] == {"linkage": "synthetic", "synthesis_target": "income", "synthesis_bins": 10,
                            "synthesis_collusion": None,  # no IR term (k, mechanism) for a synthetic release
                            "resolved_owners": 4, "resolved_collusion": 1}  # the default t = ⌊4/3⌋ in force
    assert doc["guarantee"]["table"].startswith("whole table ε-DP, ε = 1")
    whats = [r["what"] for r in doc["preview"]["rows"]]
    assert whats == ["1-way marginal", "feature pair (structure, 2-way)", "tree edge (2-way)",
                     "income × feature (2-way)"]
    assert sum(Fraction(r["epsilon_total"]) for r in doc["preview"]["rows"]) == 1
    assert any(n.startswith("collusion bound t = 1 of 4 owners") for n in doc["preview"]["notes"])
    assert "collusion bound t = 1" in doc["heading"] and "measurement" in err

    status, doc, err = _call(capsys, "validate", conf, "--json")
    assert status == 0 and doc["ok"] is True and doc["kind"] == "synthetic"
    assert doc["checks"] == ["configuration", "preflight", "local_catalog"] and doc["data_checked"] is False
    assert doc["terms_text"] == "synthetic (target income)" and doc["output"] == str(tmp_path / "release")
    assert err.startswith("OK ")


def test_validate_json_of_an_ir_release_for_an_owner(capsys, tmp_path):
    status, doc, err = _call(capsys, "validate", _conf(tmp_path, "adult-horizontal"), "--owner", "owner-2", "--json")
    assert status == 0 and doc["kind"] == "linked" and doc["party"] == "owner" and doc["owner"] == "owner-2"
    assert doc["checks"] == ["configuration", "preflight", "work_dir"] and doc["terms_text"] == "k 50, idp-ir"


# ------------------------------------------------------------------------------------------- ledger
def _ledger(tmp_path) -> str:
    from fragrelease.jobs.protocol.ledger import record_spend

    path = str(tmp_path / "ledger")
    record_spend(path, owner="o", dataset="d", plan_id="p1", epsilon=Fraction(1, 2), lifetime=Fraction(3, 2))
    record_spend(path, owner="o", dataset="d", plan_id="p2", epsilon=Fraction(1, 3), lifetime=Fraction(3, 2))
    return path


def test_ledger_check_and_history_json(capsys, tmp_path):
    path = _ledger(tmp_path)
    status, doc, err = _call(capsys, "ledger", "check", path, "--json")
    assert status == 0 and doc["verdict"] == "OK" and doc["version"] == 2 and doc["versions"] == 3
    assert [(s["plan_id"], s["epsilon"], s["total"]) for s in doc["spends"]] == [("p1", "1/2", "1/2"), ("p2", "1/3", "5/6")]
    assert doc["chain"]["chained"] == 2 and doc["anchor"]["version"] == 2 and "OK, 2 spends" in err
    status, doc, err = _call(capsys, "ledger", "history", path, "--json")
    assert status == 0 and [(e["version"], e["total"]) for e in doc["entries"]] == [(1, "1/2"), (2, "5/6")]


def test_ledger_check_of_a_damaged_ledger_is_tamper_and_of_a_missing_one_storage(capsys, tmp_path):
    path = _ledger(tmp_path)
    with open(os.path.join(path, "_delta_log", f"{2:020d}.json"), "w"):
        pass  # the last commit truncated to 0 bytes
    for command in ("check", "history"):
        status, doc, err = _call(capsys, "ledger", command, path, "--json")
        assert status == 2 and len(err.splitlines()) == 1
        assert doc["error"] == {"class": "tamper", "type": "LedgerDamagedError", "message": err[len("error: "):-1]}
    status, doc, err = _call(capsys, "ledger", "check", str(tmp_path / "none"), "--json")
    assert status == 2 and doc["error"]["class"] == "storage" and doc["error"]["type"] == "LedgerStorageError"


# ------------------------------------------------------------------------------------------- both kinds
def test_help_names_both_release_kinds(capsys):
    capsys.readouterr()
    assert main(["--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "iDP-IR microaggregation" in out and "whole-table synthetic release (linkage synthetic)" in out


def test_inspect_line_of_a_synthetic_provenance_has_its_own_terms_and_no_placeholder():
    prov = {"role": "release", "plan_id": "p-1", "dataset": "wine", "fragmentation": "horizontal", "epsilon": "1",
            "composition": "parallel", "linkage": "synthetic", "synthesis_target": None, "synthesis_bins": 10,
            "owners": [{"name": "a", "n_records": 200, "epsilon": "1", "attributes": ["x", "y"]},
                       {"name": "b", "n_records": 300, "epsilon": "1", "attributes": ["x", "y"]}],
            "synthesis": {"epsilon_one_way": "1/5", "epsilon_selection": "1/5", "epsilon_cliques": "3/5",
                          "target": None, "bins": 10, "owners": 2, "collusion": 1, "cliques": [["x", "y"]],
                          "rows": 4961, "fit_iterations": 1000}}
    line = version_line({"version": 0, "operation": "WRITE"}, prov)
    assert "?" not in line, line
    assert line == ("[bold]version 0[/bold] WRITE: horizontal synthetic, ε 1 (parallel), owners 2, collusion bound "
                    "t = 1, target none, bins 10, rows 4,961, cliques x×y, plan p-1; owners: a (ε_j 1), b (ε_j 1)")
    ir = {"fragmentation": "horizontal", "mechanism": "idp-ir", "epsilon": "1", "composition": "parallel", "k": 20,
          "plan_id": "p-1", "owners": [{"name": "o1", "epsilon": "1"}], "linkage": "linked"}
    assert version_line({"version": 3, "operation": "WRITE"}, ir).endswith(
        "WRITE: horizontal idp-ir, ε 1 (parallel), k 20, plan p-1; owners: o1 (ε_j 1)")


def test_report_paths_print_absolute_like_the_tables(tmp_path, monkeypatch):
    """The run summary prints every local report path absolute, as it prints the table's (issue 53)."""
    from fragrelease.jobs.cli.printing import shown_path

    monkeypatch.chdir(tmp_path)
    assert shown_path("releases/r/report.html") == str(tmp_path / "releases" / "r" / "report.html")
    for uri in ("s3a://bucket/r/report.html", "dbfs:/Volumes/x/report.html", "file:/tmp/r.html"):
        assert shown_path(uri) == uri


def test_the_party_entry_points_print_usage_lines_that_run_as_typed(capsys):
    """``fragrelease-owner-protect --help`` printed ``fragrelease-owner-protect owner protect``, which fails when
    typed (issue 53): the entry points' usage lines name the command line that runs the same step."""
    from fragrelease.jobs.cli import aggregator_main, owner_main, protect_main

    for call, usage in ((lambda: protect_main(["--help"]), "fragrelease owner protect [OPTIONS]"),
                        (lambda: owner_main(["metadata", "--help"]), "fragrelease owner metadata [OPTIONS]"),
                        (lambda: aggregator_main(["plan", "--help"]), "fragrelease aggregator plan [OPTIONS]")):
        assert call() == 0
        out = " ".join(capsys.readouterr().out.split())
        assert f"Usage: {usage}" in out, out[:200]
