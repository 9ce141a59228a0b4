"""The ``spark`` marker follows the fixture closure, so ``pytest -m "not spark"`` leaves out every Spark test;
the longest modules are collected first (CI's scheduling, tests/conftest.py)."""
import importlib.util
import os
from pathlib import Path

import pytest


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


def test_other_modules_follow_by_their_number_of_tests_and_xdist_keeps_this_order():
    """After HEAVY_FIRST the modules go out with the most tests first (xdist's own loadscope order), equal
    counts in collection order; xdist's reordering is turned off, so a long module with few tests named in
    HEAVY_FIRST (the quick loop's two-test synthesis audit) is no longer handed out last."""
    conftest = _conftest()
    first = conftest.HEAVY_FIRST[0]
    names = ["tests/test_one.py::t1", "tests/test_three.py::t1", "tests/test_two.py::t1", "tests/test_three.py::t2",
             "tests/test_other_two.py::t1", "tests/test_two.py::t2", "tests/test_three.py::t3",
             "tests/test_other_two.py::t2", f"{first}::t1"]
    items = [_Node(n) for n in names]
    conftest.pytest_collection_modifyitems(None, items)
    assert [i.nodeid for i in items] == [f"{first}::t1", "tests/test_three.py::t1", "tests/test_three.py::t2",
                                         "tests/test_three.py::t3", "tests/test_two.py::t1", "tests/test_two.py::t2",
                                         "tests/test_other_two.py::t1", "tests/test_other_two.py::t2",
                                         "tests/test_one.py::t1"]

    class Options:
        loadscopereorder = True  # xdist's default: the modules with the most tests first

    class Config:
        option = Options()

    config = Config()
    conftest.pytest_configure(config)
    assert config.option.loadscopereorder is False
    conftest.pytest_configure(type("NoXdist", (), {"option": object()})())  # without xdist: nothing to turn off


def test_every_module_named_first_exists():
    """A renamed or removed module would silently drop out of the ordering."""
    root = Path(__file__).parent.parent
    names = _conftest().HEAVY_FIRST
    assert len(set(names)) == len(names)
    assert [n for n in names if not (root / n).is_file()] == []


def test_the_test_jvm_compiles_with_c1_unless_told_otherwise():
    conftest = _conftest()
    args = conftest.jvm_submit_args({})
    assert args == "--conf 'spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m' pyspark-shell"
    assert conftest.jvm_submit_args({"FRAGRELEASE_TEST_JAVA_OPTIONS": ""}) is None  # the JVM's default
    assert conftest.jvm_submit_args({"FRAGRELEASE_TEST_JAVA_OPTIONS": "-Xint -Xss4m"}) == \
        "--conf 'spark.driver.extraJavaOptions=-Xint -Xss4m' pyspark-shell"
    assert conftest.jvm_submit_args({"PYSPARK_SUBMIT_ARGS": "--master local[1] pyspark-shell"}) is None  # the caller's


def test_the_session_jvm_runs_with_the_test_options_and_the_environment_is_restored(spark):
    """The option reaches the driver JVM's command line (Linux's /proc), and the suite's subprocesses
    do not inherit it (PYSPARK_SUBMIT_ARGS is removed once the session runs)."""
    conftest = _conftest()
    pid = spark.sparkContext._gateway.proc.pid
    cmdline = Path(f"/proc/{pid}/cmdline")
    if not cmdline.exists():
        pytest.skip("no /proc here")
    java_args = cmdline.read_bytes().split(b"\0")
    expected = os.environ.get("FRAGRELEASE_TEST_JAVA_OPTIONS", conftest.TEST_JAVA_OPTIONS).split()
    assert all(o.encode() in java_args for o in expected)
    assert conftest.TEST_JAVA_OPTIONS not in os.environ.get("PYSPARK_SUBMIT_ARGS", "")  # a caller's own stays
