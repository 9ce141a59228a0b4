"""Resume, don't respend (issue 49, items 2 and 3): ``fragrelease run`` after a killed or failed attempt.

Measured on 0.16.0: two killed attempts and one success left each owner's ledger at 3 for one release
(every attempt cleared ``work_dir`` and issued a new plan). Now the next run resumes the attempt's
plan: owners that kept their draw re-publish it without spending, the others draw (an earlier
attempt's spend reused), the aggregator commits; each ledger holds ε_j once. A run after a committed
release is refused unless ``--new-plan``, and the run says what it costs before it spends.
"""
from __future__ import annotations

import json
from fractions import Fraction

import pytest
import yaml
from signing_keys import with_keys  # tests/helpers: the owners sign their manifests

from fragrelease.errors import ReleaseExistsError
from fragrelease.jobs.idpir import owner_round
from fragrelease.jobs.protocol import aggregator
from fragrelease.jobs.protocol.ledger import spent
from fragrelease.jobs.protocol.release import run_local_release
from fragrelease.protocol.config import config_from_dict

OWNERS = ("a", "b")


class Killed(BaseException):
    """Stands for the process dying at this point: no handler runs."""


def _config(tmp_path):
    """Two horizontal owners of 120 records each with ledgers (lifetime 3), reports off, new versions allowed."""
    schema = {"name": "clinic", "attributes": [
        {"name": "record_id", "type": "long", "role": "id"},
        {"name": "age", "type": "integer", "role": "quasi-identifier", "kind": "numeric", "domain": [0, 100]},
        {"name": "sex", "type": "string", "role": "quasi-identifier", "kind": "categorical",
         "categories": ["Female", "Male"]},
    ]}
    (tmp_path / "schema.yaml").write_text(yaml.safe_dump(schema))
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    for name, first in (("a", 1000), ("b", 5000)):
        (src / f"{name}.csv").write_text("record_id,age,sex\n" + "".join(
            f"{first + n},{20 + (n * 7 + first) % 60},{'Male' if n % 3 else 'Female'}\n" for n in range(120)))
    owners = [{"name": n, "source": {"path": str(src / f"{n}.csv"), "format": "csv"},
               "private_dir": str(tmp_path / "private" / n),
               "ledger": {"path": str(tmp_path / "ledgers" / n), "lifetime_epsilon": "3"}} for n in OWNERS]
    return with_keys(config_from_dict(dict(
        name="resume", dataset=str(tmp_path / "schema.yaml"), fragmentation="horizontal", mechanism="idp-ir",
        epsilon="1", k=5, owners=owners, work_dir=str(tmp_path / "work"), output=str(tmp_path / "release"),
        if_exists="new-version", reports=False)), tmp_path / "signing")


def _spends(tmp_path):
    return {n: spent(str(tmp_path / "ledgers" / n), n, "clinic") for n in OWNERS}


def _kill_at(monkeypatch, where):
    """Make the run die at ``where`` (once per call of the patched step)."""
    def killed(*args, **kwargs):
        raise Killed

    if where == "after metadata":
        monkeypatch.setattr(aggregator, "issue_plan", killed)
    elif where == "after the plan":
        monkeypatch.setattr(owner_round, "protect_and_write", killed)
    elif where == "after an owner's spend":  # owner b dies after its ledger spend, before its noise
        real = owner_round.released_fragment

        def b_dies(df, attrs, spec, **kw):
            if spec.owner == "b":
                raise Killed
            return real(df, attrs, spec, **kw)
        monkeypatch.setattr(owner_round, "released_fragment", b_dies)
    elif where == "after an owner's publish":
        monkeypatch.setattr(aggregator, "release", killed)
    else:  # in the aggregator's commit
        monkeypatch.setattr(aggregator, "commit_release", killed)


RESUMED = {
    "after the plan": "owner 'a' draws its fragment (ε 1); owner 'b' draws its fragment (ε 1)",
    "after an owner's spend": "owner 'a' re-publishes its fragment (no spend); owner 'b' draws its fragment (no spend: "
                              "its earlier attempt's spend stands)",
    "after an owner's publish": "owner 'a' re-publishes its fragment (no spend); owner 'b' re-publishes its fragment "
                                "(no spend)",
}
RESUMED["in the aggregator's commit"] = RESUMED["after an owner's publish"]


@pytest.mark.slow  # two whole local releases per case
@pytest.mark.parametrize("where", ["after metadata", "after the plan", "after an owner's spend",
                                   "after an owner's publish", "in the aggregator's commit"])
def test_a_failure_at_each_step_then_the_same_run_commits_with_each_ledger_charged_once(spark, tmp_path,
                                                                                        monkeypatch, where):
    cfg = _config(tmp_path)
    lines: list[str] = []
    with monkeypatch.context() as m:
        _kill_at(m, where)
        with pytest.raises(Killed):
            run_local_release(spark, cfg, announce=lines.append)
    plan_file = tmp_path / "work" / "plan.json"
    first_plan = json.loads(plan_file.read_text())["plan_id"] if plan_file.exists() else None
    result = run_local_release(spark, cfg, announce=lines.append)
    assert result.version == 0 and result.rows == 240
    assert _spends(tmp_path) == {"a": [Fraction(1)], "b": [Fraction(1)]}  # before issue 49: [1, 1] each
    if where == "after metadata":  # no plan was issued: a new one, the only spend
        assert first_plan is None and lines[-1].startswith(f"new plan {result.plan.plan_id} (no earlier attempt to "
                                                           "resume): owner 'a' spends ε_j = 1; owner 'b' spends ε_j = 1")
    else:
        assert result.plan.plan_id == first_plan
        assert lines[-1] == f"resuming plan {first_plan}: {RESUMED[where]}"

    # the same run again: the plan is committed, nothing is spent, one line says what to do
    with pytest.raises(ReleaseExistsError, match=rf"^release 'resume' is already released \(version 0 of .*release, plan "
                                                 rf"{result.plan.plan_id}\); running it again publishes nothing new: use "
                                                 r"--new-plan"):
        run_local_release(spark, cfg)
    assert _spends(tmp_path) == {"a": [Fraction(1)], "b": [Fraction(1)]}


@pytest.mark.slow  # three runs through the command line
def test_the_cli_says_what_a_run_costs_before_it_spends_and_new_plan_spends_again(spark, tmp_path, capsys,
                                                                                   monkeypatch):
    from fragrelease.jobs.cli import run_cli
    from fragrelease.jobs.protocol import draws

    conf = tmp_path / "release.yaml"
    conf.write_text(yaml.safe_dump(_config(tmp_path).model_dump(mode="json", exclude_none=True)))
    before_spend: list[str] = []
    real = draws.record_spend

    def spend(*args, **kwargs):
        before_spend.append(capsys.readouterr().out)  # what the run printed before this spend
        return real(*args, **kwargs)

    monkeypatch.setattr(draws, "record_spend", spend)
    assert run_cli(["run", str(conf)]) == 0
    plan = json.loads((tmp_path / "work" / "plan.json").read_text())["plan_id"]
    assert f"new plan {plan} (no earlier attempt to resume): owner 'a' spends ε_j = 1; owner 'b' spends ε_j = 1" \
        in before_spend[0].replace("\n", "")
    capsys.readouterr()
    assert run_cli(["run", str(conf)]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith("error: release 'resume' is already released (version 0 of ")
    assert _spends(tmp_path) == {"a": [Fraction(1)], "b": [Fraction(1)]}
    before_spend.clear()
    assert run_cli(["run", str(conf), "--new-plan"]) == 0
    new = json.loads((tmp_path / "work" / "plan.json").read_text())["plan_id"]
    assert new != plan and f"new plan {new} (--new-plan): owner 'a' spends ε_j = 1" in before_spend[0].replace("\n", "")
    assert _spends(tmp_path) == {"a": [Fraction(1), Fraction(1)], "b": [Fraction(1), Fraction(1)]}
