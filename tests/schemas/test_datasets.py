"""Vendored taxonomies and German Credit: checksummed, complete, in the documented shape."""
import pytest

from fragrelease.errors import ConfigError
from fragrelease.schemas.datasets import (
    ADULT_TAXONOMY_FILES,
    load_adult_taxonomy,
    load_builtin_pandas,
    load_german_credit_pandas,
    resolve_schema,
)


def test_every_adult_value_is_a_leaf_of_its_taxonomy():
    adult = load_builtin_pandas("adult")
    for attribute in ADULT_TAXONOMY_FILES:
        paths = load_adult_taxonomy(attribute)
        assert len({len(p) for p in paths}) == 1, attribute
        assert all(p[-1] == "*" for p in paths), attribute
        leaves = {p[0] for p in paths}
        assert set(adult[attribute].astype(str)) <= leaves, attribute


def test_taxonomy_by_arx_name_and_unknown_attribute():
    assert load_adult_taxonomy("salary-class") == load_adult_taxonomy("income")
    assert load_adult_taxonomy("age")[0] == ["1", "0-4", "0-9", "0-19", "*"]
    with pytest.raises(ConfigError, match="fnlwgt"):
        load_adult_taxonomy("fnlwgt")


def test_german_credit_shape_and_class_balance():
    df = load_german_credit_pandas()
    assert df.shape == (1000, 26)
    assert df["credit_class"].value_counts().to_dict() == {1: 700, 2: 300}
    assert df.iloc[0, 1:].tolist()[:5] == [1, 6, 4, 12, 5]


def test_a_missing_schema_file_says_not_found_with_the_path(tmp_path, monkeypatch):
    """Issue 37: a schema path that does not exist is named as not found, with the path looked at."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as info:
        resolve_schema("schemas/clinic.yaml")
    assert str(info.value) == (f"dataset: schema file not found: 'schemas/clinic.yaml' "
                               f"(looked at {str(tmp_path / 'schemas' / 'clinic.yaml')!r})")
    with pytest.raises(ConfigError, match=r"^dataset must be one of \['adult', 'adult-income', 'adult-income-train', 'wine', 'wine-2max'\] or a schema "
                                          r"YAML file, not 'clinic'$"):
        resolve_schema("clinic")
