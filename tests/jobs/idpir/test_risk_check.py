"""The owners' risk check (risk_check): measured risk to the private report only, and the gate.

docs/privacy.md, "The owner's risk check". Each owner holds out a keyed share of its records as the
control set, measures anonymeter's inference and linkability risk of its released rows, writes the
numbers to its private report (and nowhere under work_dir or output), and refuses the hand-over
when a risk exceeds its threshold: exit 2, one line, nothing written to shared storage, the ledger
spend kept.
"""
from __future__ import annotations

import os
import re
from fractions import Fraction

import pytest
import yaml

from fragrelease.errors import ConfigError
from fragrelease.idpir.config import config_from_dict
from fragrelease.jobs.idpir import aggregator, owner, risk_check, simulate
from fragrelease.jobs.idpir.context import aggregator_context, owner_context
from fragrelease.jobs.idpir.layout import manifest_path, owner_report_path, protected_path
from fragrelease.jobs.idpir.ledger import spent
from fragrelease.schemas.datasets import resolve_schema

pytest.importorskip("anonymeter")


@pytest.fixture(scope="module")
def adult_source(spark, adult_pdf, tmp_path_factory):
    from fragrelease.schemas.adult import SCHEMA

    path = str(tmp_path_factory.mktemp("risk-src") / "adult")
    spark.createDataFrame(adult_pdf.sample(1_600, random_state=5), SCHEMA.struct_type()).write.parquet(path)
    return path


def _data(tmp, source, name, **kw):
    data = dict(name=name, dataset="adult", fragmentation="horizontal", epsilon="1", k=20,
                source={"path": source, "format": "parquet"},
                owners=[{"name": "a", "rows": 800, "ledger": {"path": str(tmp / "ledger-a"), "lifetime_epsilon": "500"}},
                        {"name": "b", "rows": 800}],
                work_dir=str(tmp / "work"), output=str(tmp / "release"),
                risk_check={"attacks": 100, "rows": 1000, "control_share": 0.2})
    data.update(kw)
    return data


def _cfg(tmp, source, name, **kw):
    from signing_keys import with_keys  # tests/helpers: owners sign their manifests

    return with_keys(config_from_dict(_data(tmp, source, name, **kw)), tmp / "keys")


def _shared_files(*roots):
    for root in roots:
        for folder, _, files in os.walk(root):
            for f in files:
                yield os.path.join(folder, f)


def test_risk_check_without_reports_is_refused_before_any_data(tmp_path):
    with pytest.raises(ConfigError, match=r"risk_check: needs reports: true \(the measured risk goes to each "
                                          r"owner's private report and nowhere else\)"):
        config_from_dict(_data(tmp_path, str(tmp_path / "src"), "r0", reports=False))
    with pytest.raises(ConfigError, match="risk_check.control_share"):
        config_from_dict(_data(tmp_path, str(tmp_path / "src"), "r0", risk_check={"control_share": 0.9}))


@pytest.mark.slow  # a whole two-owner release with the check
@pytest.mark.usefixtures("anonymeter_numba_cache")  # tests/conftest.py: compiled kernels kept on disk
def test_two_owner_release_writes_each_owners_measured_risk_to_its_private_report_only(
        spark, tmp_path, adult_source, monkeypatch):
    from fragrelease.jobs.idpir.release import run_local_release

    measured = {}
    real_gate = risk_check.gate

    def recording_gate(name, report, rc, epsilon):
        measured[name] = report
        return real_gate(name, report, rc, epsilon)

    monkeypatch.setattr(risk_check, "gate", recording_gate)
    cfg = _cfg(tmp_path, adult_source, "risk-ok")
    result = run_local_release(spark, cfg)
    assert set(measured) == {"a", "b"}
    # the held-out control records are not released: each owner published fewer than its 800 rows
    records = {o.name: o.records for o in result.owners}
    assert all(500 < n < 800 for n in records.values()) and result.rows == sum(records.values())
    for o in cfg.owners:
        report = measured[o.name]
        assert [r.attack for r in report.results][0] == "linkability"
        assert {r.attribute for r in report.results if r.attack == "inference"} == {
            a.name for a in resolve_schema("adult").protected if a.categorical}
        assert report.n_control == 800 - records[o.name]  # every held-out record, fewer than `rows`
        text = open(owner_report_path(cfg.name, o)).read()
        assert "Measured disclosure risk" in text
        for r in report.results:
            assert f"<td>{r.risk.value:.3f}</td>" in text and f"{r.risk.low:.3f} – {r.risk.high:.3f}" in text
    # nothing of it under shared storage: no word of the check, no measured number at full precision.
    # A number is looked for only when its repr has at least 6 digits after "0.": a short one (0.5, 0.25,
    # an attack rate of 1/2 or 1/4) also occurs in any report's own figures, so finding it proves nothing.
    words = [b"anonymeter", b"disclosure risk", b"linkability", b"inference risk", b"risk_check", b"control_share"]
    numbers = {repr(v).encode() for rep in measured.values() for r in rep.results
               for v in (r.risk.value, r.risk.low, r.risk.high, r.attack_rate.value, r.control_rate.value)
               if v not in (0.0, 1.0) and len(repr(v)) >= 8}
    assert numbers
    files = list(_shared_files(cfg.work_dir, cfg.output, f"{cfg.output}_reports"))
    assert os.path.abspath(result.report) in {os.path.abspath(f) for f in files}  # the public report is scanned too
    assert len(files) > 10
    for path in files:
        with open(path, "rb") as f:
            content = f.read().lower()
        for w in words:
            assert w not in content, (path, w)
        for n in numbers:
            assert n not in content, (path, n)


@pytest.mark.slow  # owner steps through the CLI
def test_a_threshold_below_the_measured_risk_refuses_the_owner_step_and_hands_nothing_over(
        spark, tmp_path, adult_source, capsys):
    from fragrelease.jobs.cli import run_cli

    # ε = 100: the linked release keeps each record's own row nearly as it was; a threshold of 0
    # lies below any measured inference risk above 0
    cfg = _cfg(tmp_path, adult_source, "risk-refused", epsilon="100",
               risk_check={"attacks": 100, "rows": 1000, "control_share": 0.2, "max_inference_risk": 0})
    schema = resolve_schema(cfg.dataset)
    simulate.split_fragments(spark, cfg, schema, simulate.load_dataset(spark, cfg, schema))
    for o in cfg.owners:
        owner.describe_fragment(spark, owner_context(cfg, o.name))
    plan = aggregator.issue_plan(aggregator_context(cfg))
    cfile = tmp_path / "c.yaml"
    cfile.write_text(yaml.safe_dump(cfg.model_dump(mode="json", exclude_none=True)))
    capsys.readouterr()
    assert run_cli(["owner", "protect", "--config", str(cfile), "--owner", "a"]) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    eps = plan.owner("a").epsilon
    m = re.fullmatch(
        r"error: owner 'a': measured inference risk of attribute '([a-z-]+)' is (0\.\d{3}|1\.000) \(95 % interval "
        r"(\d\.\d{3})–(\d\.\d{3}), 100 attacks\), above max_inference_risk 0; the protected fragment was not handed "
        r"over \(nothing written to shared storage\); the ledger keeps this attempt's spend of ε = "
        + re.escape(str(eps)) + r" \(noise was drawn\): ask the aggregator for a new plan", err)
    assert m, err
    assert float(m.group(2)) > 0 and float(m.group(3)) <= float(m.group(2)) <= float(m.group(4))
    # nothing handed over: no protected fragment, no manifest, nothing of owner a under work_dir
    assert not os.path.exists(protected_path(cfg.work_dir, "a")) and not os.path.exists(manifest_path(cfg.work_dir, "a"))
    assert not os.path.exists(os.path.join(cfg.work_dir, "owners", "a"))
    # the noise was drawn: the ledger keeps the spend, exactly ε_j
    assert spent(cfg.owners[0].ledger.path, "a", "adult") == [Fraction(str(eps))]
