"""The owners' risk check (risk_check): measured risk to the private report only, advisory.

docs/privacy.md, "Measured disclosure risk and the owner's risk check". Each owner holds out a keyed
share of its records as the control set, measures anonymeter's inference and linkability risk of its
released rows after its fragment and manifest are written, and writes the numbers, with the flag
thresholds they exceed, to its private report (and nowhere under work_dir or output). A risk above a
threshold hands over all the same (the former gate withheld the fragment: not covered by ε).
"""
from __future__ import annotations

import logging
import os
import re
from fractions import Fraction

import pytest
import yaml
from markupsafe import escape

from fragrelease.errors import ConfigError
from fragrelease.idpir.guarantee import HAND_OVER
from fragrelease.jobs.idpir import risk_check
from fragrelease.jobs.protocol import aggregator, owner, simulate
from fragrelease.jobs.protocol.context import aggregator_context, owner_context
from fragrelease.jobs.protocol.layout import manifest_path, owner_report_path, protected_path
from fragrelease.jobs.protocol.ledger import spent
from fragrelease.protocol.config import config_from_dict
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
    from fragrelease.jobs.protocol.release import run_local_release

    measured, advised = {}, {}
    real_advise = risk_check.advise

    def recording_advise(report, rc):
        out = real_advise(report, rc)
        measured[len(measured)], advised[len(advised)] = report, out
        return out

    monkeypatch.setattr(risk_check, "advise", recording_advise)
    # flag thresholds of 0: every measured risk above 0 is flagged in its owner's private report, and
    # nothing of the flags reaches shared storage either
    cfg = _cfg(tmp_path, adult_source, "risk-ok", risk_check={
        "attacks": 100, "rows": 1000, "control_share": 0.2, "flag_inference_risk": 0, "flag_linkability_risk": 0})
    result = run_local_release(spark, cfg)
    assert len(measured) == 2  # the owners run in configuration order
    measured = {o.name: measured[i] for i, o in enumerate(cfg.owners)}
    advised = {o.name: advised[i] for i, o in enumerate(cfg.owners)}
    assert result.provenance["guarantee"]["hand_over"] == HAND_OVER and result.guarantee.hand_over == HAND_OVER
    assert str(escape(HAND_OVER)) in open(result.report).read()  # the public report's guarantee table
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
        flagged = advised[o.name].flagged()
        assert flagged == tuple(r for r in report.results if r.risk.value > 0)
        assert ("Flagged: " in text) is bool(flagged) and "Advisory: this fragment was handed over" in text
        assert text.count('<td class="text">above flag_') == len(flagged)  # prose cells: left-aligned
    # nothing of it under shared storage: no word of the check, no measured number at full precision.
    # A number is looked for only when its repr has at least 6 digits after "0.": a short one (0.5, 0.25,
    # an attack rate of 1/2 or 1/4) also occurs in any report's own figures, so finding it proves nothing.
    words = [b"anonymeter", b"disclosure risk", b"linkability", b"inference risk", b"risk_check", b"control_share",
             b"flagged", b"flag_inference_risk", b"flag_linkability_risk", b"above flag"]
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
def test_a_flag_threshold_below_the_measured_risk_still_hands_the_fragment_over(spark, tmp_path, adult_source, capsys,
                                                                               monkeypatch, caplog):
    """What the retired gate withheld is handed over; the flag is in the owner's private report only."""
    from fragrelease.jobs.cli import run_cli

    manifest_first = []  # whether owner a's signed manifest was written when the measurement started
    real_measure = risk_check.measure_owner_risk

    def measure_after_hand_over(*args, **kw):
        manifest_first.append(os.path.exists(manifest_path(cfg.work_dir, "a")))
        return real_measure(*args, **kw)

    monkeypatch.setattr(risk_check, "measure_owner_risk", measure_after_hand_over)

    # ε = 100: the linked release keeps each record's own row nearly as it was; a threshold of 0
    # lies below any measured inference risk above 0 (the gate refused this very configuration)
    cfg = _cfg(tmp_path, adult_source, "cli-handover", epsilon="100",
               risk_check={"attacks": 100, "rows": 1000, "control_share": 0.2, "flag_inference_risk": 0})
    schema = resolve_schema(cfg.dataset)
    simulate.split_fragments(spark, cfg, schema, simulate.load_dataset(spark, cfg, schema))
    for o in cfg.owners:
        owner.describe_fragment(spark, owner_context(cfg, o.name))
    plan = aggregator.issue_plan(aggregator_context(cfg))
    cfile = tmp_path / "c.yaml"
    cfile.write_text(yaml.safe_dump(cfg.model_dump(mode="json", exclude_none=True)))
    capsys.readouterr()
    caplog.clear()
    with caplog.at_level(logging.DEBUG):
        assert run_cli(["owner", "protect", "--config", str(cfile), "--owner", "a"]) == 0
    ours = [r for r in caplog.records if r.name.startswith("fragrelease")]
    logged = " ".join(r.getMessage() for r in ours).lower()
    assert ours and "flag" not in logged and "risk" not in logged, logged  # no log record of fragrelease names it
    assert manifest_first == [True]  # measured once, after the hand-over: nothing handed over depends on it
    captured = capsys.readouterr()
    out = " ".join(captured.out.split())
    report_path = owner_report_path(cfg.name, cfg.owners[0])
    # the terminal line is the same whatever was measured: it names the report, no number, no flag
    assert (f"owner a: fragment handed over; its measured risk (advisory, flags included) is in its private report "
            f"{report_path}") in out and "above flag" not in out and "Flagged" not in captured.err + out
    # handed over: the protected fragment and its signed manifest are in work_dir; the spend is ε_j once
    assert os.path.exists(protected_path(cfg.work_dir, "a")) and os.path.exists(manifest_path(cfg.work_dir, "a"))
    eps = plan.owner("a").epsilon
    assert spent(cfg.owners[0].ledger.path, "a", "adult") == [Fraction(str(eps))]
    # the flag: in the private report, with the measured risk it flags
    text = open(report_path).read()
    m = re.search(r"Flagged: (\d+) of (\d+) measured risks are above the thresholds you set \(inference of [a-z-]+", text)
    assert m and int(m.group(1)) >= 1, text[:2000]
    values = [float(v) for v in re.findall(r"<td>inference</td>\s*<td(?: class=\"text\")?>[a-z-]+</td>\s*<td>(\d\.\d{3})</td>",
                                           text)]
    assert len(values) >= 2 and text.count('<td class="text">above flag_inference_risk 0</td>') == int(m.group(1))
    assert sum(v > 0 for v in values) <= int(m.group(1))  # every risk shown above 0.000 is flagged
    for path in _shared_files(cfg.work_dir):
        with open(path, "rb") as f:
            content = f.read().lower()
        for w in (b"flagged", b"above flag", b"flag_inference_risk", b"measured risk", b"risk_check", b"anonymeter"):
            assert w not in content, (path, w)
