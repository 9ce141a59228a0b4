from fractions import Fraction

import pytest

from fragrelease.budget import (
    horizontal_budget,
    parse_epsilon,
    per_attribute_epsilon,
    split_epsilon_vertical,
    vertical_budget,
)
from fragrelease.errors import InvalidParameterError


def test_parse_epsilon_is_exact():
    assert parse_epsilon("0.1") == Fraction(1, 10)
    assert parse_epsilon(0.1) == Fraction(1, 10)
    assert parse_epsilon("1/3") == Fraction(1, 3)
    assert parse_epsilon(2) == 2


@pytest.mark.parametrize("bad", [0, -1, "0", "-0.5", "abc", float("nan"), float("inf"), True])
def test_parse_epsilon_refuses_non_positive(bad):
    with pytest.raises(InvalidParameterError, match="epsilon"):
        parse_epsilon(bad)


def test_vertical_equal_split_adds_up_exactly():
    split = split_epsilon_vertical(Fraction(1), {"a": 3, "b": 4, "c": 4}, "equal")
    assert split == {"a": Fraction(1, 3), "b": Fraction(1, 3), "c": Fraction(1, 3)}
    assert sum(split.values()) == 1


def test_vertical_by_attributes_gives_every_attribute_eps_over_l():
    split = split_epsilon_vertical(Fraction(1, 10), {"a": 3, "b": 4, "c": 4}, "by-attributes")
    assert sum(split.values()) == Fraction(1, 10)
    for owner, l_j in {"a": 3, "b": 4, "c": 4}.items():
        assert per_attribute_epsilon(split[owner], l_j) == Fraction(1, 110)


def test_vertical_budget_ten_owners_sums_to_total():
    budget = vertical_budget(Fraction(1, 100), {f"o{i}": [f"a{i}"] for i in range(10)}, "equal")
    assert budget.composition == "sequential"
    assert budget.spent() == Fraction(1, 100)
    assert all(s.epsilon == Fraction(1, 1000) for s in budget.steps)


def test_horizontal_budget_is_parallel():
    budget = horizontal_budget(Fraction(1, 2), ["x", "y", "z"], [f"a{i}" for i in range(10)])
    assert budget.composition == "parallel"
    assert budget.spent() == Fraction(1, 2)
    assert {s.epsilon for s in budget.steps} == {Fraction(1, 20)}


def test_split_refuses_unknown_rule():
    with pytest.raises(InvalidParameterError, match="'random'"):
        split_epsilon_vertical(Fraction(1), {"a": 1}, "random")
