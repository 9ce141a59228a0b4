"""The Python API example (docs/python-api.md, "From a notebook: the example", moved there from the README) runs
exactly as written."""
import re
from pathlib import Path

import pytest
from deltalake import DeltaTable

ROOT = Path(__file__).resolve().parents[1]


def readme_api_example() -> str:
    text = (ROOT / "docs" / "python-api.md").read_text(encoding="utf-8")
    section = text.split("## From a notebook: the example", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1, "the section should hold exactly one python example"
    return blocks[0]


@pytest.mark.slow  # whole releases end to end (minutes with the suite's load); CI runs it
def test_readme_api_example_runs_as_written(spark, tmp_path, monkeypatch, capsys):
    code = readme_api_example()
    assert "fragrelease.protect(" in code and "fragrelease.Release(" in code
    monkeypatch.chdir(tmp_path)  # the example writes releases/notebook-demo relative to the working folder
    namespace: dict = {}
    exec(compile(code, "docs/python-api.md", "exec"), namespace)
    one, result = namespace["one"], namespace["result"]
    assert one.epsilon_spent == 1 and one.n_records == 3000
    assert result.rows == 3000 and result.version == 0 and result.epsilon == 1
    assert DeltaTable(str(tmp_path / "releases" / "notebook-demo")).version() == 0
    out = capsys.readouterr().out
    assert "eps_attr-iDP" in out and "only showing top 5 rows" in out
