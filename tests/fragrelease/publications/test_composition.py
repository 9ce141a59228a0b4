"""The composition-attack audit, pure reference, and the publications CLI (docs/specification.md §5; Spark: tests/jobs/publications/)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import publication_data
import pytest
from publication_data import OLD_P, Q, seeded

from fragrelease.errors import InvalidParameterError
from fragrelease.publications.cloning import cloning_anonymize
from fragrelease.publications.composition import (
    adversary_confidence,
    audit_pair,
    confidence_histogram,
    split_with_overlap,
)
from fragrelease.schemas.taxonomies import adult_quasi_identifiers

# shared module-scoped fixtures (tests/helpers/publication_data.py)
cloned_releases = publication_data.cloned_releases
mondrian_releases = publication_data.mondrian_releases
publishers = publication_data.publishers
qis = publication_data.qis


def test_adversary_confidence():
    # Baig et al. (CIKM 2011) Example 1: Nancy's two classes share only D
    assert adversary_confidence({"D": 2, "F": 2}, {"D": 3, "A": 3}) == (1, "D", 1.0)
    # f_P = (2/3, 1/3), f_Q = (1/4, 1/4, 1/2): weights 1/6 and 1/12 -> A with 2/3
    n, top, conf = adversary_confidence({"A": 2, "B": 1}, {"A": 1, "B": 1, "C": 2})
    assert (n, top) == (2, "A") and conf == pytest.approx(2 / 3)
    assert adversary_confidence({"A": 1}, {"B": 1}) == (0, None, 0.0)
    # with the pooled prior π: classes that mirror the prior leave the adversary at the prior's top share
    prior = {"A": 60, "B": 30, "C": 10}
    n, top, conf = adversary_confidence({"A": 6, "B": 3, "C": 1}, {"A": 12, "B": 6, "C": 2}, prior)
    assert (n, top) == (3, "A") and conf == pytest.approx(0.6)
    # and a class skewed towards B moves the adversary towards B
    n, top, conf = adversary_confidence({"A": 1, "B": 3}, {"A": 2, "B": 2}, {"A": 50, "B": 50})
    assert top == "B" and conf == pytest.approx(0.75)
    hist = confidence_histogram(np.array([0.05, 0.5, 0.99, 1.0, 1.0]))
    assert hist["[0.0,0.1)"] == 1 and hist["[0.5,0.6)"] == 1 and hist["[0.9,1.0)"] == 1 and hist["1"] == 2


def test_split_with_overlap_is_disjoint_plus_pool(adult_pdf):
    parts = split_with_overlap(1000, publishers=3, base=200, pool=300, overlap=100, permutation=seeded(1))
    own = [set(p[:200]) for p in parts]
    assert all(len(p) == 300 and len(set(p)) == 300 for p in parts)
    assert not (own[0] & own[1]) and not (own[0] & own[2]) and not (own[1] & own[2])
    pool = set().union(*[set(p[200:]) for p in parts])
    assert not pool & set().union(*own) and len(pool) <= 300
    with pytest.raises(InvalidParameterError, match="overlap 400 exceeds the pool of 300"):
        split_with_overlap(1000, publishers=3, base=200, pool=300, overlap=400)


def test_audit_finds_risks_in_l_diverse_releases_and_none_in_cloned(mondrian_releases, cloned_releases):
    risky_m, risky_c, conf_c = 0, 0, []
    names = sorted(mondrian_releases["publisher"].unique())
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            rm = audit_pair(mondrian_releases[mondrian_releases.publisher == a],
                            mondrian_releases[mondrian_releases.publisher == b], person="record_id",
                            sensitive="occupation")
            rc = audit_pair(cloned_releases[cloned_releases.publisher == a],
                            cloned_releases[cloned_releases.publisher == b], person="record_id",
                            sensitive="occupation")
            assert len(rm) > 100 and len(rc) > 100  # the pool makes the releases overlap
            risky_m += int(rm["risky"].sum())
            risky_c += int(rc["risky"].sum())
            conf_c.extend(rc["confidence"])
            # a risky person's one remaining value is the true one (both releases are truthful)
            assert (rm.loc[rm.risky, "confidence"] == 1.0).all()
    truth = mondrian_releases.drop_duplicates("record_id").set_index("record_id")["occupation"]
    assert risky_m >= 10
    assert risky_c == 0
    # cloned classes mirror the table's distribution: the adversary's top confidence stays near the
    # most frequent occupation's share (about 0.13 in Adult), far from certainty
    assert max(conf_c) < 0.2
    assert truth.size > 0


# ------------------------------------------------------------------ counterfeits the adversary can attribute
def _brute_bounds(counts, rows, caps):
    import itertools

    vals = sorted(counts)
    ranges = [range(counts[v] - caps[v], counts[v] + 1) for v in vals]
    feasible = [r for r in itertools.product(*ranges) if sum(r) == rows]
    return {v: (min(r[i] for r in feasible), max(r[i] for r in feasible)) for i, v in enumerate(vals)} if feasible else None


def test_real_count_bounds_are_exact_and_candidates_drop_attributable_counterfeits():
    from fragrelease.publications.composition import class_candidates, counterfeit_caps, real_count_bounds

    gen = np.random.default_rng(0)  # test-only
    for _ in range(400):
        vals = list("ABCD")[: gen.integers(1, 5)]
        counts = {v: int(gen.integers(1, 6)) for v in vals}
        rows = int(gen.integers(0, sum(counts.values()) + 1))
        caps = {v: int(gen.integers(0, counts[v] + 1)) for v in vals}
        want = _brute_bounds(counts, rows, caps)
        if want is None:
            with pytest.raises(InvalidParameterError, match="more counterfeits"):
                real_count_bounds(counts, rows, caps)
        else:
            assert real_count_bounds(counts, rows, caps) == want
    # no counterfeit: the published multiset unchanged (every generalized class)
    assert class_candidates({"A": 2, "B": 3}, 5) == {"A": 2, "B": 3}
    # this version's cloning, sizes A:10, B:16, C:30, D:41, a class with one counterfeit B: all values stay
    assert counterfeit_caps({"A": 1, "B": 2, "C": 3, "D": 4}, 9) == {"A": 0, "B": 1, "C": 1, "D": 1}
    assert class_candidates({"A": 1, "B": 2, "C": 3, "D": 4}, 9) == {"A": 1, "B": 2, "C": 3, "D": 4}
    # two clone classes merged (t = 2): at most 2 counterfeits of a value
    assert counterfeit_caps({"A": 2, "B": 4, "C": 6}, 9) == {"A": 0, "B": 2, "C": 2}
    # the old code's last class for sizes A:5, B:8 (b = 5, c_B = 2, cf_B = 2 stacked): 1 row, {A:1, B:2}.
    # c_A = 1 cannot be counterfeit, so the row is the A and both B copies are counterfeit
    assert class_candidates({"A": 1, "B": 2}, 1, counterfeit_bound=None) == {"A": 1}
    with pytest.raises(InvalidParameterError, match=r"1 rows and multiset \{'A': 1, 'B': 2\}"):
        class_candidates({"A": 1, "B": 2}, 1)  # impossible under this version's bound of one per class
    # more copies than the real rows can hold: B's weight is the most real rows it can have
    assert class_candidates({"A": 1, "B": 5}, 3, counterfeit_bound=None) == {"A": 1, "B": 2}




def test_audit_flags_person_whose_other_candidate_is_counterfeit_attributable():
    """Person 40 shares {A, B} between its classes, but in P the B copies are attributable counterfeits
    (1 row, 2 extra copies, and A cannot be counterfeit): the only remaining candidate is A. The old
    audit reported 2 remaining values and no risk."""
    res = audit_pair(OLD_P, Q, person="pid", sensitive="disease", counterfeit_bound=None).set_index("person")
    assert (res.loc[40, "remaining"], res.loc[40, "top_value"], res.loc[40, "risky"]) == (1, "A", True)
    assert res.loc[40, "confidence"] == pytest.approx(1.0)
    assert res.loc[0, "remaining"] == 2 and not res.loc[0, "risky"]  # a class with real A and B
    with pytest.raises(InvalidParameterError, match="more counterfeits"):
        audit_pair(OLD_P, Q, person="pid", sensitive="disease")  # this version's bound refuses the old release


def test_audit_of_new_cloning_keeps_every_value(qis):
    """This version's cloning of A:10, B:16, C:30, D:41 leaves no attributable counterfeit: every
    published value is a candidate in every class, and the audit's bounds contain every class's true
    real counts (on the old code two classes held no real B, outside the bounds [1, 2])."""
    from collections import Counter

    from fragrelease.publications.composition import (
        class_candidates,
        counterfeit_caps,
        person_multisets,
        real_count_bounds,
    )

    rng = np.random.default_rng(1)  # test-only data
    sens = ["A"] * 10 + ["B"] * 16 + ["C"] * 30 + ["D"] * 41
    df = pd.DataFrame({"age": rng.integers(20, 70, len(sens)), "sex": rng.choice(["Male", "Female"], len(sens)),
                       "marital-status": rng.choice(["Separated", "Divorced", "Never-married"], len(sens)),
                       "disease": sens, "pid": range(len(sens))})
    q3 = adult_quasi_identifiers(["age", "sex", "marital-status"])
    for k in (1, 12):  # k = 12 merges classes (t_E = 2)
        rel, rep = cloning_anonymize(df, q3, "disease", k=k, mu=1.0, keep=["pid"], permutation=seeded(k))
        assert rep.counterfeit == 4
        per = person_multisets(rel, person="pid", sensitive="disease")
        ms = per.drop_duplicates("eq_class")
        assert (ms["rows"] < ms["counts"].map(lambda c: sum(c.values()))).any()
        truth = df.set_index("pid")["disease"]
        for eq, counts, rows in zip(ms["eq_class"], ms["counts"], ms["rows"]):
            assert class_candidates(counts, int(rows)) == counts
            real = Counter(truth[per.loc[per.eq_class == eq, "person"]])
            bounds = real_count_bounds(counts, int(rows), counterfeit_caps(counts, int(rows)))
            assert all(lo <= real[v] <= hi for v, (lo, hi) in bounds.items()), (counts, real, bounds)
