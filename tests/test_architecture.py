"""The layers, read from the imports (AST, absolute and relative, module level and inside functions).

- ``fragrelease/`` (the Spark-free math) imports nothing from ``jobs``, ``udfs``, ``schemas``,
  ``experiments`` or pyspark, with one exception: the lazy facade in ``fragrelease/__init__.py``,
  whose module ``__getattr__`` imports :mod:`fragrelease.jobs.api` when ``fragrelease.protect`` or
  ``fragrelease.Release`` is first accessed (so that a notebook can write ``fragrelease.protect``),
  never at import time; ``import fragrelease`` alone loads no pyspark (checked in a subprocess);
- nothing outside the command line (``jobs.cli``) imports it, the iDP-IR party modules
  (``jobs/idpir``) included;
- no release-path module (the math, the Spark jobs, the UDFs, the schemas) imports ``experiments``;
  only the CLI's experiment commands do;
- no import cycle exists among the project's modules.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Repository folder -> the package it installs as (setup.py package_dir).
FOLDERS = {"fragrelease": "fragrelease", "jobs": "fragrelease.jobs", "udfs": "fragrelease.udfs",
           "schemas": "fragrelease.schemas", "experiments": "fragrelease.experiments"}
UPPER = ("fragrelease.jobs", "fragrelease.udfs", "fragrelease.schemas", "fragrelease.experiments")


def _module_name(path: Path) -> tuple[str, bool]:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    pkg = FOLDERS[parts[0]].split(".") + parts[1:]
    is_pkg = pkg[-1] == "__init__"
    return ".".join(pkg[:-1] if is_pkg else pkg), is_pkg


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            name, is_pkg = _module_name(path)
            out[name] = (path, is_pkg)
    return out


MODULES = _modules()


def _imports(name: str, path: Path, is_pkg: bool) -> list[tuple[str, int]]:
    """Absolute names of every import in the module (anywhere in it), with line numbers.

    ``from P import x`` yields ``P.x`` when that is a project module, else ``P``; relative imports are
    resolved against the module's package; the repository folder names (``jobs``, ``schemas``, ...)
    as top-level imports are kept as written, so that importing them is caught too.
    """
    package = name if is_pkg else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out.extend((a.name, node.lineno) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for a in node.names:
                sub = f"{mod}.{a.name}"
                out.append((sub if sub in MODULES else mod, node.lineno))
    return out


def _project_target(imported: str) -> str | None:
    """The project module an import loads last (its deepest project prefix), or None if external."""
    parts = imported.split(".")
    for n in range(len(parts), 0, -1):
        cand = ".".join(parts[:n])
        if cand in MODULES:
            return cand
    return None


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def test_the_walk_sees_every_folder_and_both_kinds_of_import():
    assert {"fragrelease.rng", "fragrelease.jobs.cli", "fragrelease.udfs.noise", "fragrelease.schemas.taxonomies",
            "fragrelease.experiments.evaluation", "fragrelease.tiers.chain"} <= set(MODULES)
    api = _imports("fragrelease.jobs.release_api", *MODULES["fragrelease.jobs.release_api"])
    assert ("fragrelease.jobs.idpir.simulate" in {m for m, _ in api})  # from P import module
    cli = _imports("fragrelease.jobs.cli.idpir", *MODULES["fragrelease.jobs.cli.idpir"])
    assert "fragrelease.jobs.idpir.owner" in {m for m, _ in cli}  # imported inside a function


#: The one allowed upward import: (module, function it sits in, what it imports).
LAZY_FACADE = ("fragrelease", "__getattr__", "fragrelease.jobs.api")


def _enclosing_functions(path: Path) -> dict[int, str]:
    """Line number of every import inside a function -> the function's name."""
    out = {}
    for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    out[node.lineno] = fn.name
    return out


def test_the_math_layer_imports_nothing_from_the_spark_side():
    bad, facade = [], []
    for name, (path, is_pkg) in MODULES.items():
        if not _under(name, "fragrelease") or any(_under(name, u) for u in UPPER):
            continue
        inside = _enclosing_functions(path)
        for imported, line in _imports(name, path, is_pkg):
            top = imported.split(".")[0]
            if (top in ("pyspark", "jobs", "udfs", "schemas", "experiments")
                    or any(_under(imported, u) for u in UPPER)):
                if (name, inside.get(line), imported) == LAZY_FACADE:
                    facade.append(line)
                    continue
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {imported}")
    assert not bad, "\n".join(bad)
    assert len(facade) == 1, f"the lazy facade should import fragrelease.jobs.api exactly once, found {facade}"


def test_importing_the_package_loads_no_spark_until_the_facade_is_used():
    """``import fragrelease`` (and its math) loads no pyspark; ``fragrelease.protect`` then does."""
    import subprocess
    import sys

    code = ("import sys, fragrelease, fragrelease.idpir.protocol, fragrelease.budget\n"
            "assert 'pyspark' not in sys.modules and 'fragrelease.jobs' not in sys.modules, 'eager'\n"
            "f = fragrelease.protect\n"
            "assert 'pyspark' in sys.modules and f.__module__ == 'fragrelease.jobs.api'\n"
            "try:\n    fragrelease.nothing_here\nexcept AttributeError as e:\n    print('ok', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "ok module 'fragrelease' has no attribute 'nothing_here'" in out.stdout


def test_nothing_outside_the_cli_imports_it():
    """The party modules (``jobs/idpir``: owner, aggregator, the local driver) included: the CLI calls them."""
    bad = [f"{path.relative_to(ROOT)}:{line} imports {imported}"
           for name, (path, is_pkg) in MODULES.items() if not _under(name, "fragrelease.jobs.cli")
           for imported, line in _imports(name, path, is_pkg) if _under(imported, "fragrelease.jobs.cli")]
    assert not bad, "\n".join(bad)


def test_no_release_path_imports_the_experiments():
    bad = []
    for name, (path, is_pkg) in MODULES.items():
        if _under(name, "fragrelease.experiments") or _under(name, "fragrelease.jobs.cli"):
            continue
        for imported, line in _imports(name, path, is_pkg):
            if _under(imported, "fragrelease.experiments") or imported.split(".")[0] == "experiments":
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {imported}")
    assert not bad, "\n".join(bad)


def _graph() -> dict[str, set[str]]:
    """Import edges; the lazy facade's edge is left out: it runs on attribute access, after every
    module involved has finished importing, so it cannot take part in an import-time cycle."""
    graph: dict[str, set[str]] = {}
    for name, (path, is_pkg) in MODULES.items():
        edges = set()
        inside = _enclosing_functions(path)
        for imported, line in _imports(name, path, is_pkg):
            target = _project_target(imported)
            if (name, inside.get(line), imported) == LAZY_FACADE:
                continue
            if target is not None and target != name:
                edges.add(target)
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a closed path ``[a, b, ..., a]``, or None (iterative DFS, three colours)."""
    white, grey, black = 0, 1, 2
    colour = {n: white for n in graph}
    for start in sorted(graph):
        if colour[start] != white:
            continue
        stack = [(start, iter(sorted(graph[start])))]
        path = [start]
        colour[start] = grey
        while stack:
            node, children = stack[-1]
            for child in children:
                if colour.get(child, black) == grey:
                    return path[path.index(child):] + [child]
                if colour.get(child) == white:
                    colour[child] = grey
                    path.append(child)
                    stack.append((child, iter(sorted(graph[child]))))
                    break
            else:
                colour[node] = black
                path.pop()
                stack.pop()
    return None


def test_find_cycle_reports_a_cycle_and_accepts_a_dag():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]


def test_no_import_cycle_among_the_project_modules():
    cycle = find_cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)
