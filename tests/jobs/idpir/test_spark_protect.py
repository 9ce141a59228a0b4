"""The Spark IR job against the numpy reference, its plan, and fragment validation."""
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from chispa import assert_df_equality
from noise_injection import HashedLaplace
from pyspark.sql import functions as F
from pyspark.sql import types as T
from spark_jobs import job_ids, job_names
from specs import protect_with

from fragrelease.errors import DomainError, IdentifierError, SchemaMismatchError
from fragrelease.idpir.category_order import DEFAULT_ORDER_SHARE, dp_frequency_order, ranks_of
from fragrelease.idpir.mechanisms import protect_attribute
from fragrelease.idpir.stage import AttributeTask
from fragrelease.jobs.protocol.fragment import validate_fragment
from fragrelease.jobs.protocol.ranking import global_rank, range_sorted
from fragrelease.protocol.options import ReleaseOptions
from fragrelease.schemas.adult import SCHEMA as ADULT
from fragrelease.schemas.wine import SCHEMA as WINE


@pytest.fixture(scope="module")
def adult_sample(adult_pdf):
    return adult_pdf.sample(2_500, random_state=7).sort_values("record_id").reset_index(drop=True)


def reference(pdf, attrs, k, eps, mechanism, noise, tiebreak=None, share=DEFAULT_ORDER_SHARE, postprocess="isotonic"):
    """numpy reference of the default release (dp-frequency order; the histogram gets share · ε)."""
    ids = pdf["record_id"].to_numpy() if tiebreak is None else tiebreak
    out = {}
    for a in attrs:
        lo, hi = a.bounds()
        eps_centroids = eps
        if a.categorical:
            counts = pdf[a.name].value_counts().to_dict()
            ranks = ranks_of(dp_frequency_order(counts, a.categories, eps * share, noise, attribute=a.name))
            eps_centroids = eps * (1 - share)
            vals = pdf[a.name].map(ranks).to_numpy(float)
        else:
            vals = pdf[a.name].to_numpy(float)
        res = protect_attribute(vals, AttributeTask(a.name, lo, hi, categorical=a.categorical, epsilon=eps_centroids),
                                k=k, mechanism=mechanism, noise=noise, tiebreak=ids,
                                options=ReleaseOptions.of(postprocess=postprocess))
        if a.categorical:
            inv = {r: c for c, r in ranks.items()}
            res = np.array([inv[int(r)] for r in res], dtype=object)
        out[a.name] = res
    return out


def assert_equals_reference(spark, got, ids, ref, attrs, *, ignore_row_order=False):
    """The Spark release ``got`` equals the numpy reference exactly (chispa): columns ``record_id`` (long)
    then each attribute (numeric double, categorical string) in ``attrs`` order, one row per id of ``ids``
    with the reference's values; in ``ids`` order unless ``ignore_row_order``."""
    schema = T.StructType([T.StructField("record_id", T.LongType()),
                           *(T.StructField(a.name, T.StringType() if a.categorical else T.DoubleType()) for a in attrs)])
    expected = pd.DataFrame({"record_id": np.asarray(ids), **{a.name: ref[a.name] for a in attrs}})
    assert_df_equality(got, spark.createDataFrame(expected, schema), ignore_nullable=True,
                       ignore_row_order=ignore_row_order)


@pytest.mark.parametrize("mechanism,k,spread,small", [("idp-ir", 50, False, False), ("dp-ir", 7, False, False),
                                                       ("idp", 1, False, False), ("idp-ir", 50, True, False),
                                                       ("idp-ir", 50, False, True), ("dp-ir", 7, False, True),
                                                       ("idp", 1, False, True)])
def test_spark_equals_numpy_reference_exactly(spark, adult_sample, monkeypatch, mechanism, k, spread, small):
    """Both plans a fragment of 2,500 × 8 can take: the small fragment's one task (the default at
    this size) and one task per attribute (forced by a gate of 0)."""
    import fragrelease.jobs.idpir.cluster_noise as cluster_noise
    import fragrelease.jobs.idpir.protect as protect

    if spread:  # one task per attribute (large fragments' placement), forced on this small one
        monkeypatch.setattr(cluster_noise, "SPREAD_VALUES", 0)
    if not small:
        monkeypatch.setattr(protect, "SMALL_VALUES", 0)  # the whole-attribute plan
    assert (len(adult_sample) * len(ADULT.protected) <= protect.SMALL_VALUES) == small
    attrs = list(ADULT.protected)
    df = spark.createDataFrame(adult_sample, ADULT.struct_type())
    noise = HashedLaplace(salt=mechanism)
    eps = Fraction(1, 10)
    got = protect_with(df, attrs, id_column="record_id", k=k, epsilon_per_attribute=eps, mechanism=mechanism,
                       noise=noise)
    ref = reference(adult_sample, attrs, k, eps, mechanism, noise)
    # one group: ids kept, in id order
    assert_equals_reference(spark, got, adult_sample["record_id"], ref, attrs)


@pytest.mark.parametrize("mechanism,k,postprocess", [("idp-ir", 50, "isotonic"), ("idp", 1, "isotonic"),
                                                     ("dp-ir", 7, "none")])
def test_many_buckets_and_assembly_groups_give_the_same_release(spark, adult_sample, monkeypatch, mechanism, k,
                                                                postprocess):
    """Force 9 sort buckets per attribute (heavy ties split by id) and 6 reassembly groups (one task each);
    dp-ir also puts each attribute's noise step in a task of its own."""
    import fragrelease.jobs.idpir.cluster_noise as cluster_noise
    import fragrelease.jobs.idpir.protect as protect

    if mechanism == "dp-ir":
        monkeypatch.setattr(cluster_noise, "SPREAD_VALUES", 0)

    monkeypatch.setattr(protect, "_WHOLE_ATTRIBUTE_ROWS", 0)  # the distributed plan, whatever n
    monkeypatch.setattr(protect, "_VALUES_PER_BUCKET", 300)
    monkeypatch.setattr(protect, "_ROWS_PER_ASSEMBLY", 450)
    monkeypatch.setattr(protect, "_RUN_ROWS", 1000)
    monkeypatch.setattr(protect, "_BROADCAST_CENTROIDS", 0)  # centroids routed by a shuffle join
    attrs = list(ADULT.protected)
    noise = HashedLaplace(salt="buckets")
    df = spark.createDataFrame(adult_sample, ADULT.struct_type()).repartition(3)
    got = protect_with(df, attrs, id_column="record_id", k=k, epsilon_per_attribute=Fraction(1, 10),
                       mechanism=mechanism, noise=noise, postprocess=postprocess)
    ref = reference(adult_sample, attrs, k, Fraction(1, 10), mechanism, noise, postprocess=postprocess)
    assert_equals_reference(spark, got, adult_sample["record_id"], ref, attrs, ignore_row_order=True)


def test_string_ids_break_ties_by_their_hash(spark, adult_sample, monkeypatch):
    import fragrelease.jobs.idpir.protect as protect

    monkeypatch.setattr(protect, "_WHOLE_ATTRIBUTE_ROWS", 0)
    monkeypatch.setattr(protect, "_VALUES_PER_BUCKET", 700)
    monkeypatch.setattr(protect, "_ROWS_PER_ASSEMBLY", 1000)
    attrs = [ADULT.attribute("age"), ADULT.attribute("sex")]
    pdf = adult_sample[["record_id", "age", "sex"]].assign(record_id=lambda d: "p-" + d["record_id"].astype(str))
    df = spark.createDataFrame(pdf)
    hashes = df.select("record_id", F.xxhash64("record_id").alias("h")).toPandas().set_index("record_id")["h"]
    noise = HashedLaplace(salt="strings")
    got = protect_with(df, attrs, id_column="record_id", k=40, epsilon_per_attribute=Fraction(1, 2),
                           mechanism="idp-ir", noise=noise).toPandas().set_index("record_id").loc[pdf["record_id"]]
    ref = reference(pdf, attrs, 40, Fraction(1, 2), "idp-ir", noise, tiebreak=hashes.loc[pdf["record_id"]].to_numpy())
    assert np.array_equal(got["age"].to_numpy(), ref["age"])
    assert (got["sex"].to_numpy() == ref["sex"]).all()


def test_bucket_of_orders_heavy_ties_by_key():
    from fragrelease.jobs.idpir.bucket_sort import bucket_of

    sx = np.array([1.0, 2.0, 2.0, 2.0, 3.0])
    sk = np.array([2**63 - 1, 10, 20, 2**63 - 1, 2**63 - 1])
    x = np.array([0.5, 1.0, 1.5, 2.0, 2.0, 2.0, 2.0, 3.0, 9.0])
    key = np.array([0, 99, 0, 5, 10, 15, 25, 7, 0])
    # bucket = number of splitters strictly below (x, key)
    expect = [sum((sx[i], sk[i]) < (xv, kv) for i in range(sx.size)) for xv, kv in zip(x, key)]
    assert bucket_of(x, key, sx, sk).tolist() == expect == [0, 0, 1, 1, 1, 2, 3, 4, 5]


@pytest.mark.parametrize("splitters", [1, 19, 48, 49, 200])
def test_bucket_of_equals_two_binary_searches(splitters):
    """The compare-count path (up to 48 splitters) and the binary search give the same buckets as
    ``np.searchsorted`` left/right with ties cut by the key, NaN last and -0.0 equal to 0.0."""
    from fragrelease.jobs.idpir.bucket_sort import bucket_of

    def two_searches(x, key, sx, sk):
        lo, hi = np.searchsorted(sx, x, side="left"), np.searchsorted(sx, x, side="right")
        out = lo.astype(np.int64)
        for i in np.flatnonzero(hi > lo):
            out[i] = lo[i] + np.searchsorted(sk[lo[i]:hi[i]], key[i], side="left")
        return out

    rng = np.random.default_rng(splitters)
    for trial in range(20):
        m = 5_000
        x = rng.integers(-6, 6, m).astype(float) if trial % 2 else np.round(rng.uniform(-5, 5, m), 1)
        x[rng.integers(0, m, 4)] = np.nan
        x[rng.integers(0, m, 4)] = -0.0
        key = rng.integers(-50, 50, m)
        sx = rng.choice(x[~np.isnan(x)], splitters)
        sk = np.where(rng.random(splitters) < 0.5, np.iinfo(np.int64).max, rng.integers(-50, 50, splitters))
        order = np.lexsort((sk, sx))
        sx, sk = sx[order], sk[order]
        got = bucket_of(x, key, sx, sk)
        assert got.dtype == np.int64
        assert np.array_equal(got, two_searches(x, key, sx, sk))


def test_spark_matches_reference_on_continuous_wine(spark, wine_pdf):
    pdf = wine_pdf.sample(900, random_state=3).sort_values("record_id").reset_index(drop=True)
    attrs = list(WINE.protected)
    noise = HashedLaplace(salt="wine")
    got = protect_with(spark.createDataFrame(pdf, WINE.struct_type()), attrs, id_column="record_id", k=30,
                           epsilon_per_attribute=Fraction(1, 11), mechanism="idp-ir", noise=noise).toPandas()
    ref = reference(pdf, attrs, 30, Fraction(1, 11), "idp-ir", noise)
    for a in attrs:  # float sums may be added in another order: equal to 1e-9 relative
        np.testing.assert_allclose(got[a.name].to_numpy(), ref[a.name], rtol=1e-9, atol=1e-12)
        lo, hi = a.bounds()
        assert got[a.name].between(lo, hi).all()


def _executed_plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def test_ir_step_never_moves_rows_to_one_partition(spark, adult_sample, monkeypatch):
    """Above the small-fragment gate (forced here by a gate of 0) no step moves the rows to one partition."""
    import fragrelease.jobs.idpir.protect as protect

    monkeypatch.setattr(protect, "SMALL_VALUES", 0)
    df = spark.createDataFrame(adult_sample, ADULT.struct_type())
    # the ranking step, before it is stored
    long = df.select("record_id", F.lit(0).alias("attr"), F.col("age").cast("double").alias("x"))
    sorted_plan = _executed_plan(range_sorted(long, ["attr", "x", "record_id"], 4))
    assert "rangepartitioning" in sorted_plan.lower()
    assert "SinglePartition" not in sorted_plan
    # clustering, centroids, noise join, pivot and ordering of the output
    out = protect_with(df, list(ADULT.protected), id_column="record_id", k=50,
                           epsilon_per_attribute=Fraction(1, 10), mechanism="idp-ir", noise=HashedLaplace())
    out_plan = _executed_plan(out)
    assert "Exchange" in out_plan
    assert "SinglePartition" not in out_plan


def test_global_rank_is_a_permutation_in_sorted_order(spark):
    rng = np.random.default_rng(5)
    pdf = pd.DataFrame({"rid": np.arange(3000), "g": rng.integers(0, 3, 3000), "x": rng.integers(0, 20, 3000).astype(float)})
    got = global_rank(spark.createDataFrame(pdf), "g", ["x", "rid"], 7).toPandas()
    for _, part in got.groupby("g"):
        part = part.sort_values("rank")
        assert part["rank"].tolist() == list(range(len(part)))
        assert part[["x", "rid"]].apply(tuple, axis=1).is_monotonic_increasing


def _adult_df(spark, pdf):
    return spark.createDataFrame(pdf, ADULT.struct_type())


def test_validation_names_the_bad_value(spark, adult_sample):
    attrs = list(ADULT.protected)
    bad = adult_sample.head(50).copy()
    bad.loc[3, "age"] = 130
    with pytest.raises(DomainError, match=r"column 'age' value '130' \(record id \d+\) is outside its declared domain \[0.0, 100.0\]"):
        validate_fragment(_adult_df(spark, bad), attrs, "record_id")
    bad = adult_sample.head(50).copy()
    bad.loc[1, "sex"] = "Unknown"
    with pytest.raises(DomainError, match="'Unknown'"):
        validate_fragment(_adult_df(spark, bad), attrs, "record_id")
    bad = adult_sample.head(50).copy()
    bad.loc[5, "record_id"] = bad.loc[6, "record_id"]
    with pytest.raises(IdentifierError, match=f"id {bad.loc[6, 'record_id']} appears 2 times"):
        validate_fragment(_adult_df(spark, bad), attrs, "record_id")


def test_validation_refuses_nulls_and_wrong_types(spark):
    df = spark.createDataFrame([(1, None), (2, 40)], "record_id long, age int")
    with pytest.raises(DomainError, match="'age' has 1 null"):
        validate_fragment(df, [ADULT.attribute("age")], "record_id")
    df = spark.createDataFrame([(1, "forty")], "record_id long, age string")
    with pytest.raises(DomainError, match="column 'age' value 'forty' \\(record id 1\\) is not a number"):
        validate_fragment(df, [ADULT.attribute("age")], "record_id")
    with pytest.raises(SchemaMismatchError, match="no column 'sex'"):
        validate_fragment(df.drop("age"), [ADULT.attribute("sex")], "record_id")


def _all_plans(df) -> str:
    qe = df._jdf.queryExecution()
    return "\n".join([qe.logical().toString(), qe.optimizedPlan().toString(), qe.executedPlan().toString()])


def test_category_order_is_not_a_literal_of_the_spark_plan(spark, adult_sample):
    """The rank order (public or noised, but the label map of the release) never shows in explain/UI/event logs."""
    attrs = [ADULT.attribute("age"), ADULT.attribute("native-country"), ADULT.attribute("occupation")]
    df = spark.createDataFrame(adult_sample, ADULT.struct_type())
    out = protect_with(df, attrs, id_column="record_id", k=50, epsilon_per_attribute=Fraction(1, 3),
                           mechanism="idp-ir", noise=HashedLaplace(salt="plan"))
    plans = _all_plans(out)
    for label in ("United-States", "Holand-Netherlands", "Prof-specialty", "Tech-support"):
        assert label not in plans, label


def test_declared_order_maps_ranks_through_the_schema_order(spark, adult_sample):
    """With ``declared`` and no noise, each cluster's label is the declared category at its rounded mean rank."""
    from noise_injection import ZeroNoise

    sex = ADULT.attribute("sex")
    df = spark.createDataFrame(adult_sample, ADULT.struct_type())
    got = protect_with(df, [sex], id_column="record_id", k=50, epsilon_per_attribute=Fraction(1),
                           mechanism="dp-ir", category_order="declared", noise=ZeroNoise()).toPandas()
    ranks = adult_sample["sex"].map({c: i + 1 for i, c in enumerate(sex.categories)}).to_numpy(float)
    ref = protect_attribute(ranks, AttributeTask("sex", 1, len(sex.categories), categorical=True, epsilon=1),
                            k=50, mechanism="dp-ir", noise=ZeroNoise(), tiebreak=adult_sample["record_id"].to_numpy())
    labels = np.asarray(sex.categories, dtype=object)[ref.astype(int) - 1]
    assert (got.set_index("record_id").loc[adult_sample["record_id"], "sex"].to_numpy() == labels).all()


def test_dp_frequency_spends_its_share_on_one_histogram_draw_per_category(spark, adult_sample):
    class Recording(HashedLaplace):
        def __init__(self):
            super().__init__(salt="rec")
            self.calls = []

        def perturb(self, values, scales, attributes, clusters):
            self.calls.append((list(attributes), np.asarray(scales, float)))
            return super().perturb(values, scales, attributes, clusters)

    race = ADULT.attribute("race")
    noise = Recording()
    df = spark.createDataFrame(adult_sample, ADULT.struct_type())
    protect_with(df, [race], id_column="record_id", k=50, epsilon_per_attribute=Fraction(1, 2),
                     mechanism="dp-ir", category_order_share=Fraction(1, 5), noise=noise)
    # the histogram is drawn on the driver, in this process: |dom| draws of scale 2 / (1/5 · 1/2) = 20
    hist = [(a, s) for a, s in noise.calls if a and a[0] == "race#order"]
    assert len(hist) == 1 and len(hist[0][0]) == len(race.categories)
    assert np.allclose(hist[0][1], 20.0)


@pytest.mark.parametrize("postprocess", ["none", "isotonic"])
def test_spark_postprocess_equals_the_numpy_reference(spark, adult_sample, postprocess):
    """Both settings, same injected noise: Spark's released values equal protect_attribute's exactly."""
    attrs = [ADULT.attribute("age"), ADULT.attribute("hours-per-week"), ADULT.attribute("education")]
    df = spark.createDataFrame(adult_sample, ADULT.struct_type())
    noise = HashedLaplace(salt=f"pp-{postprocess}")
    got = protect_with(df, attrs, id_column="record_id", k=25, epsilon_per_attribute=Fraction(1, 20),
                           mechanism="idp-ir", category_order="declared", noise=noise,
                           postprocess=postprocess).toPandas().set_index("record_id").loc[adult_sample["record_id"]]
    ids = adult_sample["record_id"].to_numpy()
    for a in attrs:
        lo, hi = a.bounds()
        if a.categorical:
            ranks = {c: i + 1 for i, c in enumerate(a.categories)}
            vals = adult_sample[a.name].map(ranks).to_numpy(float)
        else:
            vals = adult_sample[a.name].to_numpy(float)
        ref = protect_attribute(vals, AttributeTask(a.name, lo, hi, categorical=a.categorical, epsilon=Fraction(1, 20)),
                                k=25, mechanism="idp-ir", noise=noise, tiebreak=ids,
                                options=ReleaseOptions.of(postprocess=postprocess))
        if a.categorical:
            ref = np.asarray(a.categories, dtype=object)[ref.astype(int) - 1]
            assert (got[a.name].to_numpy() == ref).all(), a.name
        else:
            assert np.array_equal(got[a.name].to_numpy(), ref), a.name
            if postprocess == "isotonic":  # released values never decrease along the original order
                order = np.lexsort((ids, vals))
                assert np.all(np.diff(got[a.name].to_numpy()[order]) >= 0), a.name


def test_validation_refuses_a_non_integer_in_a_declared_integer_column(spark, adult_sample):
    """Adult's age is declared integer; a CSV read as double must not slip 35.5 through (named in the error)."""
    pdf = adult_sample.head(40)[["record_id", "age"]].astype({"age": float})
    pdf.loc[7, "age"] = 35.5
    df = spark.createDataFrame(pdf)
    with pytest.raises(DomainError, match=r"column 'age' value '35.5' \(record id \d+\) is not an integer; the schema declares integer"):
        validate_fragment(df, [ADULT.attribute("age")], "record_id")
    validate_fragment(df.where(f"record_id != {pdf.loc[7, 'record_id']}"), [ADULT.attribute("age")], "record_id")


def test_the_validation_pass_counts_categories_for_dp_frequency(spark, adult_sample):
    """The dp-frequency order's exact counts come from the validation pass: the same counts as the
    order's own pass (every declared category, 0 for absent ones), and the same release."""
    from specs import spec_for

    from fragrelease.jobs.idpir.protect import protect_fragment

    attrs = list(ADULT.protected)
    df = spark.createDataFrame(adult_sample, ADULT.struct_type())
    check = validate_fragment(df, attrs, "record_id", count_categories=True)
    assert check.n_records == len(adult_sample)
    assert "category_counts" not in repr(check)  # the owner's exact counts reach no log line by accident
    cats = [a for a in attrs if a.categorical]
    assert set(check.category_counts) == {a.name for a in cats}
    for a in cats:
        observed = adult_sample[a.name].value_counts().to_dict()
        assert check.category_counts[a.name] == {c: observed.get(c, 0) for c in a.categories}, a.name
    assert validate_fragment(df, attrs, "record_id").category_counts is None
    noise = HashedLaplace(salt="counted")
    eps = Fraction(1, 10)
    spec = spec_for(df, attrs, k=50, epsilon_per_attribute=eps, mechanism="idp-ir")
    got = protect_fragment(df, attrs, spec, id_column="record_id", noise=noise,
                           category_counts=check.category_counts)
    ref = reference(adult_sample, attrs, 50, eps, "idp-ir", noise)
    assert_equals_reference(spark, got, adult_sample["record_id"], ref, attrs)


@pytest.mark.parametrize("plan_name", ["small", "whole", "distributed"])
def test_the_line_up_gathers_the_values_with_no_pass_of_its_own(spark, adult_sample, monkeypatch, plan_name):
    """After the stored stages, the ids and their clusters cross into Python once, in the line-up's
    own tasks, which gather each id's value from its bucket's centroid slice: no map of ids to
    values runs between them (the only other Python pass reads the c · l released centroids; none
    for a small fragment, whose stored rows hold their centroids). The unlinked path's gathered
    ``(group, attr, rid, value)`` rows hold the same values."""
    from specs import spec_for

    import fragrelease.jobs.idpir.protect as protect
    from fragrelease.jobs.idpir.bucket_sort import F8, I8

    if plan_name != "small":
        monkeypatch.setattr(protect, "SMALL_VALUES", 0)
    if plan_name == "distributed":
        monkeypatch.setattr(protect, "_WHOLE_ATTRIBUTE_ROWS", 0)
        monkeypatch.setattr(protect, "_VALUES_PER_BUCKET", 700)
        monkeypatch.setattr(protect, "_ROWS_PER_ASSEMBLY", 1000)
    attrs = [ADULT.attribute("age"), ADULT.attribute("hours-per-week")]
    df = spark.createDataFrame(adult_sample, ADULT.struct_type())
    spec = spec_for(df, attrs, k=25, epsilon_per_attribute=Fraction(1, 2), mechanism="idp-ir")
    released = protect.released_fragment(df, attrs, spec, id_column="record_id", noise=HashedLaplace(salt="gather"))
    assert released.routed.broadcast
    wide = released.lined_up()
    plan = _executed_plan(wide)
    if plan_name == "small":  # one map over the stored partition: no group, no join, no exchange
        assert released.routed.together is not None
        assert plan.count("FlatMapGroupsInPandas") == 0 and plan.count("MapInPandas") == 1
        assert "Exchange" not in plan and "Join" not in plan
    else:
        assert released.routed.together is None
        assert plan.count("FlatMapGroupsInPandas") == 1  # the line-up
        assert plan.count("MapInPandas") == 1  # the centroid slices, from the stored c · l released values
    got = wide.toPandas().set_index("record_id").loc[adult_sample["record_id"]]
    assert released.groups == (3 if plan_name == "distributed" else 1)
    gathered = {a.name: {} for a in attrs}
    for r in released.values.collect():
        for i, v in zip(np.frombuffer(r["rid"], I8), np.frombuffer(r["value"], F8)):
            gathered[attrs[r["attr"]].name][int(i)] = float(v)
    for a in attrs:
        assert len(gathered[a.name]) == len(adult_sample)
        assert np.array_equal(got[a.name].to_numpy(), [gathered[a.name][int(i)] for i in adult_sample["record_id"]])


@pytest.mark.parametrize("ids", ["long", "string"])
def test_a_small_fragment_is_protected_in_one_job_and_lined_up_in_one_more(spark, adult_sample, monkeypatch, ids):
    """Records × attributes ≤ SMALL_VALUES: the draw of every attribute is one Spark job (stored at
    once), the line-up read by one more job, with no exchange; one value over the gate takes the
    whole-attribute plan (more jobs, an exchange). Both equal the numpy reference."""
    from specs import spec_for

    import fragrelease.jobs.idpir.protect as protect

    attrs = [ADULT.attribute("age"), ADULT.attribute("sex"), ADULT.attribute("hours-per-week"),
             ADULT.attribute("education")]
    pdf = adult_sample[["record_id", *[a.name for a in attrs]]]
    tiebreak = None
    if ids == "string":
        pdf = pdf.assign(record_id=lambda d: "p-" + d["record_id"].astype(str))
    df = spark.createDataFrame(pdf)  # local[2]: two input partitions, coalesced into one task, not shuffled
    if ids == "string":
        hashes = df.select("record_id", F.xxhash64("record_id").alias("h")).toPandas().set_index("record_id")["h"]
        tiebreak = hashes.loc[pdf["record_id"]].to_numpy()
    spec = spec_for(df, attrs, k=20, epsilon_per_attribute=Fraction(1, 4), mechanism="idp-ir",
                    category_order="declared")
    values = len(pdf) * len(attrs)
    noise = HashedLaplace(salt=f"one-job-{ids}")
    counts = {}
    names = {}
    plans = {}
    results = {}
    for gate in (values, values - 1):
        monkeypatch.setattr(protect, "SMALL_VALUES", gate)
        before = job_ids(spark)
        released = protect.released_fragment(df, attrs, spec, id_column="record_id", noise=noise)
        drawn = job_ids(spark)
        wide = released.lined_up()
        got = wide.toPandas()
        read = job_ids(spark) - drawn
        counts[gate] = (len(drawn - before), len(read))
        names[gate] = job_names(spark, (drawn - before) | read)
        plans[gate] = _executed_plan(wide)
        results[gate] = got.set_index("record_id").loc[pdf["record_id"]]
    assert counts[values] == (1, 1), names[values]  # the draw, stored; the line-up read back
    assert "Exchange" not in plans[values]
    assert sum(counts[values - 1]) > 2 and "Exchange" in plans[values - 1]
    # the declared order: ranks 1.. in the schema's order, the reference's mechanism on them
    for a in attrs:
        lo, hi = a.bounds()
        vals = (pdf[a.name].map({c: i + 1 for i, c in enumerate(a.categories)}) if a.categorical
                else pdf[a.name]).to_numpy(float)
        ref = protect_attribute(vals, AttributeTask(a.name, lo, hi, categorical=a.categorical, epsilon=Fraction(1, 4)),
                                k=20, mechanism="idp-ir", noise=noise,
                                tiebreak=pdf["record_id"].to_numpy() if tiebreak is None else tiebreak)
        if a.categorical:
            ref = np.asarray(a.categories, dtype=object)[ref.astype(int) - 1]
        for gate in (values, values - 1):
            assert (results[gate][a.name].to_numpy() == ref).all(), (a.name, gate)


def test_a_small_fragment_that_changed_while_read_is_refused_by_count(spark, adult_sample):
    """The one task counts every attribute's values against n: a label outside the rank order (as
    the larger plans' join drops it) or a record fewer is refused with the usual line."""
    from specs import spec_for

    import fragrelease.jobs.idpir.protect as protect

    attrs = [ADULT.attribute("age"), ADULT.attribute("sex")]
    pdf = adult_sample[["record_id", "age", "sex"]].head(200)
    df = spark.createDataFrame(pdf)
    spec = spec_for(df, attrs, k=20, epsilon_per_attribute=Fraction(1, 4), mechanism="idp-ir",
                    category_order="declared")
    changed = spark.createDataFrame(pdf.assign(sex=["Male"] * 199 + ["Unknown"]))
    with pytest.raises(Exception, match="attribute 'sex' has 199 values, expected 200 rows"):
        protect.released_fragment(changed, attrs, spec, id_column="record_id", noise=HashedLaplace())
    with pytest.raises(Exception, match="attribute 'age' has 199 values, expected 200 rows"):
        protect.released_fragment(df.where("record_id != " + str(int(pdf["record_id"].iloc[0]))), attrs, spec,
                                  id_column="record_id", noise=HashedLaplace())
