"""The paper's data-dependent category order is reachable from no release path (docs/privacy.md)."""
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
# The paper's order is defined in experiments/paper_order.py; no release-path module may import
# fragrelease.experiments (tests/test_architecture.py), and none names the order either: no allow-list.


def _names(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            out.add(node.id)
        elif isinstance(node, ast.Attribute):
            out.add(node.attr)
        elif isinstance(node, ast.alias):
            out.add(node.name)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value == "data-frequency":
            out.add("data-frequency")
    return out


def test_no_release_module_names_the_data_dependent_order():
    offenders = []
    for folder in ("fragrelease", "jobs", "udfs", "schemas"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            used = _names(path) & {"data_frequency_order", "frequency_ranks", "category_ranks", "data-frequency"}
            if used:
                offenders.append(f"{rel}: {sorted(used)}")
    assert not offenders, offenders


def test_release_configuration_refuses_the_paper_order():
    import pytest

    from fragrelease.errors import ConfigError
    from fragrelease.protocol.config import config_from_dict

    with pytest.raises(ConfigError, match="category_order"):
        config_from_dict(dict(name="x", dataset="adult", fragmentation="horizontal", epsilon="1", k=5,
                              category_order="data-frequency", work_dir="/tmp/w", output="/tmp/o",
                              owners=[{"name": "a", "rows": 10}, {"name": "b", "rows": 10}]))
