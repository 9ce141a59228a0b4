"""The ``spark`` marker follows the fixture closure, so ``pytest -m "not spark"`` leaves out every Spark test;
the longest modules are collected first (CI's scheduling, tests/conftest.py)."""
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



class _Node(_Item):
    def __init__(self, nodeid):
        super().__init__([])
        self.nodeid = nodeid


def test_longest_modules_are_collected_first_and_each_module_keeps_its_order():
    conftest = _conftest()
    first, second = conftest.HEAVY_FIRST[0], conftest.HEAVY_FIRST[1]
    names = ["tests/test_a.py::t1", f"{second}::t1", "tests/test_a.py::t2", f"{first}::t2", f"{second}::t2",
             f"{first}::t1", "tests/test_b.py::t1"]
    items = [_Node(n) for n in names]
    conftest.pytest_collection_modifyitems(None, items)
    assert [i.nodeid for i in items] == [f"{first}::t2", f"{first}::t1", f"{second}::t1", f"{second}::t2",
                                         "tests/test_a.py::t1", "tests/test_a.py::t2", "tests/test_b.py::t1"]


def test_every_module_named_first_exists():
    """A renamed or removed module would silently drop out of the ordering."""
    root = Path(__file__).parent.parent
    names = _conftest().HEAVY_FIRST
    assert len(set(names)) == len(names)
    assert [n for n in names if not (root / n).is_file()] == []
