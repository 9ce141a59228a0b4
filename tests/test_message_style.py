"""Messages never glue a possessive to a repr: ``owner 'bank-a''s key`` reads as a typo (issue 49, item 6.5).

A message names a party as ``owner 'bank-a': ...`` or ``... of owner 'bank-a'``. This test reads every
module of the project (AST: f-strings, adjacent literals joined, ``%r`` and ``{!r}`` templates) and
fails when a repr (``{x!r}``, ``{repr(x)}``, ``%r``, ``{!r}``) is directly followed by ``'s`` or ``’s``.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("fragrelease", "jobs", "udfs", "schemas", "experiments", "scripts", "benchmarks")
_POSSESSIVE = ("'s", "’s")


def _is_repr(node: ast.AST) -> bool:
    if not isinstance(node, ast.FormattedValue):
        return False
    call = node.value
    is_call = isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "repr"
    return node.conversion == ord("r") or is_call


def possessive_reprs(source: str, filename: str = "<source>") -> list[int]:
    """The line numbers where a repr is directly followed by a possessive ``'s`` in ``source``."""
    lines = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.JoinedStr):
            parts = node.values
            for a, b in zip(parts, parts[1:]):
                if _is_repr(a) and isinstance(b, ast.Constant) and str(b.value).startswith(_POSSESSIVE):
                    lines.append(node.lineno)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if any(f"{t}{p}" in node.value for t in ("%r", "!r}") for p in _POSSESSIVE):
                lines.append(node.lineno)
    return lines


def test_the_detector_finds_each_form():
    """The check can fail: every form of the pattern is found, the rephrased forms are not."""
    bad = ['f"owner {o!r}\'s key"', 'f"owner {repr(o)}\'s key"', 'f"owner {o!r}" "\'s key"',
           '"owner %r\'s key" % o', '"owner {!r}\'s key".format(o)', 'f"owner {o!r}’s key"']
    for text in bad:
        assert possessive_reprs(text) == [1], text
    good = ['f"owner {o!r}: key"', 'f"the key of owner {o!r}"', 'f"{o}\'s key"', '"it\'s fine"',
            'f"{o!r} \'s"']
    for text in good:
        assert possessive_reprs(text) == [], text


def test_no_message_glues_a_possessive_to_a_repr():
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            hits = possessive_reprs(path.read_text(encoding="utf-8"), str(path))
            found.extend(f"{path.relative_to(ROOT)}:{line}" for line in hits)
    assert found == [], f"rephrase as \"owner 'x': ...\" or \"... of owner 'x'\": {found}"
