"""The ``spark`` marker follows the fixture closure, so ``pytest -m "not spark"`` leaves out every Spark test."""
import importlib.util
from pathlib import Path


def _conftest():
    spec = importlib.util.spec_from_file_location("tests_conftest", Path(__file__).with_name("conftest.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Item:
    def __init__(self, fixturenames):
        self.fixturenames = fixturenames
        self.markers = []

    def add_marker(self, marker):
        self.markers.append(marker.name)


def test_marker_added_for_direct_and_indirect_spark_fixtures_only():
    direct = _Item(["tmp_path", "spark"])
    indirect = _Item(["wine_source", "spark", "tmp_path"])  # pytest's closure lists spark behind wine_source
    pure = _Item(["tmp_path", "adult_pdf"])
    _conftest().pytest_collection_modifyitems(None, [direct, indirect, pure])
    assert direct.markers == ["spark"] and indirect.markers == ["spark"] and pure.markers == []

