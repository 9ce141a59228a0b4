"""Every sensitivity formula against brute force on small random data (docs/specification.md §2)."""
import numpy as np
import pytest

from fragrelease.idpir.microaggregation import cluster_bounds, ir_centroids, ir_clusters
from fragrelease.idpir.sensitivity import (
    dp_ir_sensitivity,
    idp_ir_sensitivity,
    idp_ir_sensitivity_from_clusters,
    idp_ir_sensitivity_from_extremes,
)


def centroid_vector(x, k):
    return ir_centroids(x, ir_clusters(x, k))


def brute_force_ls(x, k, lo, hi):
    """Max L1 change of the centroid vector over every substitution of one value by a candidate."""
    c0 = np.sort(centroid_vector(x, k))
    best = 0.0
    candidates = np.concatenate([[lo, hi], x, np.clip(x + 0.5, lo, hi), np.clip(x - 0.5, lo, hi)])
    for i in range(len(x)):
        for v in candidates:
            y = x.copy()
            y[i] = v
            best = max(best, np.abs(np.sort(centroid_vector(y, k)) - c0).sum())
    return best


def test_local_sensitivity_matches_brute_force():
    rng = np.random.default_rng(1)  # test data only
    for _ in range(120):
        n = int(rng.integers(2, 30))
        k = int(rng.integers(1, min(8, n) + 1))
        lo, hi = 0.0, 100.0
        x = np.round(rng.uniform(10, 80, n))
        ls = idp_ir_sensitivity(x, k, lo, hi)
        assert ls == pytest.approx(brute_force_ls(x, k, lo, hi), abs=1e-9), (n, k, x)
        assert ls <= dp_ir_sensitivity(lo, hi, k) + 1e-12


def test_telescoped_form_equals_cluster_sum_form():
    rng = np.random.default_rng(2)
    for _ in range(200):
        n = int(rng.integers(1, 60))
        k = int(rng.integers(1, n + 1))
        x = np.sort(rng.uniform(0, 10, n))
        b = cluster_bounds(n, k)
        mins = [x[a] for a, _ in b]
        maxs = [x[e - 1] for _, e in b]
        sizes = [e - a for a, e in b]
        full = idp_ir_sensitivity_from_clusters(mins, maxs, sizes, -1.0, 11.0)
        assert idp_ir_sensitivity(x, k, -1.0, 11.0) == pytest.approx(full, rel=1e-12)


def test_extremes_single_cluster():
    assert idp_ir_sensitivity_from_extremes(2.0, 2.0, 0.0, 5.0, 3, 4, 1, 0.0, 10.0) == max((10 - 2) / 4, 5 / 4)


def test_dp_ir_sensitivity_is_range_over_k():
    assert dp_ir_sensitivity(0, 100, 50) == 2.0
    assert dp_ir_sensitivity(1, 99, 1) == 98.0
