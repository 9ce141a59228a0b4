"""Release configuration files (``conf/*.yaml``), validated into typed objects.

A configuration names the dataset (a built-in schema or a schema YAML), the fragmentation, the
mechanism and its parameters, and the data owners with their fragments. Errors name the bad key and
value (``owners.1.rows: Input should be greater than 0 (got -5)``).

Owners' fragments come from one of two places:

- ``source``: the owner's own table (parquet, csv or Delta), the normal case on a cluster;
- ``rows`` (horizontal) or ``attributes`` (vertical) without ``source``: a **simulation** for local
  runs and experiments, which cuts the configured dataset (``release.source`` or the built-in table)
  into owner fragments, records assigned to owners at random on every run (SPEC.md §3).
"""
from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .budget import parse_epsilon
from .errors import ConfigError, InvalidParameterError
from .validation import format_validation_error, read_yaml_mapping


class SourceConfig(BaseModel):
    """Where a table lives: ``path`` (local, dbfs:/, s3a://, ...) and ``format``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    format: Literal["parquet", "csv", "delta"] = "parquet"
    options: dict[str, str] = Field(default_factory=dict)


class LedgerConfig(BaseModel):
    """An owner's privacy-budget ledger: a Delta table and the lifetime ε per dataset."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    lifetime_epsilon: Union[str, float, int]

    @field_validator("lifetime_epsilon")
    @classmethod
    def _lifetime_ok(cls, v):
        try:
            parse_epsilon(v, name="lifetime_epsilon")
        except InvalidParameterError as exc:
            raise ValueError(str(exc)) from None
        return v

    @property
    def lifetime(self) -> Fraction:
        return parse_epsilon(self.lifetime_epsilon, name="lifetime_epsilon")


class OwnerConfig(BaseModel):
    """One data owner φ_j, its fragment and, optionally, its budget ledger."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    rows: Optional[int] = Field(default=None, gt=0)
    attributes: Optional[tuple[str, ...]] = None
    source: Optional[SourceConfig] = None
    ledger: Optional[LedgerConfig] = None


class ReleaseConfig(BaseModel):
    """A whole fragmented release: parameters, owners, where to work and where to publish."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    dataset: str
    fragmentation: Literal["horizontal", "vertical"]
    mechanism: Literal["idp-ir", "dp-ir", "idp"] = "idp-ir"
    epsilon: Union[str, float, int]
    k: int
    epsilon_split: Literal["equal", "by-attributes"] = "equal"
    keep_id: bool = False
    owners: tuple[OwnerConfig, ...]
    source: Optional[SourceConfig] = None
    work_dir: str
    output: str
    if_exists: Literal["error", "new-version"] = "error"
    reports: bool = True

    @field_validator("epsilon")
    @classmethod
    def _epsilon_ok(cls, v):
        try:
            parse_epsilon(v)
        except InvalidParameterError as exc:
            raise ValueError(str(exc)) from None
        return v

    @field_validator("k")
    @classmethod
    def _k_ok(cls, v: int) -> int:
        if v < 1:
            raise ValueError(f"k must be >= 1, not {v}")
        return v

    @model_validator(mode="after")
    def _owners_ok(self) -> "ReleaseConfig":
        if len(self.owners) < 2:
            raise ValueError(f"a fragmented release needs at least 2 owners, got {len(self.owners)}")
        names = [o.name for o in self.owners]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"owner name {dupes[0]!r} appears twice")
        for o in self.owners:
            if self.fragmentation == "horizontal":
                if o.attributes is not None:
                    raise ValueError(f"owner {o.name!r}: 'attributes' is for vertical releases only")
                if (o.rows is None) == (o.source is None):
                    raise ValueError(f"owner {o.name!r}: give exactly one of 'rows' (simulated split) or 'source'")
            else:
                if o.rows is not None:
                    raise ValueError(f"owner {o.name!r}: 'rows' is for horizontal releases only")
                if not o.attributes:
                    raise ValueError(f"owner {o.name!r}: a vertical owner must list its 'attributes'")
        return self

    @property
    def epsilon_exact(self) -> Fraction:
        return parse_epsilon(self.epsilon)

    @property
    def simulated(self) -> bool:
        """True when owners' fragments are cut from one table by the local driver."""
        return all(o.source is None for o in self.owners)


def load_config(path: str | Path, overrides: Optional[dict] = None) -> ReleaseConfig:
    """Read and validate a release configuration YAML.

    Parameters
    ----------
    path : path to the YAML file.
    overrides : dict, optional
        Top-level keys to replace (``{"epsilon": "0.5", "k": 100}``), e.g. from the command line.

    Raises
    ------
    ConfigError
        The file cannot be read or does not validate; the message names key and value.
    """
    data = read_yaml_mapping(path, "configuration")
    data.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return config_from_dict(data, source=str(path))


def config_from_dict(data: dict, *, source: str = "<dict>") -> ReleaseConfig:
    """Validate a configuration given as a dict (see :func:`load_config`)."""
    try:
        return ReleaseConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"invalid configuration {source}: {format_validation_error(exc)}") from None
