"""The composition-attack audit (pure reference and Spark), the publication jobs and the CLI (SPEC.md §5)."""
from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest

from fragrelease.cloning import cloning_anonymize
from fragrelease.composition import adversary_confidence, audit_pair, confidence_histogram, split_with_overlap
from fragrelease.errors import InvalidParameterError, SchemaMismatchError
from fragrelease.mondrian import mondrian_anonymize
from fragrelease.taxonomy import adult_quasi_identifiers, adult_taxonomy

QIS = ("age", "sex", "education", "native-country")
COLS = ["record_id", *QIS, "occupation", "income"]


def seeded(seed):
    gen = np.random.default_rng(seed)  # test-only order, never used by a release
    return lambda n: gen.permutation(n)


@pytest.fixture(scope="module")
def qis():
    return adult_quasi_identifiers(QIS)


@pytest.fixture(scope="module")
def publishers(adult_pdf):
    """Three independent publishers: 350 own Adult records each plus 300 from a shared pool of 450."""
    parts = split_with_overlap(len(adult_pdf), publishers=3, base=350, pool=450, overlap=300, permutation=seeded(11))
    return pd.concat([adult_pdf.iloc[p][COLS].assign(publisher=f"p{i}") for i, p in enumerate(parts)],
                     ignore_index=True)


def _per_publisher(pdf, fn):
    return pd.concat([fn(g).assign(publisher=name) for name, g in pdf.groupby("publisher")], ignore_index=True)


@pytest.fixture(scope="module")
def mondrian_releases(publishers, qis):
    return _per_publisher(publishers, lambda g: mondrian_anonymize(g, qis, "occupation", k=4, l=3, keep=["record_id"]))


@pytest.fixture(scope="module")
def cloned_releases(publishers, qis):
    order = seeded(2)
    return _per_publisher(publishers, lambda g: cloning_anonymize(g, qis, "occupation", k=4, eta=2,
                                                                  keep=["record_id"], permutation=order)[0])


def test_adversary_confidence():
    # paper 001 Example 1: Nancy's two classes share only D
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


def test_spark_audit_matches_reference_and_region_contains_person(spark, mondrian_releases, cloned_releases, qis,
                                                                  publishers):
    from fragrelease.jobs.publications import audit_summary, composition_audit

    # both layouts in one audit (one Spark plan); pairs across layouts are simply not looked at
    sdfs = {name: spark.createDataFrame(rel) for name, rel in (("m", mondrian_releases), ("c", cloned_releases))}
    lazy = composition_audit(sdfs, person="record_id", sensitive="occupation", qis=qis).localCheckpoint()
    allpairs = lazy.toPandas()
    summary = audit_summary(lazy)
    assert len(summary["pairs"]) == 15  # 6 releases (2 layouts x 3 publishers)
    assert all(sum(p["confidence_histogram"].values()) == p["overlapping"] for p in summary["pairs"])
    assert sum(p["risky"] for p in summary["pairs"]) == int(allpairs["risky"].sum())
    for name, rel in (("m", mondrian_releases), ("c", cloned_releases)):
        pairs = allpairs[allpairs.release_a.str.startswith(name) & allpairs.release_b.str.startswith(name)]
        ref = audit_pair(rel[rel.publisher == "p0"], rel[rel.publisher == "p2"], person="record_id",
                         sensitive="occupation")
        got = pairs[(pairs.release_a == f"{name}:p0") & (pairs.release_b == f"{name}:p2")]
        m = ref.merge(got, on="person", suffixes=("_ref", ""))
        assert len(m) == len(ref) == len(got)
        assert (m["remaining_ref"] == m["remaining"]).all() and (m["risky_ref"] == m["risky"]).all()
        assert np.allclose(m["confidence_ref"], m["confidence"], atol=1e-12)
        assert (m["top_value_ref"] == m["top_value"]).all()
        if name == "m":
            assert pairs["risky"].sum() > 0
            raw = publishers.drop_duplicates("record_id").set_index("record_id")
            pr = pairs.join(raw[list(QIS)].rename(columns=lambda c: f"{c}_raw"), on="person")
            assert ((pr["age_raw"] >= pr["age_lo"]) & (pr["age_raw"] <= pr["age_hi"])).all()
            ed = adult_taxonomy("education")
            assert all(r in ed.leaves_of(g) for r, g in zip(pr["education_raw"], pr["education"]))
        else:
            assert pairs["risky"].sum() == 0
            assert pairs["age_lo"].isna().all()  # micro-statistics give no region to intersect


def test_spark_jobs_are_per_publisher_and_report_distortion(spark, publishers, qis):
    from fragrelease.jobs.publications import anonymize_publications, cloning_report

    sdf = spark.createDataFrame(publishers)
    m = anonymize_publications(sdf, method="mondrian", qis=qis, sensitive="occupation", k=4, l=3,
                               keep=["record_id"]).toPandas()
    # publishers are independent: each one's slice equals anonymizing it alone
    alone = mondrian_anonymize(publishers[publishers.publisher == "p1"], qis, "occupation", k=4, l=3,
                               keep=["record_id"])
    got = m[m.publisher == "p1"]
    key = ["record_id", "age_lo", "age_hi", "sex", "education", "native-country", "occupation"]
    pd.testing.assert_frame_equal(got[key].sort_values("record_id").reset_index(drop=True),
                                  alone[key].sort_values("record_id").reset_index(drop=True), check_dtype=False)
    c = anonymize_publications(sdf, method="cloning", qis=qis, sensitive="occupation", k=4, eta=2).localCheckpoint()
    assert "record_id" not in c.columns  # ids are not carried unless asked
    rep = cloning_report(sdf, c, sensitive="occupation")
    for _, row in rep.iterrows():
        _, ref = cloning_anonymize(publishers[publishers.publisher == row["publisher"]], qis, "occupation", k=4,
                                   eta=2, permutation=seeded(3))
        assert (row["suppressed"], row["counterfeit"], row["published"]) == (ref.suppressed, ref.counterfeit,
                                                                          ref.published)
        assert row["delta"] == pytest.approx(ref.delta)


def test_spark_audit_bad_inputs(spark, mondrian_releases):
    from fragrelease.jobs.publications import anonymize_publications, composition_audit

    sdf = spark.createDataFrame(mondrian_releases)
    with pytest.raises(SchemaMismatchError, match="'ssn'"):
        composition_audit({"m": sdf}, person="ssn", sensitive="occupation")
    with pytest.raises(SchemaMismatchError, match="'disease'"):
        composition_audit({"m": sdf}, person="record_id", sensitive="disease")
    with pytest.raises(SchemaMismatchError, match="at least two releases, not 1"):
        composition_audit({"m": sdf}, person="record_id", sensitive="occupation", publisher=None)
    with pytest.raises(Exception, match="'tree'"):
        anonymize_publications(sdf, method="tree", qis=[], sensitive="occupation", k=3)


def test_cli_simulate_anonymize_audit(tmp_path, spark):
    from fragrelease.jobs.cli import run_cli

    src, rel_m = str(tmp_path / "pubs"), str(tmp_path / "mondrian")
    assert run_cli(["publications", "simulate", "--output", src, "--publishers", "3", "--base", "200",
                    "--pool", "200", "--overlap", "150"]) == 0
    common = ["--qi", "age", "--qi", "sex", "--qi", "education", "--qi", "native-country",
              "--sensitive", "occupation", "--k", "4", "--keep", "record_id"]
    assert run_cli(["publications", "anonymize", src, "--method", "mondrian", "--l", "3", "--output", rel_m,
                    *common]) == 0
    # a second write to the same release is refused with one line and status 2
    assert run_cli(["publications", "anonymize", src, "--method", "mondrian", "--output", rel_m, *common]) == 2
    assert run_cli(["publications", "anonymize", src, "--method", "mondrian", "--output", str(tmp_path / "x"),
                    *common[:-2], "--qi", "shoe-size"]) == 2
    from fragrelease.jobs.storage import read_delta, table_provenance

    out = rel_m + "-audit"
    assert run_cli(["publications", "audit", rel_m, "--person", "record_id", "--sensitive", "occupation",
                    "--output", out, "--qi", "age", "--qi", "education"]) == 0
    summary = json.loads(open(out + ".summary.json").read())
    assert summary["overlapping_people"] > 0 and summary["risky_people"] > 0
    risky = read_delta(spark, out)
    assert risky.where("not risky").count() == 0
    assert risky.select("person").distinct().count() == summary["risky_people"]
    assert table_provenance(rel_m)["l"] == 3 and "delta" not in table_provenance(rel_m)
    assert run_cli(["publications", "audit", rel_m, "--person", "ssn", "--sensitive", "occupation",
                    "--output", str(tmp_path / "bad")]) == 2
    assert not os.path.exists(str(tmp_path / "bad"))
