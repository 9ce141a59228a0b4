"""The owners' risk check is advisory (issue 49 item 3): no gate, nothing added to ε, flags private.

docs/privacy.md, "Measured disclosure risk and the owner's risk check". The former gate
(``max_inference_risk`` / ``max_linkability_risk``) published only the draws that passed a check on
the original records, which no ε statement covers. Now every owner hands its fragment over whatever
it measures; the thresholds ``flag_inference_risk`` / ``flag_linkability_risk`` flag the owner's
private report; the retired keys are refused with the reason, so an old configuration does not
silently publish what it used to withhold; the release's guarantee says the check adds nothing.
Spark-free (the end-to-end hand-over: tests/jobs/idpir/test_risk_check.py).
"""
from __future__ import annotations

import pytest
import yaml

from fragrelease.errors import ConfigError
from fragrelease.idpir.guarantee import HAND_OVER, release_guarantee
from fragrelease.jobs.idpir.report_sections import risk_section
from fragrelease.jobs.idpir.risk_check import AdvisoryRisk, advise
from fragrelease.protocol.config import RiskCheckConfig, config_from_dict
from fragrelease.risk import AttackResult, Rate, Risk, RiskReport

RETIRED = ("no longer a gate: the risk check never withholds a fragment (publishing only the draws that pass a check "
           "on the original records is not covered by epsilon); set flag_{a}_risk instead to flag a risk above it in "
           "the owner's private report (got {v})")


def _data(tmp, **risk):
    return dict(name="r", dataset="adult", fragmentation="horizontal", epsilon="1", k=20,
                owners=[{"name": "a", "rows": 800}, {"name": "b", "rows": 800}],
                work_dir=str(tmp / "work"), output=str(tmp / "release"), risk_check=risk)


def _result(attack, value, attribute=None):
    return AttackResult(attack=attack, attribute=attribute, risk=Risk(value, max(0.0, value - 0.05), value + 0.05),
                        attack_rate=Rate(0.5, 0.01), control_rate=Rate(0.4, 0.01), baseline_rate=0.1, n_attacks=100)


REPORT = RiskReport(results=(_result("linkability", 0.02), _result("inference", 0.30, "sex"),
                             _result("inference", 0.10, "race")), n_attacks=100, n_control=40)


@pytest.mark.parametrize("attack", ["inference", "linkability"])
def test_the_retired_gate_keys_are_refused_with_the_reason_and_the_new_key(tmp_path, attack):
    with pytest.raises(ConfigError) as e:
        config_from_dict(_data(tmp_path, **{f"max_{attack}_risk": 0.1}))
    assert str(e.value) == ("invalid configuration <dict>: risk_check.max_" + attack + "_risk: "
                            + RETIRED.format(a=attack, v="0.1"))
    # any value, even one the gate never accepted: the key itself is retired
    with pytest.raises(ConfigError, match=f"risk_check.max_{attack}_risk: no longer a gate.*got 'x'"):
        config_from_dict(_data(tmp_path, **{f"max_{attack}_risk": "x"}))
    # an explicit null sets nothing and is accepted; it is never dumped again
    cfg = config_from_dict(_data(tmp_path, **{f"max_{attack}_risk": None}))
    assert cfg.risk_check is not None and "max_" not in yaml.safe_dump(cfg.model_dump(mode="json"))


def test_fragrelease_validate_refuses_the_retired_key_in_one_line_before_spark(tmp_path, capsys):
    from fragrelease.jobs.cli import run_cli

    conf = tmp_path / "c.yaml"
    conf.write_text(yaml.safe_dump(_data(tmp_path, attacks=100, max_inference_risk=0.1)))
    assert run_cli(["validate", str(conf)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.endswith("risk_check.max_inference_risk: " + RETIRED.format(a="inference", v="0.1")), err


def test_the_flag_thresholds_are_read_and_checked(tmp_path):
    rc = config_from_dict(_data(tmp_path, flag_inference_risk=0.2, flag_linkability_risk=0)).risk_check
    assert rc is not None and (rc.flag_inference_risk, rc.flag_linkability_risk) == (0.2, 0)
    with pytest.raises(ConfigError, match=r"risk_check.flag_linkability_risk: .*less than or equal to 1 \(got 1.5\)"):
        config_from_dict(_data(tmp_path, flag_linkability_risk=1.5))


def test_a_risk_strictly_above_its_threshold_is_flagged_and_nothing_is_raised():
    risk = advise(REPORT, RiskCheckConfig(flag_inference_risk=0.1, flag_linkability_risk=0.02))
    assert isinstance(risk, AdvisoryRisk) and risk.report is REPORT
    # 0.30 > 0.1 is flagged; 0.10 and 0.02 sit at their thresholds (strictly above is flagged)
    assert [risk.flag(r) for r in REPORT.results] == ["", "above flag_inference_risk 0.1", ""]
    assert risk.flagged() == (REPORT.results[1],)
    # no thresholds: measured only, nothing flagged; no measurement: nothing
    assert advise(REPORT, RiskCheckConfig()).flagged() == ()
    assert advise(None, RiskCheckConfig(flag_inference_risk=0)) is None
    assert [advise(REPORT, RiskCheckConfig(flag_linkability_risk=0)).flag(r) for r in REPORT.results] == [
        "above flag_linkability_risk 0", "", ""]


def test_the_private_report_section_says_advisory_and_names_what_is_flagged():
    flagged = risk_section(advise(REPORT, RiskCheckConfig(flag_inference_risk=0.1)))
    assert flagged is not None
    text, rows = flagged.context["text"], flagged.context["rows"]
    assert text.startswith("Flagged: 1 of 3 measured risks are above the thresholds you set (inference of sex). "
                           "Advisory: this fragment was handed over before the measurement ran, whatever it found")
    assert flagged.context["header"][-1] == "flag" and [r[-1] for r in rows] == ["", "above flag_inference_risk 0.1", ""]
    calm = risk_section(advise(REPORT, RiskCheckConfig(flag_inference_risk=0.5)))
    assert calm is not None and calm.context["text"].startswith("No measured risk is above the thresholds you set. "
                                                                "Advisory: ")
    unset = risk_section(advise(REPORT, RiskCheckConfig()))
    assert unset is not None and unset.context["text"].startswith("Advisory: ")
    assert risk_section(None) is None


def _plan():
    from fragrelease.protocol.messages import OwnerMetadata, make_plan
    from fragrelease.schemas.adult import SCHEMA

    metas = [OwnerMetadata(owner=o, dataset="adult", fragmentation="horizontal", n_records=100, id_column="record_id",
                           attributes=tuple(a.public_spec() for a in SCHEMA.protected)) for o in ("a", "b")]
    return make_plan(metas, fragmentation="horizontal", mechanism="idp-ir", k=20, epsilon="1")


def test_the_guarantee_says_the_check_adds_nothing_to_epsilon():
    common = dict(mechanism="idp-ir", epsilon="1", composition="parallel", category_order="dp-frequency")
    for linkage in ("linked", "unlinked"):
        with_check = release_guarantee(linkage=linkage, risk_check=True, **common)
        without = release_guarantee(linkage=linkage, **common)
        assert with_check == {**without, "hand_over": HAND_OVER}  # the ε statements themselves unchanged
    assert HAND_OVER.startswith("every owner hands its protected fragment over whatever its risk check measures: the "
                                "check runs after the fragment and its manifest are written")
    assert "nothing is added to epsilon" in HAND_OVER and "private report only" in HAND_OVER
    # the provenance the aggregator commits, and the table properties made from it
    pytest.importorskip("pyspark")
    from fragrelease.jobs.describe import release_description
    from fragrelease.jobs.protocol.aggregator import provenance

    plan = _plan()
    prov = provenance(plan, risk_check=True)
    assert prov["guarantee"]["hand_over"] == HAND_OVER and "hand_over" not in provenance(plan)["guarantee"]
    assert release_description(prov).properties["fragrelease.guarantee.hand_over"] == HAND_OVER


@pytest.mark.parametrize("checked", [True, False])
def test_fragrelease_run_prints_the_hand_over_sentence_with_the_guarantee(capsys, checked):
    pytest.importorskip("pyspark")
    from fragrelease.jobs.api_common import Guarantee
    from fragrelease.jobs.cli.printing import print_summary
    from fragrelease.jobs.protocol.aggregator import provenance
    from fragrelease.jobs.release_api import OwnerResult, ReleaseResult
    from fragrelease.protocol.config import load_config
    from fragrelease.protocol.messages import manifest_for

    plan = _plan()
    prov = provenance(plan, risk_check=checked)
    owners = tuple(OwnerResult(name=o.name, records=o.n_records, epsilon=o.epsilon, attributes=o.attributes,
                               manifest=manifest_for(plan, o.name, o.n_records, "sha256-sum60:0:0")) for o in plan.owners)
    guarantee = Guarantee.from_dict(prov["guarantee"])
    assert guarantee.hand_over == (HAND_OVER if checked else None)  # Release.run()'s result carries it too
    result = ReleaseResult(path="/tmp/r", table=None, version=0, rows=200, plan=plan, owners=owners,
                           epsilon=plan.epsilon, composition=plan.composition, guarantee=guarantee, provenance=prov,
                           mean_sse=None)
    print_summary(load_config("conf/adult-horizontal.yaml"), result)
    out = " ".join(capsys.readouterr().out.split())  # the console wraps long lines
    sentence = f"hand-over: {HAND_OVER}."
    assert (sentence in out) is checked
    assert out.index("guarantee:") < out.index("hand-over:") if checked else "hand-over" not in out
