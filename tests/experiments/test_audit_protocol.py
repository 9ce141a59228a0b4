"""Audit of the synthetic kind's message protocol with the production samplers (issue 49 item 5).

Every audit here draws from the OS CSPRNG (OpenDP's Laplace and report-noisy-max), so no outcome is
fixed; each assertion's false-failure probability is stated, and their sum is below 1e-5.
Spread of the lower bound (the same code, numpy Laplace of the same law, ε = 1, 10,000 runs a side,
seeds 0..N-1): twice 500 audits mean 1.294, sd 0.057, smallest 1.163; half-noise 300 audits mean
1.558, sd 0.035, smallest 1.437; honest 300 audits mean 0.707, sd 0.026, range 0.623..0.775.
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
    protocol_case,
    protocol_statistic,
    replay_run,
    statistic_max,
)
from fragrelease.rng.diffgen import SeededDiffGenRandomness

RUNS = 10_000  # per side, batched path
REPLAY_RUNS = 1_000  # per side, the message path (about 11 ms a run)


class NoNoise:
    """A sampler that adds nothing: owner a's messages then hold its exact counts."""

    def perturb(self, values, scales, attributes, clusters):
        return np.asarray(values, dtype=float)


def test_the_twice_variant_is_flagged():
    # True loss on this pair ε₁ + 2ε₂ = 1.93. False failure: the bound's spread above puts 1.0 at
    # (1.294 - 1.0) / 0.057 = 5.2 sd below its mean, about 1e-7 under a normal tail.
    r = audit_protocol("twice", runs=RUNS)
    assert r.pair_loss == pytest.approx(1.93, abs=1e-3)
    assert r.epsilon_lower_bound > 1.0


def test_the_honest_protocol_stays_within_epsilon_and_the_audit_sees_its_loss():
    # ≤ ε fails with probability ≤ alpha = 1e-6 (the audit's guarantee for an ε-DP protocol); the floor
    # 0.5 is 8 sd below the mean (0.707, sd 0.026): an audit that cannot lift its bound fails it.
    r = audit_protocol("honest", runs=RUNS)
    assert r.pair_loss <= 1.0
    assert 0.5 <= r.epsilon_lower_bound <= 1.0


def test_too_little_noise_is_flagged():
    # Every scale halved: loss 2 (ε₁ + ε₂) = 1.98; the bound's mean 1.558 (sd 0.035) is 16 sd above 1.
    r = audit_protocol("half-noise", runs=RUNS)
    assert r.epsilon_lower_bound > 1.0


@pytest.mark.parametrize("times", [1, 2])
def test_without_noise_both_paths_reach_the_ends_of_the_statistics_range(times):
    # T is the log-likelihood ratio of every cell owner a sends (both copies of round two when measured twice):
    # on the exact counts it is +T_max on D and -T_max on D', by either path.
    case = protocol_case()
    t_max = statistic_max(case, times)
    assert t_max == pytest.approx(0.05 + 0.94 * times, abs=1e-6)  # ε₁ over both 1-ways + ε₂ per copy
    for side, sign in (("d", 1), ("n", -1)):
        for path in ("replay", "batched"):
            t = protocol_statistic(case, side, 3, path=path, randomness=SeededDiffGenRandomness(1), noise=NoNoise(),
                                   round_two_times=times)
            assert t == pytest.approx(np.full(3, sign * t_max), abs=1e-9)


def test_a_replay_holds_every_message_a_party_reads():
    case = protocol_case()
    view = replay_run(case, "d", randomness=SeededDiffGenRandomness(2), noise=NoNoise(), round_two_times=2)
    assert view.cliques == case_cliques(case) == (("x", "y"),)
    assert len(view.round_two) == 2 and set(view.round_one.one_way) == {"x", "y"}
    assert np.array_equal(view.round_two[0][("x", "y")], case.counts["d"][0][("x", "y")])


@pytest.mark.slow  # about 25 s: 2,000 replays of three owners' messages with OpenDP's samplers
def test_the_message_path_stays_within_epsilon_and_has_the_batched_law():
    # The replay (every owner's rounds, messages and checks, the vote, add_owners; production samplers) is
    # audited itself: bound ≤ ε, false failure ≤ 1e-6. Its statistic has the batched path's law on both sides
    # (two-sample KS at 1e-6 each; conservative for T's atoms), so the batched audits above audit the same
    # view of the same messages.
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
        audit_protocol("thrice", runs=1000)
    assert main(["--variant", "honest", "--runs", "10"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_the_cli_prints_one_line(capsys):
    assert main(["--variant", "half-noise", "--runs", "1000", "--epsilon", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "variant=half-noise" in out and "epsilon=2" in out


def test_the_budget_split_gives_round_two_most_of_epsilon():
    spec = protocol_case(Fraction(1)).spec
    assert spec.round_two_epsilon == Fraction(94, 100) and spec.round_one_epsilon == Fraction(6, 100)
