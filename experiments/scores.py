"""The evaluation's scores: MeanSSE from per-attribute errors, and the categorical columns' TVD.

MeanSSE as Del Vasto-Terrientes et al. (ICISSP 2025) §5 (``authors`` convention) or the paper's
formula (``paper``), docs/specification.md §3; :func:`category_tvd` is the total variation distance
between the original and released category histograms. Inputs are numpy arrays; no randomness.
"""
from __future__ import annotations

import numpy as np

from fragrelease.errors import InvalidParameterError
from fragrelease.idpir.metrics import CONVENTIONS


def category_tvd(original: dict[str, np.ndarray], released: dict[str, np.ndarray | float]) -> float:
    """Mean over categorical attributes of the total variation distance between category distributions.

    ``original`` and ``released`` map attribute → counts of shape (|dom|,), each summing to n.
    TVD = ½ Σ_c |p_c − q_c| ∈ [0, 1]; NaN when there is no categorical attribute.
    """
    if not original:
        return float("nan")
    tvds = []
    for a, p in original.items():
        p = np.asarray(p, float)
        q = np.asarray(released[a], float)
        tvds.append(0.5 * float(np.abs(p / p.sum() - q / q.sum()).sum()))
    return float(np.mean(tvds))


def combine_mean_sse(errors: dict[str, float], scales: dict[str, float], n: int, convention: str = "authors") -> float:
    """MeanSSE from per-attribute Σ d² (docs/specification.md §4).

    authors: Σ_a E_a/s_a² / (n·l); paper: Σ_a E_a/v_a² / (n·l²), with s_a the sample std (0.5 for
    categorical) and v_a = s_a².
    """
    if convention not in CONVENTIONS:
        raise InvalidParameterError(f"MeanSSE convention must be one of {CONVENTIONS}, not {convention!r}")
    l = len(errors)
    if convention == "authors":
        return float(sum(errors[a] / scales[a] ** 2 for a in errors) / (n * l))
    return float(sum(errors[a] / scales[a] ** 4 for a in errors) / (n * l * l))
