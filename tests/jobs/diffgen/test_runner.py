"""DiffGen and DistDiffGen on Spark: marginals, noisy leaf counts, releases, the Spark party and provenance.

docs/specification.md §7; the Spark-free engine and protocol are tested in tests/fragrelease/diffgen/.
"""
from __future__ import annotations

import threading
from fractions import Fraction
from multiprocessing import Pipe

import numpy as np
import pytest

from fragrelease.diffgen.engine import Cut, specialize_cut, split_intervals
from fragrelease.diffgen.params import ProtocolParams, TwoPartyParams
from fragrelease.diffgen.predictors import AttributeCounts, marginal_counts
from fragrelease.diffgen.release import leaf_codes, release_counts
from fragrelease.diffgen.two_party import Channel, run_party
from fragrelease.errors import DomainError
from fragrelease.rng.diffgen import SeededDiffGenRandomness
from fragrelease.schemas.taxonomies import ADULT_CLASS_VALUES, adult_predictors

TEST_KEY_BITS = 512  # tests only


@pytest.fixture(scope="module")
def small(adult_pdf):
    return adult_pdf.iloc[:2000].reset_index(drop=True)


# ---- Spark job ---------------------------------------------------------------------------------
def test_spark_leaf_table_has_every_cell_and_synthetic_records_stay_in_cells(spark, small):
    from fragrelease.diffgen.predictors import marginal_counts
    from fragrelease.jobs.diffgen.marginals import _col, marginal_counts_spark
    from fragrelease.jobs.diffgen.runner import noisy_generalized_table, synthetic_table

    attrs = ["sex", "education", "hours-per-week"]
    small = small.iloc[:600]
    preds = adult_predictors(attrs)
    sdf = spark.createDataFrame(small[["record_id", "income", *attrs]])
    counts = marginal_counts_spark(sdf, preds, "income", ADULT_CLASS_VALUES)
    for p in preds:  # Spark's groupBy counts equal the pandas twin
        ref = marginal_counts(p, small[p.attribute], small["income"], ADULT_CLASS_VALUES)
        assert np.array_equal(counts[p.attribute].counts, ref.counts)
    cut, _ = specialize_cut(preds, counts, epsilon=Fraction(1), specializations=3, score="max",
                            randomness=SeededDiffGenRandomness(4))
    noisy = noisy_generalized_table(spark, sdf, cut, Fraction(1)).toPandas()
    n_cells = int(np.prod([cut.size(a) for a in attrs])) * 2
    assert len(noisy) == n_cells and noisy["noisy_count"].notna().all()
    assert (noisy["noisy_count"] != np.round(noisy["noisy_count"])).all()  # every cell, even empty, is perturbed
    noisy_sdf = spark.createDataFrame(noisy)
    syn = synthetic_table(noisy_sdf, cut).toPandas()
    assert len(syn) == int(np.maximum(np.floor(noisy["noisy_count"] + 0.5), 0).sum())
    assert synthetic_table(noisy_sdf, cut, 5).count() == int(release_counts(noisy["noisy_count"].to_numpy(), 5).sum())
    for a in attrs:
        assert set(cut.cell_codes(a, syn[a].to_numpy())) <= set(range(cut.size(a)))
    assert abs(len(syn) - len(small)) < 0.2 * len(small) + 2 * n_cells
    assert _col("hours-per-week") == "c_hours_per_week"


def test_spark_party_backend_gives_exact_shares(spark, small, tmp_path):
    """Both parties on the Spark backend (one test session, two threads): X1 + X2 - C is the noise only."""
    from fragrelease.jobs.diffgen.party import SparkParty
    from fragrelease.jobs.diffgen.runner import cut_from_labels

    sub = small.iloc[:200]
    hosp, ins = ["age", "sex", "education"], ["workclass", "hours-per-week"]
    a, b = Pipe()
    out, errors = {}, []

    def go(role, attrs, conn, seed):
        try:
            df = spark.createDataFrame(sub[["record_id", "income", *attrs]])
            party = SparkParty(spark, role, df, adult_predictors(attrs), class_col="income",
                               exchange_dir=str(tmp_path))
            protocol = ProtocolParams(epsilon=1, specializations=3, score="max", key_bits=TEST_KEY_BITS,
                                      allow_small_key=True)
            out[role] = run_party(party, Channel(conn), role=role, protocol=protocol,
                                  class_values=ADULT_CLASS_VALUES, randomness=SeededDiffGenRandomness(seed))
        except Exception as exc:
            errors.append(exc)
            conn.close()

    threads = [threading.Thread(target=go, args=("hospital", hosp, a, 1)),
               threading.Thread(target=go, args=("insurer", ins, b, 2))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    r1, r2 = out["hospital"], out["insurer"]
    assert np.array_equal(r1.noisy_counts, r2.noisy_counts)
    cut = cut_from_labels(r1.cut_labels)
    true = np.bincount(leaf_codes(cut, {x: sub[x].to_numpy() for x in hosp + ins}, sub["income"], ADULT_CLASS_VALUES),
                       minlength=r1.noisy_counts.size).reshape(r1.noisy_counts.shape)
    assert np.array_equal((r1.share + r2.share).astype(np.int64), true)  # secure scalar product is exact
    assert np.abs(r1.share).max() > 2 ** 20  # a share alone is masked, not the count
    d = r1.noisy_counts - true
    assert abs(d.mean()) < 4 * 2 * np.sqrt(2) / np.sqrt(d.size) + 0.2 and np.all(d != 0)
    assert r1.channel["sent_bytes"] > 0 and r2.channel["sent_bytes"] > 0


@pytest.mark.slow  # a whole release end to end (or processes of their own): CI runs it; the quick loop leaves it out
def test_two_party_release_provenance_records_the_noise_mode_and_its_guarantee(spark, tmp_path, monkeypatch):
    """A two-party release (300 rows, test keys) records share_noise and the guarantee against the public and
    against the other party in both tables' provenance: laplace-each by default, gaussian-squares flagged."""
    import fragrelease.jobs.diffgen.processes as dd
    from fragrelease.jobs.diffgen.runner import run_two_party_release
    from fragrelease.jobs.storage import table_provenance

    real = dd.run_adult_two_party

    def small_keys(hospital, insurer, protocol, **kw):
        return real(hospital, insurer, protocol.model_copy(update={"key_bits": TEST_KEY_BITS, "allow_small_key": True}),
                    **kw)

    monkeypatch.setattr(dd, "run_adult_two_party", small_keys)
    kw = dict(hospital_attributes=("age", "sex"), insurer_attributes=("workclass", "hours-per-week"), epsilon="1",
              specializations=2, score="max", rows=(0, 300), backend="pandas")
    out = run_two_party_release(spark, TwoPartyParams(output=str(tmp_path / "default"), **kw))
    assert out.share_noise == "laplace-each" and out.guarantee["dp_against_other_party"] is True
    for table in (out.generalized, out.synthetic):
        prov = table_provenance(table)
        assert prov["share_noise"] == "laplace-each"
        assert prov["guarantee"]["mode"] == "laplace-each" and prov["guarantee"]["dp_against_other_party"] is True
        assert "epsilon-DP" in prov["guarantee"]["against_public"]
        assert "epsilon-DP" in prov["guarantee"]["against_other_party"]
        assert any("laplace-each" in r["step"] for r in prov["ledger"])
    syn = table_provenance(out.synthetic)  # the sparse filter accounts for the two Laplace terms
    assert "Lap(2/epsilon) + Lap(2/epsilon)" in syn["synthetic_min_count_rule"]
    out = run_two_party_release(spark, TwoPartyParams(output=str(tmp_path / "squares"), noise="gaussian-squares",
                                                      **kw))
    prov = table_provenance(out.generalized)
    assert prov["share_noise"] == "gaussian-squares" and prov["guarantee"]["dp_against_other_party"] is False
    assert "NOT differentially private against the other party" in prov["guarantee"]["against_other_party"]
    assert 0.215 < prov["guarantee"]["other_party_delta"] < 0.23
    assert any("NOT DP against the other party" in r["step"] for r in prov["ledger"])


def test_spark_marginals_refuse_values_outside_the_domain(spark, small):
    from fragrelease.jobs.diffgen.marginals import marginal_counts_spark

    bad = small[["record_id", "income", "age", "sex"]].iloc[:50].copy()
    bad.loc[3, "age"] = 150
    sdf = spark.createDataFrame(bad)
    with pytest.raises(DomainError, match="150"):
        marginal_counts_spark(sdf, adult_predictors(["age"]), "income", ADULT_CLASS_VALUES)
    bad.loc[3, "age"] = 30
    bad.loc[4, "sex"] = "X"
    with pytest.raises(DomainError, match="'X'"):
        marginal_counts_spark(spark.createDataFrame(bad), adult_predictors(["sex"]), "income", ADULT_CLASS_VALUES)


@pytest.mark.slow  # whole releases end to end (minutes with the suite's load); CI runs it
def test_spark_held_numeric_counts_score_and_choose_like_the_driver(spark, small, monkeypatch):
    """Numeric marginals kept in Spark (forced: tiny limits, several range partitions) == the driver's arrays."""
    import fragrelease.jobs.diffgen.marginals as jd

    monkeypatch.setattr(jd, "MAX_DRIVER_VALUES", 5)
    monkeypatch.setattr(jd, "VALUES_PER_PARTITION", 15)
    attrs = ["age", "fnlwgt", "sex"]
    sub = small.iloc[:400].reset_index(drop=True)
    preds = adult_predictors(attrs)
    counts = jd.marginal_counts_spark(spark.createDataFrame(sub[["income", *attrs]]), preds, "income",
                                      ADULT_CLASS_VALUES)
    assert isinstance(counts["age"], jd.SparkNumericCounts) and isinstance(counts["fnlwgt"], jd.SparkNumericCounts)
    assert isinstance(counts["sex"], AttributeCounts)
    assert counts["age"].table.select("pid").distinct().count() > 2
    for p in preds[:2]:
        ref = marginal_counts(p, sub[p.attribute], sub["income"], ADULT_CLASS_VALUES)
        mid = float(np.median(sub[p.attribute]))  # a value present in the data, as an interval end
        for lo, hi, top, score in [(p.lo, p.hi, True, "max"), (p.lo, p.hi, True, "infogain"), (mid, p.hi, False, "max")]:
            pts, u = counts[p.attribute].split_intervals(lo, hi, top=top, score=score)
            rpts, ru = split_intervals(ref, lo, hi, top=top, score=score)
            assert np.array_equal(pts, rpts) and np.allclose(u, ru), (p.attribute, lo, hi, score)
        rows, (_, first, _) = counts[p.attribute]._scored(mid, p.hi, False, "max", None)
        rows = rows.sort_values("left_pt")  # each sub-interval ends at the next value, across partitions
        assert np.array_equal(rows["right_pt"], np.append(rows["left_pt"].to_numpy()[1:], p.hi))
        assert first == rows["left_pt"].iloc[0]
        # with a huge ε' both pick a split of the best score
        s, uu = counts[p.attribute].choose_split(p.lo, p.hi, top=True, eps_prime=Fraction(10 ** 6), score="max",
                                                 randomness=SeededDiffGenRandomness(1))
        rpts, ru = split_intervals(ref, p.lo, p.hi, top=True, score="max")
        assert uu == ru.max() and ru[np.searchsorted(rpts, s) - 1] == ru.max() and p.lo < s < p.hi
    cut, _ = specialize_cut(preds, counts, epsilon=Fraction(1), specializations=3, score="max",
                            randomness=SeededDiffGenRandomness(2))  # the engine runs on Spark-held counts
    assert all(np.all(np.diff(cut.bounds[a]) > 0) for a in ("age", "fnlwgt"))
    bad = sub[["income", "age"]].copy()
    bad.loc[3, "age"] = 150
    with pytest.raises(DomainError, match="150"):
        jd.marginal_counts_spark(spark.createDataFrame(bad), preds[:1], "income", ADULT_CLASS_VALUES)


def test_release_refused_for_one_existing_table_writes_nothing(spark, small, tmp_path):
    import os

    from fragrelease.errors import ReleaseExistsError
    from fragrelease.jobs.diffgen.runner import ReleaseWrite, noisy_generalized_table, write_release
    from fragrelease.jobs.storage import commit_delta, is_delta_table

    attrs = ["sex", "race"]
    sdf = spark.createDataFrame(small[["record_id", "income", *attrs]].iloc[:300])
    cut = Cut.top(adult_predictors(attrs))
    noisy = noisy_generalized_table(spark, sdf, cut, Fraction(1))
    out = str(tmp_path / "release")
    commit_delta(spark.range(3), os.path.join(out, "synthetic"), provenance={})  # someone's table is in the way
    kw = dict(output=out, epsilon=Fraction(1), specializations=0, score="max", ledger=(), spent=Fraction(1, 2),
              mode="diffgen", t0=0.0)
    with pytest.raises(ReleaseExistsError, match="synthetic"):
        write_release(spark, noisy, cut, ReleaseWrite(if_exists="error", **kw))
    assert not is_delta_table(os.path.join(out, "generalized"))  # nothing half-written
    with pytest.raises(Exception, match="(?i)schema"):  # a new version must keep the table's schema
        write_release(spark, noisy, cut, ReleaseWrite(if_exists="new-version", **kw))
    assert not is_delta_table(os.path.join(out, "generalized"))
