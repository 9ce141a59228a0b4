from pathlib import Path

import pytest
import yaml

from fragrelease.errors import ConfigError
from fragrelease.protocol.config import load_config
from fragrelease.schemas.base import load_schema
from fragrelease.schemas.datasets import load_builtin_pandas, resolve_schema

CONF = Path(__file__).resolve().parents[3] / "conf"


@pytest.mark.parametrize("name", ["adult-horizontal", "adult-vertical", "wine-horizontal", "wine-vertical"])
def test_shipped_configs_validate(name):
    cfg = load_config(CONF / f"{name}.yaml")
    schema = resolve_schema(cfg.dataset)
    if cfg.fragmentation == "vertical":
        held = [a for o in cfg.owners for a in o.attributes]
        assert sorted(held) == sorted(a.name for a in schema.protected)
    else:
        assert sum(o.rows for o in cfg.owners) == len(load_builtin_pandas(cfg.dataset))


def test_config_errors_name_key_and_value(tmp_path):
    data = yaml.safe_load((CONF / "adult-horizontal.yaml").read_text())
    data["owners"][1]["rows"] = -5
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"owners\[1\]\.rows.*-5"):
        load_config(p)
    data["owners"][1]["rows"] = 10
    data["epsilon"] = "-1"
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"epsilon.*-1"):
        load_config(p)


def test_builtin_datasets_have_the_papers_sizes():
    adult = load_builtin_pandas("adult")
    assert len(adult) == 45_222 and not (adult == "?").any().any()
    assert set(adult["income"]) == {"<=50K", ">50K"}
    assert len(load_builtin_pandas("wine")) == 6_497


def test_user_schema_yaml(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({"name": "clinic", "attributes": [
        {"name": "pid", "type": "long", "role": "id"},
        {"name": "age", "type": "integer", "role": "quasi-identifier", "kind": "numeric", "domain": [0, 120]},
        {"name": "dx", "type": "string", "role": "sensitive", "kind": "categorical", "categories": ["a", "b"]},
    ]}))
    s = load_schema(p)
    assert s.id_column == "pid" and [a.name for a in s.protected] == ["age", "dx"]
    p.write_text(yaml.safe_dump({"name": "clinic", "attributes": [
        {"name": "age", "type": "integer", "role": "quasi-identifier", "kind": "numeric", "domain": [50, 10]}]}))
    with pytest.raises(ConfigError, match=r"lo < hi.*\[50"):
        load_schema(p)


def test_schema_example_in_conf_loads():
    s = load_schema(CONF / "schema-example.yaml")
    assert s.protected
