"""Audits of what a release publishes: a categorical column's labels and a table's linked rows."""
from fractions import Fraction

import numpy as np
import pytest
from noise_injection import HashedLaplace

from fragrelease.experiments.audit import (
    audit_category_column,
    category_label_histograms,
    centroids_from_rank_counts,
)
from fragrelease.experiments.audit_tables import audit_table, distinct_rows, released_tables
from fragrelease.experiments.paper_order import data_frequency_order
from fragrelease.idpir.category_order import ranks_of
from fragrelease.idpir.mechanisms import protect_attribute
from fragrelease.idpir.microaggregation import ir_centroids, ir_clusters
from fragrelease.idpir.stage import AttributeTask
from fragrelease.protocol.options import ReleaseOptions
from fragrelease.rng.laplace import FastLaplace
from fragrelease.schemas.datasets import resolve_schema

ALPHA = 1e-6
CAT_RUNS = 10_000  # per side, plus 1,000 calibration runs per side
EPS_ATTR = Fraction(1, 10)


def neighbour(d, target):
    """D': one United-States record becomes ``target``."""
    d2 = dict(d)
    d2["United-States"] -= 1
    d2[target] += 1
    return d2


@pytest.fixture(scope="module")
def native_country(adult_pdf):
    """Adult native-country (El-Salvador = India = 147) and D': one United-States record becomes India."""
    cats = list(resolve_schema("adult").attribute("native-country").categories)
    vc = adult_pdf["native-country"].value_counts()
    d = {c: int(vc.get(c, 0)) for c in cats}
    assert d["El-Salvador"] == d["India"] == 147
    return cats, d, neighbour(d, "India")


def test_centroids_from_rank_counts_equal_the_ir_reference():
    gen = np.random.default_rng(3)
    for _ in range(300):
        m, k = int(gen.integers(1, 8)), int(gen.integers(1, 6))
        rc = gen.integers(0, 6, size=(4, m))
        target = max(int(rc.sum(axis=1).max()), k)
        rc[:, -1] += target - rc.sum(axis=1)
        cent, sizes = centroids_from_rank_counts(rc, k)
        for row, got in zip(rc, cent):
            v = np.repeat(np.arange(1.0, m + 1), row)
            cl = ir_clusters(v, k, np.arange(v.size))
            assert np.allclose(got, ir_centroids(v, cl))
            assert np.array_equal(np.bincount(cl), sizes)


@pytest.mark.parametrize("order", ["declared", "paper"])
def test_label_histograms_equal_the_release_reference(native_country, order):
    # same injected noise: the audit's vectorized column equals protect_attribute + the label map
    cats, d, _ = native_country
    order_fn = (lambda c: data_frequency_order(c, cats)) if order == "paper" else "declared"
    noise = HashedLaplace(salt=order)
    got = category_label_histograms(d, cats, k=50, epsilon_attribute=EPS_ATTR, mechanism="dp-ir",
                                    category_order=order_fn, runs=1, noise=noise)[0]
    rank_order = data_frequency_order(d, cats) if order == "paper" else tuple(cats)
    ranks = ranks_of(rank_order)
    values = np.repeat([float(ranks[c]) for c in cats], [d[c] for c in cats])
    out = protect_attribute(values, AttributeTask("a", 1.0, float(len(cats)), categorical=True, epsilon=EPS_ATTR),
                            k=50, mechanism="dp-ir", noise=noise, tiebreak=np.arange(values.size),
                            options=ReleaseOptions.of(postprocess="none"))  # the audit bounds the noisy vector; isotonic only post-processes it
    labels = [rank_order[int(r) - 1] for r in out]
    assert got.tolist() == [labels.count(c) for c in cats]


def test_audit_flags_the_papers_data_frequency_order(native_country):
    """The old ranking: one substitution swaps El-Salvador and India everywhere (issue 13, item 1)."""
    cats, d, d2 = native_country
    r = audit_category_column(d, d2, cats, k=50, epsilon_attribute=EPS_ATTR, mechanism="dp-ir",
                              category_order=lambda c: data_frequency_order(c, cats), runs=CAT_RUNS,
                              noise=FastLaplace(), statistic=("El-Salvador", "India"), alpha=ALPHA)
    print(f"data-frequency: lower={r.epsilon_lower_bound:.3f} point={r.epsilon_point_estimate:.3f}")
    assert r.epsilon_lower_bound > 5 * float(EPS_ATTR)


@pytest.mark.parametrize("target", ["India", "El-Salvador"])
@pytest.mark.parametrize("order", ["dp-frequency", "declared"])
def test_private_category_orders_stay_within_epsilon(native_country, order, target):
    # both neighbours: whichever tie-break an exact order used, one of them would swap the two labels
    cats, d, _ = native_country
    d2 = neighbour(d, target)
    r = audit_category_column(d, d2, cats, k=50, epsilon_attribute=EPS_ATTR, mechanism="dp-ir",
                              category_order=order, share=Fraction(1, 10), runs=CAT_RUNS, noise=FastLaplace(),
                              statistic=("El-Salvador", "India"), alpha=ALPHA)
    print(f"{order}, US -> {target}: lower={r.epsilon_lower_bound:.3f} point={r.epsilon_point_estimate:.3f}")
    assert r.epsilon_lower_bound <= float(EPS_ATTR)


# The six-record example (issue 13, item 2): k = 3, DP-IR, ε_attr = 1/2 on each of two attributes.
SIX = np.array([[10.0 * i, 10.0 * i] for i in range(1, 7)])
SIX_N = SIX.copy()
SIX_N[0] = [10.0, 60.0]
TABLE = dict(k=3, lo=[10.0, 10.0], hi=[60.0, 60.0], epsilon_attribute=Fraction(1, 2), mechanism="dp-ir")


def test_linked_rows_of_d_never_show_more_than_two_tuples():
    t_d = distinct_rows(released_tables(SIX, runs=2000, noise=FastLaplace(), linkage="linked", **TABLE))
    t_n = distinct_rows(released_tables(SIX_N, runs=2000, noise=FastLaplace(), linkage="linked", **TABLE))
    assert t_d.max() <= 2          # multiplicities (3,3) or (6)
    assert (t_n == 4).mean() > 0.5  # (1,1,2,2): impossible under D


@pytest.mark.parametrize("linkage", ["linked", "unlinked"])
def test_table_audit_flags_linked_rows_not_unlinked_ones(linkage):
    r = audit_table(SIX, SIX_N, runs=5000, noise=FastLaplace(), linkage=linkage, alpha=ALPHA, **TABLE)
    print(f"{linkage}: lower={r.epsilon_lower_bound:.3f} point={r.epsilon_point_estimate:.3f}")
    assert r.epsilon == 1.0  # the sum over attributes
    if linkage == "linked":
        assert r.epsilon_lower_bound > 3.0
    else:
        assert r.epsilon_lower_bound <= 1.0
