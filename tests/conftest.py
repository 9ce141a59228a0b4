"""Shared fixtures: one session-scoped local SparkSession (local[2], few shuffle partitions, UI off, UTC)."""
from __future__ import annotations

import os
import sys

import pytest

_TESTS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _TESTS)
# Python workers must import the test-only helpers (noise injection) too.
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_TESTS, os.environ.get("PYTHONPATH")) if p)


@pytest.fixture(scope="session", autouse=True)
def private_root(tmp_path_factory):
    """Owners' private folders (reports, simulated fragments) go to a temporary root, not ~/."""
    root = str(tmp_path_factory.mktemp("owner-private"))
    os.environ["FRAGRELEASE_PRIVATE_ROOT"] = root
    return root


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from fragrelease.jobs.session import get_spark

    os.environ.setdefault("FRAGRELEASE_SPARK_LOG_LEVEL", "ERROR")
    session = get_spark("fragrelease-tests", master="local[2]", shuffle_partitions=4)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def adult_pdf():
    from fragrelease.schemas.datasets import load_builtin_pandas

    return load_builtin_pandas("adult")


@pytest.fixture(scope="session")
def wine_pdf():
    from fragrelease.schemas.datasets import load_builtin_pandas

    return load_builtin_pandas("wine")
