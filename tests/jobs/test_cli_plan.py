"""``fragrelease plan CONFIG``: the accuracy preview, printed without data, Spark or budget."""
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fragrelease.jobs.cli import main

ROOT = Path(__file__).resolve().parents[2]
ADULT = ["age", "workclass", "education", "marital-status", "occupation", "relationship", "race", "sex",
         "hours-per-week", "native-country"]


def _rows(out: str) -> dict[str, list[str]]:
    """Table rows by attribute name (the first cell of each line)."""
    return {line.split()[0]: line.split() for line in out.splitlines() if line.split()}


def test_plan_prints_the_table_of_the_adult_release(capsys):
    assert main(["plan", "conf/adult-horizontal.yaml"]) == 0
    out = capsys.readouterr().out
    rows = _rows(out)
    for a in ADULT:
        assert a in rows, out
    # age: DP-IR bound Δ = 100/50, ε_attr = 1/10 -> b = 20 years, ±20·ln 20 = 59.91, 120 % of the domain
    assert rows["age"][1:6] == ["num", "1/10", "20", "59.91", "120%"]
    # sex: ranks [1, 2], ε_centroids = 9/10 · 1/10: b = (1/50)/0.09, P(rank moves) = exp(-1/(2b)) = 11 %
    assert rows["sex"][1:7] == ["cat", "1/10", "0.2222", "0.6657", "133%", "11%"]
    assert "upper bounds (the DP-IR values)" in out and "no data read, no budget spent" in out
    # after the isotonic projection: age's expected RMSE is a few years against the mean's 28.9 (data spread
    # over [0, 100]); the noise interval alone (120 % of the domain) no longer decides the check
    assert rows["age"][-2] == "28.9" and 4.5 < float(rows["age"][-3]) < 6.5 and rows["age"][-1] == "ok"
    for a in ("sex", "race", "marital-status", "relationship", "age", "hours-per-week"):
        assert rows[a][-1] == "ok", rows[a]
    # native-country: 41 categories at b = 8.9 ranks: about 80 % of the labels change (constant: 97.6 %)
    assert rows["native-country"][-2] == "97.6%" and rows["native-country"][-1] == "WARN"
    assert "warning: " in out and "worst: native-country" in out


def test_plan_of_the_20_attribute_release_warns_and_suggests_k_and_epsilon(capsys):
    assert main(["plan", "conf/german-credit-horizontal.yaml"]) == 0
    out = capsys.readouterr().out
    rows = _rows(out)
    warned = [a for a, r in rows.items() if r[-1] == "WARN"]
    assert len(warned) >= 15, out
    # credit amount: Δ = 50,000/20 DM, b = Δ/(1/20) = 50,000 DM, ±b·ln 20 = 149,787 DM; after the projection
    # its expected RMSE is about 90 % of the mean's (14,434 DM for data spread over [0, 50,000])
    assert rows["credit_amount"][1:6] == ["num", "1/20", "50,000", "149,787", "599%"]
    assert rows["credit_amount"][-2:] == ["14,434", "WARN"]
    assert (f"warning: {len(warned)} of 20 attributes are expected to be released with an error at least 0.5 "
            "times that of releasing their mean (numeric) or most frequent category (categorical), on data drawn "
            "from the declared domain") in out
    assert "suggestion: epsilon = " in out and "suggestion: keep only " in out


def test_plan_threshold_and_overrides(capsys):
    assert main(["plan", "conf/german-credit-horizontal.yaml", "--epsilon", "60"]) == 0
    out = capsys.readouterr().out
    assert "warning" not in out and "suggestion" not in out
    # the paper's release (no projection): age's expected RMSE is several times the projected one
    assert main(["plan", "conf/adult-horizontal.yaml", "--postprocess", "none"]) == 0
    out = capsys.readouterr().out
    assert "expected after postprocess none on data drawn" in out and float(_rows(out)["age"][-3]) > 15
    assert main(["plan", "conf/adult-horizontal.yaml", "--threshold", "1.5"]) == 0
    assert "warning" not in capsys.readouterr().out


def test_plan_reads_no_data(tmp_path, capsys):
    """Owners whose sources do not exist still preview: nothing is read but the configuration and schema."""
    conf = yaml.safe_load((ROOT / "conf" / "wine-horizontal.yaml").read_text())
    conf["owners"] = [{"name": "a", "source": {"path": str(tmp_path / "missing-a.parquet")}},
                      {"name": "b", "source": {"path": str(tmp_path / "missing-b.parquet")}}]
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(conf))
    assert main(["plan", str(path)]) == 0
    out = capsys.readouterr().out
    assert "alcohol" in _rows(out) and "record counts not declared" in out
    assert _rows(out)["alcohol"][-3:] == ["n/a", "n/a", "ok"]  # no n: nothing simulated
    assert main(["plan", str(path), "--rows", "500"]) == 0
    out = capsys.readouterr().out
    assert "record counts not declared" not in out and _rows(out)["alcohol"][-3] != "n/a"
    # --rows is per owner, and the plan says so with the total it implies (issue 52)
    assert "--rows 500 per owner, for 2 of 2 owners without declared rows: 1,000 records in total" in out
    assert main(["plan", "conf/wine-horizontal.yaml", "--rows", "500"]) == 0
    assert "--rows 500 ignored: every owner declares its rows" in capsys.readouterr().out


def test_plan_runs_without_pyspark():
    code = ("import sys; sys.modules['pyspark'] = None; from fragrelease.jobs.cli import main; "
            "sys.exit(main(sys.argv[1:]))")
    r = subprocess.run([sys.executable, "-c", code, "plan", "conf/adult-vertical.yaml"], capture_output=True,
                       text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "owner-native-country" in r.stdout
    assert "record counts not declared" not in r.stdout  # a simulation of the built-in table: its public size


def test_plan_errors_are_one_line_with_status_2(capsys, tmp_path):
    for args, message in ((["--threshold", "0"], "threshold"), (["--rows", "0"], "--rows"),
                          (["--epsilon", "-1"], "-1")):
        assert main(["plan", "conf/adult-horizontal.yaml", *args]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and message in err, err
    assert main(["plan", str(tmp_path / "none.yaml")]) == 2
    assert "none.yaml" in capsys.readouterr().err


def test_the_run_summary_prints_the_table_and_the_meansse_scale(capsys):
    """After a run: the same per-attribute table beside the guarantee, from the release's provenance."""
    from fragrelease.jobs.api_common import Guarantee
    from fragrelease.jobs.cli.printing import print_summary
    from fragrelease.jobs.protocol.aggregator import provenance
    from fragrelease.jobs.release_api import OwnerResult, ReleaseResult
    from fragrelease.protocol.messages import OwnerMetadata, make_plan, manifest_for
    from fragrelease.schemas.datasets import resolve_schema

    schema = resolve_schema("conf/german-credit-schema.yaml")
    specs = tuple(a.public_spec() for a in schema.protected)
    metas = [OwnerMetadata(owner=o, dataset="german-credit", fragmentation="horizontal", attributes=specs,
                           n_records=n) for o, n in (("bank-a", 600), ("bank-b", 400))]
    plan = make_plan(metas, fragmentation="horizontal", mechanism="idp-ir", k=20, epsilon="1")
    prov = provenance(plan)
    owners = tuple(OwnerResult(name=o.name, records=o.n_records, epsilon=o.epsilon, attributes=o.attributes,
                               manifest=manifest_for(plan, o.name, o.n_records, "sha256-sum60:0:0")) for o in plan.owners)
    result = ReleaseResult(path="/tmp/r", table=None, version=0, rows=1000, plan=plan, owners=owners,
                           epsilon=plan.epsilon, composition=plan.composition,
                           guarantee=Guarantee.from_dict(prov["guarantee"]), provenance=prov, mean_sse=5.56)
    from fragrelease.protocol.config import load_config

    print_summary(load_config("conf/german-credit-horizontal.yaml"), result)
    out = capsys.readouterr().out
    assert "MeanSSE 5.5600 (private: from the originals): mean over records and attributes of the squared error in " \
           "units of the original's standard deviation; 0 = every released value equals the original" in out
    assert "MeanSSE vs original 5.5600 (private: from the originals)" in out
    assert "linkage linked | postprocess isotonic | MeanSSE" in out  # the options it recorded, no synthesis ones
    assert out.index("guarantee:") < out.index("credit_amount")
    # the statement in three lines, one per part, not one line of about 1,900 characters (issue 53)
    lines = out.splitlines()
    starts = [next(i for i, line in enumerate(lines) if line.startswith(p))
              for p in ("guarantee: per column, each released column", "  whole table: ", "  against whom: release")]
    assert starts == sorted(starts) and starts[2] - starts[0] >= 2
    rows = _rows(out)
    assert rows["credit_amount"][1:6] == ["num", "1/20", "50,000", "149,787", "599%"]
    assert rows["credit_amount"][-2:] == ["14,434", "WARN"]
    assert "attributes are expected to be released with an error" in out and "suggestion" not in out


def test_the_python_api_previews_without_spark():
    from fragrelease.jobs.api import Release

    pv = Release.from_config("conf/german-credit-horizontal.yaml").preview()
    assert len(pv.warnings) >= 15 and pv.suggestions is not None and pv.suggestions.epsilon is not None
    assert pv.to_dict()["suggestions"]["keep"] == list(pv.suggestions.keep)
    assert pv.to_dict()["attributes"][0]["released_error"]["baseline_error"] == pytest.approx(0.75)  # 1 − 1/4
    assert {a.error.runs for a in pv.attributes if a.error is not None} == {32}  # docs/usage.md: 32 simulated releases
    assert not Release.from_config("conf/german-credit-horizontal.yaml", overrides={"epsilon": "60"}).preview().warnings


def test_run_logs_the_preview_warning_before_reading_data(caplog):
    import logging

    from fragrelease.jobs.cli.release import _warn_accuracy
    from fragrelease.protocol.config import load_config

    with caplog.at_level(logging.WARNING, logger="fragrelease.preview"):
        _warn_accuracy(load_config("conf/german-credit-horizontal.yaml"), "conf/german-credit-horizontal.yaml")
        _warn_accuracy(load_config("conf/german-credit-horizontal.yaml", {"epsilon": "60"}), "c.yaml")
    assert len(caplog.records) == 1
    assert " of 20 attributes are expected to be released with an error at least 0.5 times" in \
        caplog.records[0].getMessage()
    assert caplog.records[0].getMessage().endswith("see fragrelease plan conf/german-credit-horizontal.yaml")
