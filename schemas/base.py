"""Declared dataset schemas: column types plus per-attribute privacy metadata.

A dataset is declared by a :class:`DatasetSchema`: its columns (Spark type), and for each the
**role** (``id``, ``quasi-identifier``, ``sensitive`` or ``not-released``), the **kind**
(``numeric`` or ``categorical``) and the **declared domain** ([lo, hi] for numeric attributes, the
list of categories for categorical ones). Domains are public knowledge fixed before looking at the
data (docs/specification.md §2): values outside them are refused, never silently widened.

Every quasi-identifier and sensitive attribute is protected (IR microaggregation + noise) and
released; ``not-released`` columns never leave the data owner; the ``id`` column serves the
vertical join and is dropped from the release unless a configuration keeps it.

Users declare their own dataset in YAML (see ``conf/schema-example.yaml``) and load it with
:func:`load_schema`.
"""
from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from fragrelease.errors import ConfigError
from fragrelease.validation import format_validation_error, read_yaml_mapping

Role = Literal["id", "quasi-identifier", "sensitive", "not-released"]
Kind = Literal["numeric", "categorical"]
ColumnType = Literal["integer", "long", "double", "string"]

#: Roles whose attributes are protected and released.
PROTECTED_ROLES = ("quasi-identifier", "sensitive")
#: Characters Delta Lake does not allow in a column name without column mapping.
_INVALID_NAME_CHARS = set(" ,;{}()\n\t=")


class Attribute(BaseModel):
    """One column of a dataset and its privacy metadata."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    type: ColumnType
    role: Role
    kind: Optional[Kind] = None
    domain: Optional[tuple[float, float]] = None
    categories: Optional[tuple[str, ...]] = None
    unit: Optional[str] = None
    description: Optional[str] = None

    @field_validator("name")
    @classmethod
    def _name_ok(cls, v: str) -> str:
        bad = sorted(set(v) & _INVALID_NAME_CHARS)
        if not v or bad:
            raise ValueError(f"column name {v!r} is empty or contains characters Delta forbids: {bad}")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Attribute:
        if self.role in PROTECTED_ROLES:
            if self.kind is None:
                raise ValueError(f"attribute {self.name!r} with role {self.role!r} needs a kind")
            if self.kind == "numeric":
                if self.domain is None:
                    raise ValueError(f"numeric attribute {self.name!r} needs a declared domain [lo, hi]")
                lo, hi = self.domain
                if not lo < hi:
                    raise ValueError(f"domain of {self.name!r} must have lo < hi, not [{lo}, {hi}]")
                if self.type == "string":
                    raise ValueError(f"numeric attribute {self.name!r} cannot have type 'string'")
            else:
                if not self.categories or len(self.categories) < 2:
                    raise ValueError(f"categorical attribute {self.name!r} needs at least 2 declared categories")
                if len(set(self.categories)) != len(self.categories):
                    raise ValueError(f"categorical attribute {self.name!r} declares a category twice")
                if self.type != "string":
                    raise ValueError(f"categorical attribute {self.name!r} must have type 'string', not {self.type!r}")
        return self

    @property
    def protected(self) -> bool:
        return self.role in PROTECTED_ROLES

    @property
    def categorical(self) -> bool:
        return self.kind == "categorical"

    def bounds(self) -> tuple[float, float]:
        """[lo, hi] the mechanism works in: the numeric domain, or ranks [1, |dom|]."""
        if self.categorical:
            assert self.categories is not None  # a categorical attribute declares its categories
            return 1.0, float(len(self.categories))
        assert self.domain is not None  # a numeric attribute declares its domain
        return float(self.domain[0]), float(self.domain[1])

    def public_spec(self) -> dict:
        """What may be shared with the aggregator: name, kind and declared domain (all public)."""
        spec: dict[str, object] = {"name": self.name, "kind": self.kind}
        if self.categorical:
            assert self.categories is not None  # a categorical attribute declares its categories
            spec["categories"] = list(self.categories)
        else:
            assert self.domain is not None  # a numeric attribute declares its domain
            spec["domain"] = [float(self.domain[0]), float(self.domain[1])]
        return spec


class DatasetSchema(BaseModel):
    """A dataset's declared columns; at most one has role ``id``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    attributes: tuple[Attribute, ...]
    description: Optional[str] = None

    @model_validator(mode="after")
    def _consistent(self) -> DatasetSchema:
        names = [a.name for a in self.attributes]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"schema {self.name!r} declares column {dupes[0]!r} twice")
        ids = [a.name for a in self.attributes if a.role == "id"]
        if len(ids) > 1:
            raise ValueError(f"schema {self.name!r} declares more than one id column: {ids}")
        if not any(a.protected for a in self.attributes):
            raise ValueError(f"schema {self.name!r} has no quasi-identifier or sensitive attribute to release")
        return self

    @property
    def id_column(self) -> Optional[str]:
        return next((a.name for a in self.attributes if a.role == "id"), None)

    @property
    def protected(self) -> tuple[Attribute, ...]:
        return tuple(a for a in self.attributes if a.protected)

    def attribute(self, name: str) -> Attribute:
        for a in self.attributes:
            if a.name == name:
                return a
        raise ConfigError(f"schema {self.name!r} has no attribute {name!r}")

    def struct_type(self):
        """Spark StructType of the raw dataset (every declared column, in order)."""
        from pyspark.sql import types as T

        mapping = {"integer": T.IntegerType(), "long": T.LongType(), "double": T.DoubleType(), "string": T.StringType()}
        return T.StructType([T.StructField(a.name, mapping[a.type], nullable=False) for a in self.attributes])


def schema_from_dict(data: dict, *, source: str = "<dict>") -> DatasetSchema:
    """Validate a schema given as a dict; errors name the bad key and value.

    Raises
    ------
    ConfigError
    """
    try:
        return DatasetSchema.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"invalid dataset schema in {source}: {format_validation_error(exc)}") from None


#: Schemas read in this process, by file (real path, modification time, size): a step resolves its schema
#: several times (the configuration's checks, the output's, the party's context) and a schema may declare
#: 200,000 categories. A changed file is read again. Schemas are frozen: sharing one is safe.
_LOADED: OrderedDict[tuple, DatasetSchema] = OrderedDict()
_LOADED_MAX = 8
_LOADED_LOCK = threading.Lock()


def load_schema(path: str | Path) -> DatasetSchema:
    """Read a dataset schema from a YAML file (format: ``conf/schema-example.yaml``).

    A file read before in this process, unchanged since (same real path, modification time and size),
    gives the schema read then; anything else reads and validates the file.

    Raises
    ------
    ConfigError
        If the file is missing, not YAML, or does not validate.
    """
    try:
        st = os.stat(path)
        key: Optional[tuple] = (os.path.realpath(path), st.st_mtime_ns, st.st_size, str(path))
    except OSError:
        key = None  # read_yaml_mapping names the problem
    if key is not None:
        with _LOADED_LOCK:
            kept = _LOADED.get(key)
        if kept is not None:
            return kept
    schema = schema_from_dict(read_yaml_mapping(path, "dataset schema"), source=str(path))
    if key is not None:
        with _LOADED_LOCK:
            _LOADED[key] = schema
            while len(_LOADED) > _LOADED_MAX:
                _LOADED.popitem(last=False)
    return schema
