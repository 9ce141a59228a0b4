"""COUNT-query estimators on hand-computed groups, and the floor (exact QI counts x the table's share)."""
import numpy as np
import pandas as pd
import pytest

from fragrelease.errors import InvalidParameterError
from fragrelease.experiments.workload import Groups, Queries, estimate_counts, floor_counts, hierarchy_order
from fragrelease.schemas.taxonomies import adult_quasi_identifiers

AGE, EDU = adult_quasi_identifiers(("age", "education"))
N_EDU = EDU.require_taxonomy().n_leaves


def _queries(age_lo, age_hi, leaves, s="x"):
    mask = np.zeros((1, N_EDU), dtype=bool)
    rank = np.empty(N_EDU, dtype=np.int64)
    rank[hierarchy_order(EDU)] = np.arange(N_EDU)
    pos = sorted(rank[EDU.require_taxonomy().node_id(leaf)] for leaf in leaves)
    assert pos == list(range(pos[0], pos[-1] + 1)), "a query is a run of leaves in hierarchy order"
    for leaf in leaves:
        mask[0, EDU.require_taxonomy().node_id(leaf)] = True
    return Queries({"age": (np.array([float(age_lo)]), np.array([float(age_hi)]))}, {"education": mask},
                   np.array([s], dtype=object), {"education": (np.array([pos[0]]), np.array([pos[-1]]))})


def _group(lo, hi, node, weights=(10.0,), values=("x",), avg=None, distinct=None):
    return Groups(np.array([list(weights)]), list(values), {"age": (np.array([float(lo)]), np.array([float(hi)]))},
                  {"education": np.array([EDU.require_taxonomy().node_id(node)])},
                  None if avg is None else {"age": np.array([float(avg)])},
                  None if distinct is None else {"education": np.array([float(distinct)])})


def test_range_20_40_and_query_30_50_gets_half_the_count():
    # ages 20..39 (the class's range [20, 40)), the query 30..49: 10 of the 20 integers
    g = _group(20, 39, "Masters", weights=(8.0,))
    assert estimate_counts(g, [AGE, EDU], _queries(30, 49, ["Masters"]))[0] == pytest.approx(4.0)
    # no overlap: 0; the whole range: all 8
    assert estimate_counts(g, [AGE, EDU], _queries(40, 60, ["Masters"]))[0] == 0.0
    assert estimate_counts(g, [AGE, EDU], _queries(0, 100, ["Masters"]))[0] == pytest.approx(8.0)


def test_uniform_spread_over_the_generalized_value_and_the_sensitive_share():
    # "Graduate" covers Masters and Doctorate; the class holds s = x and y in 3 : 1
    g = _group(20, 39, "Graduate", weights=(6.0, 2.0), values=("x", "y"))
    q = _queries(0, 100, ["Masters"], s="x")  # one of its two leaves
    assert estimate_counts(g, [AGE, EDU], q, categorical="uniform")[0] == pytest.approx(6.0 / 2)
    q.sensitive = np.array(["y"], dtype=object)
    assert estimate_counts(g, [AGE, EDU], q)[0] == pytest.approx(2.0 / 2)
    q.sensitive = np.array(["z"], dtype=object)  # a value the class does not publish
    assert estimate_counts(g, [AGE, EDU], q)[0] == 0.0


def test_release_marginal_weights_leaves_by_leaf_level_groups():
    # a leaf-level group of 30 Masters makes π(Masters) = 31, π(Doctorate) = 1
    g = Groups(np.array([[10.0], [30.0]]), ["x"], {"age": (np.array([20.0, 20.0]), np.array([39.0, 39.0]))},
               {"education": np.array([EDU.require_taxonomy().node_id("Graduate"),
                                       EDU.require_taxonomy().node_id("Masters")])})
    q = _queries(0, 100, ["Doctorate"])
    assert estimate_counts(g, [AGE, EDU], q, categorical="release-marginal")[0] == pytest.approx(10 * 1 / 32)
    assert estimate_counts(g, [AGE, EDU], q, categorical="uniform")[0] == pytest.approx(10 * 1 / 2)


def test_distinct_aware_spread():
    # 10 records under "Higher education" (9 leaves), 3 distinct: 8 records on the dominant leaf (release
    # marginal; no leaf-level group, so uniform here) and 2 spread uniformly: p = 0.8 * 1/9 + 0.2 * 1/9
    g = _group(20, 39, "Higher education", avg=30, distinct=3)
    n_leaves = int(EDU.require_taxonomy().member[EDU.require_taxonomy().node_id("Higher education")].sum())
    q = _queries(0, 100, ["Masters"])
    assert estimate_counts(g, [AGE, EDU], q, categorical="distinct")[0] == pytest.approx(10 / n_leaves)
    # with a leaf-level group of Masters, the dominant leaf goes there and the rare records stay uniform
    g2 = Groups(np.array([[10.0], [40.0]]), ["x"], {"age": (np.array([20.0, 20.0]), np.array([39.0, 39.0]))},
                {"education": np.array([EDU.require_taxonomy().node_id("Higher education"),
                                        EDU.require_taxonomy().node_id("Masters")])},
                {"age": np.array([30.0, 30.0])}, {"education": np.array([3.0, 1.0])})
    q = _queries(0, 100, ["Doctorate"])
    expect = 10 * (0.8 * (1 / (41 + n_leaves - 1)) + 0.2 / n_leaves)
    assert estimate_counts(g2, [AGE, EDU], q, categorical="distinct")[0] == pytest.approx(expect)
    with pytest.raises(InvalidParameterError, match="distinct"):
        estimate_counts(_group(20, 39, "Masters"), [AGE, EDU], q, categorical="distinct")


def test_scaled_range_widens_the_indicative_range_by_size_over_eta():
    # 5 nearest values span 30..31 (2 integers) of a 10-record sub-class: the sub-class spans 4 years
    # around its average 31: [29, 33]; the query's integers 29..30 read as [28.5, 30.5] take 1.5 of its 4
    g = _group(30, 31, "Masters", avg=31, distinct=1)
    q = _queries(29, 30, ["Masters"])
    assert estimate_counts(g, [AGE, EDU], q, numeric="scaled", eta=5)[0] == pytest.approx(10 * 1.5 / 4)
    assert estimate_counts(g, [AGE, EDU], q, numeric="indicative")[0] == pytest.approx(10 * 1 / 2)
    # clipped at the declared domain [0, 100]: the span [-1.5, 2.5] becomes [-0.5, 2.5]
    edge = _group(0, 1, "Masters", avg=0.5, distinct=1)
    assert estimate_counts(edge, [AGE, EDU], _queries(0, 100, ["Masters"]), numeric="scaled", eta=5)[0] == \
        pytest.approx(10.0)
    with pytest.raises(InvalidParameterError, match="eta"):
        estimate_counts(g, [AGE, EDU], q, numeric="scaled")
    with pytest.raises(InvalidParameterError):
        estimate_counts(g, [AGE, EDU], q, categorical="sideways")


def test_floor_is_exact_qi_counts_times_the_tables_share():
    df = pd.DataFrame({"age": [25, 25, 35, 45, 45, 45], "education": ["Masters", "Masters", "Masters", "Doctorate",
                                                                       "Bachelors", "Masters"],
                       "s": ["a", "b", "a", "a", "a", "b"]})
    q = _queries(20, 40, ["Masters"], s="a")  # QI count 3; share of a = 4/6
    assert floor_counts(df, [AGE, EDU], "s", q)[0] == pytest.approx(3 * 4 / 6)
    q = _queries(40, 50, ["Masters", "Doctorate"], s="b")  # QI count 2; share of b = 2/6
    assert floor_counts(df, [AGE, EDU], "s", q)[0] == pytest.approx(2 * 2 / 6)
    q.sensitive = np.array(["zzz"], dtype=object)  # a value the table lacks: 0
    assert floor_counts(df, [AGE, EDU], "s", q)[0] == 0.0
