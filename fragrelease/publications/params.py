"""The parameters and results of the publications jobs, typed (docs/specification.md §5 and §8).

:class:`AnonymizeParams` and :class:`AuditParams` are what ``fragrelease publications anonymize`` /
``audit`` and :func:`fragrelease.jobs.publications.runner.run_anonymize` / ``run_audit`` agree on:
frozen models (unknown fields refused) built once by the command line or a caller.
:class:`AnonymizeResult`, :class:`AuditSummary` and :class:`AuditResult` are what the jobs return.

The models check types only; the values are checked where they were checked before, with the same
one-line errors (the command line's checks before Spark starts, the algorithms' own checks).
Source: Baig et al., "Cloning for privacy protection in multiple independent data publications"
(CIKM 2011).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Optional

import pandas as pd
from pydantic import ConfigDict

from fragrelease.taxonomy import QuasiIdentifier
from fragrelease.validation import FrozenParams


class _Params(FrozenParams):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)


class AnonymizeParams(_Params):
    """One independent publication: every publisher anonymized on its own (frozen; unknown fields refused).

    Fields
    ------
    source, fmt : the input table and its format (parquet, csv or delta).
    output : the Delta folder of the release; if_exists : ``error`` or ``new-version``.
    method : ``cloning`` (δ-cloning, docs/specification.md §5) or ``mondrian`` (ℓ-diverse baseline, §8).
    qis : the quasi-identifiers; sensitive : the sensitive attribute.
    k : minimum class size; l : distinct ℓ-diversity (mondrian); mu, eta : cloning's distortion
        control (a fraction of the data) and indicative-range width η ≤ k.
    publisher : the column naming the publisher (None: one publisher); keep : columns carried along.
    """

    source: str
    fmt: str = "parquet"
    output: str
    method: str = "cloning"
    qis: tuple[QuasiIdentifier, ...]
    sensitive: str
    k: int = 5
    l: int = 2  # noqa: E741  (the paper's ℓ)
    mu: float = 0.2
    eta: int = 1
    publisher: Optional[str] = "publisher"
    keep: tuple[str, ...] = ()
    if_exists: str = "error"


class AuditParams(_Params):
    """One composition audit of independent releases (frozen; unknown fields refused).

    Fields
    ------
    releases : the release tables (Delta or Parquet); output : the Delta folder of the privacy-risk tuples
        (summary at ``<output>.summary.json``); if_exists : ``error`` or ``new-version``.
    person : the audit key naming a person in every release; sensitive : the sensitive attribute.
    publisher : the column splitting one table into several releases (None: none).
    qis : quasi-identifiers whose generalizations are intersected.
    counterfeit_bound : counterfeits of one value per clone class the adversary assumes (None: no bound).
    """

    releases: tuple[str, ...]
    output: str
    person: str
    sensitive: str
    publisher: Optional[str] = "publisher"
    qis: tuple[QuasiIdentifier, ...] = ()
    if_exists: str = "error"
    counterfeit_bound: Optional[int] = 1


@dataclass(frozen=True)
class AnonymizeResult:
    """A committed publication: its Delta folder and version, the stamped provenance and, for
    cloning, the per-publisher report (records, published, distorted tuples, δ; for the publishers,
    never published; None for mondrian)."""

    path: str
    version: int
    provenance: Mapping[str, Any]
    report: Optional[pd.DataFrame]


@dataclass(frozen=True)
class AuditSummary:
    """The audit's counts: per pair of releases (``release_a``, ``release_b``, ``overlapping``,
    ``risky``, ``mean_confidence``, ``max_confidence``, ``confidence_histogram``) and overall.

    It counts people (the risky table names them): for the publishers' auditors, not for publication.
    ``note`` says why nothing was found when no person appears in two releases.
    """

    pairs: tuple[Mapping[str, Any], ...]
    overlapping_people: int
    risky_people: int
    max_risky_in_a_pair: int
    note: Optional[str] = None

    def to_json(self) -> str:
        """The summary file's text (``<output>.summary.json``): the fields as JSON, ``note`` only when set."""
        doc: dict[str, Any] = {"pairs": [dict(p) for p in self.pairs], "overlapping_people": self.overlapping_people,
                               "risky_people": self.risky_people, "max_risky_in_a_pair": self.max_risky_in_a_pair}
        if self.note is not None:
            doc["note"] = self.note
        return json.dumps(doc, indent=2, default=float)


@dataclass(frozen=True)
class AuditResult:
    """A committed audit: the Delta folder and version of the privacy-risk tuples and the summary."""

    path: str
    version: int
    summary: AuditSummary
