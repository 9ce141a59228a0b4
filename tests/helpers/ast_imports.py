"""The module a ``from ... import`` statement names, relative imports resolved (the architecture tests')."""
from __future__ import annotations

import ast


def from_module(node: ast.ImportFrom, package: str) -> str:
    """The absolute module ``node`` imports from, inside ``package`` (the importing module's package)."""
    if not node.level:
        return node.module or ""
    base = package.split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))
