"""One protocol, several release kinds (issue 50, "done when"), read from the code (AST):

(a) no module of the protocol (``fragrelease/protocol/``, ``jobs/protocol/``) or of the shared modules
    (``jobs/cli/``, ``jobs/api.py``, ``jobs/release_api.py``, ``jobs/describe.py``, ``jobs/session*.py``,
    the top-level modules of ``fragrelease/`` but the registry ``fragrelease/kinds.py``) imports a kind
    module (``fragrelease.idpir``, ``fragrelease.synthesis``, ``fragrelease.jobs.idpir``,
    ``fragrelease.jobs.synthesis``): absolute or relative, at module level, inside a function or under
    ``TYPE_CHECKING``, nor by a string given to ``importlib.import_module``/``__import__``; they reach a kind
    through the registry (docs/architecture.md, "Release kinds");
(b) the synthesis kind (``jobs/synthesis/``, ``fragrelease/synthesis/``) imports nothing of the IR kind;
(c) no module outside the kinds' folders and the registry branches on a kind: no attribute
    ``.synthesized``, ``.shuffles_columns`` or ``.rows_are_records`` and no comparison (``==``, ``!=``,
    ``in``, ``not in``, ``is``, a ``match`` case) with the string ``"linked"``, ``"unlinked"`` or
    ``"synthetic"``; it asks the kind object instead.

Every finding reads ``path:line what``. Each check has a companion test on a planted module that shows
it fails when violated.
"""
from __future__ import annotations

import ast
from pathlib import Path

from fragrelease.kinds import KINDS
from tests.helpers.ast_imports import from_module

ROOT = Path(__file__).resolve().parents[1]
#: Repository folder -> the package it installs as (setup.py package_dir); the product folders only.
FOLDERS = {"fragrelease": "fragrelease", "jobs": "fragrelease.jobs", "udfs": "fragrelease.udfs",
           "schemas": "fragrelease.schemas"}
#: The kinds' packages: what (a) forbids the protocol and the shared modules to import.
#: Read from the registry (each half's module's package), so a new kind is checked without editing this test.
KIND_PACKAGES = tuple(sorted({dotted.partition(":")[0].rpartition(".")[0]
                              for entry in KINDS.values() for dotted in (entry.terms, entry.jobs)}))
#: The IR kind's packages: what (b) forbids the synthesis kind to import.
IR_PACKAGES = ("fragrelease.idpir", "fragrelease.jobs.idpir")
SYNTHESIS_PACKAGES = ("fragrelease.synthesis", "fragrelease.jobs.synthesis")
#: The one module besides the kinds' own that names the kinds (wire name -> "module:attribute").
REGISTRY = "fragrelease.kinds"
#: A kind's own questions (the former Linkage flags) and wire names: asked of the kind object, never branched on.
KIND_ATTRIBUTES = frozenset({"synthesized", "shuffles_columns", "rows_are_records"})
KIND_NAMES = frozenset(KINDS)


def _module_name(path: Path, root: Path = ROOT) -> tuple[str, bool]:
    """(dotted name as installed, is a package ``__init__``) of a product file."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    dotted = FOLDERS[parts[0]].split(".") + parts[1:]
    if dotted[-1] == "__init__":
        return ".".join(dotted[:-1]), True
    return ".".join(dotted), False


def _modules(root: Path = ROOT) -> dict[str, tuple[Path, bool]]:
    return {_module_name(p, root)[0]: (p, _module_name(p, root)[1])
            for folder in FOLDERS for p in sorted((root / folder).rglob("*.py"))}


#: Every product module by dotted name (what an import may name).
MODULES = _modules()


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _installed(name: str) -> str:
    """An absolute import written with a repository folder's name (``jobs.idpir``) as installed."""
    top, _, rest = name.partition(".")
    if top in FOLDERS and top != "fragrelease":
        return FOLDERS[top] + ("." + rest if rest else "")
    return name


def imported_names(tree: ast.AST, name: str, is_pkg: bool) -> list[tuple[str, int]]:
    """The module each import in ``tree`` loads last, with its line: ``import a.b`` gives ``a.b``;
    ``from P import x`` gives ``P.x`` when that is a product module (or package), else ``P``; relative
    imports resolved against the module's package; string arguments of ``import_module``/``__import__``."""
    package = name if is_pkg else name.rpartition(".")[0]
    out: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((_installed(a.name), node.lineno) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            mod = from_module(node, package) if node.level else _installed(node.module or "")
            out.extend((f"{mod}.{a.name}" if f"{mod}.{a.name}" in MODULES else mod, node.lineno)
                       for a in node.names)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in ("import_module", "__import__"):
                out.append((_installed(node.args[0].value), node.lineno))
    return out


def forbidden_imports(label: str, tree: ast.AST, name: str, is_pkg: bool, packages: tuple[str, ...]) -> list[str]:
    """``label:line imports X`` for every import of a module under one of ``packages`` (one line per import)."""
    bad = []
    for imported, line in imported_names(tree, name, is_pkg):
        if any(_under(imported, p) for p in packages):
            bad.append(f"{label}:{line} imports {imported}")
    return sorted(set(bad), key=lambda s: (int(s.split(":")[1].split()[0]), s))


def _kind_constants(node: ast.AST) -> list[str]:
    """The kind names written as string constants in ``node`` (itself, or the items of a tuple/list/set)."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [i.value for i in items if isinstance(i, ast.Constant) and i.value in KIND_NAMES]


def kind_branches(label: str, tree: ast.AST) -> list[str]:
    """``label:line what`` for every attribute of :data:`KIND_ATTRIBUTES` and every comparison with a kind name."""
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in KIND_ATTRIBUTES:
            bad.append(f"{label}:{node.lineno} reads .{node.attr}")
        elif isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                bad.extend(f"{label}:{node.lineno} compares with {value!r}" for value in _kind_constants(side))
        elif isinstance(node, ast.MatchValue):
            bad.extend(f"{label}:{node.lineno} matches {value!r}" for value in _kind_constants(node.value))
    return sorted(bad, key=lambda s: (int(s.split(":")[1].split()[0]), s))


def _protocol_or_shared(name: str) -> bool:
    """The modules (a) covers: the protocol's and the shared ones."""
    if _under(name, "fragrelease.protocol") or _under(name, "fragrelease.jobs.protocol"):
        return True
    if _under(name, "fragrelease.jobs.cli") or name in ("fragrelease.jobs.api", "fragrelease.jobs.release_api",
                                                         "fragrelease.jobs.describe"):
        return True
    if name == "fragrelease.jobs.session" or name.startswith("fragrelease.jobs.session_"):
        return True
    return name.count(".") <= 1 and _under(name, "fragrelease") and not _under(name, "fragrelease.jobs") \
        and name not in (REGISTRY,) and not any(_under(name, k) for k in KIND_PACKAGES) \
        and _top_level_file(name)


def _top_level_file(name: str) -> bool:
    """A module file directly in ``fragrelease/`` (``fragrelease/errors.py``, ``fragrelease/__init__.py``), not a package."""
    if name == "fragrelease":
        return True
    return (ROOT / "fragrelease" / f"{name.split('.')[1]}.py").is_file()


def _in_a_kind(name: str) -> bool:
    return any(_under(name, k) for k in KIND_PACKAGES) or name == REGISTRY


def _label(path: Path, root: Path = ROOT) -> str:
    return str(path.relative_to(root))


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def test_the_walk_sees_the_protocol_the_shared_modules_and_the_kinds():
    modules = MODULES
    covered = {n for n in modules if _protocol_or_shared(n)}
    assert {"fragrelease.protocol.config", "fragrelease.jobs.protocol.release", "fragrelease.jobs.protocol.kind",
            "fragrelease.jobs.cli", "fragrelease.jobs.cli.keys", "fragrelease.jobs.api", "fragrelease.jobs.release_api",
            "fragrelease.jobs.describe", "fragrelease.jobs.session", "fragrelease.jobs.session_workers",
            "fragrelease", "fragrelease.errors", "fragrelease.budget"} <= covered
    assert not covered & {REGISTRY, "fragrelease.idpir.preview", "fragrelease.jobs.idpir.protect",
                          "fragrelease.jobs.synthesis.owner", "fragrelease.rng.laplace", "fragrelease.jobs.storage.files",
                          "fragrelease.tiers.chain"}
    assert {"fragrelease.jobs.synthesis.owner", "fragrelease.synthesis.mechanism"} <= set(modules)


#: The imports of the IR kind that (a) still lets through, each module with the IR modules it may import and
#: why (docs/known-limitations.md #21). The plan message and the release options carry the IR kind's terms
#: (mechanism, k, category order, post-processing, each owner's protection spec): a kind's own plan terms
#: and options are the options model of a later issue. Nothing here may import the synthesis kind.
CARRIED_IR_TERMS: dict[str, frozenset[str]] = {
    "fragrelease.protocol.config": frozenset({"fragrelease.idpir.mechanisms"}),
    "fragrelease.protocol.options": frozenset({"fragrelease.idpir.category_order", "fragrelease.idpir.postprocess"}),
    "fragrelease.protocol.messages": frozenset({"fragrelease.idpir.category_order", "fragrelease.idpir.mechanisms",
                                                "fragrelease.idpir.microaggregation", "fragrelease.idpir.spec"}),
    "fragrelease.protocol.plan_check": frozenset({"fragrelease.idpir.category_order", "fragrelease.idpir.mechanisms",
                                                  "fragrelease.idpir.spec"}),
    # one owner's protect() of a DataFrame is the IR kind's own Python API (README, "Python API")
    "fragrelease.jobs.api": frozenset({"fragrelease.idpir.category_order", "fragrelease.idpir.mechanisms",
                                       "fragrelease.idpir.microaggregation", "fragrelease.idpir.spec",
                                       "fragrelease.jobs.idpir.owner_round"}),
    # the paper's IR experiments (fragrelease evaluate, audit): not steps of a release
    "fragrelease.jobs.cli.experiments": frozenset({"fragrelease.idpir.category_order", "fragrelease.idpir.postprocess",
                                                   "fragrelease.idpir.mechanisms", "fragrelease.idpir.metrics"}),
}


def _kind_imports_beyond_carried(modules) -> tuple[list[str], list[str]]:
    """(every kind import of a protocol or shared module not in :data:`CARRIED_IR_TERMS`, every entry of it
    that no import uses any more)."""
    bad, used = [], set()
    for name, (path, is_pkg) in modules.items():
        if not _protocol_or_shared(name):
            continue
        for finding in forbidden_imports(_label(path), _parse(path), name, is_pkg, KIND_PACKAGES):
            imported = finding.rsplit(" ", 1)[1]
            if imported in CARRIED_IR_TERMS.get(name, ()):
                used.add((name, imported))
            else:
                bad.append(finding)
    stale = [f"{m} no longer imports {i}" for m, imports in CARRIED_IR_TERMS.items() for i in sorted(imports)
             if (m, i) not in used]
    return bad, stale


def test_the_kind_packages_come_from_the_registry():
    """Today's kinds' packages are among those read from the registry."""
    assert {"fragrelease.idpir", "fragrelease.synthesis", "fragrelease.jobs.idpir", "fragrelease.jobs.synthesis"} \
        <= set(KIND_PACKAGES)
    assert {"linked", "unlinked", "synthetic"} <= KIND_NAMES


def test_a_protocol_or_shared_module_imports_no_kind():
    """(a): the protocol and the shared modules reach a kind only through the registry, but for the IR terms
    the plan and the options still carry (:data:`CARRIED_IR_TERMS`; an entry no import needs fails too)."""
    bad, stale = _kind_imports_beyond_carried(MODULES)
    assert not bad, "\n".join(bad)
    assert not stale, "remove from CARRIED_IR_TERMS: " + "; ".join(stale)
    assert not any(_under(i, s) for imports in CARRIED_IR_TERMS.values() for i in imports for s in SYNTHESIS_PACKAGES)


def test_the_synthesis_kind_imports_nothing_of_the_ir_kind():
    """(b)."""
    bad = []
    for name, (path, is_pkg) in MODULES.items():
        if any(_under(name, s) for s in SYNTHESIS_PACKAGES):
            bad += forbidden_imports(_label(path), _parse(path), name, is_pkg, IR_PACKAGES)
    assert not bad, "\n".join(bad)


def test_no_module_outside_the_kinds_branches_on_a_kind():
    """(c), over every product module (``fragrelease/``, ``jobs/``, ``udfs/``, ``schemas/``) but the kinds'
    folders and the registry."""
    bad = []
    for name, (path, _is_pkg) in MODULES.items():
        if not _in_a_kind(name):
            bad += kind_branches(_label(path), _parse(path))
    assert not bad, "\n".join(bad)


# --- The checks fail on planted violations ----------------------------------------------------------------

PLANTED_IMPORTS = (
    "import fragrelease.idpir.preview\n"                             # 1 absolute
    "from fragrelease.synthesis import mechanism\n"                  # 2
    "from fragrelease import idpir\n"                                # 3 a kind package as a name
    "from typing import TYPE_CHECKING\n"                             # 4
    "if TYPE_CHECKING:\n"                                            # 5
    "    from ..idpir.protect import released_values\n"             # 6 relative, under TYPE_CHECKING
    "def f():\n"                                                     # 7
    "    from ...jobs import synthesis\n"                            # 8 relative, in a function
    "    import importlib\n"                                         # 9
    "    return importlib.import_module('fragrelease.jobs.idpir.kind')\n"  # 10 by string
    "import jobs.synthesis.owner\n"                                  # 11 the repository folder's name
    "from fragrelease.protocol import messages\n"                    # 12 fine
    "from ..storage import write_text\n"                             # 13 fine
    "from fragrelease.kinds import entry_of\n"                       # 14 fine: the registry
    "import fragrelease.idpirate\n"                                  # 15 fine: another name
)


def test_the_import_check_catches_every_way_of_importing_a_kind(tmp_path):
    """(a) on a planted ``jobs/protocol`` module: absolute, a package as a name, relative under
    ``TYPE_CHECKING`` and in a function, by string, by folder name; the protocol's and storage's own
    imports, the registry and a look-alike name pass."""
    path = tmp_path / "jobs" / "protocol" / "planted.py"
    path.parent.mkdir(parents=True)
    path.write_text(PLANTED_IMPORTS, encoding="utf-8")
    name, is_pkg = _module_name(path, tmp_path)
    assert (name, is_pkg) == ("fragrelease.jobs.protocol.planted", False)
    bad = forbidden_imports(_label(path, tmp_path), _parse(path), name, is_pkg, KIND_PACKAGES)
    assert bad == ["jobs/protocol/planted.py:1 imports fragrelease.idpir.preview",
                   "jobs/protocol/planted.py:2 imports fragrelease.synthesis.mechanism",
                   "jobs/protocol/planted.py:3 imports fragrelease.idpir",
                   "jobs/protocol/planted.py:6 imports fragrelease.jobs.idpir.protect",
                   "jobs/protocol/planted.py:8 imports fragrelease.jobs.synthesis",
                   "jobs/protocol/planted.py:10 imports fragrelease.jobs.idpir.kind",
                   "jobs/protocol/planted.py:11 imports fragrelease.jobs.synthesis.owner"], bad


def test_the_synthesis_check_catches_an_import_of_the_ir_kind(tmp_path):
    """(b) on a planted ``jobs/synthesis`` module: the IR kind's modules are caught, the protocol's and the
    synthesis kind's own pass."""
    path = tmp_path / "jobs" / "synthesis" / "planted.py"
    path.parent.mkdir(parents=True)
    path.write_text("from ..idpir import unlink\nfrom fragrelease.idpir.stage import StageSpec\n"
                    "from ..protocol import owner\nfrom fragrelease.synthesis import mechanism\n"
                    "from . import counts\n", encoding="utf-8")
    name, is_pkg = _module_name(path, tmp_path)
    bad = forbidden_imports(_label(path, tmp_path), _parse(path), name, is_pkg, IR_PACKAGES)
    assert bad == ["jobs/synthesis/planted.py:1 imports fragrelease.jobs.idpir.unlink",
                   "jobs/synthesis/planted.py:2 imports fragrelease.idpir.stage"], bad


PLANTED_BRANCHES = (
    "def f(cfg, kind):\n"                                           # 1
    "    if linkage_of(cfg.linkage).synthesized:\n"                  # 2
    "        return 1\n"                                             # 3
    "    if cfg.linkage == 'unlinked' or 'linked' != cfg.linkage:\n"  # 4 (two)
    "        return 2\n"                                             # 5
    "    if cfg.linkage in ('linked', 'synthetic'):\n"               # 6 (two)
    "        return kind.rows_are_records or kind.shuffles_columns\n"  # 7 (two)
    "    match cfg.linkage:\n"                                       # 8
    "        case 'synthetic':\n"                                    # 9
    "            return 3\n"                                         # 10
    "    note = 'linked' + 'synthetic'\n"                            # 11 fine: not a comparison
    "    return kind.name == cfg.linkage or cfg.kind == 'linkedin' or kind.evaluates\n"  # 12 fine
)


def test_the_branch_check_catches_flags_comparisons_and_cases():
    """(c) on a planted module: the three flags, ``==``, ``!=``, ``in`` (a tuple) and a ``match`` case are
    caught; a kind name outside a comparison, a comparison of two variables, another string and another
    attribute of the kind pass."""
    bad = kind_branches("jobs/protocol/planted.py", ast.parse(PLANTED_BRANCHES))
    assert bad == [
        "jobs/protocol/planted.py:2 reads .synthesized",
        "jobs/protocol/planted.py:4 compares with 'linked'",
        "jobs/protocol/planted.py:4 compares with 'unlinked'",
        "jobs/protocol/planted.py:6 compares with 'linked'",
        "jobs/protocol/planted.py:6 compares with 'synthetic'",
        "jobs/protocol/planted.py:7 reads .rows_are_records",
        "jobs/protocol/planted.py:7 reads .shuffles_columns",
        "jobs/protocol/planted.py:9 matches 'synthetic'"], bad


def test_the_kinds_folders_and_the_registry_are_exempt_from_the_branch_check():
    """The kinds name themselves: their folders and the registry are left out of (c), nothing else is."""
    assert _in_a_kind("fragrelease.jobs.idpir.kind") and _in_a_kind("fragrelease.synthesis.mechanism")
    assert _in_a_kind(REGISTRY) and _in_a_kind("fragrelease.idpir")
    assert not _in_a_kind("fragrelease.jobs.protocol.aggregator") and not _in_a_kind("fragrelease.protocol.config")
    assert not _in_a_kind("fragrelease.udfs.synthesis") and not _in_a_kind("fragrelease.kinds_extra")
