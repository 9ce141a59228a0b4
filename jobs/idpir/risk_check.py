"""The owner's advisory risk check: measured disclosure risk of its own released rows, for its private report.

Configured by ``risk_check`` (:class:`fragrelease.protocol.config.RiskCheckConfig`); docs/privacy.md
"The owner's risk check" and docs/specification.md §3 describe the design. In short:

- **Control set.** anonymeter's risk compares an attack on the release's own rows with the same
  attack on real rows of the same population that were **not** released (Giomi et al., "A Unified
  Framework for Quantifying Privacy Risk in Synthetic Data", PoPETs 2023). The owner therefore holds
  out a random share ``control_share`` of its records: a record is held out when the first 32 bits of
  its keyed pseudonym (HMAC-SHA-256 under the owners' pseudonym key, context
  ``risk-control NUL <release name>``) fall below that share. The selection is the same in the
  metadata and the protect step (and, vertical, at every owner, who share the key), needs no stored
  state, and cannot be predicted without the key. Held-out records are **not released**: that is
  the utility cost of a statistically sound control set.
- **Measurement** (:func:`measure_owner_risk`): anonymeter's inference (every categorical
  attribute, aux = the owner's other attributes) and linkability (column halves), on a bounded
  random sample: ``rows`` records of the fragment with their released rows (linked: lined up by id;
  unlinked: ``rows`` rows of the unlinked table) and up to ``rows`` held-out records, collected to
  the owner's driver as pandas (the only row-level collect; the owner's own data on its own machine).
- **Advisory, not a gate** (:func:`advise`): the owner hands its fragment over whatever the check
  measures; the measurement runs after the fragment and its manifest are written. A measured risk
  (the point estimate) strictly above ``flag_inference_risk`` or ``flag_linkability_risk`` is
  flagged in the owner's private report (:class:`AdvisoryRisk`). A gate that published only the
  draws passing a check on the original records would condition the release on the data outside
  every ε statement; a DP decision would need its own ε and a noisy risk, which this check does not
  have (docs/privacy.md, "Measured disclosure risk and the owner's risk check").

The measured numbers and flags go to the owner's private report only (never to shared storage,
manifests, table properties or logs).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from fragrelease.protocol.config import RiskCheckConfig
from fragrelease.risk import INFERENCE, LINKABILITY, AttackResult, RiskReport, anonymeter_evaluators, measure_risk
from fragrelease.schemas.base import Attribute
from fragrelease.udfs.keys import bernoulli_sample

#: Context of the held-out records' keyed hash (then NUL and the release name).
CONTROL_CONTEXT = "risk-control"


def check_risk_tools(rc: Optional[RiskCheckConfig]) -> None:
    """Refuse a configured risk check whose measurement tool is missing, before Spark or any spend.

    Raises
    ------
    MissingDependencyError
        ``risk_check`` is configured and anonymeter is not installed (one line, the install command).
    """
    if rc is not None:
        anonymeter_evaluators()


def split_control(df: DataFrame, id_column: str, key: bytes, release_name: str,
                  share: float) -> tuple[DataFrame, DataFrame]:
    """(kept, held out): the records whose keyed hash is at or above ``share``, and the others.

    The hash: the first 8 hex digits of ``HMAC-SHA-256(key, "risk-control" NUL release name NUL id)``
    (:func:`fragrelease.udfs.pseudonyms.pseudonym_udf`) read as a number in [0, 1). Shapes: both
    parts have ``df``'s columns.
    """
    from fragrelease.udfs.pseudonyms import pseudonym_udf

    udf = pseudonym_udf(key, f"{CONTROL_CONTEXT}\0{release_name}")
    u = F.conv(F.substring(udf(F.col(id_column).cast("string")), 1, 8), 16, 10).cast("double") / float(2 ** 32)
    marked = df.withColumn("__held", u < F.lit(float(share)))
    return marked.filter(~F.col("__held")).drop("__held"), marked.filter(F.col("__held")).drop("__held")


def _sample(df: DataFrame, rows: int, total: int) -> DataFrame:
    """At most ``rows`` random rows of ``df`` (``total`` rows): Bernoulli sample with a CSPRNG seed, then a limit."""
    if total <= rows:
        return df
    return bernoulli_sample(df, min(1.0, 1.2 * rows / total)).limit(rows)


def _pandas(df: DataFrame, attrs: Sequence[Attribute]) -> pd.DataFrame:
    pdf = df.select(*[a.name for a in attrs]).toPandas()
    return pd.DataFrame({a.name: pdf[a.name].astype(str) if a.categorical else pd.to_numeric(pdf[a.name]).astype(float)
                         for a in attrs})


def measure_owner_risk(kept: DataFrame, released: DataFrame, control: DataFrame, attrs: Sequence[Attribute],
                       id_column: str, rc: RiskCheckConfig, *, n_kept: int, n_control: int,
                       linked: bool) -> Optional[RiskReport]:
    """The owner's inference and linkability risk (:func:`fragrelease.risk.measure_risk`), or None.

    Shapes: ``kept`` (the released records' original rows: ``id_column`` and ``attrs``, ``n_kept``
    rows), ``n_control`` the held-out rows' count (the fragment's count minus ``n_kept``: no second
    count), ``released`` (linked: ``id_column`` and ``attrs`` lined up by id; unlinked: ``attrs``
    only), ``control`` (held-out rows). At most ``rc.rows`` rows of each reach the driver. None
    when the owner has fewer than 2 attributes (no attack has an auxiliary column) or fewer than 2
    held-out records.

    Raises
    ------
    MissingDependencyError
        anonymeter is not installed.
    """
    if len(attrs) < 2:
        return None
    sample = _sample(kept, rc.rows, n_kept)
    if linked:
        ids = sample.select(id_column)
        ori_df = sample
        syn_df = released.join(F.broadcast(ids) if rc.rows <= 100_000 else ids, id_column)
    else:
        ori_df, syn_df = sample, _sample(released, rc.rows, n_kept)
    ctl = _pandas(_sample(control, rc.rows, n_control), attrs)
    if len(ctl) < 2:
        return None
    ori, syn = _pandas(ori_df, attrs), _pandas(syn_df, attrs)
    cats = [a.name for a in attrs if a.categorical]
    return measure_risk(ori, syn, ctl, categorical=cats, n_attacks=rc.attacks,
                        attacks=(LINKABILITY, INFERENCE) if cats else (LINKABILITY,))


@dataclass(frozen=True)
class AdvisoryRisk:
    """The owner's measured risk and its advisory thresholds, for its private report only.

    ``report``: the measurement (:func:`measure_owner_risk`); ``inference_limit`` /
    ``linkability_limit``: ``flag_inference_risk`` / ``flag_linkability_risk`` (None: not set).
    Nothing in it decides what is handed over.
    """

    report: RiskReport
    inference_limit: Optional[float] = None
    linkability_limit: Optional[float] = None

    def limit(self, attack: str) -> Optional[float]:
        """The flag threshold of ``attack`` (``inference`` or ``linkability``), or None."""
        return self.inference_limit if attack == INFERENCE else self.linkability_limit if attack == LINKABILITY else None

    def flag(self, result: AttackResult) -> str:
        """``above flag_<attack>_risk <t>`` when ``result``'s point estimate is strictly above its threshold, else ``""``."""
        limit = self.limit(result.attack)
        return f"above flag_{result.attack}_risk {limit:g}" if limit is not None and result.risk.value > limit else ""

    def flagged(self) -> tuple[AttackResult, ...]:
        """The results above their thresholds, in the report's order."""
        return tuple(r for r in self.report.results if self.flag(r))


def advise(report: Optional[RiskReport], rc: RiskCheckConfig) -> Optional[AdvisoryRisk]:
    """The measurement with ``rc``'s flag thresholds for the owner's private report, or None without one.

    Advisory: it raises nothing and the fragment is handed over whatever it holds (the former gate,
    which withheld the hand-over, is gone: docs/privacy.md).
    """
    if report is None:
        return None
    return AdvisoryRisk(report, rc.flag_inference_risk, rc.flag_linkability_risk)
