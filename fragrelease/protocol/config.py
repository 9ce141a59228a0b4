"""Release configuration files (``conf/*.yaml``), validated into typed objects.

A configuration names the dataset (a built-in schema or a schema YAML), the fragmentation, the
mechanism and its parameters, and the data owners with their fragments. Errors name the bad key and
value, one line per problem, never the whole document (``owners[1].rows: Input should be greater than 0
(got -5)``, ``owners[1].attributes: required for a vertical owner (owner 'insurer')``).

Everything that needs no data is checked here, before a SparkSession exists: ε, the mechanism, k
(≥ 3 unless the mechanism fixes it, and ≤ every owner's declared ``rows``), owners and their keys.


Owners' fragments come from one of two places:

- ``source``: the owner's own table (parquet, csv or Delta by ``path``, or a catalog ``table`` read
  with ``spark.table``), the normal case on a cluster;
- ``rows`` (horizontal) or ``attributes`` (vertical) without ``source``: a **simulation** for local
  runs and experiments, which cuts the configured dataset (``release.source`` or the built-in table)
  into owner fragments, records assigned to owners at random on every run (docs/specification.md §3).
"""
from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from fragrelease.budget import Epsilon
from fragrelease.errors import ConfigError, InvalidParameterError
from fragrelease.idpir.mechanisms import get_mechanism
from fragrelease.protocol.fragmentation import FragmentationName, fragmentation_of
from fragrelease.protocol.kind import release_kind
from fragrelease.protocol.messages import MIN_K
from fragrelease.protocol.options import ReleaseOptions
from fragrelease.validation import (
    SAFE_NAME_RULE,
    check_table_name,
    format_validation_error,
    is_safe_name,
    read_yaml_mapping,
)


def _checked(value, parse):
    """``value`` if ``parse(value)`` accepts it; its InvalidParameterError as pydantic's ValueError."""
    try:
        parse(value)
    except InvalidParameterError as exc:
        raise ValueError(str(exc)) from None
    return value


def _safe_name(v: str) -> str:
    """A release or owner name that is safe as a folder name (:data:`fragrelease.validation.SAFE_NAME`);
    pydantic reports the ValueError under the key with the value (``name: ... (got '../..')``)."""
    if not is_safe_name(v):
        raise ValueError(f"not a safe name ({SAFE_NAME_RULE}); it becomes a folder name")
    return v


def _table_name(v: Optional[str], key: str) -> Optional[str]:
    """A catalog table name checked by :func:`fragrelease.validation.check_table_name` (ConfigError is a ValueError)."""
    return None if v is None else check_table_name(v, key=key)


class SourceConfig(BaseModel):
    """Where a table lives: ``path`` (local, dbfs:/, s3a://, ...) with ``format``, or a catalog ``table``.

    ``table`` (``db.name``, read with ``spark.table``) and ``path`` are exclusive; ``format`` and
    ``options`` apply to ``path`` only.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: Optional[str] = None
    table: Optional[str] = None
    format: Literal["parquet", "csv", "delta"] = "parquet"
    options: dict[str, str] = Field(default_factory=dict)

    @field_validator("table")
    @classmethod
    def _table_ok(cls, v: Optional[str]) -> Optional[str]:
        return _table_name(v, "source.table")

    @model_validator(mode="after")
    def _one_place(self) -> SourceConfig:
        if (self.path is None) == (self.table is None):
            raise ValueError(f"give exactly one of 'path' and 'table' (got path={self.path!r}, table={self.table!r})")
        if self.table is not None and (self.format != "parquet" or self.options):
            raise ValueError(f"'format' and 'options' apply to 'path' only; table {self.table!r} is read with spark.table")
        return self


class LedgerConfig(BaseModel):
    """An owner's privacy-budget ledger: a Delta table (``path``, or a catalog ``table``) and the lifetime ε per dataset."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: Optional[str] = None
    table: Optional[str] = None
    #: ε a data owner may spend on a dataset over all releases (exact: "3", "5/2")
    lifetime_epsilon: Epsilon

    @field_validator("table")
    @classmethod
    def _table_ok(cls, v: Optional[str]) -> Optional[str]:
        return _table_name(v, "ledger.table")

    @model_validator(mode="after")
    def _one_place(self) -> LedgerConfig:
        if (self.path is None) == (self.table is None):
            raise ValueError(f"give exactly one of 'path' and 'table' (got path={self.path!r}, table={self.table!r})")
        return self

    @property
    def lifetime(self) -> Fraction:
        """The lifetime budget (exact)."""
        return self.lifetime_epsilon


class PseudonymKeyConfig(BaseModel):
    """Where an owner's pseudonym key comes from: a ``file`` (its bytes) or an ``env`` variable; exactly one.

    Every owner of a release must name the same secret (the aggregator compares their public key
    checks); a separate aggregator step never reads it. At least 32 bytes of a **random** secret
    (``openssl rand -hex 32`` gives 64 characters; the public key check lets anyone test guessed
    secrets offline, so never a passphrase); the HMAC key is derived from it with HKDF-SHA-256. The
    file must be the owner's alone (mode 0600) and must not lie under the release's ``work_dir`` or
    ``output``. See :mod:`fragrelease.pseudonyms` and docs/privacy.md.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    file: Optional[str] = None
    env: Optional[str] = None

    @model_validator(mode="after")
    def _one_place(self) -> PseudonymKeyConfig:
        if (self.file is None) == (self.env is None):
            raise ValueError(f"give exactly one of 'file' and 'env' (got file={self.file!r}, env={self.env!r})")
        return self

    @property
    def where(self) -> str:
        return f"file {self.file!r}" if self.file is not None else f"environment variable {self.env!r}"


class OwnerConfig(BaseModel):
    """One data owner φ_j, its fragment and, optionally, its budget ledger.

    ``private_dir`` is where the owner keeps what is derived from its original data and is for its
    eyes only: the private utility report and, in simulations, the simulated raw fragment. It must
    not lie under the shared ``work_dir`` or the release ``output`` (the aggregator reads those).

    ``pseudonym_key`` (``{file: PATH}`` or ``{env: VAR}``) names the key the owners share to replace
    record ids by keyed pseudonyms (:mod:`fragrelease.pseudonyms`). Without it, ``fragrelease run``
    and ``Release.run()`` generate a fresh key per release in the owners' private folders, and the
    separate owner commands use the one key of the release's shared private root when no owner sets
    a ``private_dir`` (every party on one machine); otherwise they refuse
    (:func:`fragrelease.jobs.protocol.keys.owner_pseudonym_key`).
    Default: ``$FRAGRELEASE_PRIVATE_ROOT/<release name>/<owner>``, with
    ``FRAGRELEASE_PRIVATE_ROOT`` defaulting to ``~/.fragrelease/private`` (the owner's own machine).

    Manifest signatures (docs/known-limitations.md #7): ``public_key`` is the owner's Ed25519 public
    key, base64 of its raw 32 bytes as ``fragrelease keys generate`` prints it; the aggregator
    verifies the owner's manifest under it and refuses the owner's fragment without it.
    ``signing_key`` is the path of the owner's private key file (PKCS#8 PEM, mode 0600, never under
    ``work_dir`` or ``output``), read by the owner's protect step only. ``fragrelease run`` and
    ``Release.run()`` generate a key pair per owner and release when an owner has neither.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    rows: Optional[int] = Field(default=None, gt=0)
    attributes: Optional[tuple[str, ...]] = None
    source: Optional[SourceConfig] = None
    ledger: Optional[LedgerConfig] = None
    private_dir: Optional[str] = None
    # manifest signatures (fragrelease.signing)
    public_key: Optional[str] = None
    signing_key: Optional[str] = None
    pseudonym_key: Optional[PseudonymKeyConfig] = None

    @field_validator("name")
    @classmethod
    def _name_ok(cls, v: str) -> str:
        return _safe_name(v)


class RiskCheckConfig(BaseModel):
    """Each owner's advisory measured-risk check (``risk_check:``; fragrelease.jobs.idpir.risk_check).

    Every owner holds out ``control_share`` of its records (a keyed, unpredictable selection; they
    are not released) as the control set and, after its fragment and manifest are written, measures
    anonymeter's inference (every categorical attribute) and linkability risk of its released rows
    on ``rows`` sampled records with ``attacks`` attacks, and writes them to its private report only.
    The check never withholds a fragment: a risk above ``flag_inference_risk`` /
    ``flag_linkability_risk`` is flagged in that report (unset: measure only). The retired gate's
    keys ``max_inference_risk`` / ``max_linkability_risk`` are refused with the reason (a
    :class:`fragrelease.errors.ConfigError` naming the key and its value) rather than read as flags.
    docs/privacy.md, "Measured disclosure risk and the owner's risk check".
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: attacks per set (targets and control) of each attack
    attacks: int = Field(default=500, ge=10, le=100_000)
    #: share of each owner's records held out (not released) as the control set
    control_share: float = Field(default=0.05, gt=0, le=0.5)
    #: records sampled for the measurement (their original and released rows reach the owner's driver)
    rows: int = Field(default=10_000, ge=20, le=1_000_000)
    #: a measured inference risk (point estimate) strictly above this is flagged in the private report
    flag_inference_risk: Optional[float] = Field(default=None, ge=0, le=1)
    #: a measured linkability risk (point estimate) strictly above this is flagged in the private report
    flag_linkability_risk: Optional[float] = Field(default=None, ge=0, le=1)
    #: retired: the gate that withheld a fragment (refused when given a value; never dumped)
    max_inference_risk: Optional[float] = Field(default=None, exclude=True, repr=False)
    max_linkability_risk: Optional[float] = Field(default=None, exclude=True, repr=False)

    @field_validator("max_inference_risk", "max_linkability_risk", mode="before")
    @classmethod
    def _gate_retired(cls, v: object, info: ValidationInfo) -> None:
        if v is None:
            return None
        attack = str(info.field_name).split("_")[1]
        raise ValueError(f"no longer a gate: the risk check never withholds a fragment (publishing only the draws "
                         f"that pass a check on the original records is not covered by epsilon); set "
                         f"flag_{attack}_risk instead to flag a risk above it in the owner's private report")


class ReleaseConfig(ReleaseOptions):
    """A whole fragmented release: parameters, owners, where to work and where to publish, and the
    release options (:class:`~fragrelease.protocol.options.ReleaseOptions`, inherited)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    dataset: str
    fragmentation: FragmentationName
    mechanism: str = "idp-ir"  # a name of the registry fragrelease.idpir.mechanisms.MECHANISMS
    #: the release's total ε (exact; "1", "0.5" and "1/2" are the same budget)
    epsilon: Epsilon
    #: the cluster size of microaggregation: required by the IR kinds, refused by the synthetic kind
    k: Optional[int] = None
    epsilon_split: Literal["equal", "by-attributes"] = "equal"
    keep_id: bool = False
    owners: tuple[OwnerConfig, ...]
    source: Optional[SourceConfig] = None
    work_dir: str
    #: where the release is committed: a Delta table folder (``output``) or a catalog table name
    #: (``output_table``, ``db.name``); exactly one
    output: Optional[str] = None
    output_table: Optional[str] = None
    #: create ``output_table``'s database (schema) when it does not exist; default: refuse
    #: (fragrelease.jobs.storage.ensure_database)
    create_schema: bool = False
    if_exists: Literal["error", "new-version"] = "error"
    reports: bool = True
    #: each owner's advisory measured disclosure risk (RiskCheckConfig); None: no check, nothing held out
    risk_check: Optional[RiskCheckConfig] = None
    # the release options (category_order, category_order_share, linkage, postprocess) are the
    # fields of ReleaseOptions, inherited: fragrelease/protocol/options.py declares them once

    @field_validator("name")
    @classmethod
    def _name_ok(cls, v: str) -> str:
        return _safe_name(v)

    @field_validator("mechanism")
    @classmethod
    def _mechanism_ok(cls, v: str) -> str:
        return _checked(v, get_mechanism)

    @field_validator("output_table")
    @classmethod
    def _output_table_ok(cls, v: Optional[str]) -> Optional[str]:
        return _table_name(v, "output_table")

    @model_validator(mode="after")
    def _owners_ok(self) -> ReleaseConfig:
        """Cross-key checks; every problem found is reported, each naming its key and value."""
        problems = []
        if (self.output is None) == (self.output_table is None):
            problems.append(f"output: give exactly one of 'output' (a path) and 'output_table' (a catalog table name); "
                            f"got output={self.output!r}, output_table={self.output_table!r}")
        if self.risk_check is not None and not self.reports:
            problems.append("risk_check: needs reports: true (the measured risk goes to each owner's private report "
                            "and nowhere else)")
        kind = release_kind(self.linkage)
        # a key the kind does not act on is refused when written with a value of its own (one place: each
        # kind's unused_keys); its default is accepted, so a dumped configuration reads back
        problems.extend(f"{key}: not used by linkage: {self.linkage} ({why}); remove it"
                        for key, why in kind.unused_keys.items()
                        if key in self.model_fields_set and getattr(self, key) != type(self).model_fields[key].default)
        problems.extend(kind.config_problems(self))  # the kind's own (keep_id, k required, its options)
        fixed_k = get_mechanism(self.mechanism).fixed_k
        min_k = MIN_K if fixed_k is None else 1  # plain iDP ignores k (cluster size 1)
        k = None if "k" in kind.unused_keys else self.k  # a k the kind refuses is not checked further
        if k is not None and k < min_k:
            problems.append(f"k: must be >= {min_k} for mechanism {self.mechanism!r}, not {self.k}")
        if len(self.owners) < 2:
            problems.append(f"owners: a fragmented release needs at least 2 owners, got {len(self.owners)}")
        names = [o.name for o in self.owners]
        root_inside = [key for key in ("work_dir", "output")
                       if getattr(self, key) is not None and _within(private_root(), getattr(self, key))]
        for i, o in enumerate(self.owners):
            at = f"owners[{i}]"
            if o.name in names[:i]:
                problems.append(f"{at}.name: owner name {o.name!r} appears twice")
            problems += fragmentation_of(self.fragmentation).owner_config_problems(at, o, k=k, min_k=MIN_K,
                                                                                  fixed_k=fixed_k)
            private = resolved_private_dir(self.name, o)
            what = "private_dir" if o.private_dir is not None else f"default private folder ({PRIVATE_ROOT_ENV})"
            for shared, key in ((self.work_dir, "work_dir"), (self.output, "output")):
                if shared is None or (o.private_dir is None and key in root_inside):
                    continue  # the default root itself lies there: reported once below
                if _within(private, shared):
                    problems.append(f"{at}.private_dir: owner {o.name!r}: {what} {private!r} lies under the "
                                    f"shared {key} {shared!r}; an owner's private files must stay out of it")
            problems.extend(_signing_problems(self, o, at))
            if o.pseudonym_key is not None and o.pseudonym_key.file is not None:
                for shared, key in ((self.work_dir, "work_dir"), (self.output, "output")):
                    if shared is not None and _within(o.pseudonym_key.file, shared):
                        problems.append(f"{at}.pseudonym_key: owner {o.name!r}: pseudonym key file "
                                        f"{o.pseudonym_key.file!r} lies under the shared {key} {shared!r}; "
                                        "a secret key must stay out of it")
        defaulted = [o.name for o in self.owners if o.private_dir is None]
        for key in root_inside if defaulted else ():
            problems.append(f"{PRIVATE_ROOT_ENV}: the default private root {private_root()!r} of owners {defaulted} lies "
                            f"under the shared {key} {getattr(self, key)!r}; set {PRIVATE_ROOT_ENV} or each owner's "
                            "private_dir outside it")
        keyed = [o.name for o in self.owners if o.pseudonym_key is not None]
        if keyed and len(keyed) < len(self.owners):
            for i, o in enumerate(self.owners):
                if o.pseudonym_key is None:
                    problems.append(f"owners[{i}].pseudonym_key: owner {o.name!r} names no pseudonym key while "
                                    f"{keyed[0]!r} does; the owners of a release share one key")
                    break
        if problems:
            raise ValueError("\n".join(problems))
        return self

    @property
    def simulated(self) -> bool:
        """True when owners' fragments are cut from one table by the local driver."""
        return all(o.source is None for o in self.owners)


#: Environment variable naming the root of the owners' default private folders.
PRIVATE_ROOT_ENV = "FRAGRELEASE_PRIVATE_ROOT"


def private_root() -> str:
    """The root of the owners' default private folders: ``$FRAGRELEASE_PRIVATE_ROOT`` or ``~/.fragrelease/private``."""
    import os

    return os.environ.get(PRIVATE_ROOT_ENV) or os.path.join(os.path.expanduser("~"), ".fragrelease", "private")


def resolved_private_dir(release: str, owner: OwnerConfig) -> str:
    """The owner's private folder: ``owner.private_dir`` or ``<private root>/<release>/<owner>`` (:func:`private_root`)."""
    import posixpath

    if owner.private_dir is not None:
        return owner.private_dir
    return posixpath.join(private_root(), release, owner.name)


def _signing_problems(cfg: ReleaseConfig, o: OwnerConfig, at: str) -> list[str]:
    """An owner's ``public_key`` that does not parse, or a ``signing_key`` under ``work_dir`` or ``output``."""
    from fragrelease.errors import SigningKeyError
    from fragrelease.signing import parse_public_key

    out = []
    if o.public_key is not None:
        try:
            parse_public_key(o.public_key, owner=o.name)
        except SigningKeyError as exc:
            out.append(f"{at}.public_key: {exc}")
    if o.signing_key is not None:
        for shared, key in ((cfg.work_dir, "work_dir"), (cfg.output, "output")):
            if shared is not None and _within(o.signing_key, shared):
                out.append(f"{at}.signing_key: owner {o.name!r}: signing_key {o.signing_key!r} lies under the shared "
                           f"{key} {shared!r}; a private key must stay out of it")
    return out


def _within(path: str, folder: str) -> bool:
    """True if ``path`` is ``folder`` or lies under it (local paths resolved; URIs compared as text)."""
    import os

    def norm(p: str) -> str:
        if "://" in p or p.startswith("dbfs:"):
            return p.rstrip("/")
        return os.path.realpath(os.path.expanduser(p))

    a, b = norm(path), norm(folder)
    return a == b or a.startswith(b.rstrip("/") + "/")


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
        lines = format_validation_error(exc, ReleaseConfig).splitlines()
        sep = " " if len(lines) == 1 else "\n  "
        raise ConfigError(f"invalid configuration {source}:{sep}{sep.join(lines)}") from None
