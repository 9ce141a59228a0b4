"""Property-based tests (hypothesis) of the mechanisms' invariants."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fragrelease.idpir.mechanisms import protect_attribute
from fragrelease.idpir.microaggregation import cluster_bounds, ir_clusters
from fragrelease.idpir.sensitivity import dp_ir_sensitivity, idp_ir_sensitivity
from fragrelease.idpir.stage import AttributeTask
from fragrelease.rng.laplace import SecureLaplace

NOISE = SecureLaplace()


@st.composite
def attribute(draw):
    lo = draw(st.floats(-1e4, 1e4, allow_nan=False))
    hi = lo + draw(st.floats(1e-3, 1e4, allow_nan=False))
    n = draw(st.integers(1, 60))
    values = draw(st.lists(st.floats(lo, hi, allow_nan=False), min_size=n, max_size=n))
    k = draw(st.integers(1, n))
    return np.array(values), k, lo, hi


@settings(max_examples=60, deadline=None)
@given(attribute(), st.sampled_from(["idp-ir", "dp-ir", "idp"]), st.floats(0.01, 10))
def test_output_in_domain_one_value_per_cluster(attr, mechanism, eps):
    x, k, lo, hi = attr
    ids = np.arange(len(x))
    out = protect_attribute(x, AttributeTask("a", lo, hi, categorical=False, epsilon=eps),
                            k=k, mechanism=mechanism, noise=NOISE, tiebreak=ids)
    assert out.shape == x.shape
    assert np.all(out >= lo) and np.all(out <= hi)
    clusters = ir_clusters(x, 1 if mechanism == "idp" else k, ids)
    for c in np.unique(clusters):
        assert len(np.unique(out[clusters == c])) == 1


@settings(max_examples=100, deadline=None)
@given(attribute())
def test_local_sensitivity_never_exceeds_global(attr):
    x, k, lo, hi = attr
    assert idp_ir_sensitivity(x, k, lo, hi) <= dp_ir_sensitivity(lo, hi, k) * (1 + 1e-9) + 1e-9


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 500), st.integers(1, 500))
def test_clusters_partition_the_ranks(n, k):
    if k > n:
        return
    b = cluster_bounds(n, k)
    assert b[0][0] == 0 and b[-1][1] == n
    assert all(e == s2 for (_, e), (s2, _) in zip(b, b[1:], strict=False))
    assert all(e - s == k for s, e in b[:-1]) and k <= b[-1][1] - b[-1][0] < 2 * k or len(b) == 1
