"""The Python API (fragrelease.jobs.api): one owner's protect step and a two-owner Release from
DataFrames and from catalog table names (Spark's built-in in-memory catalog, with Delta's classes unless
``FRAGRELEASE_DELTA=off``)."""
from __future__ import annotations

from fractions import Fraction

import pandas as pd
import pytest
from deltalake import DeltaTable
from noise_injection import HashedLaplace
from pyspark.sql import functions as F
from specs import protect_with

import fragrelease
from fragrelease.errors import ConfigError, InvalidParameterError, ReleaseExistsError, SchemaMismatchError
from fragrelease.jobs.api import OwnerResult, ProtectResult, Release, ReleaseResult, protect
from fragrelease.jobs.protocol.keys import generated_key_path
from fragrelease.jobs.protocol.layout import protected_path
from fragrelease.jobs.session import delta_available
from fragrelease.jobs.storage import PROP_LOCATION, PROP_VERSION, read_delta, table_location, table_provenance
from fragrelease.protocol.config import LedgerConfig, OwnerConfig, config_from_dict
from fragrelease.protocol.messages import OwnerMetadata, make_plan
from fragrelease.protocol.options import ReleaseOptions
from fragrelease.pseudonyms import derive_key, pseudonyms
from fragrelease.schemas.adult import RELEASED, SCHEMA

N1, N2 = 500, 700


@pytest.fixture(scope="module")
def owners(spark, adult_pdf):
    sample = adult_pdf.iloc[: N1 + N2]
    df = spark.createDataFrame(sample, SCHEMA.struct_type())
    return df.where(F.col("record_id") < N1), df.where(F.col("record_id") >= N1)


@pytest.fixture(scope="module")
def database(spark, tmp_path_factory):
    """A database of Spark's built-in (in-memory) catalog whose tables live in a temporary folder."""
    spark.sql(f"CREATE DATABASE IF NOT EXISTS fr_api LOCATION '{tmp_path_factory.mktemp('warehouse')}'")
    yield "fr_api"
    spark.sql("DROP DATABASE IF EXISTS fr_api CASCADE")


@pytest.fixture(scope="module")
def protected_a(owners):
    """``protect`` of owner a's records (all of Adult's protected attributes, ε = 1, k = 20, the
    test noise salted "api"), run once: the protect test checks it, the DataFrame release test compares
    owner clinic-a's fragment with it (the same records, budget and noise)."""
    df, _ = owners
    return protect(df, "adult", epsilon="1", k=20, _noise=HashedLaplace("api"))


def _sorted(pdf: pd.DataFrame) -> pd.DataFrame:
    return pdf.sort_values(list(pdf.columns)).reset_index(drop=True)


# ---- protect ---------------------------------------------------------------------------------


def test_protect_spends_the_budget_exactly_as_the_owner_step_of_a_plan(spark, owners, protected_a):
    df, _ = owners
    result = protected_a
    assert isinstance(result, ProtectResult) and result.n_records == N1 and result.k == 20
    l_attrs = len(SCHEMA.protected)
    assert result.epsilon_spent == 1 and result.epsilon_per_attribute == Fraction(1, l_attrs)
    assert sum(b.total for b in result.budgets) == 1
    sex = next(b for b in result.budgets if b.attribute == "sex")
    assert (sex.order, sex.centroids) == (Fraction(1, 10 * l_attrs), Fraction(9, 10 * l_attrs))
    # the plan an aggregator would issue to an owner of these records spends exactly these budgets
    meta = [OwnerMetadata(owner=o, dataset="adult", fragmentation="horizontal", n_records=N1, id_column="record_id",
                          attributes=tuple(a.public_spec() for a in SCHEMA.protected)) for o in ("owner", "other")]
    plan = make_plan(meta, fragmentation="horizontal", mechanism="idp-ir", k=20, epsilon="1")
    assert result.manifest.budgets == plan.owner("owner").budgets
    assert result.manifest.epsilon == plan.owner("owner").epsilon
    # and the protected values equal protect_fragment's with that budget and the same noise
    ref = protect_with(df.select("record_id", *RELEASED), list(SCHEMA.protected), id_column="record_id", k=20,
                           epsilon_per_attribute=Fraction(1, l_attrs), mechanism="idp-ir",
                           noise=HashedLaplace("api")).toPandas()
    got = result.dataframe.toPandas()
    assert list(got.columns) == ["record_id", *RELEASED]
    pd.testing.assert_frame_equal(_sorted(got), _sorted(ref))
    # noise is materialized: a second action sees the same values
    pd.testing.assert_frame_equal(_sorted(result.dataframe.toPandas()), _sorted(got))
    assert "no epsilon bound" in result.guarantee.table and result.manifest.plan_id.startswith("standalone:")


def test_protect_checks_every_parameter_before_any_spark_action(spark):
    # any Spark job on this DataFrame fails with "no job expected"
    boom = spark.range(10).select(F.col("id").alias("record_id"), F.lit(40.0).alias("age")).withColumn(
        "age", F.when(F.col("record_id") >= 0, F.raise_error(F.lit("no job expected"))).otherwise(40.0).cast("double"))
    age = [SCHEMA.attribute("age")]
    ok = dict(epsilon="1", k=5, id_column="record_id")
    for bad, msg in [(dict(epsilon="0"), "'0'|0"), (dict(epsilon="-1/2"), "-1/2"), (dict(k=2), "2"),
                     (dict(mechanism="nope"), "nope"), (dict(category_order="sorted"), "sorted"),
                     (dict(category_order_share="3/2"), "3/2"), (dict(postprocess="clip"), "clip")]:
        with pytest.raises(InvalidParameterError, match=msg):
            protect(boom, age, **{**ok, **bad})
    with pytest.raises(InvalidParameterError, match="'salary'"):
        protect(boom, "adult", epsilon="1", k=5, attributes=["age", "salary"])
    with pytest.raises(SchemaMismatchError, match="'workclass'"):
        protect(boom, "adult", epsilon="1", k=5)  # a missing column: from the schema, no job
    with pytest.raises(ConfigError, match="no-such-dataset"):
        protect(boom, "no-such-dataset", epsilon="1", k=5)
    with pytest.raises(Exception, match="no job expected"):  # the control: valid parameters do run a job
        protect(boom, age, **ok)


def test_protect_takes_the_options_model_or_its_fields_before_any_spark_action(spark):
    boom = spark.range(10).select(F.col("id").alias("record_id"), F.lit(40.0).alias("age")).withColumn(
        "age", F.when(F.col("record_id") >= 0, F.raise_error(F.lit("no job expected"))).otherwise(40.0).cast("double"))
    age = [SCHEMA.attribute("age")]
    ok = dict(epsilon="1", k=5, id_column="record_id")
    for bad, msg in [
        (dict(options=ReleaseOptions.of(postprocess="none"), postprocess="none"),
         r"^protect: give options or the option keywords \['postprocess'\], not both$"),
        (dict(options=ReleaseOptions.of(linkage="unlinked")),
         r"^protect: a single owner's DataFrame keeps its rows linked; linkage 'unlinked' is for a Release$"),
        (dict(linkage="synthetic"), r"^protect: a single owner's DataFrame keeps its rows linked; linkage 'synthetic'"),
        (dict(options={"postprocess": "none"}), r"^protect: options must be ReleaseOptions, not dict$"),
    ]:
        with pytest.raises(InvalidParameterError, match=msg):
            protect(boom, age, **{**ok, **bad})
    with pytest.raises(TypeError, match=r"^protect\(\) got an unexpected keyword argument 'no_such_option'$"):
        protect(boom, age, **ok, no_such_option=1)
    for good in (dict(options=ReleaseOptions.of(postprocess="none")), dict(postprocess="none")):
        with pytest.raises(Exception, match="no job expected"):  # the control: valid options do run a job
            protect(boom, age, **{**ok, **good})


# ---- Release ---------------------------------------------------------------------------------


@pytest.mark.slow  # whole releases end to end (minutes with the suite's load); CI runs it
def test_two_owner_release_from_dataframes(spark, owners, protected_a, tmp_path):
    a, b = owners
    release = Release("adult", epsilon="1", k=20, output=str(tmp_path / "release"), work_dir=str(tmp_path / "work"),
                      spark=spark, reports=False)
    release.add_owner("clinic-a", a).add_owner("clinic-b", b)
    result = release.run(_noise=HashedLaplace("api"))
    assert isinstance(result, ReleaseResult) and result.table is None and result.version == 0
    assert result.rows == N1 + N2 and result.epsilon == 1 and result.composition == "parallel"
    assert all(isinstance(o, OwnerResult) for o in result.owners)
    assert [(o.name, o.records, o.epsilon) for o in result.owners] == [("clinic-a", N1, 1), ("clinic-b", N2, 1)]
    assert result.owners[0].manifest.plan_id == result.plan.plan_id == result.provenance["plan_id"]
    assert result.guarantee.per_column == table_provenance(result.path)["guarantee"]["per_column"]
    released = result.dataframe(spark).toPandas()
    assert list(released.columns) == list(RELEASED) and len(released) == N1 + N2
    assert DeltaTable(result.path).to_pandas().shape == released.shape
    # each owner's fragment is what protect() makes of that DataFrame with the same noise (one path)
    # (the shared fragment carries pseudonyms under the release's generated key, never record ids)
    fragment = read_delta(spark, protected_path(release.config().work_dir, "clinic-a")).toPandas()
    assert "record_id" not in fragment.columns
    cfg = release.config()
    key = open(generated_key_path(cfg, cfg.owners[0]), "rb").read()
    alone = protected_a.dataframe.toPandas()  # protect(a, ...) with the release's budget and noise
    alone.insert(0, "pseudonym", pseudonyms(derive_key(key), alone.pop("record_id").tolist(), context=result.plan.pseudonym_context()))
    pd.testing.assert_frame_equal(_sorted(fragment), _sorted(alone))
    # the owners' temporary views are gone once the release ran
    assert not [t for t in spark.catalog.listTables() if t.name.startswith("fragrelease_src_")]
    with pytest.raises(ConfigError, match="already ran"):  # never a second spend over dropped views
        release.run()


@pytest.mark.slow  # whole releases end to end (minutes with the suite's load); CI runs it
def test_two_owner_release_from_catalog_table_names(spark, owners, database, tmp_path):
    a, b = owners
    a.write.saveAsTable(f"{database}.clinic_a")
    b.write.saveAsTable(f"{database}.clinic_b")
    out, ledger = f"{database}.adult_release", f"{database}.budget_a"

    def run(if_exists, new_plan=False):
        rel = Release("adult", epsilon="1", k=20, output_table=out, work_dir=str(tmp_path / "work"), spark=spark,
                      reports=False, if_exists=if_exists)
        rel.add_owner("clinic-a", f"{database}.clinic_a",
                      ledger=LedgerConfig(table=ledger, lifetime_epsilon="3"))
        rel.add_owner("clinic-b", f"{database}.clinic_b")
        return rel.run(new_plan=new_plan)

    first = run("error")
    assert first.table == out and first.version == 0 and first.rows == N1 + N2
    # spark.table reads the release; it is the Delta table's current version, row for row
    via_catalog = spark.table(out).toPandas()
    pd.testing.assert_frame_equal(_sorted(via_catalog), _sorted(DeltaTable(first.path).to_pandas()))
    props = {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {out}").collect()}
    if delta_available(spark):  # a real Delta catalog table (tests/jobs/test_lakehouse.py)
        assert table_location(spark, out) == first.path and props["fragrelease.epsilon"] == "1"
    else:
        assert props[PROP_LOCATION] == first.path and props[PROP_VERSION] == "0"
    assert table_provenance(first.path)["plan_id"] == first.plan.plan_id
    with pytest.raises(ReleaseExistsError, match=out):  # the same work_dir: its plan is committed (issue 49)
        run("error")
    with pytest.raises(ReleaseExistsError, match=out):  # a new plan: the table exists and if_exists is error
        run("error", new_plan=True)
    second = run("new-version", new_plan=True)
    assert second.version == 1 and second.path == first.path
    again = spark.table(out).toPandas()
    assert len(again) == N1 + N2  # the new version only, not the union of both versions' files
    pd.testing.assert_frame_equal(_sorted(again), _sorted(DeltaTable(first.path, version=1).to_pandas()))
    pd.testing.assert_frame_equal(_sorted(first.dataframe(spark).toPandas()), _sorted(via_catalog))  # time travel
    # the ledger is a catalog table too: one spend per release, the same rows delta-rs reads
    spends = spark.table(ledger).toPandas()
    assert sorted(spends["plan_id"]) == sorted([first.plan.plan_id, second.plan.plan_id])
    assert set(spends["epsilon"]) == {"1"} and set(spends["owner"]) == {"clinic-a"}
    ledger_path = table_location(spark, ledger)
    assert len(DeltaTable(ledger_path).to_pandas()) == 2


def test_catalog_names_are_validated_and_exclusive_with_paths():
    base = dict(name="x", dataset="adult", fragmentation="horizontal", epsilon="1", k=20, work_dir="w",
                owners=[{"name": "a", "source": {"table": "db.a"}}, {"name": "b", "source": {"path": "/b"}}])
    assert config_from_dict({**base, "output_table": "db.release"}).owners[0].source.table == "db.a"
    for bad, msg in [({"output_table": "db.re-lease"}, "db.re-lease"), ({"output_table": "a.b.c.d"}, "a.b.c.d"),
                     ({"output": "/r", "output_table": "db.r"}, "exactly one"), ({}, "exactly one"),
                     ({"output": "/r", "owners": [{"name": "a", "source": {"table": "1db.a"}}, base["owners"][1]]},
                      "1db.a"),
                     ({"output": "/r", "owners": [{"name": "a", "source": {"table": "db.a", "format": "csv"}},
                                                  base["owners"][1]]}, "path' only")]:
        with pytest.raises(ConfigError, match=msg):
            config_from_dict({**base, **bad})
    with pytest.raises(ValueError, match="exactly one"):
        LedgerConfig(path="/l", table="db.l", lifetime_epsilon="1")


def test_lazy_facade_serves_the_api():
    assert fragrelease.protect is protect and fragrelease.Release is Release


def test_protect_returns_rows_in_random_order_and_says_what_holds_with_ids(spark, owners):
    df, _ = owners
    one = protect(df, "adult", epsilon="1", k=20, attributes=["age"], _noise=HashedLaplace("order"))
    first = [int(r["record_id"]) for r in one.dataframe.select("record_id").collect()]
    assert sorted(first) == list(range(N1)) and first != sorted(first)  # never in id (input) order
    two = protect(df, "adult", epsilon="1", k=20, attributes=["age"], _noise=HashedLaplace("order"))
    assert [int(r["record_id"]) for r in two.dataframe.select("record_id").collect()] != first  # a fresh order
    assert "no epsilon bound" in one.guarantee.against and "'record_id' present" in one.guarantee.against
    assert "no epsilon bound holds" in fragrelease.protect.__doc__ or "No ε bound holds" in fragrelease.protect.__doc__


def test_every_protect_call_spends_epsilon_afresh_and_a_ledger_stops_it(spark, owners, tmp_path):
    """docs/python-api.md: two calls on the same data spend twice; with a ledger the spend past the
    lifetime budget is refused before any noise."""
    from fragrelease.errors import BudgetExceededError
    from fragrelease.jobs.protocol.ledger import spent

    df = owners[0].limit(40)
    ledger = LedgerConfig(path=str(tmp_path / "ledger"), lifetime_epsilon="3/2")
    protect(df, "adult", epsilon="1", k=10, attributes=["age"], owner=OwnerConfig(name="clinic-a", ledger=ledger))
    assert spent(ledger.path, "clinic-a", "adult") == [Fraction(1)]
    with pytest.raises(BudgetExceededError):
        protect(df, "adult", epsilon="1", k=10, attributes=["age"], owner=OwnerConfig(name="clinic-a", ledger=ledger))
    assert spent(ledger.path, "clinic-a", "adult") == [Fraction(1)]  # the refused call spent nothing
    protect(df, "adult", epsilon="1/2", k=10, attributes=["age"], owner=OwnerConfig(name="clinic-a", ledger=ledger))
    assert sorted(spent(ledger.path, "clinic-a", "adult")) == [Fraction(1, 2), Fraction(1)]  # a second spend


def test_protect_takes_the_owner_as_a_name_or_a_config_of_name_and_ledger():
    """docs/python-api.md: ``owner`` is a name or an ``OwnerConfig`` whose name and ledger protect() uses;
    one that sets a configured release's fields, or another type, is refused before any data is read."""
    import inspect

    assert len(inspect.signature(protect).parameters) - 1 <= 10  # **option_values is no parameter a caller fills
    pdf = pd.DataFrame({"record_id": [1], "age": [30]})
    with pytest.raises(InvalidParameterError) as info:
        protect(pdf, "adult", epsilon="1", k=10, owner=OwnerConfig(name="clinic-a", rows=5, attributes=("age",)))
    assert str(info.value) == ("protect: owner 'clinic-a' sets attributes, rows: protect() uses only an OwnerConfig's "
                               "name and ledger (the rest belong to a configured release)")
    with pytest.raises(InvalidParameterError) as info:
        protect(pdf, "adult", epsilon="1", k=10, owner=7)
    assert str(info.value) == "protect: owner must be a name or an OwnerConfig, not int"
    with pytest.raises(TypeError) as type_info:  # 0.11's keywords name the new form
        protect(pdf, "adult", epsilon="1", k=10, owner_name="clinic-a")
    assert str(type_info.value) == ("protect() got an unexpected keyword argument 'owner_name': since 0.12 the owner is "
                                    "owner='name' or owner=OwnerConfig(name=..., ledger=LedgerConfig(...))")


def test_the_test_noise_hook_is_private():
    """``noise=`` is no longer a public keyword of protect() or Release.run() (``_noise=``, tests only)."""
    import inspect

    assert "noise" not in inspect.signature(protect).parameters and "_noise" in inspect.signature(protect).parameters
    assert "noise" not in inspect.signature(Release.run).parameters
    with pytest.raises(TypeError):
        protect(None, "adult", epsilon="1", k=20, noise=HashedLaplace("x"))  # type: ignore[call-arg]
