"""docs/architecture.md tells the truth: every path and ``file::name`` it names exists, and the
claims it makes about the code (no Spark windows, noise in grouped tasks, pyarrow's schemes) hold."""
from __future__ import annotations

import ast
import dataclasses
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


# --- Release kinds (docs/architecture.md, "Release kinds" and "Add a release kind") ------------------------

#: Installed package -> repository folder (setup.py package_dir), longest first.
_FOLDER_OF = (("fragrelease.jobs", "jobs"), ("fragrelease.udfs", "udfs"), ("fragrelease.schemas", "schemas"),
              ("fragrelease", "fragrelease"))


def _file_of(module: str, root: Path = ROOT) -> Path:
    """The repository file of an installed module name (a package: its ``__init__.py``)."""
    for package, folder in _FOLDER_OF:
        if module == package or module.startswith(package + "."):
            rel = Path(folder, *module[len(package) + 1:].split(".")) if module != package else Path(folder)
            return root / rel / "__init__.py" if (root / rel).is_dir() else (root / rel).with_suffix(".py")
    raise AssertionError(f"{module} is not a product module")


def _registry_problems(kinds, root: Path = ROOT) -> list[str]:
    """What is wrong with registry entries ``kinds`` (wire name -> entry: ``terms``, ``jobs`` and any other
    ``"module:attribute"`` field), read without importing them: a module file missing, or an object it
    does not define."""
    bad = []
    for name, entry in kinds.items():
        halves = [f.name for f in dataclasses.fields(entry)] if dataclasses.is_dataclass(entry) else ["terms", "jobs"]
        for half in halves:
            if not isinstance(getattr(entry, half), str):
                continue
            module, _, attribute = getattr(entry, half).partition(":")
            path = _file_of(module, root)
            if not path.is_file():
                bad.append(f"{name}.{half}: no file {path.relative_to(root)} for {module}")
            elif not attribute or not _defines(path, attribute):
                bad.append(f"{name}.{half}: {path.relative_to(root)} defines no {attribute or '(nothing named)'}")
    return bad


def _section(title: str) -> str:
    start = TEXT.index(f"\n{title}\n")
    following = re.search(r"\n#{2,3} ", TEXT[start + len(title) + 2:])
    return TEXT[start: start + len(title) + 2 + (following.start() if following else len(TEXT))]


def test_every_registry_entry_names_a_module_that_defines_its_half():
    """Each kind's two halves, as ``fragrelease/kinds.py::KINDS`` names them, exist (read, not imported)."""
    from fragrelease.kinds import KINDS

    assert {"linked", "unlinked", "synthetic"} <= set(KINDS)
    bad = _registry_problems(KINDS)
    assert not bad, "\n".join(bad)


def test_a_registry_entry_naming_nothing_is_caught():
    from types import SimpleNamespace

    planted = {"ghost": SimpleNamespace(terms="fragrelease.ghost.kind:GHOST",
                                        jobs="fragrelease.jobs.protocol.kind:NO_SUCH_JOBS"),
               "fine": SimpleNamespace(terms="fragrelease.kinds:KINDS", jobs="fragrelease.jobs.protocol.kind:KindJobs")}
    assert _registry_problems(planted) == ["ghost.terms: no file fragrelease/ghost/kind.py for fragrelease.ghost.kind",
                                           "ghost.jobs: jobs/protocol/kind.py defines no NO_SUCH_JOBS"]
    assert _file_of("fragrelease.jobs.idpir") == ROOT / "jobs" / "idpir" / "__init__.py"


def test_the_doc_names_both_halves_of_every_registered_kind():
    """The "Release kinds" table names each half's file of every registry entry, and the recipe names the
    registry and both interfaces: the doc cannot lose a kind the registry has."""
    from fragrelease.kinds import KINDS

    kinds = _section("## Release kinds")
    for name, entry in KINDS.items():
        assert f"`{name}`" in kinds, name
        for half in (entry.terms, entry.jobs):
            module, _, attribute = half.partition(":")
            path = str(_file_of(module).relative_to(ROOT))
            assert f"`{path}`" in kinds or f"`{path}::{attribute}`" in kinds, (name, half)
    recipe = _section("### Add a release kind")
    for named in ("`fragrelease/kinds.py::KINDS`", "`fragrelease/protocol/kind.py`", "`jobs/protocol/kind.py::KindJobs`",
                  "`tests/test_kind_boundaries.py", "`tests/test_architecture.py::JOBS_LAYERS`"):
        assert named in recipe, named


def test_the_linkage_option_accepts_exactly_the_registered_kinds():
    """The recipe's step 1: the ``linkage`` option takes every registry name and refuses any other,
    naming exactly the registry's names."""
    from fragrelease.errors import InvalidParameterError
    from fragrelease.kinds import KINDS
    from fragrelease.protocol.options import ReleaseOptions

    for name in KINDS:
        assert ReleaseOptions.of(linkage=name).linkage == name
    with pytest.raises(InvalidParameterError) as refused:
        ReleaseOptions.of(linkage="joined")
    assert set(re.findall(r"'(\w+)'", str(refused.value))) == set(KINDS) | {"joined"}


# --- Package docstrings -------------------------------------------------------------------------------------

def _packages_without_docstring(root: Path, folders=("fragrelease", "jobs", "udfs", "schemas")) -> list[str]:
    """Every product package whose ``__init__.py`` opens with no docstring."""
    return [str(p.relative_to(root)) for folder in folders for p in sorted((root / folder).rglob("__init__.py"))
            if not (ast.get_docstring(ast.parse(p.read_text(encoding="utf-8"))) or "").strip()]


def test_every_product_package_says_what_it_holds():
    """Every package of ``fragrelease/``, ``jobs/``, ``udfs/`` and ``schemas/`` opens with a docstring."""
    assert len(list((ROOT / "jobs").rglob("__init__.py"))) >= 9
    assert _packages_without_docstring(ROOT) == []


def test_a_package_without_a_docstring_is_caught(tmp_path):
    (tmp_path / "jobs" / "bare").mkdir(parents=True)
    (tmp_path / "jobs" / "bare" / "__init__.py").write_text("# a comment is not a docstring\nx = 1\n", encoding="utf-8")
    (tmp_path / "jobs" / "__init__.py").write_text('"""The Spark side."""\n', encoding="utf-8")
    assert _packages_without_docstring(tmp_path, ("jobs",)) == ["jobs/bare/__init__.py"]


def test_the_registry_imports_only_the_errors():
    """The Layers table: ``fragrelease/kinds.py`` imports no project module but ``fragrelease.errors`` (the
    kinds' halves are text, imported on first use), so importing it loads no kind."""
    tree = ast.parse((ROOT / "fragrelease" / "kinds.py").read_text(encoding="utf-8"))
    project = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert not node.level, node.lineno
            project.add(node.module or "")
        elif isinstance(node, ast.Import):
            project.update(a.name for a in node.names)
    assert {m for m in project if m.split(".")[0] == "fragrelease"} == {"fragrelease.errors"}
