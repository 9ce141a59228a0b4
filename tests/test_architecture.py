"""The layers, read from the imports (AST, absolute and relative, module level and inside functions).

- ``fragrelease/`` (the Spark-free math) imports nothing from ``jobs``, ``udfs``, ``schemas``,
  ``experiments`` or pyspark, with one exception: the lazy facade in ``fragrelease/__init__.py``,
  whose module ``__getattr__`` imports :mod:`fragrelease.jobs.api` when ``fragrelease.protect`` or
  ``fragrelease.Release`` is first accessed (so that a notebook can write ``fragrelease.protect``),
  never at import time; ``import fragrelease`` alone loads no pyspark (checked in a subprocess);
- nothing outside the command line (``jobs.cli``) imports it, the party modules (``jobs/protocol``)
  and the kinds included;
- no release-path module (the math, the Spark jobs, the UDFs, the schemas) imports ``experiments``;
  only the CLI's experiment commands do;
- no import cycle exists among the project's modules;
- storage is one subpackage with one public face: nothing outside ``jobs/storage/`` imports a module
  inside it (three tests that monkeypatch an inner module's attribute are listed), and its ``__all__``
  is exactly what the rest of the project imports from it.
- inside ``jobs/``, no module imports a higher layer of ``JOBS_LAYERS`` (storage and session < the
  protocol < the release kinds and the other systems < shared result types < the local driver < the
  Python API < the entry points);
- no module of ``fragrelease/``, ``jobs/``, ``udfs/`` or ``schemas/`` is over 500 lines.

What the protocol may not import or branch on (the kinds) is ``tests/test_kind_boundaries.py``'s.
"""
from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from fragrelease.kinds import KINDS
from tests.helpers.ast_imports import from_module

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


@functools.cache
def _parse_source(source: str, filename: str) -> ast.Module:
    """One parse per distinct source text in this process: the tests only read the trees (each test
    read and parsed every module again, 2,000 parses for about 300 files; issue 41, session 5)."""
    return ast.parse(source, filename)


@pytest.fixture(scope="module", autouse=True)
def _parsed_trees_freed():
    """The parse caches below last as long as this module's tests: the rest of a worker's session does
    not carry some 300 parsed modules, which every full run of the garbage collector would walk."""
    yield
    for cached in (_parse_source, _imports_in, _enclosing_functions_in, _from_imports_in, _aliases_in,
                   _drawing_math_functions_once):
        cached.cache_clear()


def _tree(path: Path) -> ast.Module:
    """The module at ``path`` parsed (read afresh, so a changed file is parsed again)."""
    return _parse_source(path.read_text(encoding="utf-8"), str(path))


def _imports(name: str, path: Path, is_pkg: bool) -> list[tuple[str, int]]:
    """Absolute names of every import in the module (anywhere in it), with line numbers.

    ``from P import x`` yields ``P.x`` when that is a project module, else ``P``; relative imports are
    resolved against the module's package; the repository folder names (``jobs``, ``schemas``, ...)
    as top-level imports are kept as written, so that importing them is caught too.
    """
    return list(_imports_in(name, is_pkg, _tree(path)))


@functools.cache
def _imports_in(name: str, is_pkg: bool, tree: ast.Module) -> tuple[tuple[str, int], ...]:
    """:func:`_imports` of a parsed module (cached with its tree: a tree is one source text)."""
    package = name if is_pkg else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((a.name, node.lineno) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            mod = from_module(node, package)
            for a in node.names:
                sub = f"{mod}.{a.name}"
                out.append((sub if sub in MODULES else mod, node.lineno))
    return tuple(out)


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
    driver = _imports("fragrelease.jobs.protocol.release", *MODULES["fragrelease.jobs.protocol.release"])
    assert ("fragrelease.jobs.protocol.simulate" in {m for m, _ in driver})  # from . import module
    cli = _imports("fragrelease.jobs.cli.parties", *MODULES["fragrelease.jobs.cli.parties"])
    assert "fragrelease.jobs.protocol.owner" in {m for m, _ in cli}  # imported inside a function


#: The one allowed upward import: (module, function it sits in, what it imports).
LAZY_FACADE = ("fragrelease", "__getattr__", "fragrelease.jobs.api")


def _enclosing_functions(path: Path) -> dict[int, str]:
    """Line number of every import inside a function -> the function's name."""
    return dict(_enclosing_functions_in(_tree(path)))


@functools.cache
def _enclosing_functions_in(tree: ast.Module) -> tuple[tuple[int, str], ...]:
    """:func:`_enclosing_functions` of a parsed module, as pairs (cached with its tree)."""
    out = {}
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    out[node.lineno] = fn.name
    return tuple(out.items())


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

    code = ("import sys, fragrelease, fragrelease.protocol.messages, fragrelease.budget\n"
            "assert 'pyspark' not in sys.modules and 'fragrelease.jobs' not in sys.modules, 'eager'\n"
            "f = fragrelease.protect\n"
            "assert 'pyspark' in sys.modules and f.__module__ == 'fragrelease.jobs.api'\n"
            "try:\n    fragrelease.nothing_here\nexcept AttributeError as e:\n    print('ok', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "ok module 'fragrelease' has no attribute 'nothing_here'" in out.stdout


def test_nothing_outside_the_cli_imports_it():
    """The party modules (``jobs/protocol``: owner, aggregator, the local driver) and the kinds included: the
    CLI calls them."""
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


def test_udfs_and_schemas_sit_below_the_jobs():
    """docs/architecture.md, "Layers": ``udfs/`` and ``schemas/`` import no job, CLI or experiment."""
    upper = ("fragrelease.jobs", "fragrelease.experiments")
    bad = [f"{path.relative_to(ROOT)}:{line} imports {imported}"
           for name, (path, is_pkg) in MODULES.items()
           if _under(name, "fragrelease.udfs") or _under(name, "fragrelease.schemas")
           for imported, line in _imports(name, path, is_pkg)
           if any(_under(imported, u) for u in upper) or imported.split(".")[0] in ("jobs", "experiments")]
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


# --- Storage: one subpackage, one public face (docs/architecture.md, "Storage") ----------------------------

STORAGE = "fragrelease.jobs.storage"
#: Test files that name a module inside the storage package, and which: each replaces (monkeypatch) or
#: unit-tests a private attribute where that module looks it up, which the package's face cannot reach.
#: ``files``: ``delta_available`` as ``files.commit_delta`` sees it (forces the delta-rs path);
#: ``delta``: ``_discard_uncommitted`` (a killed commit) and ``_spark_commit_error`` (a Java error's cause);
#: ``commit``: ``commit_delta`` as ``commit_release`` sees it (a disk full at the release's commit).
STORAGE_INNER_IN_TESTS = {
    "tests/jobs/test_commit_engine.py": {f"{STORAGE}.files"},  # which engine commits a table
    "tests/jobs/test_commit_failures.py": {f"{STORAGE}.files"},
    "tests/jobs/test_output_recovery.py": {f"{STORAGE}.files", f"{STORAGE}.delta"},
    "tests/jobs/idpir/test_fault_safety.py": {f"{STORAGE}.commit", f"{STORAGE}.files"},
    "tests/jobs/idpir/test_spend_last_owners.py": {f"{STORAGE}.delta"},  # the Delta-Spark commit lock
}


def _from_imports(tree: ast.AST, package: str) -> list[tuple[str, str, int]]:
    """``(module, name, line)`` of every import in ``tree`` (relative ones resolved against ``package``);
    ``import a.b`` gives ``("a.b", "", line)``."""
    return list(_from_imports_in(tree, package))


@functools.cache
def _from_imports_in(tree: ast.AST, package: str) -> tuple[tuple[str, str, int], ...]:
    """:func:`_from_imports`, cached with its tree (the trees are only read)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((a.name, "", node.lineno) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                base = package.split(".")
                mod = ".".join(base[: len(base) - (node.level - 1)] + ([mod] if mod else []))
            out.extend((mod, a.name, node.lineno) for a in node.names)
    return tuple(out)


def _storage_inner(tree: ast.AST, package: str) -> list[tuple[str, int]]:
    """The modules inside the storage package that ``tree`` imports by name, with line numbers."""
    inner = []
    for mod, name, line in _from_imports(tree, package):
        if mod.startswith(STORAGE + "."):  # from fragrelease.jobs.storage.files import x; import ...storage.files
            inner.append((".".join(mod.split(".")[:4]), line))
        elif mod == STORAGE and f"{mod}.{name}" in MODULES:  # from fragrelease.jobs.storage import files
            inner.append((f"{mod}.{name}", line))
    return inner


def _outside_storage() -> list[tuple[str, Path, str]]:
    """``(label, path, package)`` of every project module outside the storage package and every test file."""
    out = [(name, path, name if is_pkg else name.rpartition(".")[0])
           for name, (path, is_pkg) in MODULES.items() if not _under(name, STORAGE)]
    out += [(str(p.relative_to(ROOT)), p, "tests") for p in sorted((ROOT / "tests").rglob("*.py"))]
    return out


def test_storage_is_imported_only_through_its_package():
    """Outside ``jobs/storage/`` nothing imports ``fragrelease.jobs.storage.<module>``; the test files of
    :data:`STORAGE_INNER_IN_TESTS` name exactly the inner modules listed there (the list cannot go stale)."""
    bad, seen = [], {}
    for label, path, package in _outside_storage():
        for inner, line in _storage_inner(_tree(path), package):
            if inner in STORAGE_INNER_IN_TESTS.get(label, set()):
                seen.setdefault(label, set()).add(inner)
            else:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {inner}")
    assert not bad, "\n".join(bad)
    assert seen == STORAGE_INNER_IN_TESTS
    planted = ast.parse("from ..storage.files import write_text\nfrom fragrelease.jobs.storage import uris\n"
                        "import fragrelease.jobs.storage.catalog\nfrom ..storage import write_text\n")
    assert _storage_inner(planted, "fragrelease.jobs.idpir") == [
        (f"{STORAGE}.files", 1), (f"{STORAGE}.uris", 2), (f"{STORAGE}.catalog", 3)]


def test_the_storage_face_exports_exactly_what_the_project_uses():
    """``jobs/storage/__init__.py``'s ``__all__`` is the set of names that modules and tests outside the
    package import from it: nothing unused is exported, nothing used is missing, every name resolves."""
    import fragrelease.jobs.storage as storage

    used = {name for _label, path, package in _outside_storage()
            for mod, name, _line in _from_imports(_tree(path), package)
            if mod == STORAGE and name and f"{STORAGE}.{name}" not in MODULES}
    assert sorted(set(storage.__all__)) == sorted(used)
    assert len(storage.__all__) == len(set(storage.__all__))
    assert all(hasattr(storage, name) for name in storage.__all__)


#: The layers of ``jobs/``, lowest first (docs/architecture.md, "Layers"): a module imports modules of
#: its own layer or of a lower one, never of a higher one (TYPE_CHECKING and function-level imports
#: included). Each layer lists module names or packages (a name covers its submodules); the most
#: specific name decides (``fragrelease.jobs.protocol.release`` is the local driver, the rest of
#: ``fragrelease.jobs.protocol`` the protocol). Every module of ``jobs/`` must be in one layer.
#: The protocol sits below the release kinds: it reaches a kind only through the registry
#: (:mod:`fragrelease.kinds`, imported on first use by ``jobs/protocol/kind.py``), never by an import;
#: the kinds build on the protocol. The local driver plays every party, through the kinds' interface.
JOBS_LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("storage and session", ("fragrelease.jobs", "fragrelease.jobs.storage", "fragrelease.jobs.session",
                             "fragrelease.jobs.session_catalog", "fragrelease.jobs.session_delta",
                             "fragrelease.jobs.session_jvm", "fragrelease.jobs.session_workers",
                             "fragrelease.jobs.class_archive", "fragrelease.jobs.frames",
                             "fragrelease.jobs.partitioning", "fragrelease.jobs.progress",
                             "fragrelease.jobs.describe")),
    ("protocol", ("fragrelease.jobs.protocol",)),
    # the kinds' Spark packages read from the registry (a new kind needs no edit here), and the other systems
    ("release kinds and the other systems", (*sorted({e.jobs.partition(":")[0].rpartition(".")[0] for e in KINDS.values()}),
                                             "fragrelease.jobs.tiers", "fragrelease.jobs.publications",
                                             "fragrelease.jobs.diffgen")),
    ("result types shared by the driver and the API", ("fragrelease.jobs.api_common",)),
    ("local driver", ("fragrelease.jobs.protocol.release",)),
    ("Python API", ("fragrelease.jobs.api", "fragrelease.jobs.release_api")),
    ("entry points", ("fragrelease.jobs.cli", "fragrelease.jobs.class_archive_build")),
)


def _jobs_layer(name: str, layers=JOBS_LAYERS) -> int | None:
    """Index in ``layers`` of the layer holding module ``name`` (its longest listed prefix), or None."""
    best: tuple[int, int] | None = None
    for index, (_, prefixes) in enumerate(layers):
        for prefix in prefixes:
            if _under(name, prefix) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), index)
    return None if best is None else best[1]


def _upward_imports(modules, layers=JOBS_LAYERS) -> list[str]:
    """``path:line imports X (layer a -> layer b)`` for every import of a higher jobs layer."""
    bad = []
    for name, (path, is_pkg) in modules.items():
        own = _jobs_layer(name, layers)
        if own is None:
            continue
        for imported, line in _imports(name, path, is_pkg):
            target = _project_target(imported)
            theirs = None if target is None else _jobs_layer(target, layers)
            if theirs is not None and theirs > own:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {target} "
                           f"({layers[own][0]} -> {layers[theirs][0]})")
    return bad


def test_every_jobs_module_sits_in_one_layer():
    loose = [name for name in MODULES if _under(name, "fragrelease.jobs") and _jobs_layer(name) is None]
    assert not loose, f"add these modules to JOBS_LAYERS: {loose}"
    assert _jobs_layer("fragrelease.jobs.protocol.release") > _jobs_layer("fragrelease.jobs.protocol.owner")
    assert _jobs_layer("fragrelease.jobs.release_api") > _jobs_layer("fragrelease.jobs.protocol.release")
    for kind in ("fragrelease.jobs.idpir.kind", "fragrelease.jobs.synthesis.kind"):
        assert _jobs_layer("fragrelease.jobs.protocol.kind") < _jobs_layer(kind) < _jobs_layer(
            "fragrelease.jobs.protocol.release"), kind
    assert _jobs_layer("fragrelease.jobs.session_workers") == _jobs_layer("fragrelease.jobs.session") == 0


def test_no_jobs_module_imports_a_higher_layer():
    """storage and session < protocol < release kinds (and the other systems) < shared result types <
    local driver < Python API < CLI: the protocol imports no kind, the driver
    (``jobs/protocol/release.py``) imports neither ``jobs/api.py`` nor ``jobs/release_api.py``."""
    bad = _upward_imports(MODULES)
    assert not bad, "\n".join(bad)


def test_the_layer_rule_catches_a_planted_upward_import(tmp_path):
    """A TYPE_CHECKING import of the API from the driver, a function-level one, a protocol module importing
    the driver, and one importing a kind (relative, in a function) are all caught; a kind importing the
    protocol is not."""
    driver = tmp_path / "release.py"
    driver.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..api import Release\n"
                      "def f():\n    from ..release_api import Release\n", encoding="utf-8")
    party = tmp_path / "owner.py"
    party.write_text("from . import release\ndef g():\n    from ..idpir import protect\n", encoding="utf-8")
    kind = tmp_path / "kind.py"
    kind.write_text("from ..protocol.kind import KindJobs\nfrom ..protocol import owner\n", encoding="utf-8")
    planted = {"fragrelease.jobs.protocol.release": (driver, False), "fragrelease.jobs.protocol.owner": (party, False),
               "fragrelease.jobs.idpir.kind": (kind, False)}

    global ROOT
    saved = ROOT
    ROOT = tmp_path
    try:
        bad = _upward_imports(planted)
    finally:
        ROOT = saved
    assert bad == ["release.py:3 imports fragrelease.jobs.api (local driver -> Python API)",
                   "release.py:5 imports fragrelease.jobs.release_api (local driver -> Python API)",
                   "owner.py:1 imports fragrelease.jobs.protocol.release (protocol -> local driver)",
                   "owner.py:3 imports fragrelease.jobs.idpir.protect "
                   "(protocol -> release kinds and the other systems)"], bad


# --- Module size (docs/architecture.md, "Layers") --------------------------------------------------------

#: The longest a product module may be, in lines: a module a reader can hold.
MAX_MODULE_LINES = 500
#: The product folders the limit covers (experiments and tests are not product code).
PRODUCT_FOLDERS = ("fragrelease", "jobs", "udfs", "schemas")


def _too_long(paths, limit: int = MAX_MODULE_LINES) -> list[str]:
    """``path: N lines`` for every file of ``paths`` longer than ``limit`` lines."""
    out = []
    for path in paths:
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > limit:
            out.append(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {lines} lines")
    return out


def test_no_product_module_is_over_500_lines():
    """Every module of ``fragrelease/``, ``jobs/``, ``udfs/`` and ``schemas/`` has at most 500 lines."""
    paths = [p for folder in PRODUCT_FOLDERS for p in sorted((ROOT / folder).rglob("*.py"))]
    assert {p.relative_to(ROOT).parts[0] for p in paths} == set(PRODUCT_FOLDERS)
    assert len(paths) > 150
    bad = _too_long(paths)
    assert not bad, "\n".join(bad)


def test_the_size_rule_catches_a_planted_long_module(tmp_path):
    long_module, short_module = tmp_path / "long.py", tmp_path / "short.py"
    long_module.write_text("x = 1\n" * (MAX_MODULE_LINES + 1), encoding="utf-8")
    short_module.write_text("x = 1\n" * MAX_MODULE_LINES, encoding="utf-8")
    assert _too_long([long_module, short_module]) == [f"{long_module}: {MAX_MODULE_LINES + 1} lines"]


# --- Randomness (docs/architecture.md, "Randomness") -------------------------------------------------
#
# 1. Entropy: only ``fragrelease/rng/`` touches a source of randomness (``secrets``, ``random``,
#    ``os.urandom``, ``numpy.random``; not ``uuid.uuid4``, see ENTROPY_ATTRIBUTES); every other module of the five folders
#    draws through a :mod:`fragrelease.rng` entry point (the names in ``RNG_DRAWS``).
# 2. Executors: in ``jobs/``, no Spark random operator (``DataFrame.sample/sampleBy/randomSplit``,
#    ``functions.rand/randn/shuffle/uuid``) and no draw inside a task function: a nested function or
#    lambda (every closure is treated as a task), or a module-level function passed to
#    ``mapInPandas``/``applyInPandas``/``pandas_udf``/... A draw there is an ``RNG_DRAWS`` name or a
#    math-layer function that names one (one level deep: ``_drawing_math_functions``). Such draws
#    live in ``udfs/``, which the jobs call.
# 3. Driver: a draw in ``jobs/`` outside task functions is a driver-side draw; it is allowed only at
#    the sites of ``DRIVER_DRAWS`` (module, function), each drawn once in the driver process.
#    The Spark-free math (``fragrelease/``) draws only on the driver or inside a ``udfs/`` task,
#    and only through ``fragrelease.rng`` (rule 1); mechanisms that receive a ``NoiseSource``,
#    ``DiffGenRandomness``, ``SimulationRandomness`` or a permutation function draw nothing themselves.

RNG = "fragrelease.rng"
#: Public names of fragrelease.rng whose call (or construction) draws randomness or seeds a generator.
RNG_DRAWS = frozenset({
    "secure_token_bytes", "secure_random_keys", "secure_bytes", "secure_permutation", "secure_randbelow",
    "secure_randbits", "secure_open_unit", "secure_gumbel", "SecureDiffGenRandomness", "FastDiffGenRandomness",
    "SeededDiffGenRandomness", "SecureLaplace", "FastLaplace", "evaluation_generator", "SecureSimulation",
    "SeededSimulation", "secure_noisy_max", "SecureShareSource", "SeededShareSource",
})
#: Public names of fragrelease.rng that draw nothing themselves: protocols, calibration, constants, and
#: functions that draw only from a source passed in (``gumbel_max``; ``LaplaceNoise.sample`` draws from
#: its ``source``, a SecureLaplace when None: in jobs/ the ``.sample`` call is caught by rule 2).
RNG_NON_DRAWS = frozenset({
    "DiffGenRandomness", "UNIFORM_BITS", "gumbel_max", "NoiseSource", "LAPLACE_GRANULARITY_EXPONENT",
    "laplace_measurement", "laplace_epsilon", "float_at_most", "calibrated_laplace_scale", "LaplaceNoise",
    "FAST_SAMPLER_NAME", "SimulationRandomness", "noisy_max_measurement", "noisy_max_epsilon",
    "calibrated_noisy_max_scale", "check_scores", "TEST_MARKER", "refuse_injected_noise",
    "ShareSource", "discrete_laplace_alpha", "polya_sample", "DivisibleDiscreteLaplace",
})
#: Raw sources of randomness (rule 1): modules, and attributes of other modules.
ENTROPY_MODULES = ("secrets", "random", "numpy.random")
#: ``uuid.uuid4()`` is not one: it names things (plan ids, temporary files, ledger entries), it draws
#: nothing a release's values or order depend on, and it is allowed anywhere.
ENTROPY_ATTRIBUTES = frozenset({"os.urandom", "os.getrandom"})
#: numpy.random names that are types, not draws (annotations such as ``np.random.Generator``).
NUMPY_RANDOM_TYPES = frozenset({"Generator", "BitGenerator"})
#: Spark operators that draw on the executors (rule 2): DataFrame methods and pyspark.sql.functions.
SPARK_RANDOM_METHODS = frozenset({"sample", "sampleBy", "randomSplit"})
SPARK_RANDOM_FUNCTIONS = frozenset({"rand", "randn", "shuffle", "uuid", "random", "randstr", "uniform"})
#: Calls whose function argument Spark runs on the executors.
TASK_CALLS = frozenset({"mapInPandas", "mapInArrow", "applyInPandas", "applyInArrow", "applyInPandasWithState",
                        "pandas_udf", "udf", "foreach", "foreachPartition", "foreachBatch", "mapPartitions"})
#: Rule 3: the driver-side draws of jobs/ (module, function that contains the draw) and why each is on the driver.
DRIVER_DRAWS = {
    # the dp-frequency category order: one histogram per attribute, noised once on the driver (docs/specification.md §2)
    ("fragrelease.jobs.idpir.protect", "category_orders"),
    # a synthetic release's key round: its X25519 key, made from the OS CSPRNG (fragrelease.rng.secure) once on the
    # owner's driver and kept privately (§10); the rounds' noise shares are drawn by fragrelease.rng.polya on the driver
    ("fragrelease.jobs.synthesis.owner", "_kept_key"),
    ("fragrelease.jobs.synthesis.owner", "_key_record"),
    # key material and nonces: the release's pseudonym key, each owner's nonce, a generated signing key's file name
    ("fragrelease.jobs.protocol.keys", "generate_release_key"),
    ("fragrelease.jobs.protocol.keys", "owner_pseudonym_key"),
    ("fragrelease.jobs.protocol.owner", "describe_fragment"),
    ("fragrelease.jobs.protocol.signatures", "with_release_keys"),
    # the owner's accuracy preview: the categorical simulation (never released; numeric: udfs/preview.py)
    ("fragrelease.jobs.idpir.owner_preview", "owner_preview"),
    # DiffGen: the exponential mechanism and the uniform split points run on the driver (one party: the
    # driver; two parties: each party's process), and the two processes' socket key
    ("fragrelease.jobs.diffgen.runner", "run_diffgen_release"),
    ("fragrelease.jobs.diffgen.processes", "_party_process"),
    ("fragrelease.jobs.diffgen.processes", "run_adult_two_party"),
    # the command line's evaluation commands: the audit's evaluation sampler, the demo split into publishers
    ("fragrelease.jobs.cli.experiments", "audit"),
    ("fragrelease.jobs.cli.publications", "simulate"),
}


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` of a Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def _aliases(name: str, path: Path, is_pkg: bool, tree: ast.AST) -> dict[str, str]:
    """Local name -> the absolute name it stands for, from every import of the module (any scope)."""
    return dict(_aliases_in(name, is_pkg, tree))


@functools.cache
def _aliases_in(name: str, is_pkg: bool, tree: ast.AST) -> tuple[tuple[str, str], ...]:
    """:func:`_aliases` as pairs, cached with its tree."""
    package = name if is_pkg else name.rpartition(".")[0]
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    out[a.asname] = a.name
                else:
                    top = a.name.split(".")[0]
                    out.setdefault(top, top)
        elif isinstance(node, ast.ImportFrom):
            mod = from_module(node, package)
            for a in node.names:
                out[a.asname or a.name] = f"{mod}.{a.name}"
    return tuple(out.items())


def _resolve(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """The absolute dotted name a Name/Attribute chain refers to (through the module's imports), or None."""
    dotted = _dotted(node)
    if dotted is None:
        return None
    head, _, rest = dotted.partition(".")
    if head not in aliases:
        return None
    return aliases[head] + ("." + rest if rest else "")


def _rng_draw(absolute: str | None) -> bool:
    return (absolute is not None and absolute.startswith(RNG + ".")
            and absolute.rsplit(".", 1)[-1] in RNG_DRAWS)


def _outermost(tree: ast.AST) -> list[tuple[ast.AST, str | None, bool]]:
    """Every Name/Attribute node with (its outermost module-level function's name or None, inside a
    nested function or lambda). Methods of module-level classes count as module-level functions."""
    out: list[tuple[ast.AST, str | None, bool]] = []

    def visit(node: ast.AST, top: str | None, depth: int) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                name = getattr(child, "name", "<lambda>")
                for d in getattr(child, "decorator_list", []):
                    visit_expr(d, top, depth)
                visit(child, top if depth else name, depth + 1)
            elif isinstance(child, ast.ClassDef) and depth == 0:
                visit(child, None, 0)
            elif isinstance(child, ast.Name) or isinstance(child, ast.Attribute) and _dotted(child) is not None:
                out.append((child, top, depth > 1))  # a whole chain: ``X.name`` reads X's attribute, draws nothing
            elif isinstance(child, ast.Attribute):
                visit(child, top, depth)  # ``X().attr``: the call inside is a draw when X is one
            else:
                visit(child, top, depth)

    def visit_expr(node: ast.AST, top: str | None, depth: int) -> None:
        wrapper = ast.Module(body=[ast.Expr(node)], type_ignores=[])
        visit(wrapper, top, depth)

    visit(tree, None, 0)
    return out


def _task_functions(tree: ast.AST, aliases: dict[str, str]) -> set[str]:
    """Module-level functions Spark runs on the executors: passed to a TASK_CALLS call or decorated by one."""
    tasks = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            callee = _dotted(node.func) or ""
            if callee.rsplit(".", 1)[-1] in TASK_CALLS:
                for arg in [*node.args, *(k.value for k in node.keywords)]:
                    if isinstance(arg, ast.Name):
                        tasks.add(arg.id)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in node.decorator_list:
                target = d.func if isinstance(d, ast.Call) else d
                if (_dotted(target) or "").rsplit(".", 1)[-1] in TASK_CALLS:
                    tasks.add(node.name)
    return tasks


def _parsed(folders: tuple[str, ...]) -> dict[str, tuple[Path, bool, ast.AST, dict[str, str]]]:
    out = {}
    for name, (path, is_pkg) in MODULES.items():
        if any(_under(name, f) for f in folders):
            tree = _tree(path)
            out[name] = (path, is_pkg, tree, _aliases(name, path, is_pkg, tree))
    return out


def _entropy_uses(name: str, path: Path, tree: ast.AST, aliases: dict[str, str]) -> list[str]:
    """Rule 1: imports of a raw source of randomness and references to one."""
    bad = []
    for node in ast.walk(tree):
        mods = []
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            mods = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
        for m in mods:
            if any(_under(m, e) for e in ENTROPY_MODULES) and m.rsplit(".", 1)[-1] not in NUMPY_RANDOM_TYPES \
                    or m in ENTROPY_ATTRIBUTES:
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {m}")
        if isinstance(node, ast.Attribute):
            absolute = _resolve(node, aliases)
            if absolute is None:
                continue
            if absolute in ENTROPY_ATTRIBUTES or (
                    _under(absolute, "numpy.random") and absolute != "numpy.random"
                    and absolute.split(".")[2] not in NUMPY_RANDOM_TYPES):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} uses {absolute}")
    return bad


def _drawing_math_functions() -> dict[str, str]:
    """Functions and classes of the math layer (not rng) that name an RNG_DRAWS entry point -> the draw."""
    return dict(_drawing_math_functions_once())


@functools.lru_cache(maxsize=1)
def _drawing_math_functions_once() -> tuple[tuple[str, str], ...]:
    """:func:`_drawing_math_functions` as pairs, computed once per process (two tests ask)."""
    out = {}
    for name, (_path, _is_pkg, tree, aliases) in _parsed(("fragrelease",)).items():
        if _under(name, RNG) or any(_under(name, u) for u in UPPER):
            continue
        for node in tree.body:  # type: ignore[attr-defined]
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                for sub in ast.walk(node):
                    if isinstance(sub, (ast.Name, ast.Attribute)) and _rng_draw(_resolve(sub, aliases)):
                        out[f"{name}.{node.name}"] = str(_resolve(sub, aliases))
                        break
    return tuple(out.items())


def _executor_draws(name: str, path: Path, tree: ast.AST, aliases: dict[str, str],
                    math_draws: dict[str, str]) -> tuple[list[str], set[tuple[str, str | None]]]:
    """Rule 2 violations of one jobs/ module, and its driver-side draw sites (module, function)."""
    bad, driver = [], set()
    refs = _outermost(tree)
    tasks = _task_functions(tree, aliases)
    local = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}  # type: ignore[attr-defined]
    while True:  # a module-level function that a task function (or any closure) calls runs in the task too
        more = {n.id for n, top, nested in refs if isinstance(n, ast.Name) and n.id in local - tasks
                and (nested or top in tasks)}
        if not more:
            break
        tasks |= more
    where = f"{path.relative_to(ROOT)}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            absolute = _resolve(node.func, aliases) or ""
            if node.func.attr in SPARK_RANDOM_METHODS and not absolute.startswith(RNG):
                bad.append(f"{where}:{node.lineno} calls .{node.func.attr}(...) (a random Spark operator)")
    for node, top, nested in refs:
        absolute = _resolve(node, aliases)
        if absolute is None:
            continue
        if _under(absolute, "pyspark.sql.functions") and absolute.rsplit(".", 1)[-1] in SPARK_RANDOM_FUNCTIONS:
            bad.append(f"{where}:{node.lineno} uses {absolute} (a random Spark function)")
        draws = _rng_draw(absolute) or absolute in math_draws
        if not draws:
            continue
        if nested or top in tasks:
            bad.append(f"{where}:{node.lineno} draws {absolute} in a task function"
                       + (f" (through {math_draws[absolute]})" if absolute in math_draws else ""))
        else:
            driver.add((name, top))
    return bad, driver


def test_rng_names_are_all_classified():
    """Every public name of fragrelease.rng is either a draw or not: a new sampler forces a decision here."""
    public = set()
    for path in sorted((ROOT / "fragrelease" / "rng").glob("*.py")):
        for node in _tree(path).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                public.add(node.name)
            elif isinstance(node, ast.Assign):
                public.update(t.id for t in node.targets if isinstance(t, ast.Name))
    public = {p for p in public if not p.startswith("_")}
    assert public == RNG_DRAWS | RNG_NON_DRAWS, (public - RNG_DRAWS - RNG_NON_DRAWS, RNG_DRAWS | RNG_NON_DRAWS - public)
    assert not RNG_DRAWS & RNG_NON_DRAWS


def test_entropy_only_in_the_rng_package():
    """Rule 1 over fragrelease/, jobs/, udfs/, schemas/ and experiments/."""
    bad = []
    for name, (path, _is_pkg, tree, aliases) in _parsed(tuple(FOLDERS.values())).items():
        if not _under(name, RNG):
            bad += _entropy_uses(name, path, tree, aliases)
    assert not bad, "\n".join(bad)


def test_executor_side_draws_only_in_udfs_and_driver_draws_only_at_the_listed_sites():
    """Rules 2 and 3 over jobs/ (the CLI included)."""
    math_draws = _drawing_math_functions()
    bad, driver = [], set()
    for name, (path, _is_pkg, tree, aliases) in _parsed(("fragrelease.jobs",)).items():
        b, d = _executor_draws(name, path, tree, aliases, math_draws)
        bad += b
        driver |= d
    assert not bad, "\n".join(bad)
    assert driver <= DRIVER_DRAWS, f"driver-side draws not in DRIVER_DRAWS: {sorted(driver - DRIVER_DRAWS, key=str)}"
    assert driver == DRIVER_DRAWS, f"stale DRIVER_DRAWS entries: {sorted(DRIVER_DRAWS - driver)}"


def test_udfs_hold_the_release_draws():
    """The draws moved out of jobs/ are where the map says (docs/architecture.md, "Randomness")."""
    parsed = _parsed(("fragrelease.udfs",))
    drawn = {(name, top) for name, (path, _p, tree, aliases) in parsed.items()
             for node, top, _nested in _outermost(tree) if _rng_draw(_resolve(node, aliases))}
    assert {("fragrelease.udfs.noise", "task_noise"), ("fragrelease.udfs.noise", "gumbel_noise"),
            ("fragrelease.udfs.keys", "random_keys"), ("fragrelease.udfs.keys", "bernoulli_sample"),
            ("fragrelease.udfs.noise", "secure_random_key_udf")} <= drawn


PLANTED = {
    "entropy": ("import secrets\n\ndef f():\n    return secrets.token_bytes(8)\n", "imports secrets"),
    "numpy": ("import numpy as np\n\ndef f():\n    return np.random.default_rng().random()\n",
              "uses numpy.random.default_rng"),
    "urandom": ("import os\n\ndef f():\n    return os.urandom(8)\n", "uses os.urandom"),
    "closure": ("from fragrelease.rng.laplace import SecureLaplace\n\ndef plan(df):\n"
                "    def task(pdf):\n        return SecureLaplace().perturb(pdf, 1, 2, 3)\n"
                "    return df.mapInPandas(task, 's')\n", "draws fragrelease.rng.laplace.SecureLaplace in a task"),
    "task": ("from fragrelease.rng.secure import secure_random_keys as keys\n\ndef task(batches):\n"
             "    yield keys(3)\n\ndef plan(df):\n    return df.mapInPandas(task, 's')\n",
             "draws fragrelease.rng.secure.secure_random_keys in a task"),
    "helper": ("from fragrelease.rng import secure\n\ndef scatter(values):\n    return secure.secure_random_keys(3)\n\n"
               "def plan(df):\n    def task(batches):\n        for b in batches:\n            yield scatter(b)\n"
               "    return df.mapInPandas(task, 's')\n", "draws fragrelease.rng.secure.secure_random_keys in a task"),
    "math": ("from fragrelease.tiers import chain\n\ndef plan(df):\n"
             "    return df.applyInPandas(lambda p: chain.draw_surrogate_ids(len(p)), 's')\n",
             "draws fragrelease.tiers.chain.draw_surrogate_ids in a task function (through"),
    "sample": ("def plan(df):\n    return df.sample(fraction=0.5, seed=1)\n", "calls .sample(...)"),
    "rand": ("from pyspark.sql import functions as F\n\ndef plan(df):\n    return df.orderBy(F.rand())\n",
             "uses pyspark.sql.functions.rand"),
    "driver": ("from fragrelease.rng.secure import secure_bytes\n\ndef key():\n    return secure_bytes(8)\n", None),
}


def test_the_randomness_rules_catch_planted_draws():
    """Each rule fails on a draw planted in a jobs module (the checks cannot pass vacuously)."""
    math_draws = _drawing_math_functions()
    assert math_draws["fragrelease.tiers.chain.draw_surrogate_ids"] == "fragrelease.rng.secure.secure_random_keys"
    name = "fragrelease.jobs.idpir.planted"
    path = ROOT / "jobs" / "idpir" / "planted.py"
    for case, (source, expected) in PLANTED.items():
        tree = ast.parse(source)
        aliases = _aliases(name, path, False, tree)
        bad = _entropy_uses(name, path, tree, aliases)
        executor, driver = _executor_draws(name, path, tree, aliases, math_draws)
        found = "\n".join(bad + executor)
        if expected is None:  # a driver-side draw: not an executor draw, but a site DRIVER_DRAWS must list
            assert not found and driver == {(name, "key")} and not driver <= DRIVER_DRAWS, case
        else:
            assert expected in found, (case, found)
