"""Isotonic post-processing of the noisy centroids (docs/specification.md §9)."""
import itertools

import numpy as np
import pytest
from noise_injection import HashedLaplace, ZeroNoise
from scipy.optimize import minimize

from fragrelease.errors import InvalidParameterError
from fragrelease.idpir.mechanisms import protect_attribute
from fragrelease.idpir.postprocess import check_postprocess, finish_centroids, isotonic_projection
from fragrelease.idpir.stage import AttributeTask
from fragrelease.protocol.options import ReleaseOptions


def test_projection_is_non_decreasing_and_within_the_domain():
    rng = np.random.default_rng(1)
    for _ in range(200):
        c = int(rng.integers(1, 30))
        y = rng.normal(50, 40, c)
        w = rng.integers(1, 9, c).astype(float)
        z = isotonic_projection(y, w, 0.0, 100.0)
        assert np.all(np.diff(z) >= -1e-12) and z.min() >= 0.0 and z.max() <= 100.0


def test_projection_equals_brute_force_weighted_least_squares():
    """Against a constrained optimizer on small vectors (z_1 <= ... <= z_c, lo <= z <= hi)."""
    rng = np.random.default_rng(2)
    for _ in range(40):
        c = int(rng.integers(2, 7))
        y = rng.normal(5, 6, c)
        w = rng.integers(1, 5, c).astype(float)
        lo, hi = 0.0, 10.0
        cons = [{"type": "ineq", "fun": (lambda z, i=i: z[i + 1] - z[i])} for i in range(c - 1)]
        best = minimize(lambda z, w=w, y=y: float(np.sum(w * (z - y) ** 2)), np.clip(np.sort(y), lo, hi), method="SLSQP",
                        bounds=[(lo, hi)] * c, constraints=cons, options={"ftol": 1e-12, "maxiter": 500})
        z = isotonic_projection(y, w, lo, hi)
        assert np.sum(w * (z - y) ** 2) <= best.fun + 1e-6
        np.testing.assert_allclose(z, best.x, atol=1e-4)


def test_projection_of_an_ordered_vector_in_the_domain_is_itself():
    y = np.array([1.0, 2.0, 2.0, 7.5])
    assert np.array_equal(isotonic_projection(y, np.ones(4), 0.0, 10.0), y)


def test_zero_noise_gives_the_exact_centroids():
    rng = np.random.default_rng(4)
    x = rng.integers(0, 100, 503).astype(float)
    plain = protect_attribute(x, AttributeTask("a", 0, 100, categorical=False, epsilon=1),
                              k=20, mechanism="idp-ir", noise=ZeroNoise(),
                              options=ReleaseOptions.of(postprocess="none"))
    iso = protect_attribute(x, AttributeTask("a", 0, 100, categorical=False, epsilon=1),
                            k=20, mechanism="idp-ir", noise=ZeroNoise(),
                            options=ReleaseOptions.of(postprocess="isotonic"))
    assert np.array_equal(plain, iso)


def test_categorical_ranks_are_projected_then_rounded():
    z = finish_centroids(np.array([3.4, 1.2, 2.2]), np.array([5, 5, 6]), 1.0, 4.0, True,
                         ReleaseOptions.of(postprocess="isotonic"))
    assert z.tolist() == [2.0, 2.0, 2.0]  # block mean (5·3.4 + 5·1.2 + 6·2.2)/16 = 2.26 → 2


def test_isotonic_reduces_error_on_average():
    """Projection onto a convex set containing the truth never increases the L2 error (weighted)."""
    rng = np.random.default_rng(5)
    x = np.sort(rng.integers(0, 100, 2000).astype(float))
    for salt in range(5):
        noise = HashedLaplace(salt=str(salt))
        a = protect_attribute(x, AttributeTask("a", 0, 100, categorical=False, epsilon=0.2),
                              k=10, mechanism="idp-ir", noise=noise, options=ReleaseOptions.of(postprocess="none"))
        b = protect_attribute(x, AttributeTask("a", 0, 100, categorical=False, epsilon=0.2),
                              k=10, mechanism="idp-ir", noise=noise, options=ReleaseOptions.of(postprocess="isotonic"))
        exact = protect_attribute(x, AttributeTask("a", 0, 100, categorical=False, epsilon=0.2),
                                  k=10, mechanism="idp-ir", noise=ZeroNoise(),
                                  options=ReleaseOptions.of(postprocess="none"))
        assert np.sum((b - exact) ** 2) <= np.sum((a - exact) ** 2) + 1e-9


@pytest.mark.parametrize("bad", ["Isotonic", "pava", ""])
def test_unknown_postprocess_is_refused_naming_it(bad):
    with pytest.raises(InvalidParameterError, match=repr(bad)):
        check_postprocess(bad)


def test_bad_shapes_and_sizes_are_refused():
    with pytest.raises(InvalidParameterError):
        isotonic_projection(np.ones(3), np.ones(2), 0, 1)
    with pytest.raises(InvalidParameterError, match="sizes must be > 0"):
        isotonic_projection(np.ones(2), np.array([1.0, 0.0]), 0, 1)


def test_all_orders_of_three_match_enumeration():
    # exhaustive check on a small grid: the projection is the best non-decreasing vector on a fine grid
    y = np.array([3.0, 1.0, 2.0])
    w = np.array([1.0, 2.0, 1.0])
    grid = np.linspace(0, 4, 81)
    best = min((float(np.sum(w * (np.array(z) - y) ** 2)), z)
               for z in itertools.combinations_with_replacement(grid, 3))
    z = isotonic_projection(y, w, 0.0, 4.0)
    assert np.sum(w * (z - y) ** 2) <= best[0] + 1e-12
