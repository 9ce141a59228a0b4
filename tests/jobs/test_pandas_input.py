"""``fragrelease.protect`` and ``Release.add_owner`` take pandas DataFrames, converted with the declared
column types (issue: "add_owner(name, pandas_df) fails with 'must be a DataFrame … not DataFrame'")."""
import pytest
from noise_injection import HashedLaplace

from fragrelease.errors import InvalidParameterError, SchemaMismatchError
from fragrelease.jobs.api import Release, protect


def test_protect_takes_a_pandas_frame_with_the_declared_types(spark, wine_pdf):
    pdf = wine_pdf.head(60).copy()
    # as a pandas user may hold it: ids as float, a numeric column as text
    pdf["record_id"] = pdf["record_id"].astype(float)
    pdf["alcohol"] = pdf["alcohol"].astype(str)
    result = protect(pdf, "wine", epsilon="1", k=10, _noise=HashedLaplace("pandas"))
    df = result.dataframe
    assert dict(df.dtypes)["record_id"] in ("int", "bigint")  # the declared id type, not double
    assert df.count() == 60 and result.n_records == 60
    assert sorted(r[0] for r in df.select("record_id").collect()) == sorted(wine_pdf.head(60)["record_id"])


def test_a_pandas_value_of_the_wrong_type_names_owner_column_and_value(spark, wine_pdf):
    pdf = wine_pdf.head(30).copy()
    pdf["alcohol"] = pdf["alcohol"].astype(object)
    pdf.loc[7, "alcohol"] = "twelve"
    with pytest.raises(SchemaMismatchError, match=r"owner 'me', source pandas DataFrame, column 'alcohol': "
                                                  r"declared double, holds 'twelve'"):
        protect(pdf, "wine", epsilon="1", k=10, owner="me")
    ids = wine_pdf.head(30).copy()
    ids["record_id"] = ids["record_id"] + 0.5
    with pytest.raises(SchemaMismatchError, match=r"column 'record_id': declared \w+, holds 0\.5"):
        protect(ids, "wine", epsilon="1", k=10, owner="me")


@pytest.mark.slow  # a whole two-owner release
def test_release_add_owner_takes_pandas_frames(spark, wine_pdf, tmp_path):
    pdf = wine_pdf.head(200)
    release = Release("wine", epsilon="1", k=10, output=str(tmp_path / "release"), reports=False, spark=spark,
                      work_dir=str(tmp_path / "work"))
    release.add_owner("a", pdf.iloc[:100]).add_owner("b", pdf.iloc[100:])
    result = release.run(_noise=HashedLaplace("pandas-release"))
    assert result.rows == 200 and [o.records for o in result.owners] == [100, 100]


def test_add_owner_refuses_another_type_naming_pandas():
    release = Release("wine", epsilon="1", k=10)
    with pytest.raises(InvalidParameterError, match="Spark or pandas DataFrame"):
        release.add_owner("a", [1, 2, 3])


def test_a_pandas_int64_beyond_a_declared_integer_is_one_error_and_a_long_id_accepts_it(spark, adult_pdf):
    """On 0.8.4 an int64 value above 2^31 in a column declared ``integer`` crashed in pandas' cast to Int32."""
    from fragrelease.jobs.api_common import _from_pandas
    from fragrelease.schemas.adult import SCHEMA

    pdf = adult_pdf.head(30).copy()
    pdf["age"] = pdf["age"].astype("int64")
    pdf.loc[3, "age"] = 3_000_000_000
    with pytest.raises(SchemaMismatchError) as e:
        protect(pdf, "adult", epsilon="1", k=10, owner="me")
    assert str(e.value) == ("owner 'me', source pandas DataFrame, column 'age': declared integer, holds 3000000000, "
                            "outside its range [-2147483648, 2147483647]; declare it long")
    ids = adult_pdf.head(30).copy()
    ids["record_id"] = ids["record_id"].astype("int64") + 2 ** 40  # declared long: kept exactly
    df = _from_pandas(spark, ids, SCHEMA.attributes, owner="me")
    assert dict(df.dtypes)["record_id"] == "bigint"
    assert sorted(r[0] for r in df.select("record_id").collect()) == sorted(ids["record_id"].tolist())
