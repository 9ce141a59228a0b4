"""The accuracy preview as text: the per-attribute table the CLI (``fragrelease plan``, the run summary)
and the public report share. Spark-free; the figures come from :mod:`fragrelease.idpir.preview`
(public quantities only, docs/specification.md §2 "Accuracy preview").
"""
from __future__ import annotations

from fragrelease.budget import format_epsilon
from fragrelease.idpir.mechanisms import get_mechanism
from fragrelease.idpir.preview import ReleasePreview, error_text
from fragrelease.protocol.fragmentation import fragmentation_of


def _number(x: float) -> str:
    """Four significant digits; thousands as whole numbers with separators (50,000 rather than 5e+04)."""
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"


def table_header(pv: ReleasePreview) -> list[str]:
    """Column titles of :func:`table_rows` (the owner column only for vertical releases)."""
    head = ["attribute"] + (["owner"] if fragmentation_of(pv.params.fragmentation).by_attributes else [])
    return head + ["kind", "ε_attr", "b = E|noise|", "95 % ±", "of domain", "P(rank moves)", "released error",
                   "constant's", "check"]


def table_title(pv: ReleasePreview) -> str:
    """What the table's figures are: exact (DP-IR) or upper bounds (iDP-IR, iDP), and the threshold."""
    what = ("upper bounds (the DP-IR values)" if get_mechanism(pv.params.mechanism).local
            else "exact (DP-IR)")
    times = "" if pv.threshold == 1 else f"{pv.threshold:g} × "
    return (f"noise on each released centroid, {what}; released error: expected after postprocess {pv.params.postprocess} "
            f"on data drawn from the declared domain (numeric: RMSE, categorical: share changed); "
            f"check: WARN when it is at least {times}the error of releasing the mean or most frequent category "
            "(constant's)")


def table_rows(pv: ReleasePreview) -> list[list[str]]:
    """The per-attribute table as text cells (CLI and reports share it); header: :func:`table_header`.

    Cells: ε_attr (exact), b = E|noise| and the 95 % half-width b·ln 20 in the attribute's units (ranks for
    categorical attributes), the share of the domain width the 95 % interval covers, P(rank moves by ≥ 1)
    for categorical attributes, the expected released error and the constant release's error (numeric:
    RMSE in the attribute's units; categorical: share of changed categories; ``n/a`` when a record count
    is not declared), and WARN or ok.
    """
    rows = []
    for a in pv.attributes:
        row = [a.attribute] + ([", ".join(a.owners)] if fragmentation_of(pv.params.fragmentation).by_attributes else [])
        row += ["cat" if a.kind == "categorical" else "num", format_epsilon(a.epsilon), _number(a.scale),
                _number(a.half_width), f"{a.coverage:.0%}", "" if a.p_move is None else f"{a.p_move:.0%}",
                "n/a" if a.error is None else error_text(a.kind, a.error.released),
                "n/a" if a.error is None else error_text(a.kind, a.error.baseline),
                "WARN" if a.warn else "ok"]
        rows.append(row)
    return rows
