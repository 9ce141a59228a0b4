"""Draw once (issue 49, item 1), Spark-free: the owner's private claims, its kept outputs and its spends.

The ledger is a Delta table written by delta-rs (no Spark); the plan is a stand-in with an id and
each owner's nonce. What the Spark tests show end to end (a deleted message or table re-published
byte for byte, a killed run resumed without a second spend) rests on these rules:
``tests/jobs/idpir/test_owner_rerun.py``, ``tests/jobs/synthesis/test_synthetic_release.py``,
``tests/jobs/idpir/test_run_resume.py``.
"""
from __future__ import annotations

import os
import stat
from fractions import Fraction
from types import SimpleNamespace

import pytest

from fragrelease.errors import BudgetExceededError, ManifestMismatchError, PlanAlreadySpentError
from fragrelease.jobs.protocol import draws
from fragrelease.jobs.protocol.context import owner_context
from fragrelease.jobs.protocol.ledger import spent
from fragrelease.private_files import write_once
from fragrelease.protocol.config import config_from_dict


class Killed(BaseException):
    """Stands for the process dying at this point: no handler runs."""


def _ctx(tmp, *, private="pa", ledger=True, lifetime="5"):
    owner = {"name": "a", "rows": 10, "private_dir": str(tmp / private)}
    if ledger:
        owner["ledger"] = {"path": str(tmp / "ledger-a"), "lifetime_epsilon": lifetime}
    cfg = config_from_dict(dict(name="draws", dataset="wine", fragmentation="horizontal", epsilon="1", k=3,
                                owners=[owner, {"name": "b", "rows": 10}], work_dir=str(tmp / "work"),
                                output=str(tmp / "out")))
    return owner_context(cfg, "a")


def _plan(plan_id="11111111-1111-4111-8111-111111111111", nonce="n" * 32):
    return SimpleNamespace(plan_id=plan_id, owner=lambda name: SimpleNamespace(nonce=nonce))


SPEND = draws.Spend("wine", "11111111-1111-4111-8111-111111111111", Fraction(1), Fraction(1))


def test_write_once_creates_exclusively_and_atomically(tmp_path):
    path = str(tmp_path / "kept")
    assert write_once(path, b"first") is True
    assert write_once(path, b"second") is False  # an earlier writer's bytes stay
    assert open(path, "rb").read() == b"first"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert os.listdir(tmp_path) == ["kept"]  # no temporary file left behind


def test_the_first_spend_claims_and_spends_once_and_a_rerun_reuses_it(tmp_path):
    ctx, plan = _ctx(tmp_path), _plan()
    step = draws.draw_step(ctx, plan.plan_id, "protect")
    assert draws.spend_once(None, ctx, plan, step, SPEND) is True
    assert step.claimed() and spent(str(tmp_path / "ledger-a"), "a", "wine") == [Fraction(1)]
    claim = tmp_path / "pa" / "draws" / plan.plan_id / "protect.claim"
    assert stat.S_IMODE(os.stat(claim).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(claim.parent).st_mode) == 0o700
    # the nonce is consumed by this plan
    assert (tmp_path / "pa" / "draws" / "nonces" / ("n" * 32)).read_text() == plan.plan_id + "\n"
    # a rerun of the same plan (its earlier attempt kept no output): no second spend, and no refusal
    draws.check_spend_once(None, ctx, plan, step, SPEND)
    assert draws.spend_once(None, ctx, plan, step, SPEND) is False
    assert spent(str(tmp_path / "ledger-a"), "a", "wine") == [Fraction(1)]


def test_a_spend_the_ledger_records_without_this_owners_claim_is_refused(tmp_path):
    """A replayed or copied plan (or another private folder): the ledger has the spend, the owner no claim."""
    ctx, plan = _ctx(tmp_path), _plan()
    draws.spend_once(None, ctx, plan, draws.draw_step(ctx, plan.plan_id, "protect"), SPEND)
    other = _ctx(tmp_path, private="elsewhere")  # the same ledger, another private folder
    step = draws.draw_step(other, plan.plan_id, "protect")
    for call in (draws.check_spend_once, draws.spend_once):
        with pytest.raises(PlanAlreadySpentError, match=r"^owner 'a' already spent on plan '11111111-[0-9a-f-]+' "
                                                        r"\(dataset 'wine', budget ledger .*\) but holds no claim of it "
                                                        r"at .*elsewhere/draws/.*/protect.claim'; a plan is spent once"):
            call(None, other, plan, step, SPEND)
    assert not step.claimed() and spent(str(tmp_path / "ledger-a"), "a", "wine") == [Fraction(1)]


def test_a_claim_whose_spend_was_killed_spends_on_the_rerun_once(tmp_path, monkeypatch):
    ctx, plan = _ctx(tmp_path), _plan()
    step = draws.draw_step(ctx, plan.plan_id, "protect")

    def killed(*args, **kwargs):
        raise Killed

    with monkeypatch.context() as m:
        m.setattr(draws, "record_spend", killed)
        with pytest.raises(Killed):
            draws.spend_once(None, ctx, plan, step, SPEND)
    assert step.claimed() and spent(str(tmp_path / "ledger-a"), "a", "wine") == []
    assert draws.spend_once(None, ctx, plan, step, SPEND) is True
    assert draws.spend_once(None, ctx, plan, step, SPEND) is False
    assert spent(str(tmp_path / "ledger-a"), "a", "wine") == [Fraction(1)]


def test_a_consumed_nonce_refuses_a_second_plan(tmp_path):
    ctx, first, second = _ctx(tmp_path), _plan(), _plan("22222222-2222-4222-8222-222222222222")
    draws.spend_once(None, ctx, first, draws.draw_step(ctx, first.plan_id, "protect"), SPEND)
    spend2 = draws.Spend("wine", second.plan_id, Fraction(1), Fraction(1))
    step = draws.draw_step(ctx, second.plan_id, "protect")
    for call in (draws.check_spend_once, draws.spend_once):
        with pytest.raises(ManifestMismatchError, match=r"^owner 'a': plan 22222222-[0-9a-f-]+ carries the metadata "
                                                        r"nonce that plan 11111111-[0-9a-f-]+ consumed"):
            call(None, ctx, second, step, spend2)
    assert not step.claimed() and spent(str(tmp_path / "ledger-a"), "a", "wine") == [Fraction(1)]


def test_without_a_ledger_the_claim_alone_decides(tmp_path):
    ctx, plan = _ctx(tmp_path, ledger=False), _plan()
    step = draws.draw_step(ctx, plan.plan_id, "round-1")
    assert draws.spend_once(None, ctx, plan, step, SPEND) is False  # nothing to record
    assert step.claimed()
    assert step.keep(b"message") is True and step.keep(b"another draw") is False
    assert step.kept_bytes() == b"message"
    assert draws.drawn_steps(ctx, plan.plan_id, ("round-1", "round-2")) == ("round-1",)
    draws.check_spend_once(None, ctx, plan, step, SPEND)  # kept: nothing to check, nothing spent


def test_the_checks_before_the_spend_write_nothing_and_refuse_what_the_spend_would(tmp_path):
    ctx, plan = _ctx(tmp_path, lifetime="1/2"), _plan()
    step = draws.draw_step(ctx, plan.plan_id, "protect")
    with pytest.raises(BudgetExceededError):
        draws.check_spend_once(None, ctx, plan, step, SPEND)
    assert not (tmp_path / "pa" / "draws").exists()
    with pytest.raises(BudgetExceededError):
        draws.spend_once(None, ctx, plan, step, SPEND)
    assert not step.claimed() and spent(str(tmp_path / "ledger-a"), "a", "wine") == []


def test_a_plan_id_that_is_not_a_folder_name_is_refused(tmp_path):
    with pytest.raises(ManifestMismatchError, match=r"plan id '\.\./x' cannot name a folder"):
        draws.draw_step(_ctx(tmp_path), "../x", "protect")
