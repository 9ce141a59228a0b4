"""The tiers job on Spark equals the pure-python chain; its CLI and refusals (docs/specification.md §6)."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from fragrelease import tiers as tm
from fragrelease.errors import DomainError, SchemaMismatchError


@pytest.fixture(scope="module")
def german():
    from fragrelease.schemas.datasets import GERMAN_COLUMNS, load_german_credit_pandas

    qi = [c for c in GERMAN_COLUMNS if c != "credit_class"]
    return tm.standardize(load_german_credit_pandas(), qi), tm.TierColumns.make(qi, "credit_class", "record_id")


@pytest.mark.parametrize("alg,hops", [("tda", 2), ("fla", 2), ("bua", 1)])
def test_spark_chain_equals_pure_python(spark, german, alg, hops):
    from fragrelease.jobs.tiers import runner as jt
    from fragrelease.schemas.datasets import load_german_credit_pandas

    _, cols = german
    raw = load_german_credit_pandas().iloc[:120]  # unstandardized: the same input bits on both paths
    # max_node_rows = 70: the root is split in its own pass, its halves are solved whole
    ref = tm.run_chain(raw, cols, "0.04", hops, alg, max_node_rows=70, surrogate_ids=False)
    source = jt.prepare(spark.createDataFrame(raw), cols, standardize=False)
    got = jt.build_chain(source, cols, "0.04", hops, alg, max_node_rows=70, surrogate_ids=False)
    assert len(got) == hops
    for r, g in zip(ref, got):
        table = g["table"].toPandas().sort_values(cols.row_id).reset_index(drop=True)
        pd.testing.assert_frame_equal(table, r.table[table.columns], check_exact=True, check_dtype=False)
        assert g["disclosure"] == pytest.approx(r.disclosure, rel=1e-12)
        assert g["utility_loss"] == pytest.approx(r.utility_loss, rel=1e-9)
        assert g["threshold"] == r.threshold


def test_spark_validation_names_bad_columns_and_nulls(spark):
    from fragrelease.jobs.tiers import runner as jt

    df = spark.createDataFrame(pd.DataFrame({"record_id": [0, 1, 2], "age": [30.0, None, 50.0], "s": ["a", "b", "a"]}))
    with pytest.raises(DomainError, match="'age'"):
        jt.validate_source(df, tm.TierColumns.make(["age"], "s", "record_id"))
    with pytest.raises(SchemaMismatchError, match="'height'"):
        jt.validate_source(df, tm.TierColumns.make(["height"], "s", "record_id"))
    with pytest.raises(SchemaMismatchError, match="'s'"):
        jt.validate_source(df, tm.TierColumns.make(["s"], "age", "record_id"))


@pytest.mark.slow  # whole releases end to end (minutes with the suite's load); CI runs it
def test_cli_german_chain_writes_delta_tiers_with_p_and_ul(spark, tmp_path, capsys):
    from fragrelease.jobs.cli import run_cli
    from fragrelease.jobs.storage import read_delta, table_provenance

    out = tmp_path / "german"
    args = ["tiers", "run", "--dataset", "german", "--delta", "0.05", "--hops", "2", "--algorithm", "tda",
            "--output", str(out)]
    assert run_cli(args) == 0
    assert "P(T_i)" in capsys.readouterr().out
    cols = tm.TierColumns.make([c for c in read_delta(spark, str(out / "tier_1")).columns
                                if c not in ("record_id", "credit_class")], "credit_class", "record_id")
    assert len(cols.quasi_identifiers) == 24
    prev = None
    for i, th in ((1, 0.10), (2, 0.05)):
        table = read_delta(spark, str(out / f"tier_{i}")).toPandas().sort_values("record_id").reset_index(drop=True)
        prov = table_provenance(str(out / f"tier_{i}"))
        assert prov["tier"] == i and Fraction(prov["threshold"]) == Fraction(th).limit_denominator(100)
        assert prov["disclosure"] == pytest.approx(tm.table_disclosure(table, cols), rel=1e-9)
        assert prov["disclosure"] < th
        assert "utility_loss" not in prov  # it involves the source's dispersion: operator output only
        assert len(table) == 1000
        if prev is not None:
            assert tm.is_sanitization(prev, table, cols)
        prev = table
    assert run_cli(args) == 2  # the tiers exist: refused, nothing overwritten
    assert "already exists" in capsys.readouterr().err


@pytest.mark.slow  # a whole release end to end (or processes of their own): CI runs it; the quick loop leaves it out
def test_adult_sample_with_user_chosen_sensitive_attribute(spark, tmp_path, adult_pdf):
    from fragrelease.jobs.storage import read_delta, table_provenance
    from fragrelease.jobs.tiers import runner as jt

    path = str(tmp_path / "adult.parquet")
    spark.createDataFrame(adult_pdf.iloc[:1000]).write.parquet(path)
    qi = ["age", "education-num", "hours-per-week"]
    result = jt.run_tiers(spark, tm.TiersParams(dataset=path, delta="0.05", hops=2, output=str(tmp_path / "out"),
                                                sensitive="occupation", quasi_identifiers=tuple(qi), algorithm="tda"))
    cols = tm.TierColumns.make(qi, "occupation", "record_id")
    prev = None  # tier 1 carries surrogate ids, so it is matched to the next tier only
    for t in result.tiers:
        table = read_delta(spark, t.path).toPandas().sort_values("record_id").reset_index(drop=True)
        assert tm.table_disclosure(table, cols) < float(t.threshold)
        assert sorted(table["occupation"]) == sorted(adult_pdf["occupation"].iloc[:1000])
        if prev is not None:
            assert tm.is_sanitization(prev, table, cols)
        assert table_provenance(t.path)["sensitive"] == "occupation"
        prev = table


def test_cli_refuses_a_threshold_at_or_above_the_singleton_disclosure(spark, tmp_path, capsys):
    from fragrelease.jobs.cli import run_cli
    from fragrelease.jobs.storage import is_delta_table

    out = tmp_path / "german"
    args = ["tiers", "run", "--dataset", "german", "--delta", "0.25", "--hops", "2", "--output", str(out)]
    assert run_cli(args) == 2
    err = " ".join(capsys.readouterr().err.split())
    for part in ("l·δ = 0.5", "tier 1", "0.4934"):
        assert part in err
    assert not is_delta_table(str(out / "tier_1")) and not is_delta_table(str(out / "tier_2"))


@pytest.mark.slow  # a whole release end to end (or processes of their own): CI runs it; the quick loop leaves it out
def test_spark_release_carries_surrogate_ids_matching_their_classes(spark, tmp_path):
    """Before: run_tiers released the source's record_id in every tier."""
    from fragrelease.jobs.storage import read_delta, table_provenance
    from fragrelease.jobs.tiers import runner as jt
    from fragrelease.schemas.datasets import GERMAN_COLUMNS, load_german_credit_pandas

    qi = [c for c in GERMAN_COLUMNS if c != "credit_class"]
    cols = tm.TierColumns.make(qi, "credit_class", "record_id")
    raw = load_german_credit_pandas().iloc[:300].astype({c: float for c in qi})
    path = str(tmp_path / "german.parquet")
    spark.createDataFrame(raw.sample(frac=1.0, random_state=2)).write.parquet(path)
    # the release path: BUA at 0.2 leaves many lone "good" records unchanged, which lets the test
    # find their source rows by their exact quasi-identifiers (as a recipient could)
    result = jt.run_tiers(spark, tm.TiersParams(dataset=path, delta="0.2", hops=1, output=str(tmp_path / "out"),
                                                sensitive="credit_class", quasi_identifiers=tuple(qi),
                                                algorithm="bua", standardize=False))
    tier = read_delta(spark, result.tiers[0].path).toPandas()
    prov = table_provenance(result.tiers[0].path)
    assert "CSPRNG" in prov["row_ids"]
    assert len(tier) == 300 and tier["record_id"].is_unique
    assert not set(tier["record_id"]) & set(raw["record_id"])
    assert sorted(tier["credit_class"]) == sorted(raw["credit_class"])
    found = tier.merge(raw, on=[*qi, "credit_class"], suffixes=("", "_src"))
    assert len(found) >= 100 and found["record_id_src"].is_unique
    order = found.sort_values("record_id")["record_id_src"].to_numpy()
    assert not (np.all(np.diff(order) > 0) or np.all(np.diff(order) < 0))  # not a monotone relabelling

    # the Spark surrogates, with the input id carried alongside (test only): every row keeps its class
    source = jt.prepare(spark.createDataFrame(raw.iloc[:120]), cols, standardize=False)
    labelled = jt.assign_surrogate_ids(source.withColumn("orig", source["record_id"]), cols)
    pairs = labelled.select("record_id", "orig").toPandas()
    assert pairs["record_id"].is_unique and not set(pairs["record_id"]) & set(pairs["orig"])
    chain = jt.build_chain(labelled.drop("orig"), cols, "0.04", 2, "tda", surrogate_ids=False)
    src = raw.iloc[:120].set_index("record_id")
    x0 = src.loc[pairs["orig"], qi].to_numpy(float)
    for t in chain:
        rows = t["table"].toPandas().set_index("record_id").loc[pairs["record_id"]]
        assert rows["credit_class"].tolist() == src.loc[pairs["orig"], "credit_class"].tolist()
        labels = rows[qi].groupby(qi, sort=False).ngroup().to_numpy()
        np.testing.assert_allclose(rows[qi].to_numpy(float), tm.class_means(x0, labels), rtol=0, atol=1e-9)


def test_standardized_source_keeps_table_statistics_out_of_the_spark_plan(spark, capsys):
    from fragrelease.jobs.tiers import runner as jt

    raw = pd.DataFrame({"record_id": [1, 2, 3, 4], "a": [1.25, 2.5, 100.125, 34.0], "b": [3.0, 3.0, 3.0, 3.0],
                        "s": ["x", "y", "x", "y"]})
    cols = tm.TierColumns.make(["a", "b"], "s", "record_id")
    out = jt.prepare(spark.createDataFrame(raw), cols, standardize=True)
    got = out.orderBy("record_id").toPandas()
    a = raw["a"].to_numpy()
    np.testing.assert_allclose(got["a"], (a - a.mean()) / a.std(), rtol=1e-12)
    assert (got["b"] == 0.0).all()  # a constant column becomes 0
    out.explain(mode="extended")
    plan = capsys.readouterr().out
    assert str(a.mean()) not in plan and str(a.mean())[:6] not in plan  # the mean of a (34.46875)
    assert str(a.std())[:8] not in plan
    mean = np.array([a.mean(), 3.0])
    assert jt.utility_df(spark.createDataFrame(raw[["a", "b"]]), cols, mean) == pytest.approx(
        float(np.sqrt(np.asarray(cols.weights)[0] * (a - a.mean()) ** 2).sum()), rel=1e-12)
