"""Audit of the synthetic kind's message protocol with the production samplers (issues 49, 51).

Every audit here draws its shares from the OS CSPRNG, so no outcome is fixed; each assertion's
false-failure probability is stated, and their sum is below 1e-5.
Spread of the lower bound (the same code with seeded shares of the same law, ε = 1, 10,000 runs a
side, seeds 0..199, issue 51): honest mean 0.745, sd 0.022, range 0.690..0.794; twice mean 1.418, sd
0.052, smallest 1.295; broken-share mean 2.287, sd 0.055, smallest 2.162.
"""
from fractions import Fraction

import numpy as np
import pytest
from fit import same_law

from fragrelease.errors import InvalidParameterError
from fragrelease.experiments.audit import epsilon_bounds
from fragrelease.experiments.audit_protocol import (
    audit_protocol,
    case_cliques,
    main,
    pair_loss,
    protocol_case,
    protocol_statistic,
    replay_run,
    statistic_max,
)

RUNS = 10_000  # per side, batched path
REPLAY_RUNS = 1_000  # per side, the message path (8-20 ms a run)


class ZeroWords:
    """A share source of zero words only: every share is 0 (X = Y = 0), so the sums are the exact counts."""

    def words(self, count):
        return np.zeros(count, np.uint64)


def test_the_twice_variant_is_flagged():
    # True loss on this pair ε₁ + ε_sel + 2ε₂ = 1.94. False failure: the bound's spread above puts 1.0
    # (1.418 - 1.0) / 0.052 = 8.0 sd below its mean, below 1e-14 under a normal tail.
    r = audit_protocol("twice", runs=RUNS)
    assert r.pair_loss == pytest.approx(1.94, abs=1e-9)
    assert r.epsilon_lower_bound > 1.0


def test_the_honest_protocol_stays_within_epsilon_and_the_audit_sees_its_loss():
    # ≤ ε fails with probability ≤ alpha = 1e-6 (the audit's guarantee for an ε-DP protocol); the floor
    # 0.5 is 11 sd below the mean (0.745, sd 0.022): an audit that cannot lift its bound fails it.
    r = audit_protocol("honest", runs=RUNS)
    assert r.pair_loss == pytest.approx(1.0, abs=1e-9) and r.pair_loss <= 1.0
    assert 0.5 <= r.epsilon_lower_bound <= 1.0


def test_a_share_calibrated_for_every_owner_is_flagged_when_owners_collude():
    # Shares drawn for m = 3 owners while b and c collude: owner a's share carries a third of one noise.
    # Its bound's mean 2.287 (sd 0.055) is 23 sd above 1.
    r = audit_protocol("broken-share", runs=RUNS)
    assert r.pair_loss > 2.0
    assert r.epsilon_lower_bound > 1.0


@pytest.mark.parametrize("variant", ["honest", "twice"])
def test_without_noise_both_paths_reach_the_ends_of_the_statistics_range(variant):
    # T is the log-likelihood ratio of every decoded cell of the coalition's view (round 3 twice when measured
    # twice): on the exact counts it is +T_max on D and -T_max on D', by either path.
    case = protocol_case()
    t_max = statistic_max(case, variant)
    times = 2 if variant == "twice" else 1
    assert t_max == pytest.approx(0.05 + 0.01 + 0.94 * times, abs=1e-6)  # ε₁ + ε_sel + ε₂ per copy, tight
    assert t_max <= 1.0 + 0.94 * (times - 1)  # α rounded up: never more than the budget
    for side, sign in (("d", 1), ("n", -1)):
        for path in ("replay", "batched"):
            t = protocol_statistic(case, side, 3, path=path, source=ZeroWords(), variant=variant)
            assert t == pytest.approx(np.full(3, sign * t_max), abs=1e-9)


def test_a_replay_holds_the_coalitions_view_of_every_decoded_round():
    # Without noise the coalition's view (the decoded sums minus owners b's and c's vectors) is owner a's counts.
    case = protocol_case()
    view = replay_run(case, "d", source=ZeroWords(), variant="twice")
    assert [number for number, _ in view] == [2, 3, 3]
    assert tuple(view[1][1]) == case_cliques(case) == (("x", "y"),)
    assert set(view[0][1]) == {("x",), ("y",), ("x", "y")}
    for _, sums in view:
        for c, z in sums.items():
            assert np.array_equal(z, case.counts["d"][0][c].ravel())


def test_the_broken_share_loses_more_than_epsilon_on_this_pair():
    # The numerical loss of a share NB(1/3, α) − NB(1/3, α) alone (module docstring of fragrelease.rng.polya):
    # far above ε, mostly from the cells next to the exact counts.
    assert pair_loss(protocol_case(), "broken-share") > 2.0


@pytest.mark.slow  # 13-42 s (machine idle to loaded): 2,000 replays of three owners' masked messages with the OS CSPRNG's shares
def test_the_message_path_stays_within_epsilon_and_has_the_batched_law():
    # The replay (keys, every owner's masked rounds, their checks, the decoding, the structure from the sums;
    # production shares) is audited itself: bound ≤ ε, false failure ≤ 1e-6. Its statistic has the batched
    # path's law on both sides (two-sample KS at 1e-6 each; conservative for T's atoms), so the batched audits
    # above audit the same view of the same messages.
    case = protocol_case()
    t = {side: protocol_statistic(case, side, REPLAY_RUNS, path="replay") for side in ("d", "n")}
    t_max = statistic_max(case)
    lower, _ = epsilon_bounds(t["d"], t["n"], np.linspace(-t_max, t_max, 41), 1e-6)
    assert 0.0 <= lower <= 1.0
    for side in ("d", "n"):
        assert same_law(t[side], protocol_statistic(case, side, REPLAY_RUNS, path="batched"))


def test_bad_requests_are_refused(capsys):
    with pytest.raises(InvalidParameterError, match="at least 1000 runs"):
        audit_protocol("honest", runs=999)
    with pytest.raises(InvalidParameterError, match="variant must be one of"):
        audit_protocol("half-noise", runs=1000)
    with pytest.raises(InvalidParameterError, match=r"synthesis_collusion must lie in \[0, 2\]"):
        protocol_case(collusion=3)
    assert main(["--variant", "honest", "--runs", "10"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_the_cli_prints_one_line(capsys):
    assert main(["--variant", "broken-share", "--runs", "1000", "--epsilon", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "variant=broken-share" in out and "epsilon=2" in out


def test_the_budget_split_gives_round_three_most_of_epsilon():
    spec = protocol_case(Fraction(1)).spec
    assert spec.round_epsilon(3) == Fraction(94, 100) and spec.round_epsilon(2) == Fraction(6, 100)
    assert (spec.owners, spec.collusion, spec.parts) == (3, 2, 1)
