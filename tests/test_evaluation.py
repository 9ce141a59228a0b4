"""The evaluation shortcut (prefix sums, per-cluster errors) equals the release mechanism + MeanSSE."""
from fractions import Fraction

import numpy as np
import pytest

from fragrelease.evaluation import AttributeSpec, Scenario, SortedAttribute, run_once
from fragrelease.mechanisms import frequency_ranks, protect_attribute
from fragrelease.metrics import mean_sse
from fragrelease.rng import FastLaplace
from fragrelease.schemas.adult import SCHEMA as ADULT
from noise_injection import HashedLaplace

SPECS = [AttributeSpec.from_attribute(a) for a in ADULT.protected]


@pytest.fixture(scope="module")
def sample(adult_pdf):
    pdf = adult_pdf.sample(1_200, random_state=4).reset_index(drop=True)
    data = {s.name: pdf[s.name].to_numpy(object if s.categorical else float) for s in SPECS}
    return data, pdf["record_id"].to_numpy()


def reference_mean_sse(data, ids, mechanism, k, eps_attr, noise, convention):
    protected, original, cat = {}, {}, {}
    for s in SPECS:
        if s.categorical:
            ranks = frequency_ranks(data[s.name], list(s.categories))
            vals = np.array([ranks[v] for v in data[s.name]], float)
        else:
            vals = data[s.name].astype(float)
        protected[s.name] = protect_attribute(vals, k=k, lo=s.lo, hi=s.hi, epsilon_attribute=eps_attr, mechanism=mechanism,
                                              noise=noise, attribute=s.name, tiebreak=ids, categorical=s.categorical)
        original[s.name] = vals if s.categorical else data[s.name].astype(float)
        cat[s.name] = s.categorical
    return mean_sse(original, protected, cat, convention)


@pytest.mark.parametrize("mechanism,k", [("idp-ir", 25), ("dp-ir", 40), ("idp", 1), ("idp-ir", 7)])
@pytest.mark.parametrize("convention", ["authors", "paper"])
def test_run_once_equals_mechanism_plus_metric(sample, mechanism, k, convention):
    data, ids = sample
    noise = HashedLaplace(salt=f"{mechanism}{k}")
    got = run_once(data, ids, SPECS, Scenario("centralized"), mechanisms=[mechanism], epsilons=["1"], ks=[k],
                   noise=noise, convention=convention)
    assert len(got) == 1
    want = reference_mean_sse(data, ids, mechanism, k, Fraction(1, 10), noise, convention)
    assert got[0]["mean_sse"] == pytest.approx(want, rel=1e-9)


def test_squared_error_of_exact_centroids_is_within_cluster_ss():
    x = np.array([1.0, 2.0, 3.0, 10.0, 11.0, 30.0])
    attr = SortedAttribute(x, np.arange(6), AttributeSpec("a", 0, 100, False))
    z = attr.centroids(3)
    assert z.tolist() == [2.0, 17.0]
    assert attr.squared_error(3, z) == pytest.approx(2.0 + (49 + 36 + 169))


def test_vertical_by_attributes_matches_centralized_budget(sample):
    data, ids = sample
    groups = (tuple(s.name for s in SPECS[:3]), tuple(s.name for s in SPECS[3:]))
    noise = HashedLaplace(salt="v")
    central = run_once(data, ids, SPECS, Scenario("centralized"), mechanisms=["idp-ir"], epsilons=["0.5"], ks=[20],
                       noise=noise)
    by_attr = run_once(data, ids, SPECS, Scenario("vertical", owner_attributes=groups, split="by-attributes"),
                       mechanisms=["idp-ir"], epsilons=["0.5"], ks=[20], noise=noise)
    equal = run_once(data, ids, SPECS, Scenario("vertical", owner_attributes=groups, split="equal"),
                     mechanisms=["idp-ir"], epsilons=["0.5"], ks=[20], noise=noise)
    assert by_attr[0]["mean_sse"] == pytest.approx(central[0]["mean_sse"], rel=1e-12)
    assert equal[0]["mean_sse"] != pytest.approx(central[0]["mean_sse"], rel=1e-6)


def test_horizontal_trends_with_fast_sampler(sample):
    """Fixed sample sizes and thresholds: MeanSSE falls with ε; iDP-IR <= DP-IR on average."""
    data, ids = sample
    scen = Scenario("horizontal", owner_rows=(400, 500, 300))
    rows = []
    for _ in range(10):
        rows += run_once(data, ids, SPECS, scen, mechanisms=["idp-ir", "dp-ir"], epsilons=["0.1", "1"], ks=[20],
                         noise=FastLaplace())
    mean = {}
    for r in rows:
        mean.setdefault((r["mechanism"], r["epsilon"]), []).append(r["mean_sse"])
    mean = {key: np.mean(v) for key, v in mean.items()}
    assert mean[("idp-ir", "1")] < mean[("idp-ir", "0.1")]
    assert mean[("idp-ir", "1")] <= mean[("dp-ir", "1")] * 1.05
