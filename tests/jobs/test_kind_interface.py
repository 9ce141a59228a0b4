"""Every registered release kind's Spark half keeps the protocol's interface (jobs/protocol/kind.py, ``KindJobs``).

One common test over :data:`fragrelease.kinds.KINDS` (as scikit-learn checks every estimator with one
suite): the registry entry resolves to a :class:`~fragrelease.jobs.protocol.kind.KindJobs` serving its own
wire name, every abstract method is the kind's own, and an owner's rounds of a small plan (Spark-free: a
plan made from metadata, no data read) are numbered 1..n, draw in distinct steps and spend, together,
exactly the owner's ε_j under distinct ledger plan ids.
"""
from __future__ import annotations

from fractions import Fraction

import pytest

from fragrelease.jobs.protocol.context import owner_context
from fragrelease.jobs.protocol.kind import KindJobs, kind_jobs
from fragrelease.kinds import KINDS, entry_of, resolve
from fragrelease.protocol.config import config_from_dict
from fragrelease.protocol.messages import OwnerMetadata, make_plan
from fragrelease.schemas.datasets import resolve_schema

#: Each kind's wire name, in the registry's order.
NAMES = list(KINDS)
#: Every owner's records: small, and the same for both owners (ε_j of a horizontal owner is the full ε).
ROWS = 40


def test_the_registry_lists_the_kinds_this_suite_checks():
    assert {"linked", "unlinked", "synthetic"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_the_spark_half_is_a_kind_jobs_serving_its_own_name(name):
    jobs = kind_jobs(name)
    assert isinstance(jobs, KindJobs) and jobs is resolve(entry_of(name).jobs)
    assert jobs.name == name
    assert isinstance(jobs.rounds_per_owner, int) and jobs.rounds_per_owner >= 1
    assert isinstance(jobs.combining, str) and jobs.combining


@pytest.mark.parametrize("name", NAMES)
def test_every_abstract_method_is_the_kinds_own(name):
    cls = type(kind_jobs(name))
    assert not cls.__abstractmethods__
    assert KindJobs.__abstractmethods__ == {"rounds", "check_before_spend", "play_round", "combine"}
    for method in KindJobs.__abstractmethods__:
        assert getattr(cls, method) is not getattr(KindJobs, method), (name, method)
    if cls.evaluates:  # the driver scores MeanSSE only through the kind's own method
        assert cls.mean_sse is not KindJobs.mean_sse, name


def test_an_incomplete_kind_cannot_be_built():
    class Partial(KindJobs):
        name = "partial"

        def rounds(self, ctx, plan):
            return ()

    with pytest.raises(TypeError, match="abstract"):
        Partial()  # type: ignore[abstract]


def _plan_and_owner(tmp_path, name):
    """A two-owner horizontal release of kind ``name`` on ``adult-income`` (both kinds accept it), its plan
    made from the owners' metadata, and owner ``a``'s context: no data, no Spark."""
    data = dict(name=f"kind-{name}", dataset="adult-income", fragmentation="horizontal", epsilon="3/2", k=5,
                linkage=name, owners=[{"name": o, "rows": ROWS} for o in ("a", "b")],
                work_dir=str(tmp_path / "work"), output=str(tmp_path / "release"), reports=False)
    if name == "synthetic":  # the synthetic kind's own term; k is microaggregation's (refused when given)
        data["synthesis_target"] = "income"
        data.pop("k")
    cfg = config_from_dict(data)
    schema = resolve_schema(cfg.dataset)
    metas = [OwnerMetadata(owner=o.name, dataset=schema.name, fragmentation=cfg.fragmentation, n_records=ROWS,
                           id_column=schema.id_column, attributes=tuple(a.public_spec() for a in schema.protected))
             for o in cfg.owners]
    plan = make_plan(metas, fragmentation=cfg.fragmentation, mechanism=cfg.mechanism, k=cfg.k, epsilon=cfg.epsilon,
                     epsilon_split=cfg.epsilon_split, keep_id=cfg.keep_id, options=cfg.options)
    return plan, owner_context(cfg, "a", schema=schema)


@pytest.mark.parametrize("name", NAMES)
def test_an_owners_rounds_are_numbered_draw_apart_and_spend_its_epsilon_exactly(tmp_path, name):
    jobs = kind_jobs(name)
    plan, ctx = _plan_and_owner(tmp_path, name)
    rounds = list(jobs.rounds(ctx, plan))
    assert [r.number for r in rounds] == list(range(1, jobs.rounds_per_owner + 1))
    assert len({r.step for r in rounds}) == len(rounds) and all(r.step for r in rounds)
    spends = [r.spend for r in rounds if r.spend is not None]  # None: a round that draws no noise (a key round)
    assert spends
    assert len({s.ledger_plan_id for s in spends}) == len(spends)  # each spend recorded once in the ledger
    eps_j = Fraction(plan.owner("a").epsilon)
    assert eps_j == Fraction(3, 2)  # horizontal: every owner the full ε
    assert sum((s.epsilon for s in spends), Fraction(0)) == eps_j
    for s in spends:
        assert s.dataset == plan.dataset and s.epsilon > 0
        assert s.room_for >= s.epsilon  # the room checked first covers the round's own spend
    assert all(r.label and r.doing for r in rounds)
    assert spends[0].room_for == eps_j  # room for the whole ε_j before the first round spends


@pytest.mark.parametrize("name", NAMES)
def test_a_kind_without_a_risk_check_holds_no_record_out(tmp_path, name):
    """The metadata step's hold-out (KindJobs.held_out): nothing held out unless the kind's own option asks."""
    _, ctx = _plan_and_owner(tmp_path, name)
    assert ctx.config.risk_check is None
    assert kind_jobs(name).held_out(ctx, None, b"k" * 32) is None  # decided from the configuration: no data read
