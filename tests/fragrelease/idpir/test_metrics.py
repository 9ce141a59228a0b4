import numpy as np
import pytest

from fragrelease.errors import InvalidParameterError
from fragrelease.idpir.metrics import mean_sse


def test_mean_sse_hand_computed_authors_convention():
    # numeric a: original [1, 3] (s = sqrt(2)), protected [2, 3] -> (1/sqrt2)^2 = 0.5, 0
    # categorical b: [x, y] vs [x, z] -> 0, (1/0.5)^2 = 4
    orig = {"a": np.array([1.0, 3.0]), "b": np.array(["x", "y"], dtype=object)}
    prot = {"a": np.array([2.0, 3.0]), "b": np.array(["x", "z"], dtype=object)}
    cat = {"a": False, "b": True}
    # record 1: (0.5 + 0)/2 = 0.25; record 2: (0 + 4)/2 = 2 -> mean 1.125
    assert mean_sse(orig, prot, cat) == pytest.approx(1.125)


def test_mean_sse_paper_convention():
    # divide by the variance (2 and 0.25), 1/l outside the root: dist^2 = (1/l^2) * sum
    orig = {"a": np.array([1.0, 3.0]), "b": np.array(["x", "y"], dtype=object)}
    prot = {"a": np.array([2.0, 3.0]), "b": np.array(["x", "z"], dtype=object)}
    cat = {"a": False, "b": True}
    # record 1: (1/2)^2 / 4 = 0.0625; record 2: (1/0.25)^2 / 4 = 4 -> mean 2.03125
    assert mean_sse(orig, prot, cat, "paper") == pytest.approx(2.03125)


def test_mean_sse_zero_when_equal_and_errors():
    orig = {"a": np.array([1.0, 2.0, 4.0])}
    assert mean_sse(orig, orig, {"a": False}) == 0.0
    with pytest.raises(InvalidParameterError, match="zero spread"):
        mean_sse({"a": np.array([1.0, 1.0])}, {"a": np.array([1.0, 2.0])}, {"a": False})
    with pytest.raises(InvalidParameterError, match="'median'"):
        mean_sse(orig, orig, {"a": False}, "median")
