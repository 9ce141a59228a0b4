"""notebooks/walkthrough.ipynb runs from top to bottom on a small sample (nbclient, a fresh kernel)
and is committed with its outputs: the plan, the head of the release, the provenance, a plot, then a
synthetic release of the same owners and a table read back from it."""
import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "walkthrough.ipynb"
#: Adult records the CI run uses (the committed outputs are from 12,000).
CI_SAMPLE = "2400"
#: Per-cell limit of the CI run, seconds.
CELL_TIMEOUT = 600


@pytest.mark.slow
@pytest.mark.spark  # the kernel starts its own local Spark session
def test_walkthrough_notebook_executes_without_error(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    from nbclient import NotebookClient

    nb = nbformat.read(NOTEBOOK, as_version=4)
    monkeypatch.setenv("FRAGRELEASE_NOTEBOOK_SAMPLE", CI_SAMPLE)
    monkeypatch.setenv("FRAGRELEASE_NOTEBOOK_OUTPUT", str(tmp_path / "release"))
    monkeypatch.setenv("FRAGRELEASE_SPARK_MASTER", "local[2]")
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    # a kernel of exactly this interpreter (not whatever "python3" kernel the machine has installed)
    spec = tmp_path / "jupyter" / "kernels" / "fragrelease-test"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "fragrelease test", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    client = NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="fragrelease-test", allow_errors=False,
                            resources={"metadata": {"path": str(ROOT)}})
    client.execute()  # raises CellExecutionError on the first failing cell
    texts = "\n".join(o.get("text", "") + json.dumps(o.get("data", {})) for c in nb.cells if c.cell_type == "code"
                      for o in c.get("outputs", []))
    assert "plan " in texts and "MeanSSE" in texts and '"role": "release"' in texts
    assert "rows drawn from the model" in texts and "cliques:" in texts  # the synthetic release (issue 53)
    assert os.path.isdir(tmp_path / "release-synthetic" / "_delta_log")
    assert any("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert os.path.isdir(tmp_path / "release" / "_delta_log")


def test_committed_notebook_holds_its_outputs():
    """The committed copy shows the plan, the head of the release, the provenance and a plot, without errors."""
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(c.get("outputs") for c in code), "every code cell should be committed with its outputs"
    outputs = [o for c in code for o in c["outputs"]]
    assert not [o for o in outputs if o["output_type"] == "error"]
    text = json.dumps(outputs)
    assert "plan " in text and '\\"role\\": \\"release\\"' in text and "image/png" in text
    assert "fragrelease.Release(" in json.dumps([c["source"] for c in code])
    # the synthetic kind: a release and reading it back (issue 53)
    assert 'linkage=\\"synthetic\\"' in json.dumps([c["source"] for c in code])
    assert "rows drawn from" in text and "synthetic" in text
