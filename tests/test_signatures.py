"""Signatures of the product code, read from the source (AST over ``fragrelease/``, ``jobs/`` and ``udfs/``).

- No function takes more than :data:`MAX_PARAMETERS` parameters (positional and keyword-only,
  ``self``/``cls`` not counted; ``*args``/``**kwargs`` are not parameters a caller must fill). A
  release with many settings takes one frozen params model instead (``TiersParams``,
  ``AnonymizeParams``, ``DiffGenParams``, ``ReleaseOptions``, ...).
- No function under ``jobs/`` returns a bare dict: an annotation ``dict``, ``Dict[...]``,
  ``dict[...]`` (also inside ``Optional``/``Union``/``X | None``), or no annotation and a
  ``return {...}``. A result is a typed object (a frozen dataclass or model); a read-only mapping
  keyed by data (column names, table properties) is annotated ``Mapping[...]``.

One exemption, by construction: a command-line command (a function under ``jobs/cli`` whose every
parameter defaults to ``typer.Option(...)``, ``typer.Argument(...)`` or the shared ``MASTER``
option) declares one parameter per flag, because that is how typer reads flags, and every flag is
kept; such a command builds the params model of its release at once.

There is no list of pending offenders any more: every product function keeps both rules.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("fragrelease", "jobs", "udfs")
MAX_PARAMETERS = 10

Function = ast.FunctionDef | ast.AsyncFunctionDef


def _functions(tree: ast.AST) -> list[tuple[str, Function]]:
    """Every function of a module with its qualified name (``Class.method``, ``outer.inner``)."""
    out: list[tuple[str, Function]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((prefix + child.name, child))
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return out


def parameter_count(fn: Function) -> int:
    """Positional (incl. positional-only) plus keyword-only parameters, without a leading self/cls."""
    names = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)]
    if names and names[0] in ("self", "cls"):
        names = names[1:]
    return len(names)


def _is_dict_annotation(node: ast.AST | None) -> bool:
    if node is None:
        return False
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a quoted annotation
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return False
    if isinstance(node, ast.Name):
        return node.id in ("dict", "Dict")
    if isinstance(node, ast.Attribute):
        return node.attr in ("dict", "Dict")
    if isinstance(node, ast.Subscript):
        base = node.value
        name = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else ""
        if name in ("dict", "Dict"):
            return True
        if name in ("Optional", "Union"):
            inner = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            return any(_is_dict_annotation(e) for e in inner)
        return False
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _is_dict_annotation(node.left) or _is_dict_annotation(node.right)
    return False


def _returns_dict_literal(fn: Function) -> bool:
    """A ``return {...}`` (a dict display or comprehension) in the function itself, not in a nested one."""
    todo: list[ast.AST] = list(fn.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Return) and isinstance(node.value, (ast.Dict, ast.DictComp)):
            return True
        todo.extend(ast.iter_child_nodes(node))
    return False


def returns_bare_dict(fn: Function) -> bool:
    """Annotated as a dict (see the module docstring), or unannotated and returning a dict literal."""
    return _is_dict_annotation(fn.returns) if fn.returns is not None else _returns_dict_literal(fn)


def _is_cli_command(path: str, fn: Function) -> bool:
    """A typer command: under jobs/cli, every parameter defaulting to typer.Option/Argument or MASTER."""
    if not path.startswith("jobs/cli/"):
        return False
    params = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
    defaults = [*fn.args.defaults, *[d for d in fn.args.kw_defaults if d is not None]]
    if not params or len(defaults) != len(params):
        return False

    def typer_default(d: ast.AST) -> bool:
        if isinstance(d, ast.Name):
            return d.id == "MASTER"
        return (isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and isinstance(d.func.value, ast.Name)
                and d.func.value.id == "typer" and d.func.attr in ("Option", "Argument"))

    return all(typer_default(d) for d in defaults)


def offenders(source: str, path: str) -> set[tuple[str, str, str]]:
    """(path, qualified name, kind) of every function of ``source`` breaking a rule; kind is params or dict."""
    out = set()
    for name, fn in _functions(ast.parse(source, path)):
        if parameter_count(fn) > MAX_PARAMETERS and not _is_cli_command(path, fn):
            out.add((path, name, "params"))
        if path.startswith("jobs/") and returns_bare_dict(fn):
            out.add((path, name, "dict"))
    return out


def _all_offenders() -> set[tuple[str, str, str]]:
    out = set()
    for folder in FOLDERS:
        for file in sorted((ROOT / folder).rglob("*.py")):
            rel = file.relative_to(ROOT).as_posix()
            out |= offenders(file.read_text(encoding="utf-8"), rel)
    return out


def test_the_rules_catch_what_they_name():
    src = '''
def eleven(a, b, c, d, e, f, g, h, i, j, k): ...
def ten_and_star(a, b, c, d, e, f, g, h, i, j, *args, **kwargs): ...
def kw_only(a, *, b, c, d, e, f, g, h, i, j, k): ...
class C:
    def method(self, a, b, c, d, e, f, g, h, i, j): ...
def plain() -> dict: ...
def typed() -> dict[str, int]: ...
def legacy() -> Dict[str, int]: ...
def optional() -> Optional[dict]: ...
def union() -> dict[str, int] | None: ...
def quoted() -> "dict[str, int]": ...
def literal():
    return {"a": 1}
def comprehension():
    return {k: 1 for k in "ab"}
def mapping() -> Mapping[str, int]:
    return {"a": 1}
def outer() -> int:
    def inner():
        return {}
    return 1
def list_of() -> list[dict]: ...
'''
    got = offenders(src, "jobs/example.py")
    assert {n for _, n, k in got if k == "params"} == {"eleven", "kw_only"}
    assert {n for _, n, k in got if k == "dict"} == {"plain", "typed", "legacy", "optional", "union", "quoted",
                                                     "literal", "comprehension", "outer.inner"}
    assert not {k for _, _, k in offenders(src, "fragrelease/example.py")} - {"params"}  # dicts: jobs/ only


def test_a_cli_command_may_take_one_parameter_per_flag_and_nothing_else_may():
    flags = ", ".join(f"f{i}: int = typer.Option({i})" for i in range(11))
    assert not offenders(f"def run({flags}, master=MASTER): ...", "jobs/cli/example.py")
    assert offenders(f"def run({flags}, plain=1): ...", "jobs/cli/example.py")  # one default not a flag
    assert offenders(f"def run({flags}): ...", "jobs/example.py")  # not under jobs/cli


def test_no_function_takes_more_than_ten_parameters_and_no_jobs_function_returns_a_bare_dict():
    found = sorted(_all_offenders())
    assert not found, f"functions breaking the signature rules (module docstring): {found}"


def test_the_releases_of_systems_2_to_4_take_one_params_model_and_return_a_typed_result():
    import dataclasses
    import inspect
    import typing

    from pydantic import BaseModel

    from fragrelease.jobs.diffgen.runner import run_diffgen_release, run_two_party_release
    from fragrelease.jobs.publications.runner import run_anonymize, run_audit
    from fragrelease.jobs.tiers.runner import run_tiers

    for fn in (run_tiers, run_anonymize, run_audit, run_diffgen_release, run_two_party_release):
        hints = typing.get_type_hints(fn)
        params = [p for p in inspect.signature(fn).parameters if p not in ("spark", "progress")]
        assert params == ["params"], fn.__name__
        model = hints["params"]
        assert issubclass(model, BaseModel), fn.__name__
        assert model.model_config.get("frozen") and model.model_config.get("extra") == "forbid", model.__name__
        result = hints["return"]
        assert dataclasses.is_dataclass(result) and result.__dataclass_params__.frozen, fn.__name__
