"""Spend last across owners in the local driver (issue 41, session 5).

:func:`fragrelease.jobs.protocol.release.play_release` runs every owner's checks that need no noise, up to
its ledger's check of the spend (:func:`fragrelease.jobs.idpir.owner_round.check_before_spend`,
:func:`fragrelease.jobs.protocol.ledger.check_spend`), before any owner's protection: an owner whose
ledger has no room stops the release before any owner spends (before, owner a had spent when owner b
was refused). Delta commits through Spark set session confs and take turns (a process-wide lock).
"""
import os
import threading
from fractions import Fraction

import pytest
import yaml
from signing_keys import with_keys  # tests/helpers: the owners sign their manifests

from fragrelease.errors import BudgetExceededError, LedgerDamagedError
from fragrelease.jobs.protocol.ledger import spent
from fragrelease.jobs.protocol.release import run_local_release
from fragrelease.protocol.config import config_from_dict

OWNERS = ("a", "b")


def _config(tmp_path, *, lifetimes=None, work="work"):
    """Two horizontal owners of 120 records each (reports off); ``lifetimes``: each owner's ledger budget."""
    schema = {"name": "clinic", "attributes": [
        {"name": "record_id", "type": "long", "role": "id"},
        {"name": "age", "type": "integer", "role": "quasi-identifier", "kind": "numeric", "domain": [0, 100]},
        {"name": "income", "type": "double", "role": "quasi-identifier", "kind": "numeric", "domain": [0, 1000]},
        {"name": "sex", "type": "string", "role": "quasi-identifier", "kind": "categorical",
         "categories": ["Female", "Male"]},
    ]}
    (tmp_path / "schema.yaml").write_text(yaml.safe_dump(schema))
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    for name, first in (("a", 1000), ("b", 5000)):
        (src / f"{name}.csv").write_text("record_id,age,income,sex\n" + "".join(
            f"{first + n},{20 + (n * 7 + first) % 60},{(n * 37 + first) % 997 + 0.5},{'Male' if n % 3 else 'Female'}\n"
            for n in range(120)))
    keyfile = tmp_path / "keys" / "k"
    if not keyfile.exists():
        keyfile.parent.mkdir()
        keyfile.write_bytes(b"0123456789abcdef0123456789abcdef-owners-at-once")
        keyfile.chmod(0o600)
    owners = []
    for n in OWNERS:
        o = {"name": n, "source": {"path": str(src / f"{n}.csv"), "format": "csv"},
             "pseudonym_key": {"file": str(keyfile)}, "private_dir": str(tmp_path / "private" / n)}
        if lifetimes is not None:
            o["ledger"] = {"path": str(tmp_path / "ledgers" / n), "lifetime_epsilon": lifetimes[n]}
        owners.append(o)
    return with_keys(config_from_dict(dict(
        name="at-once", dataset=str(tmp_path / "schema.yaml"), fragmentation="horizontal", mechanism="idp-ir",
        epsilon="1", k=5, owners=owners, work_dir=str(tmp_path / work), output=str(tmp_path / "release"),
        if_exists="new-version", reports=False)), tmp_path / "signing")


@pytest.mark.parametrize("poor", OWNERS)
def test_an_owner_without_budget_stops_the_release_before_any_owner_spends(spark, tmp_path, poor):
    """An owner whose ledger has no room fails with the ledger's message, before any protection step
    starts, and the other owner spends nothing (the first owner too when the second is the poor one)."""
    lifetimes = {n: "1/2" if n == poor else "3" for n in OWNERS}
    events = []
    with pytest.raises(BudgetExceededError) as e:
        run_local_release(spark, _config(tmp_path, lifetimes=lifetimes), progress=events.append)
    assert str(e.value) == (f"owner {poor!r} has spent ε = 0 of its lifetime budget 1/2 on dataset 'clinic'; "
                            "a release with ε = 1 would exceed it")
    assert {n: spent(str(tmp_path / "ledgers" / n), n, "clinic") for n in OWNERS} == {"a": [], "b": []}
    # the metadata steps and the plan ran; no protection step started
    assert [(ev.step, ev.status) for ev in events if ev.done] == [(1, "done"), (2, "done"), (3, "done")]
    assert not (tmp_path / "work" / "owners" / "a" / "manifest.json").exists()
    assert not (tmp_path / "work" / "owners" / "b" / "manifest.json").exists()


def test_owners_with_budget_spend_once_each(spark, tmp_path):
    """The checks record nothing: a release whose owners have room spends ε once per owner."""
    result = run_local_release(spark, _config(tmp_path, lifetimes={"a": "3", "b": "3"}))
    assert result.rows == 240
    assert {n: spent(str(tmp_path / "ledgers" / n), n, "clinic") for n in OWNERS} == {
        "a": [Fraction(1)], "b": [Fraction(1)]}
    # each spend is chained and anchored on this machine; its last commit removed, the next run is refused
    from fragrelease.jobs.protocol.ledger import check_ledger
    from fragrelease.jobs.protocol.ledger_anchor import read_anchor

    for n in OWNERS:
        ledger = str(tmp_path / "ledgers" / n)
        chain, anchor = check_ledger(ledger).chain, read_anchor(ledger)
        assert [s.total for s in chain.chained] == [1] and (anchor.version, anchor.chain) == (1, chain.head)
    os.remove(tmp_path / "ledgers" / "b" / "_delta_log" / f"{1:020d}.json")
    with pytest.raises(LedgerDamagedError, match="version 1 is missing: the ledger ends at version 0"):
        run_local_release(spark, _config(tmp_path, lifetimes={"a": "3", "b": "3"}), new_plan=True)
    assert spent(str(tmp_path / "ledgers" / "a"), "a", "clinic") == [Fraction(1)]  # refused before a spent again


def test_the_cli_prints_the_first_owners_failure_as_one_line(spark, tmp_path, capsys):
    """Both owners refused by their ledgers: exit 2, one line, the first owner's in configuration order."""
    from fragrelease.jobs.cli import run_cli

    cfg = _config(tmp_path, lifetimes={"a": "1/3", "b": "1/2"})
    conf = tmp_path / "release.yaml"
    conf.write_text(yaml.safe_dump(cfg.model_dump(mode="json", exclude_none=True)))
    assert run_cli(["run", str(conf)]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert err == ["error: owner 'a' has spent ε = 0 of its lifetime budget 1/3 on dataset 'clinic'; "
                   "a release with ε = 1 would exceed it"]
    assert {n: spent(str(tmp_path / "ledgers" / n), n, "clinic") for n in OWNERS} == {"a": [], "b": []}


def test_the_driver_commits_through_delta_spark_one_at_a_time(spark):
    """Delta's commit metadata is a session conf: a second commit's setting waits until the first
    commit has restored it (two owners' commits at once would otherwise record each other's)."""
    from fragrelease.jobs.storage import delta

    inside = threading.Event()

    def second():
        with delta._UserMetadata(spark, "second"):
            seen.append(spark.conf.get(delta._USER_METADATA_CONF))
            inside.set()

    seen: list = []
    with delta._UserMetadata(spark, "first"):
        thread = threading.Thread(target=second)
        thread.start()
        assert not inside.wait(0.5)  # held while the first commit runs
        assert spark.conf.get(delta._USER_METADATA_CONF) == "first"
    thread.join(30)
    assert seen == ["second"] and spark.conf.get(delta._USER_METADATA_CONF, None) is None


def test_the_ledgers_check_of_a_spend_raises_what_the_spend_raises_and_records_nothing(tmp_path):
    from fragrelease.errors import PlanAlreadySpentError
    from fragrelease.jobs.protocol.ledger import check_spend, record_spend

    path = str(tmp_path / "ledger")
    terms = dict(owner="a", dataset="clinic", lifetime=Fraction(2))
    check_spend(path, plan_id="p0", epsilon=Fraction(1), **terms)  # creates the empty ledger, records nothing
    assert spent(path, "a", "clinic") == []
    record_spend(path, plan_id="p1", epsilon=Fraction(3, 2), **terms)
    for plan_id, epsilon, error in (("p1", Fraction(1, 4), PlanAlreadySpentError),
                                    ("p2", Fraction(1), BudgetExceededError)):
        with pytest.raises(error) as checked:
            check_spend(path, plan_id=plan_id, epsilon=epsilon, **terms)
        with pytest.raises(error) as recorded:
            record_spend(path, plan_id=plan_id, epsilon=epsilon, **terms)
        assert str(checked.value) == str(recorded.value)
    check_spend(path, plan_id="p2", epsilon=Fraction(1, 2), **terms)  # fits exactly: no error, nothing recorded
    assert spent(path, "a", "clinic") == [Fraction(3, 2)]
