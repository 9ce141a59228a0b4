"""Imports a step does not need are not paid where they are not used (docs/benchmarks.md, "Issue 41,
session 4: the first release's warm-up"): a new process imports these modules fresh."""
from __future__ import annotations

import subprocess
import sys

import pytest


def _loaded(module: str, heavy: tuple[str, ...]) -> dict[str, bool]:
    code = (f"import sys, {module}\n"
            f"print(' '.join(str(m in sys.modules) for m in {heavy!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return dict(zip(heavy, (w == "True" for w in out.stdout.split())))


@pytest.mark.parametrize("module", ["fragrelease.jobs.protocol.report", "fragrelease.jobs.protocol.release"])
def test_the_report_module_does_not_import_matplotlib(module):
    # the Python workers import the report module for its summaries' mapInPandas functions, and never draw
    assert _loaded(module, ("matplotlib", "matplotlib.figure")) == {"matplotlib": False, "matplotlib.figure": False}


def test_the_configuration_does_not_import_scipys_optimize():
    # fragrelease.protocol.options imports the post-processing's names before any fit is made
    assert _loaded("fragrelease.protocol.config", ("scipy.optimize",)) == {"scipy.optimize": False}

