"""Marginal synthesis on Spark: the owners' counts equal the numpy reference; rows drawn on the executors."""
import numpy as np
import pandas as pd

from fragrelease.jobs.synthesis.counts import coded_columns, first_bad_value, marginal_counts
from fragrelease.synthesis.domain import CodedAttribute, SynthesisDomain, contingency
from fragrelease.synthesis.model import SamplingPlan
from fragrelease.udfs.synthesis import synthetic_rows

DOM = SynthesisDomain((CodedAttribute("sex", ("Female", "Male")),
                       CodedAttribute.numeric("age", 0, 100, bins=10, integer=True),
                       CodedAttribute("race", ("White", "Black", "Other"))))


def _table(n, seed):
    gen = np.random.default_rng(seed)
    return pd.DataFrame({"record_id": np.arange(n), "sex": gen.choice(["Female", "Male"], n),
                         "age": gen.integers(0, 101, n), "race": gen.choice(["White", "Black", "Other"], n)})


def test_spark_counts_equal_the_numpy_reference(spark):
    pdf = _table(500, 1)
    coded = coded_columns(spark.createDataFrame(pdf), DOM)
    assert first_bad_value(coded, DOM, source="owner a, fragment f.csv") is None
    cliques = [("sex",), ("age",), ("race",), ("sex", "age"), ("age", "race"), ("sex", "age", "race")]
    got = marginal_counts(coded, DOM, cliques)
    ref = DOM.encode(pdf[list(DOM.names)])
    for c in cliques:
        assert np.array_equal(got[c], contingency(ref, c, DOM.sizes)), c
    assert got[("age",)][-1] == (pdf["age"] > 90).sum()  # left-open bins: (90, 100]
    assert got[("age",)][0] == (pdf["age"] <= 10).sum()  # and [0, 10]


def test_a_bad_value_is_named_before_any_noise(spark):
    pdf = _table(20, 2).astype({"age": float})
    pdf.loc[7, "race"] = "Martian"
    coded = coded_columns(spark.createDataFrame(pdf), DOM)
    assert first_bad_value(coded, DOM, source="owner a, fragment f.csv") == \
        "owner a, fragment f.csv: column 'race': value 'Martian' is not one of the declared categories"
    pdf.loc[7, "race"] = "White"
    pdf.loc[3, "age"] = 101.5
    coded = coded_columns(spark.createDataFrame(pdf), DOM)
    assert first_bad_value(coded, DOM, source="s") == "s: column 'age': value '101.5' lies outside the declared domain [0, 100]"


ROWS = 9000


def test_rows_drawn_on_the_executors_follow_the_plan(spark):
    # sex a fair coin; race given sex: Female -> White, Male -> uniform; age given sex: bin 2 or bin 7
    cdf_sex = np.array([0.5, 1.0])
    cdf_race = np.array([[1.0, 1.0, 1.0], [1 / 3, 2 / 3, 1.0]])
    cdf_age = np.zeros((2, 10))
    cdf_age[0, 2:] = 1.0
    cdf_age[1, 7:] = 1.0
    plan = SamplingPlan((("sex", (), cdf_sex), ("race", ("sex",), cdf_race), ("age", ("sex",), cdf_age)))
    out = synthetic_rows(spark, plan, DOM, ROWS, partitions=3).toPandas()
    assert len(out) == ROWS and list(out.columns) == ["sex", "age", "race"]
    assert str(out["age"].dtype) == "int64"
    fem = out[out["sex"] == "Female"]
    assert set(fem["race"]) == {"White"} and fem["age"].between(21, 30).all()
    male = out[out["sex"] == "Male"]
    assert male["age"].between(71, 80).all()
    # the executors draw from the OS CSPRNG: 9,000 rows (6,000 before) put the same bands at 5.7 sd (the
    # share of Female, sd 0.0053) and at 5.5 sd or more (each race among the ~4,500 men, sd 0.0070; 0.0073
    # at 4,216 men, a 1e-9 quantile), together 1e-7; at 6,000 rows both were 4.6 sd, 1 false failure in
    # 75,000 runs
    assert abs(len(fem) / ROWS - 0.5) < 0.03
    assert np.abs(male["race"].value_counts(normalize=True).to_numpy() - 1 / 3).max() < 0.04
