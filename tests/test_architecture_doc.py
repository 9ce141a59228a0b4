"""docs/architecture.md tells the truth: every path and ``file::name`` it names exists, and the
claims it makes about the code (no Spark windows, noise in grouped tasks, pyarrow's schemes) hold."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
TEXT = DOC.read_text(encoding="utf-8")
#: A backticked repository path (a folder ends with /), optionally ``::name`` or ``::Class.method``.
PATH = re.compile(r"`((?:fragrelease|jobs|udfs|schemas|experiments|tests|docs|scripts)/[\w./-]*?)(?:::([\w.]+))?`")


def _refs() -> list[tuple[str, str | None]]:
    return sorted(set(PATH.findall(TEXT)), key=lambda r: (r[0], r[1] or ""))


def _defines(path: Path, name: str) -> bool:
    """True when ``path`` defines ``name`` at module level (``Class.method``: a method of that class)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    head, _, rest = name.partition(".")
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == head:
            if not rest:
                return True
            return isinstance(node, ast.ClassDef) and any(
                isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name == rest for m in node.body)
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and not rest:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == head for t in targets):
                return True
    return False


def test_the_doc_names_many_files_and_functions():
    refs = _refs()
    assert len({p for p, _ in refs}) > 60 and len([n for _, n in refs if n]) > 50


@pytest.mark.parametrize("path,name", _refs(), ids=lambda v: str(v))
def test_every_named_path_and_function_exists(path, name):
    target = ROOT / path
    if path.endswith("/"):
        assert target.is_dir(), path
    else:
        assert target.is_file(), path
    if name:
        assert _defines(target, name), f"{path} defines no {name}"


def test_a_missing_path_or_function_is_caught():
    assert not (ROOT / "jobs/idpir/no_such_module.py").is_file()
    assert not _defines(ROOT / "jobs/protocol/owner.py", "no_such_function")
    assert _defines(ROOT / "jobs/release_api.py", "Release.run")
    assert not _defines(ROOT / "jobs/release_api.py", "Release.no_such_method")


def _sources(*folders: str):
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            yield path, ast.parse(path.read_text(encoding="utf-8"))


def test_no_spark_window_anywhere():
    """"No module uses a Spark window": no pyspark.sql.window import and no ``.over(...)`` call."""
    bad = []
    for path, tree in _sources("fragrelease", "jobs", "udfs", "schemas"):
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pyspark.sql.window"):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}")
            if isinstance(node, ast.ImportFrom) and any(a.name == "Window" for a in node.names):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "over":
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not bad, bad


def _calls_in(path: Path, function: str) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function)
    return {n.func.attr for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}


def test_the_centroid_noise_runs_in_grouped_tasks_and_is_stored():
    """"one task per attribute (applyInPandas)", materialized before anything reads it."""
    for fn in ("noise_per_attribute", "draw_whole_attributes"):
        calls = _calls_in(ROOT / "jobs/idpir/cluster_noise.py", fn)
        assert {"applyInPandas", "localCheckpoint", "groupBy"} <= calls, fn


def test_pyarrow_knows_no_s3a_or_dbfs_scheme():
    """The storage recipe's claim: ``jobs/storage/uris.py`` hands URIs to pyarrow, which refuses these two."""
    import pyarrow as pa

    from fragrelease.jobs.storage import fs_path

    for uri in ("s3a://bucket/key", "dbfs:/folder/key"):
        with pytest.raises(pa.ArrowInvalid, match="Unrecognized filesystem type"):
            fs_path(uri)
