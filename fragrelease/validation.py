"""Reading YAML files into dicts and reporting pydantic errors by key and value (configs, schemas)."""
from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from .errors import ConfigError


def read_yaml_mapping(path: str | Path, what: str) -> dict:
    """The top-level mapping of a YAML file.

    Raises
    ------
    ConfigError
        The file is missing, not YAML, or not a mapping; the message names ``what`` and the path.
    """
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read {what} {str(path)!r}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{what} {str(path)!r} must be a mapping, not {type(data).__name__}")
    return data


def format_validation_error(exc: ValidationError) -> str:
    """One line per problem: ``key.path: message (got value)``."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "<root>"
        shown = repr(err.get("input"))
        if len(shown) > 80:
            shown = shown[:77] + "..."
        parts.append(f"{loc}: {err['msg']} (got {shown})")
    return "; ".join(parts)
