"""The local driver runs the owners' steps of a phase at the same time (issue 41, session 5).

:func:`fragrelease.jobs.idpir.release.play_release`: one thread per owner, one SparkSession; step
numbers in configuration order; every owner's checks before any owner's spend; a failing owner's
step gives exactly the error of a run that plays the owners one after another, once every owner's
step of that phase has ended.
"""
import threading
from fractions import Fraction

import pytest
import yaml
from noise_injection import HashedLaplace
from signing_keys import with_keys  # tests/helpers: the owners sign their manifests

from fragrelease.errors import BudgetExceededError, StorageError
from fragrelease.idpir.config import config_from_dict
from fragrelease.jobs.idpir import owner, release
from fragrelease.jobs.idpir.ledger import spent
from fragrelease.jobs.idpir.release import run_local_release

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


def _one_after_another(monkeypatch):
    """Play the owners of each phase one after another in the calling thread, as before (the reference)."""
    together = release._owners_together
    monkeypatch.setattr(release, "_owners_together",
                        lambda *args, **kwargs: together(*args, **{**kwargs, "at_once": False}))


def _owner_threads():
    return [t for t in threading.enumerate() if t.name.startswith("fragrelease-owner")]


class Events:
    def __init__(self):
        self.events = []

    def __call__(self, event):
        self.events.append((event, threading.current_thread().name))


def test_the_owners_steps_overlap_and_are_numbered_in_configuration_order(spark, tmp_path, monkeypatch):
    """Each owner's metadata and protection step waits inside the step for the other owner's: played one
    after another, the wait would time out (BrokenBarrierError); together, both are inside at once."""
    met = {"metadata": threading.Barrier(2, timeout=60), "protect": threading.Barrier(2, timeout=60)}
    describe, protect = owner.describe_fragment, owner.protect_and_write

    inherited = []

    def describe_together(spark_, ctx):
        inherited.append(spark_.sparkContext.getLocalProperty("fragrelease.test.caller"))
        met["metadata"].wait()
        return describe(spark_, ctx)

    def protect_together(spark_, ctx, **kwargs):
        met["protect"].wait()
        return protect(spark_, ctx, **kwargs)

    monkeypatch.setattr(owner, "describe_fragment", describe_together)
    monkeypatch.setattr(owner, "protect_and_write", protect_together)
    events = Events()
    spark.sparkContext.setLocalProperty("fragrelease.test.caller", "the caller's")  # e.g. a notebook's job group
    try:
        result = run_local_release(spark, _config(tmp_path), progress=events)
    finally:
        spark.sparkContext.setLocalProperty("fragrelease.test.caller", None)
    assert result.rows == 240 and result.mean_sse is not None
    assert inherited == ["the caller's", "the caller's"]  # the owners' threads run with the caller's properties
    got = [(e.step, e.total, e.owner, e.status) for e, _ in events.events]
    # every step once started and once done, numbered in configuration order (owners a then b)
    expected = {(1, "a"), (2, "b"), (3, None), (4, "a"), (5, "b"), (6, None), (7, None)}
    assert {(s, o) for s, _, o, st in got if st == "started"} == expected
    assert {(s, o) for s, _, o, st in got if st == "done"} == expected
    assert len(got) == 14 and {t for _, t, _, _ in got} == {7}
    for s, _ in expected:  # a step's start before its end
        assert [st for n, _, _, st in got if n == s] == ["started", "done"]
    # the owners' steps ran in the owners' threads, the others in the caller's; both owners of a
    # phase started before either ended
    threads = {(e.step, e.status): t for e, t in events.events}
    assert all(threads[(s, st)].startswith("fragrelease-owner") for s in (1, 2, 4, 5) for st in ("started", "done"))
    assert threads[(3, "started")] == threading.current_thread().name
    order = [(e.step, e.status) for e, _ in events.events]
    for a, b in ((1, 2), (4, 5)):
        assert max(order.index((a, "started")), order.index((b, "started"))) < \
            min(order.index((a, "done")), order.index((b, "done")))
    assert not _owner_threads()


def test_the_release_equals_the_one_played_owner_after_owner(spark, tmp_path, monkeypatch):
    """Seeded noise (a function of attribute and cluster): the same released values, MeanSSE, manifest
    terms and ledger spends as the same release with the owners played one after another."""
    def play(folder, sequential):
        folder.mkdir()
        with monkeypatch.context() as m:
            if sequential:
                _one_after_another(m)
            result = run_local_release(spark, _config(folder, lifetimes={"a": "3", "b": "3"}),
                                       noise=HashedLaplace(salt="at-once"))
        rows = spark.read.format("delta").load(result.path).drop("pseudonym").toPandas()
        rows = sorted(map(tuple, rows[sorted(rows.columns)].itertuples(index=False)))
        terms = [{k: v for k, v in o.manifest.model_dump(mode="json").items()
                  if k in ("owner", "n_records", "epsilon", "k", "mechanism", "attributes")} for o in result.owners]
        ledgers = {n: spent(str(folder / "ledgers" / n), n, "clinic") for n in OWNERS}
        return rows, result.mean_sse, terms, ledgers, result.rows

    together = play(tmp_path / "together", sequential=False)
    alone = play(tmp_path / "alone", sequential=True)
    assert together == alone
    assert together[3] == {"a": [Fraction(1)], "b": [Fraction(1)]} and together[4] == 240


@pytest.mark.parametrize("failing", OWNERS)
def test_a_failed_owner_step_raises_the_sequential_error_after_the_phase_ended(spark, tmp_path, monkeypatch, failing):
    """A failure after the checks (here: the draw's storage) in owner ``failing``: the run raises exactly
    the error the owner-after-owner run raises, once the other owner's step has ended; no owner thread
    and no Spark job is left running; the other owner spent and published (the budget consequence)."""
    spend = owner.spend_and_release

    def failing_draw(spark_, df, attrs, spec, **kwargs):
        if spec.owner == failing:
            spend(spark_, df, attrs, spec, **kwargs)  # spent, then the storage fails
            raise StorageError(f"owner {failing!r}: disk full while drawing")
        return spend(spark_, df, attrs, spec, **kwargs)

    monkeypatch.setattr(owner, "spend_and_release", failing_draw)
    errors = {}
    for how in ("alone", "together"):
        folder = tmp_path / how
        folder.mkdir()
        events = Events()
        with monkeypatch.context() as m:
            if how == "alone":
                _one_after_another(m)
            with pytest.raises(StorageError) as e:
                run_local_release(spark, _config(folder, lifetimes={"a": "3", "b": "3"}), progress=events)
        errors[how] = (type(e.value), str(e.value))
        ended = {(ev.owner, ev.status) for ev, _ in events.events if ev.step in (4, 5)}
        if how == "together":
            other = "b" if failing == "a" else "a"
            assert ended == {(failing, "started"), (failing, "failed"), (other, "started"), (other, "done")}
            assert spent(str(folder / "ledgers" / other), other, "clinic") == [Fraction(1)]
            assert (folder / "work" / "owners" / other / "manifest.json").exists()
        assert spent(str(folder / "ledgers" / failing), failing, "clinic") == [Fraction(1)]
        assert not _owner_threads()
        assert list(spark.sparkContext.statusTracker().getActiveJobsIds()) == []
    assert errors["together"] == errors["alone"] == (StorageError, f"owner {failing!r}: disk full while drawing")
    # what the failed run left (the other owner's spend and published fragment) does not stop a rerun
    monkeypatch.setattr(owner, "spend_and_release", spend)
    result = run_local_release(spark, _config(tmp_path / "together", lifetimes={"a": "3", "b": "3"}))
    assert result.rows == 240
    assert {n: spent(str(tmp_path / "together" / "ledgers" / n), n, "clinic") for n in OWNERS} == {
        "a": [Fraction(1), Fraction(1)], "b": [Fraction(1), Fraction(1)]}


@pytest.mark.parametrize("poor", OWNERS)
def test_an_owner_without_budget_stops_the_phase_before_any_owner_spends(spark, tmp_path, poor):
    """Every owner's checks before any owner's spend: an owner whose ledger has no room fails with the
    sequential run's message, and the other owner spends nothing (played one after another, owner a
    had spent when owner b was refused)."""
    lifetimes = {n: "1/2" if n == poor else "3" for n in OWNERS}
    events = Events()
    with pytest.raises(BudgetExceededError) as e:
        run_local_release(spark, _config(tmp_path, lifetimes=lifetimes), progress=events)
    assert str(e.value) == (f"owner {poor!r} has spent ε = 0 of its lifetime budget 1/2 on dataset 'clinic'; "
                            "a release with ε = 1 would exceed it")
    assert {n: spent(str(tmp_path / "ledgers" / n), n, "clinic") for n in OWNERS} == {"a": [], "b": []}
    assert {(ev.owner, ev.status) for ev, _ in events.events if ev.step in (4, 5)} == {
        ("a", "started"), ("a", "failed"), ("b", "started"), ("b", "failed")}
    assert not (tmp_path / "work" / "owners" / "a" / "manifest.json").exists()
    assert not (tmp_path / "work" / "owners" / "b" / "manifest.json").exists()
    assert not _owner_threads()


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


def test_reports_draw_on_one_plot_thread_one_drawing_at_a_time():
    """Two owners' reports at once: their drawings run on the process's one plot thread, one after the other."""
    import time

    from fragrelease.jobs.idpir import report

    busy, overlaps, names = threading.Lock(), [], []

    def draw():
        if not busy.acquire(blocking=False):
            overlaps.append(True)
            return
        try:
            names.append(threading.current_thread().name)
            time.sleep(0.05)
        finally:
            busy.release()

    futures = []
    start = threading.Barrier(4)

    def owner_report():
        start.wait()
        futures.append(report._in_background(draw))

    threads = [threading.Thread(target=owner_report) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for f in futures:
        f.result(30)
    assert not overlaps and len(names) == 4 and len(set(names)) == 1
    assert names[0].startswith("fragrelease-report-plots")


def test_the_ledgers_check_of_a_spend_raises_what_the_spend_raises_and_records_nothing(tmp_path):
    from fragrelease.errors import PlanAlreadySpentError
    from fragrelease.jobs.idpir.ledger import check_spend, record_spend

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
