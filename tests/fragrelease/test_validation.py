"""fragrelease.validation: pydantic errors by key and value, table-name syntax, the ε warning."""
import logging
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from fragrelease.errors import ConfigError, InvalidParameterError
from fragrelease.validation import (
    check_table_name,
    format_location,
    format_validation_error,
    parse_table_name,
    read_yaml_mapping,
    warn_if_large_epsilon,
)

ROOT = Path(__file__).resolve().parents[2]


class _Owner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    rows: int


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str
    owners: list[_Owner]

    @model_validator(mode="after")
    def _cross(self):
        raise ValueError("owners[1].rows: 5 rows are fewer than k = 9 (owner 'b')\nowners: second problem")


def _error(data) -> str:
    with pytest.raises(ValidationError) as info:
        _Doc.model_validate(data)
    return format_validation_error(info.value)


def test_location_uses_brackets_for_list_indices():
    assert format_location(("owners", 1, "rows")) == "owners[1].rows"
    assert format_location(()) == ""


def test_field_errors_name_key_and_value_one_line_each():
    text = _error({"title": "t", "owners": [{"name": "a", "rows": "x"}, {"name": "b", "rows": 1, "colour": "red"}]})
    assert text.splitlines() == [
        "owners[0].rows: Input should be a valid integer, unable to parse string as an integer (got 'x')",
        "owners[1].colour: Extra inputs are not permitted (got 'red')",
    ]


def test_missing_key_and_mapping_values_never_dump_the_document():
    secret = "do-not-print-this-document-value"
    text = _error({"owners": {"name": secret}, "notes": {"deep": secret}})
    assert secret not in text, text
    assert "title: required" in text.splitlines()


def test_model_validator_messages_are_shown_as_written_without_the_document():
    secret = "document-value-42"
    text = _error({"title": secret, "owners": [{"name": "a", "rows": 9}, {"name": "b", "rows": 5}]})
    assert text.splitlines() == ["owners[1].rows: 5 rows are fewer than k = 9 (owner 'b')", "owners: second problem"]
    assert secret not in text and "Value error" not in text


def test_empty_yaml_file_is_called_empty(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("")
    with pytest.raises(ConfigError, match=r"configuration '.*c\.yaml' is empty"):
        read_yaml_mapping(p, "configuration")


@pytest.mark.parametrize("name,parts", [
    ("release", ("release",)),
    ("hr.release", ("hr", "release")),
    ("main.hr.release_2024", ("main", "hr", "release_2024")),
    ("`my-catalog`.hr.`release v1`", ("my-catalog", "hr", "release v1")),
    ("main.`odd``name`.t", ("main", "odd`name", "t")),
    ("_t1", ("_t1",)),
])
def test_table_names_accepted(name, parts):
    assert parse_table_name(name) == parts
    assert check_table_name(name, key="output") == name


@pytest.mark.parametrize("name,text", [
    ("", "must not be empty"),
    ("main..t", "an empty part"),
    ("main.hr.", "an empty part"),
    (".t", "an empty part"),
    ("main.hr.t.x", "has 4 parts; at most 3"),
    ("1table", "'1table' is not an identifier"),
    ("main.my-table", "'my-table' is not an identifier"),
    ("main.`open", "an unclosed backtick"),
    ("`a`b", "unexpected 'b' after '`a`'"),
    ("main.t\n", "control character"),
    ("/data/releases/x", "is not an identifier"),
    ("s3a://bucket/x", "is not an identifier"),
])
def test_table_names_refused_naming_key_and_value(name, text):
    with pytest.raises(ConfigError) as info:
        parse_table_name(name, key="ledger")
    msg = str(info.value)
    assert msg.startswith("ledger: ") and text in msg and repr(name) in msg, msg


def test_table_name_part_limit_and_type():
    with pytest.raises(ConfigError, match=r"output: table name 'a.b.c' has 3 parts; at most 2 \(schema.table\)"):
        parse_table_name("a.b.c", key="output", max_parts=2)
    with pytest.raises(ConfigError, match="must be a string, not 3"):
        parse_table_name(3)


def test_large_epsilon_warns_but_is_not_an_error(caplog):
    with caplog.at_level(logging.WARNING, logger="fragrelease.validation"):
        assert warn_if_large_epsilon("10") is False
        assert warn_if_large_epsilon("1/3") is False
        assert caplog.records == []
        assert warn_if_large_epsilon("25", what="--epsilon") is True
    (rec,) = caplog.records
    assert rec.levelno == logging.WARNING and "--epsilon = 25 is above 10 per release" in rec.getMessage()


def test_large_epsilon_check_still_refuses_an_invalid_epsilon():
    with pytest.raises(InvalidParameterError, match="nan"):
        warn_if_large_epsilon("nan")


def test_an_unknown_configuration_key_gets_the_closest_accepted_key():
    """Issue 37: a misspelt key says which key was meant (pydantic's error, difflib over the model's keys)."""
    from fragrelease.protocol.config import config_from_dict

    base = yaml.safe_load((ROOT / "conf" / "wine-horizontal.yaml").read_text())
    typo = {**base, "outptu": base["output"]}
    typo.pop("output")
    typo["owners"] = [{**base["owners"][0], "sourc": {"path": "x"}}, *base["owners"][1:]]
    with pytest.raises(ConfigError) as info:
        config_from_dict(typo, source="c.yaml")
    lines = str(info.value).splitlines()
    assert "  owners[0].sourc: Extra inputs are not permitted; did you mean 'source'?" in lines
    assert "  outptu: Extra inputs are not permitted; did you mean 'output'? (got 'releases/wine-horizontal')" in lines
    with pytest.raises(ConfigError) as info:
        config_from_dict({**base, "zzzz": 1}, source="c.yaml")
    assert str(info.value) == "invalid configuration c.yaml: zzzz: Extra inputs are not permitted (got 1)"
