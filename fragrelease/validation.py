"""Checks that need no data: YAML files into dicts, pydantic errors by key and value, table-name
syntax, and a warning for an ε beyond a sane range (configs, schemas, command lines).

Everything here runs before a SparkSession exists (README, "Checks before Spark starts").
"""
from __future__ import annotations

import difflib
import logging
import re
import typing
from fractions import Fraction
from pathlib import Path
from typing import Any, Mapping, Optional, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from .errors import ConfigError

log = logging.getLogger(__name__)

#: ε per release above which :func:`warn_if_large_epsilon` warns (a likelihood ratio of e^10 ≈ 22,026).
SANE_EPSILON = Fraction(10)


#: YAML's safe loader in C (libyaml, shipped in PyYAML's wheels) when present: the same documents and values
#: as :class:`yaml.SafeLoader`, about 10 times faster, which a schema that declares 200,000 categories needs
#: (the pure-Python parser took 30 s on it, docs/configuration.md "Large category lists").
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml_mapping(path: str | Path, what: str) -> dict:
    """The top-level mapping of a YAML file (safe loading: plain data only; libyaml's parser when installed).

    Raises
    ------
    ConfigError
        The file is missing, not YAML, or not a mapping; the message names ``what`` and the path.
    """
    path = Path(path)
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_SAFE_LOADER)  # noqa: S506 - a safe loader
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read {what} {str(path)!r}: {exc}") from None
    if data is None:
        raise ConfigError(f"{what} {str(path)!r} is empty")
    if not isinstance(data, dict):
        raise ConfigError(f"{what} {str(path)!r} must be a mapping, not {type(data).__name__}")
    return data


def format_location(loc) -> str:
    """A pydantic error location as a key path: ``("owners", 1, "rows")`` → ``owners[1].rows``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _model_in(annotation: Any) -> Optional[type[BaseModel]]:
    """The pydantic model inside a field's annotation (``Model``, ``Optional[Model]``, ``list[Model]``, ...)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _keys_beside(model: type[BaseModel], loc: tuple) -> list[str]:
    """The keys the model at ``loc[:-1]`` (reached from ``model`` through its fields) accepts."""
    current: Optional[type[BaseModel]] = model
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = current.model_fields.get(str(part)) if current is not None else None
        current = _model_in(field.annotation) if field is not None else None
        if current is None:
            return []
    return [f.alias or name for name, f in current.model_fields.items()] if current is not None else []


def did_you_mean(key: str, keys: list[str]) -> str:
    """``"; did you mean 'output'?"`` for the one key of ``keys`` closest to ``key`` (difflib), else ``""``."""
    close = difflib.get_close_matches(key, keys, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def format_validation_error(exc: ValidationError, model: Optional[type[BaseModel]] = None) -> str:
    """The problems of a pydantic ValidationError, one line each, naming the key and the value.

    A field error reads ``owners[1].rows: Input should be greater than 0 (got -5)``. A missing key
    reads ``owners[0].name: required``. An unknown key of ``model`` (the model validated, when given)
    gets the closest accepted key: ``outptu: Extra inputs are not permitted; did you mean 'output'?
    (got 'r')``. The offending value is shown only when it is a scalar: a
    mapping or list (a whole owner, the whole document) is never printed. Errors raised by a model
    validator carry no location; their message already names the key and the value
    (``owners[1].attributes: required for a vertical owner (owner 'insurer')``) and is shown as is.
    Several problems are separated by newlines.
    """
    lines = []
    for err in exc.errors():
        msg = str(err["msg"])
        for prefix in ("Value error, ", "Assertion failed, "):
            if msg.startswith(prefix):
                msg = msg[len(prefix):]
        if err["type"] == "extra_forbidden" and model is not None and err["loc"]:
            msg += did_you_mean(str(err["loc"][-1]), _keys_beside(model, tuple(err["loc"])))
        loc = format_location(err["loc"])
        if not loc:
            lines.extend(msg.splitlines())
            continue
        if err["type"] == "missing":
            lines.append(f"{loc}: required")
            continue
        value = err.get("input")
        if isinstance(value, (dict, list, tuple, set)):
            lines.append(f"{loc}: {msg}")
            continue
        shown = repr(value)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        lines.append(f"{loc}: {msg} (got {shown})")
    return "\n".join(lines)


# ---------------------------------------------------------------- names that become paths
#: The one pattern of every release and owner name (each becomes a folder name: the private root's
#: ``<release>/<owner>``, ``work_dir/metadata/<owner>.json``, ``work_dir/owners/<owner>``): a letter or
#: digit, then letters, digits, ``_``, ``.`` and ``-``, never ``..``. So no name is a separator,
#: an absolute path or a step up.
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
#: What :data:`SAFE_NAME` allows, in words (error messages).
SAFE_NAME_RULE = "a letter or digit, then letters, digits, '_', '.' or '-', without '..'"


def is_safe_name(name: object) -> bool:
    """True if ``name`` is a str matching :data:`SAFE_NAME` and holding no ``..``."""
    return isinstance(name, str) and SAFE_NAME.fullmatch(name) is not None and ".." not in name


def check_safe_name(name: str, *, key: str) -> str:
    """``name`` if :func:`is_safe_name`; else ConfigError ``<key>: '<name>' is not a safe name (...)``.

    Raises
    ------
    ConfigError
        One line naming ``key`` and the value as written (a ValueError, so pydantic validators
        report it under their key).
    """
    if not is_safe_name(name):
        raise ConfigError(f"{key}: {name!r} is not a safe name ({SAFE_NAME_RULE}); it becomes a folder name")
    return name


# ---------------------------------------------------------------- table names
_PLAIN = r"[A-Za-z_][A-Za-z0-9_]*"
_QUOTED = r"`(?:[^`]|``)+`"
_PART = re.compile(rf"(?:{_PLAIN}|{_QUOTED})")


def parse_table_name(name: str, *, key: str = "table", max_parts: int = 3) -> tuple[str, ...]:
    """Split a catalog table name ``[catalog.][schema.]table`` into its identifiers.

    Each part is a plain identifier (ASCII letters, digits and ``_``, not starting with a digit) or
    a backticked one (any characters but control characters; a literal backtick is written twice:
    ```` `my``table` ````). Backticks are removed from the returned parts. This is the identifier
    syntax of Spark SQL and Unity Catalog (``catalog.schema.table``); whether the table exists is
    not checked (that needs a session).

    Parameters
    ----------
    name : the table name as written in a configuration or on a command line.
    key : the configuration key or option the name came from, for the error message.
    max_parts : 3 (catalog.schema.table, default), or fewer to forbid a catalog or schema.

    Returns
    -------
    tuple of 1 to ``max_parts`` identifiers, e.g. ``("main", "hr", "release")``.

    Raises
    ------
    ConfigError
        Not a string, empty, an empty or malformed part, a control character, or too many parts;
        the message names ``key`` and the value.
    """
    if not isinstance(name, str):
        raise ConfigError(f"{key}: a table name must be a string, not {name!r}")
    if not name.strip():
        raise ConfigError(f"{key}: a table name must not be empty (got {name!r})")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise ConfigError(f"{key}: table name {name!r} contains a control character")
    parts: list[str] = []
    pos = 0
    while True:
        m = _PART.match(name, pos)
        if m is None:
            rest = name[pos:]
            why = ("an empty part" if rest == "" or rest.startswith(".") else
                   "an unclosed backtick" if rest.startswith("`") else
                   f"{rest.split('.')[0]!r} is not an identifier (letters, digits, _; or `quoted`)")
            raise ConfigError(f"{key}: {name!r} is not a table name [catalog.][schema.]table: {why}")
        part = m.group(0)
        if m.end() < len(name) and name[m.end()] != ".":
            if part.startswith("`"):
                why = f"unexpected {name[m.end()]!r} after {part!r}"
            else:
                segment = name[pos:].split(".")[0]
                why = f"{segment!r} is not an identifier (letters, digits, _; or `quoted`)"
            if "/" in name:
                why += "; it looks like a path, not a table name"
            raise ConfigError(f"{key}: {name!r} is not a table name [catalog.][schema.]table: {why}")
        parts.append(part[1:-1].replace("``", "`") if part.startswith("`") else part)
        pos = m.end()
        if pos == len(name):
            break
        pos += 1
    if len(parts) > max_parts:
        raise ConfigError(f"{key}: table name {name!r} has {len(parts)} parts; at most {max_parts} "
                          f"({'.'.join(('catalog', 'schema', 'table')[3 - max_parts:])})")
    return tuple(parts)


def check_table_name(name: str, *, key: str = "table", max_parts: int = 3) -> str:
    """``name`` unchanged if :func:`parse_table_name` accepts it (for pydantic field validators).

    Raises
    ------
    ConfigError
        See :func:`parse_table_name`.
    """
    parse_table_name(name, key=key, max_parts=max_parts)
    return name


# ---------------------------------------------------------------- ε range
def warn_if_large_epsilon(epsilon, *, what: str = "epsilon", limit: Fraction = SANE_EPSILON) -> bool:
    """Log a warning when ``epsilon`` exceeds ``limit`` (default 10 per release); return whether it did.

    An ε this large is valid but gives little protection: the (i)DP guarantee bounds the likelihood
    ratio of any output by e^ε (e^10 ≈ 22,026). The warning is a parameter check, not an error; it
    names the key and the value and goes to the ``fragrelease.validation`` logger at WARNING
    (printed on standard error by the command line) before any Spark session starts.

    Parameters
    ----------
    epsilon : the ε as given (str such as ``"20"`` or ``"1/3"``, int, float, Fraction); must be
        valid for :func:`fragrelease.budget.parse_epsilon`.
    what : the key or option name, for the message.

    Raises
    ------
    InvalidParameterError
        ``epsilon`` is not a valid ε (from :func:`fragrelease.budget.parse_epsilon`).
    """
    from .budget import parse_epsilon

    eps = parse_epsilon(epsilon, name=what)
    if eps <= limit:
        return False
    log.warning("%s = %s is above %s per release: valid, but the guarantee bounds the likelihood ratio of any "
                "output only by e^%s; check the value", what, epsilon, limit, epsilon)
    return True


_P = TypeVar("_P", bound="FrozenParams")


class FrozenParams(BaseModel):
    """A frozen parameter model whose unknown fields are refused: the params of systems 2-4
    (``fragrelease.tiers.params``, ``fragrelease.publications.params``, ``fragrelease.diffgen.params``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @classmethod
    def of(cls: type[_P], **values: Any) -> _P:
        """The parameters from keyword values.

        Raises
        ------
        InvalidParameterError
            An unknown field or a value of the wrong type, one line per problem naming the field.
        """
        from .errors import InvalidParameterError

        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            raise InvalidParameterError(format_validation_error(exc, cls)) from None


_T = TypeVar("_T")


def registered(registry: Mapping[str, _T], name: str, what: str) -> _T:
    """The entry called ``name`` of a registry (mechanisms, fragmentations, linkages).

    Raises
    ------
    InvalidParameterError
        Unknown name: ``<what> must be one of (<names>), not '<name>'``.
    """
    from .errors import InvalidParameterError

    try:
        return registry[name]
    except (KeyError, TypeError):
        raise InvalidParameterError(f"{what} must be one of {tuple(registry)}, not {name!r}") from None
