"""Data errors say where (issue 22 item 7): the owner, its source, the column, one value as written
and its record id, in one line, before any budget is spent or any noise drawn.

Each case is an owner's CSV file read by the owner's own metadata step
(:func:`fragrelease.jobs.protocol.owner.describe_fragment`) in a release of two owners. At 13383f1 no
message named the owner or the source, a string in a numeric column was a bare type mismatch, no
record id was named, and an id column the schema's type cannot hold passed the owner (it failed at
the aggregator after both owners drew noise).
"""
import os

import pytest
import yaml

from fragrelease.errors import DomainError, FragReleaseError, IdentifierError, SchemaMismatchError
from fragrelease.jobs.protocol.context import owner_context
from fragrelease.jobs.protocol.owner import describe_fragment
from fragrelease.protocol.config import config_from_dict

SCHEMA = {"name": "clinic", "attributes": [
    {"name": "record_id", "type": "long", "role": "id"},
    {"name": "age", "type": "integer", "role": "quasi-identifier", "kind": "numeric", "domain": [0, 100]},
    {"name": "sex", "type": "string", "role": "sensitive", "kind": "categorical", "categories": ["Female", "Male"]},
]}
GOOD = "record_id,age,sex\n1,40,Male\n2,50,Female\n3,60,Male\n"

#: (case, CSV text of owner clinic-a, error class, the message after "owner 'clinic-a' (source PATH): ")
CASES = [
    ("string in a numeric column", "record_id,age,sex\n16,40,Male\n17,abc,Female\n18,50,Male\n", DomainError,
     "column 'age' value 'abc' (record id 17) is not a number; the schema declares integer in [0.0, 100.0]"),
    ("null value", "record_id,age,sex\n16,40,Male\n17,,Female\n", DomainError,
     "column 'age' has 1 null value(s), e.g. record id 17; nulls are not allowed"),
    ("value outside the domain", "record_id,age,sex\n16,40,Male\n17,130,Female\n", DomainError,
     "column 'age' value '130' (record id 17) is outside its declared domain [0.0, 100.0] (1 such value(s))"),
    ("negative value", "record_id,age,sex\n16,-1,Male\n17,40,Female\n", DomainError,
     "column 'age' value '-1' (record id 16) is outside its declared domain [0.0, 100.0] (1 such value(s))"),
    ("NaN", "record_id,age,sex\n16,40.0,Male\n17,NaN,Female\n", DomainError,
     "column 'age' value 'NaN' (record id 17) is outside its declared domain [0.0, 100.0] (1 such value(s))"),
    ("non-integer in an integer column", "record_id,age,sex\n16,40,Male\n17,40.5,Female\n", DomainError,
     "column 'age' value '40.5' (record id 17) is not an integer; the schema declares integer"),
    ("undeclared category", "record_id,age,sex\n16,40,Male\n17,50,M\n", DomainError,
     "column 'sex' value 'M' (record id 17) is not a declared category of ['Female', 'Male'] (1 such value(s))"),
    ("number in a categorical column", "record_id,age,sex\n16,40,1\n17,50,2\n", DomainError,
     "column 'sex' value '1' (record id 16) is not a declared category of ['Female', 'Male'] (2 such value(s))"),
    ("duplicate id", "record_id,age,sex\n16,40,Male\n17,50,Female\n17,60,Male\n", IdentifierError,
     "id column 'record_id': record id 17 appears 2 times; ids must be unique"),
    ("null id", "record_id,age,sex\n16,40,Male\n,50,Female\n", IdentifierError,
     "id column 'record_id' has 1 null value(s); every record needs an id"),
    ("id the schema's type cannot hold", "record_id,age,sex\n16,40,Male\nx17,50,Female\n", IdentifierError,
     "id column 'record_id' value 'x17' is not an integer; the schema declares the id long (column type string)"),
    ("non-integer id", "record_id,age,sex\n16,40,Male\n17.5,50,Female\n", IdentifierError,
     "id column 'record_id' value '17.5' is not an integer; the schema declares the id long (column type string)"),
    ("missing column", "record_id,age\n16,40\n17,50\n", SchemaMismatchError,
     "the fragment has no column 'sex'; it has ['age', 'record_id']"),
    ("missing id column", "age,sex\n40,Male\n", SchemaMismatchError,
     "the fragment has no id column 'record_id'; it has ['age', 'sex']"),
    ("empty fragment (header only)", "record_id,age,sex\n", DomainError, "the fragment is empty: it has no records"),
    ("empty file", "", DomainError, "the fragment is empty: it has no records"),
    # a CSV source is read as text (no inference pass): a boolean is a value that is not a number
    ("wrong type (a boolean age)", "record_id,age,sex\n16,true,Male\n17,false,Female\n", DomainError,
     "column 'age' value 'true' (record id 16) is not a number; the schema declares integer in [0.0, 100.0]"),
]


def _release(tmp_path, csv_text):
    schema = tmp_path / "schema.yaml"
    schema.write_text(yaml.safe_dump(SCHEMA))
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "a.csv").write_text(csv_text)
    (src / "b.csv").write_text(GOOD)
    return config_from_dict(dict(
        name="where", dataset=str(schema), fragmentation="horizontal", epsilon="1", k=3,
        owners=[{"name": "clinic-a", "source": {"path": str(src / "a.csv"), "format": "csv"}},
                {"name": "clinic-b", "source": {"path": str(src / "b.csv"), "format": "csv"}}],
        work_dir=str(tmp_path / "work"), output=str(tmp_path / "release")))


@pytest.mark.parametrize("case,csv_text,error,text", CASES, ids=[c[0] for c in CASES])
def test_owner_data_error_names_owner_source_column_value_and_record(spark, tmp_path, case, csv_text, error, text):
    cfg = _release(tmp_path, csv_text)
    with pytest.raises(error) as info:
        describe_fragment(spark, owner_context(cfg, "clinic-a"))
    assert str(info.value) == f"owner 'clinic-a' (source {tmp_path / 'src' / 'a.csv'}): {text}"
    assert not os.path.exists(tmp_path / "work" / "metadata")  # nothing sent to the aggregator


def test_the_good_owner_passes(spark, tmp_path):
    cfg = _release(tmp_path, GOOD)
    assert describe_fragment(spark, owner_context(cfg, "clinic-b")).n_records == 3


def test_string_ids_that_parse_are_conformed_to_the_declared_type(spark, tmp_path):
    """Ids read as text ('007') but declared long reach the protocol as longs, like the other owner's."""
    from fragrelease.jobs.protocol.fragment import conform_id, validate_fragment
    from fragrelease.schemas.base import schema_from_dict

    schema = schema_from_dict(SCHEMA)
    df = spark.createDataFrame([("007", 40, "Male"), ("8", 50, "Female")], "record_id string, age int, sex string")
    assert validate_fragment(df, list(schema.protected), "record_id", id_type="long").n_records == 2
    out = conform_id(df, "record_id", "long")
    assert out.schema["record_id"].dataType.simpleString() == "bigint"
    assert sorted(r.record_id for r in out.collect()) == [7, 8]


def test_api_protect_names_the_owner_and_a_dataframe(spark):
    from fragrelease.jobs.api import protect
    from fragrelease.schemas.base import schema_from_dict

    df = spark.createDataFrame([(1, "40", "Male"), (2, "abc", "Female"), (3, "50", "Male")],
                               "record_id long, age string, sex string")
    with pytest.raises(DomainError) as info:
        protect(df, schema_from_dict(SCHEMA), epsilon="1", k=3, owner="clinic-a")
    assert str(info.value) == ("owner 'clinic-a' (source DataFrame): column 'age' value 'abc' (record id 2) is not a "
                               "number; the schema declares integer in [0.0, 100.0]")


def test_cli_prints_one_line_with_the_where(spark, tmp_path, capsys):
    from fragrelease.jobs.cli import run_cli

    cfg = _release(tmp_path, CASES[0][1])
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(cfg.model_dump(mode="json", exclude_none=True)))
    assert run_cli(["owner", "metadata", "--config", str(config), "--owner", "clinic-a"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0] == f"error: owner 'clinic-a' (source {tmp_path / 'src' / 'a.csv'}): {CASES[0][3]}"


def test_errors_are_fragrelease_errors():
    assert all(issubclass(c[2], FragReleaseError) for c in CASES)


@pytest.mark.parametrize("ddl, rows, text", [
    ("record_id long, age boolean, sex string", [(16, True, "Male"), (17, False, "Female")],
     "column 'age' has type boolean, the schema declares numeric (integer); e.g. value 'true' (record id 16)"),
    # a typed source's string column is a schema mismatch even when its values parse (only a CSV is read as text)
    ("record_id long, age string, sex string", [(16, "40", "Male"), (17, "50", "Female")],
     "column 'age' has type string, the schema declares numeric (integer); e.g. value '40' (record id 16)"),
])
def test_a_typed_source_of_the_wrong_type_is_refused_by_its_type(spark, tmp_path, ddl, rows, text):
    cfg = _release(tmp_path, GOOD)
    path = tmp_path / "src" / "a.parquet"
    spark.createDataFrame(rows, ddl).coalesce(1).write.parquet(str(path))  # one file: the first row is the example
    cfg = cfg.model_copy(update={"owners": [cfg.owners[0].model_copy(update={"source": cfg.owners[0].source.model_copy(
        update={"path": str(path), "format": "parquet"})}), cfg.owners[1]]})
    with pytest.raises(SchemaMismatchError) as info:
        describe_fragment(spark, owner_context(cfg, "clinic-a"))
    assert str(info.value) == f"owner 'clinic-a' (source {path}): {text}"
