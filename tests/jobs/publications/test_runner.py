"""The publication jobs on Spark (anonymize, composition audit) equal the pure reference (docs/specification.md §5)."""
from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import publication_data
import pytest
from publication_data import OLD_P, QIS, Q, seeded

from fragrelease.errors import SchemaMismatchError
from fragrelease.publications.cloning import cloning_anonymize
from fragrelease.publications.composition import audit_pair
from fragrelease.publications.mondrian import mondrian_anonymize
from fragrelease.schemas.taxonomies import adult_hierarchy

# shared module-scoped fixtures (tests/helpers/publication_data.py)
cloned_releases = publication_data.cloned_releases
mondrian_releases = publication_data.mondrian_releases
publishers = publication_data.publishers
qis = publication_data.qis


def test_spark_audit_matches_reference_and_region_contains_person(spark, mondrian_releases, cloned_releases, qis,
                                                                  publishers):
    from fragrelease.jobs.publications.runner import audit_summary, composition_audit

    # both layouts in one audit (one Spark plan); pairs across layouts are simply not looked at
    sdfs = {name: spark.createDataFrame(rel) for name, rel in (("m", mondrian_releases), ("c", cloned_releases))}
    lazy = composition_audit(sdfs, person="record_id", sensitive="occupation", qis=qis).localCheckpoint()
    allpairs = lazy.toPandas()
    summary = audit_summary(lazy)
    assert len(summary.pairs) == 15  # 6 releases (2 layouts x 3 publishers)
    assert all(sum(p["confidence_histogram"].values()) == p["overlapping"] for p in summary.pairs)
    assert sum(p["risky"] for p in summary.pairs) == int(allpairs["risky"].sum())
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
            ed = adult_hierarchy("education")
            assert all(r in ed.leaves_of(g) for r, g in zip(pr["education_raw"], pr["education"]))
        else:
            assert pairs["risky"].sum() == 0
            assert pairs["age_lo"].isna().all()  # micro-statistics give no region to intersect


def test_spark_jobs_are_per_publisher_and_report_distortion(spark, publishers, qis):
    from fragrelease.jobs.publications.runner import anonymize_publications, cloning_report

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
    from fragrelease.jobs.publications.runner import anonymize_publications, composition_audit

    sdf = spark.createDataFrame(mondrian_releases)
    with pytest.raises(SchemaMismatchError, match="'ssn'"):
        composition_audit({"m": sdf}, person="ssn", sensitive="occupation")
    with pytest.raises(SchemaMismatchError, match="'disease'"):
        composition_audit({"m": sdf}, person="record_id", sensitive="disease")
    with pytest.raises(SchemaMismatchError, match="at least two releases, not 1"):
        composition_audit({"m": sdf}, person="record_id", sensitive="occupation", publisher=None)
    with pytest.raises(Exception, match="'tree'"):
        anonymize_publications(sdf, method="tree", qis=[], sensitive="occupation", k=3)


@pytest.mark.slow  # a whole release end to end (or processes of their own): CI runs it; the quick loop leaves it out
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




def test_spark_audit_uses_counterfeit_attribution(spark):
    from fragrelease.jobs.publications.runner import composition_audit

    sdfs = {"p": spark.createDataFrame(OLD_P), "q": spark.createDataFrame(Q)}
    got = composition_audit(sdfs, person="pid", sensitive="disease", publisher=None,
                            counterfeit_bound=None).toPandas().set_index("person")
    ref = audit_pair(OLD_P, Q, person="pid", sensitive="disease", counterfeit_bound=None).set_index("person")
    assert sorted(got.index) == sorted(ref.index)
    for p in ref.index:
        assert (got.loc[p, "remaining"], got.loc[p, "top_value"], bool(got.loc[p, "risky"])) == \
            (ref.loc[p, "remaining"], ref.loc[p, "top_value"], bool(ref.loc[p, "risky"]))
        assert got.loc[p, "confidence"] == pytest.approx(ref.loc[p, "confidence"], abs=1e-12)
    assert bool(got.loc[40, "risky"])
    with pytest.raises(Exception, match="more counterfeits"):
        composition_audit(sdfs, person="pid", sensitive="disease", publisher=None).collect()
