"""The first place two public protocol values differ, for one short line (Spark-free).

A plan, an owner's metadata and a synthesis message carry lists of attribute specs (name, kind,
declared domain or every category) and budgets. When one party refuses another's value, the message
names the first attribute and field that differ and both values there, never the whole lists (an
attribute may declare 200,000 categories): :func:`first_difference`.

Everything compared here is public (declared names, kinds, domains, categories, exact ε text).
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Mapping, Optional, Sequence

#: Longest rendering of one value in a message, in characters (longer ones end with ``…``).
MAX_SHOWN = 80
#: Keys that name the item of a list of mappings (an attribute spec's ``name``, a budget's ``attribute``).
_NAME_KEYS = ("name", "attribute")


@dataclass(frozen=True)
class Difference:
    """Where two values differ: ``where`` (``attribute 'age' domain``, ``item 3``; empty at the top)
    and both values there as shown in a message (:func:`shown`)."""

    where: str
    got: str
    want: str


def shown(value: Any, limit: int = MAX_SHOWN, *, quoted: bool = False) -> str:
    """``value`` for a message: text (``quoted``: in quotes, as an item of a list is) and exact fractions
    as written, anything else by ``repr``; at most ``limit`` characters (cut with ``…``)."""
    if isinstance(value, str):
        text = repr(value) if quoted else value
    else:
        text = str(value) if isinstance(value, Fraction) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _item_name(value: Any) -> Optional[str]:
    if isinstance(value, Mapping):
        for key in _NAME_KEYS:
            if isinstance(value.get(key), str):
                return value[key]
    return None


def _at(where: str, part: str) -> str:
    return f"{where} {part}" if where else part


def _flat(values: Sequence[Any]) -> bool:
    return not any(isinstance(v, (Mapping, list, tuple)) for v in values)


def _sequence(got: Sequence[Any], want: Sequence[Any], where: str) -> Optional[Difference]:
    whole = shown(list(got), 1 << 62), shown(list(want), 1 << 62)
    if _flat(got) and _flat(want) and max(map(len, whole)) <= MAX_SHOWN:  # short: both shown whole
        return None if list(got) == list(want) else Difference(where, *whole)
    for i in range(max(len(got), len(want))):
        if i >= len(got):
            return Difference(_at(where, f"item {i + 1}"), f"absent (it has {len(got)} items)",
                              shown(want[i], quoted=True))
        if i >= len(want):
            return Difference(_at(where, f"item {i + 1}"), shown(got[i], quoted=True),
                              f"absent (it has {len(want)} items)")
        if got[i] != want[i]:
            name = _item_name(want[i])
            label = f"attribute {name!r}" if name is not None and name == _item_name(got[i]) else f"item {i + 1}"
            return first_difference(got[i], want[i], _at(where, label))
    return None


def _mapping(got: Mapping[Any, Any], want: Mapping[Any, Any], where: str) -> Optional[Difference]:
    for key in [*want, *(k for k in got if k not in want)]:
        if key not in got:
            return Difference(_at(where, str(key)), "absent", shown(want[key], quoted=True))
        if key not in want:
            return Difference(_at(where, str(key)), shown(got[key], quoted=True), "absent")
        if got[key] != want[key]:
            return first_difference(got[key], want[key], _at(where, str(key)))
    return None


def first_difference(got: Any, want: Any, where: str = "") -> Optional[Difference]:
    """The first place ``got`` and ``want`` differ, or ``None`` when they are equal.

    Mappings are walked in ``want``'s key order (then keys only ``got`` has); lists and tuples item
    by item (a list of mappings that name an attribute is labelled ``attribute '<name>'``, otherwise
    ``item <i>``, 1-based; an item only one side has is ``absent``), except lists of plain values short
    enough to show whole (``domain is [0.0, 1000.0]``); anything else is compared with ``==`` and shown
    whole (:func:`shown`; text in quotes below the top). ``where`` prefixes every label.
    """
    if isinstance(got, Mapping) and isinstance(want, Mapping):
        return _mapping(got, want, where)
    if isinstance(got, (list, tuple)) and isinstance(want, (list, tuple)):
        return _sequence(got, want, where)
    if got == want:
        return None
    inner = bool(where)  # an item or a key: text in quotes; a whole field's value as written
    return Difference(where, shown(got, quoted=inner), shown(want, quoted=inner))
