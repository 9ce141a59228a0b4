"""Taxonomies, Mondrian ℓ-diversity (pycanon cross-check) and δ-cloning (docs/specification.md §5, §8). Spark-free."""
from __future__ import annotations

from collections import Counter
from fractions import Fraction

import numpy as np
import pandas as pd
import publication_data
import pytest
from publication_data import seeded

from fragrelease.errors import ConfigError, DomainError, InvalidParameterError, SchemaMismatchError
from fragrelease.publications.cloning import clone_counts, cloning_anonymize
from fragrelease.publications.mondrian import mondrian_anonymize
from fragrelease.schemas.taxonomies import adult_hierarchy, adult_quasi_identifiers
from fragrelease.taxonomy import QuasiIdentifier, Taxonomy

# shared module-scoped fixtures (tests/helpers/publication_data.py)
qis = publication_data.qis


@pytest.fixture(scope="module")
def sample(adult_pdf):
    return adult_pdf.sample(3000, random_state=7).reset_index(drop=True)


# ------------------------------------------------------------------ taxonomy
def test_taxonomy_steps_lca_and_intersection():
    t = adult_hierarchy("education")
    assert t.depth == 3 and t.n_leaves == 16
    bach, masters, hs = t.node_id("Bachelors"), t.node_id("Masters"), t.node_id("HS-grad")
    assert t.nodes[t.lca[bach, masters]] == "Higher education"
    assert t.nodes[t.lca[bach, hs]] == "*"
    assert t.steps(bach, t.node_id("Undergraduate")) == 1 and t.steps(bach, t.root) == 3
    # a single-child chain: Primary School (level 1) is the lowest node over its three leaves
    assert t.nodes[t.lca_of(t.leaf_codes(["Preschool", "1st-4th"]))] == "Primary School"
    assert t.intersect("*", "Masters") == "Masters"
    assert t.intersect("Higher education", "Graduate") == "Graduate"
    assert t.intersect("Graduate", "High School") is None
    assert set(t.leaves_of("Graduate")) == {"Masters", "Doctorate"}
    with pytest.raises(DomainError, match="'Kindergarten'"):
        t.leaf_codes(["Bachelors", "Kindergarten"])
    with pytest.raises(DomainError, match="'Graduate'"):
        t.steps(bach, t.node_id("Graduate"))


def test_taxonomy_rejects_malformed_paths():
    with pytest.raises(ConfigError, match=r"\['b', '\*'\]"):
        Taxonomy("x", [["a", "g", "*"], ["b", "*"]])
    with pytest.raises(ConfigError, match="several roots"):
        Taxonomy("x", [["a", "g", "*"], ["b", "h", "*"], ["c", "g", "R"]])
    with pytest.raises(ConfigError, match="'g' has two parents"):
        Taxonomy("x", [["a", "g", "p", "*"], ["b", "g", "q", "*"]])
    with pytest.raises(ConfigError, match="'v'"):
        QuasiIdentifier("v", "categorical")
    with pytest.raises(ConfigError, match=r"\(5.0, 1.0\)"):
        QuasiIdentifier("v", "numeric", None, (5.0, 1.0))


# ------------------------------------------------------------------ worked example (docs/specification.md §5 step 3)
def test_worked_example_counts():
    b, counts = clone_counts({"J": 5, "B": 4, "G": 3, "L": 7})
    assert b == 3
    by = {c.value: c for c in counts}
    assert [by[v].c for v in "JBGL"] == [2, 1, 1, 2]
    assert (by["J"].counterfeit, by["J"].suppressed) == (1, 0)
    assert (by["B"].counterfeit, by["B"].suppressed) == (0, 1)
    assert (by["G"].counterfeit, by["G"].suppressed) == (0, 0)
    assert (by["L"].counterfeit, by["L"].suppressed) == (0, 1)


def test_half_rule_splits_suppression_and_counterfeit():
    # b = 2: every other size has fractional part 0 or 1/2; four halves -> two round up, two round down
    b, counts = clone_counts({"a": 2, "b": 3, "c": 5, "d": 7, "e": 9, "f": 4})
    assert b == 2
    halves = [c for c in counts if Fraction(c.size, b) % 1 == Fraction(1, 2)]
    assert len(halves) == 4
    assert sum(c.counterfeit == 1 for c in halves) == 2 and sum(c.suppressed == 1 for c in halves) == 2
    assert all(c.counterfeit == c.suppressed == 0 for c in counts if c not in halves)
    with pytest.raises(InvalidParameterError, match="'x'"):
        clone_counts({"x": 0, "y": 3})


def test_worked_example_release():
    """Table 3(a)'s shape: J:5, B:4, G:3, L:7 with k = 3 and η = 1 (Baig et al. (CIKM 2011) §6 running example)."""
    rng = np.random.default_rng(3)
    sens = ["J"] * 5 + ["B"] * 4 + ["G"] * 3 + ["L"] * 7
    df = pd.DataFrame({"age": rng.integers(20, 70, len(sens)), "sex": rng.choice(["Male", "Female"], len(sens)),
                       "marital-status": rng.choice(["Separated", "Divorced", "Never-married"], len(sens)),
                       "disease": sens, "pid": range(len(sens))})
    qis = adult_quasi_identifiers(["age", "sex", "marital-status"])
    rel, rep = cloning_anonymize(df, qis, "disease", k=3, mu=1.0, eta=1, keep=["pid"], permutation=seeded(1))
    assert rep.b == 3 and rep.classes == 3
    assert (rep.counterfeit, rep.suppressed, rep.published) == (1, 2, 17)
    for _, g in rel.groupby("eq_class"):
        assert dict(zip(g["disease_values"].iloc[0], g["disease_counts"].iloc[0])) == {"B": 1, "G": 1, "J": 2, "L": 2}
    assert rel.groupby("sub_class").size().min() >= 3
    # the class with the counterfeit J has 5 real tuples (one sub-class), the others 6 (two sub-classes of 3)
    assert sorted(rel.groupby("eq_class")["sub_class"].nunique()) == [1, 2, 2]
    # the paper reports max δ = 0.07 for this table: |5/19 - 2/6|
    assert rep.delta == pytest.approx(abs(5 / 19 - 2 / 6)) and round(rep.delta, 2) == 0.07
    # the suppressed tuples are one B and one L
    left = Counter(df.loc[~df["pid"].isin(rel["pid"]), "disease"])
    assert left == Counter({"B": 1, "L": 1})
    # η = 1: the indicative range is the single age nearest the average
    assert (rel["age_lo"] == rel["age_hi"]).all()
    # μ smaller than c_j (one candidate) still fills every place with real tuples first
    _, small = cloning_anonymize(df, qis, "disease", k=3, mu=0.01, eta=1, permutation=seeded(2))
    assert (small.counterfeit, small.suppressed, small.published) == (1, 2, 17)


# ------------------------------------------------------------------ cloning on Adult
@pytest.mark.parametrize("sensitive", ["occupation", "income"])
def test_cloning_properties_on_adult(sample, qis, sensitive):
    k, eta = 5, 3
    rel, rep = cloning_anonymize(sample, qis, sensitive, k=k, mu=0.2, eta=eta, keep=["record_id"],
                                 permutation=seeded(5))
    values = set(sample[sensitive].astype(str))
    sizes = sample[sensitive].astype(str).value_counts()
    assert rep.published == len(rel) == len(sample) - rep.suppressed
    assert rel["record_id"].is_unique
    assert rel.groupby("sub_class").size().min() >= k
    # every class holds every sensitive value, in proportions within δ of the table's
    worst = 0.0
    for _, g in rel.groupby("eq_class"):
        ms = dict(zip(g[f"{sensitive}_values"].iloc[0], g[f"{sensitive}_counts"].iloc[0]))
        assert set(ms) == values
        tot = sum(ms.values())
        worst = max(worst, max(abs(sizes[v] / len(sample) - ms[v] / tot) for v in values))
    assert rep.delta == pytest.approx(worst)
    # counterfeit + suppressed per value equals |c_j b - |W_j||, total below half of b per value (paper §6.2)
    for c in rep.counts:
        assert c.counterfeit + c.suppressed == abs(c.c * rep.b - c.size) <= rep.b / 2
    # micro-statistics: average of the sub-class, indicative range inside the sub-class holding >= η values
    raw = sample[["record_id", "age", "education"]].rename(columns={"age": "age_raw", "education": "education_raw"})
    joined = rel.merge(raw, on="record_id")
    ed = adult_hierarchy("education")
    for _, g in joined.groupby("sub_class"):
        assert g["age_avg"].iloc[0] == pytest.approx(g["age_raw"].mean())
        lo, hi = g["age_lo"].iloc[0], g["age_hi"].iloc[0]
        assert g["age_raw"].min() <= lo <= hi <= g["age_raw"].max()
        assert ((g["age_raw"] >= lo) & (g["age_raw"] <= hi)).sum() >= eta
        assert g["education_distinct"].iloc[0] == g["education_raw"].nunique()
        assert set(g["education_raw"]) <= set(ed.leaves_of(g["education"].iloc[0]))


def test_cloning_bad_inputs(sample, qis):
    with pytest.raises(InvalidParameterError, match="eta must be <= k = 3, not 4"):
        cloning_anonymize(sample, qis, "occupation", k=3, eta=4)
    with pytest.raises(InvalidParameterError, match="mu .* not 1.5"):
        cloning_anonymize(sample, qis, "occupation", k=3, mu=1.5)
    with pytest.raises(InvalidParameterError, match="k must be an integer >= 1, not 0"):
        cloning_anonymize(sample, qis, "occupation", k=0)
    with pytest.raises(InvalidParameterError, match="k = 5000 exceeds"):
        cloning_anonymize(sample, qis, "occupation", k=5000)
    with pytest.raises(SchemaMismatchError, match="'salary'"):
        cloning_anonymize(sample, qis, "salary", k=3)
    bad = sample.copy()
    bad.loc[3, "education"] = "Kindergarten"
    with pytest.raises(DomainError, match="'Kindergarten'"):
        cloning_anonymize(bad, qis, "occupation", k=3)
    bad = sample.copy()
    bad.loc[3, "age"] = 130
    with pytest.raises(DomainError, match="130"):
        cloning_anonymize(bad, qis, "occupation", k=3)


# ------------------------------------------------------------------ Mondrian
@pytest.mark.parametrize("k,l", [(5, 3), (10, 6)])
def test_mondrian_is_k_anonymous_and_l_diverse_per_pycanon(sample, qis, k, l):
    from pycanon import anonymity

    rel = mondrian_anonymize(sample, qis, "occupation", k=k, l=l, keep=["record_id"])
    gen = ["age_lo", "age_hi", "sex", "education", "native-country"]
    assert anonymity.k_anonymity(rel, gen) >= k
    assert anonymity.l_diversity(rel, gen, ["occupation"]) >= l
    # the generalization of a class is its own key (classes are distinct regions)
    assert rel.groupby(gen).ngroups == rel["eq_class"].nunique()
    # every record lies in its class's generalization and keeps its sensitive value
    joined = rel.merge(sample[["record_id", "age", "education", "native-country", "occupation"]], on="record_id",
                       suffixes=("", "_raw"))
    assert len(joined) == len(sample)
    assert ((joined["age"] >= joined["age_lo"]) & (joined["age"] <= joined["age_hi"])).all()
    ed, nc = adult_hierarchy("education"), adult_hierarchy("native-country")
    assert all(r in ed.leaves_of(g) for r, g in zip(joined["education_raw"], joined["education"]))
    assert all(r in nc.leaves_of(g) for r, g in zip(joined["native-country_raw"], joined["native-country"]))
    assert (joined["occupation"] == joined["occupation_raw"]).all()


def test_mondrian_splits_until_no_allowable_cut(sample, qis):
    """Maximality: no class can be cut again on any attribute with both sides allowable."""
    from fragrelease.publications.mondrian import (
        _candidate_split,
        encode_quasi_identifiers,
        mondrian_partition,
        sensitive_codes,
    )

    k, l = 5, 3
    codes = encode_quasi_identifiers(sample, qis)
    _, sens = sensitive_codes(sample, "occupation")
    parts = mondrian_partition(codes, qis, sens, k=k, l=l)
    assert sum(len(p) for p in parts) == len(sample)
    for p in parts:
        for a, q in enumerate(qis):
            cut = _candidate_split(p, codes, a, q)
            if cut is not None:
                assert not all(len(c) >= k and len(np.unique(sens[c])) >= l for c in cut)


def test_mondrian_bad_inputs(sample, qis):
    with pytest.raises(InvalidParameterError, match="l = 20 exceeds the 14 distinct"):
        mondrian_anonymize(sample, qis, "occupation", k=5, l=20)
    with pytest.raises(SchemaMismatchError, match="'ssn'"):
        mondrian_anonymize(sample, qis, "occupation", k=5, l=2, keep=["ssn"])
    bad = sample.copy()
    bad.loc[0, "sex"] = "Unknown"
    with pytest.raises(DomainError, match="'Unknown'"):
        mondrian_anonymize(bad, qis, "occupation", k=5, l=2)


# ------------------------------------------------------------------ COUNT-query workload (docs/specification.md §5, Evaluation)
def test_workload_exact_answers_and_estimators(sample, qis):
    from fragrelease.experiments.workload import (
        Groups,
        actual_counts,
        cloning_groups,
        estimate_counts,
        mondrian_groups,
        random_queries,
    )

    gen = np.random.default_rng(4)  # test-only
    values = sorted(sample["occupation"].unique())
    qs = random_queries(qis, values, theta=0.4, size=300, generator=gen)
    act = actual_counts(sample, qis, "occupation", qs)
    codes = {q.name: (sample[q.name].to_numpy() if q.kind == "numeric"
                      else q.taxonomy.leaf_codes(sample[q.name].astype(str))) for q in qis}
    for i in range(len(qs)):
        ok = sample["occupation"].to_numpy() == qs.sensitive[i]
        for q in qis:
            if q.kind == "numeric":
                lo, hi = qs.numeric[q.name]
                ok &= (codes[q.name] >= lo[i]) & (codes[q.name] <= hi[i])
            else:
                ok &= qs.categorical[q.name][i][codes[q.name]]
        assert act[i] == ok.sum()
    # θ = 1 selects every record of value s: Mondrian's counts are exact, cloning's off by its distortion only
    full = random_queries(qis, values, theta=1.0, size=len(values), generator=gen)
    full.sensitive = np.array(values, dtype=object)
    act = actual_counts(sample, qis, "occupation", full)
    assert (act == sample["occupation"].value_counts()[values].to_numpy()).all()
    mond = mondrian_anonymize(sample, qis, "occupation", k=5, l=3)
    assert np.allclose(estimate_counts(mondrian_groups(mond, qis, "occupation"), qis, full), act)
    rel, rep = cloning_anonymize(sample, qis, "occupation", k=5, eta=2, permutation=seeded(8))
    est = estimate_counts(cloning_groups(rel, qis, "occupation"), qis, full)
    assert np.abs(est - act).max() <= rep.distorted + 1e-9
    # one group: ages 30..39 (indicative range), education "Graduate" (2 leaves), 10 records of value x
    one = Groups(np.array([[10.0]]), ["x"], {"age": (np.array([30.0]), np.array([39.0]))},
                 {"education": np.array([qis[2].taxonomy.node_id("Graduate")])})
    q = random_queries([qis[0], qis[2]], ["x"], theta=1.0, size=1, generator=gen)
    q.numeric["age"] = (np.array([35.0]), np.array([60.0]))  # 5 of the 10 integers
    mask = np.zeros((1, 16), dtype=bool)
    mask[0, qis[2].taxonomy.node_id("Masters")] = True      # 1 of 2 leaves (no leaf-level groups: π uniform)
    q.categorical["education"] = mask
    assert estimate_counts(one, [qis[0], qis[2]], q)[0] == pytest.approx(10 * 0.5 * 0.5)


# ------------------------------------------------------------------ counterfeits spread, classes numbered at random
def _four_values(seed=0):
    """Sizes A:10, B:16, C:30, D:41: b = 10, c = 1, 2, 3, 4; B has cf = 4 counterfeits, D one suppressed."""
    rng = np.random.default_rng(seed)  # test-only data
    sens = ["A"] * 10 + ["B"] * 16 + ["C"] * 30 + ["D"] * 41
    return pd.DataFrame({"age": rng.integers(20, 70, len(sens)), "sex": rng.choice(["Male", "Female"], len(sens)),
                         "marital-status": rng.choice(["Separated", "Divorced", "Never-married"], len(sens)),
                         "disease": sens, "pid": range(len(sens))})


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_counterfeits_are_spread_and_every_published_value_has_a_real_tuple(seed):
    """Property: in every class E (k = 1: no merge, t_E = 1), for every value s, the counterfeit
    copies m_E(s) − r_E(s) are at most ⌈cf_s / b⌉ (= 1 for B, 0 for A, C, D), and r_E(s) ≥ 1 for
    every published s. On the old code two classes published B:2 with no real B."""
    df = _four_values(seed)
    qis = adult_quasi_identifiers(["age", "sex", "marital-status"])
    b, counts = clone_counts({"A": 10, "B": 16, "C": 30, "D": 41})
    cf = {c.value: c.counterfeit for c in counts}
    assert b == 10 and cf == {"A": 0, "B": 4, "C": 0, "D": 0}
    rel, rep = cloning_anonymize(df, qis, "disease", k=1, mu=1.0, eta=1, keep=["pid"], permutation=seeded(seed))
    assert rep.classes == 10 and rep.counterfeit == 4 and rep.suppressed == 1
    truth = df.set_index("pid")["disease"]
    with_fakes = 0
    for _, g in rel.groupby("eq_class"):
        ms = dict(zip(g["disease_values"].iloc[0], g["disease_counts"].iloc[0]))
        assert ms == {"A": 1, "B": 2, "C": 3, "D": 4}
        real = Counter(truth[g["pid"]])
        for v, m in ms.items():
            assert 0 <= m - real[v] <= -(-cf[v] // b), (v, ms, real)
            assert real[v] >= 1, (v, ms, real)
        with_fakes += sum(ms.values()) - len(g) > 0
    assert with_fakes == 4  # one counterfeit B in each of four classes, not two in each of two


def test_class_numbering_is_a_random_permutation():
    """Two randomness sources that agree on every draw except the class numbering give the same
    classes (as sets of records with their multisets) under different ids, each a permutation of
    0..classes−1; the sub-class ids are a permutation of 0..sub-classes−1."""
    df = _four_values(0)
    qis = adult_quasi_identifiers(["age", "sex", "marital-status"])

    def source(flip_call):
        gen = np.random.default_rng(9)  # test-only
        calls = []

        def perm(n):
            p = gen.permutation(n)
            calls.append(n)
            return p[::-1].copy() if len(calls) == flip_call else p
        return perm, calls

    probe, calls = source(None)
    cloning_anonymize(df, qis, "disease", k=3, mu=1.0, eta=1, keep=["pid"], permutation=probe)
    numbering_call = len(calls) - 2  # then the sub-class numbering and the row order
    out = []
    for flip in (None, numbering_call):
        perm, _ = source(flip)
        rel, rep = cloning_anonymize(df, qis, "disease", k=3, mu=1.0, eta=1, keep=["pid"], permutation=perm)
        assert sorted(rel["eq_class"].unique()) == list(range(rep.classes))
        assert sorted(rel["sub_class"].unique()) == list(range(rep.sub_classes))
        out.append(rel)
    a, b = out
    assert a["eq_class"].nunique() >= 3

    def classes(rel):
        return sorted((tuple(sorted(g["pid"])), tuple(g["disease_counts"].iloc[0])) for _, g in rel.groupby("eq_class"))
    assert classes(a) == classes(b)
    ids_a = a.set_index("pid")["eq_class"]
    ids_b = b.set_index("pid")["eq_class"]
    assert (ids_a != ids_b[ids_a.index]).any()
