"""The paper's data-dependent category order: evaluation only, never a release (docs/privacy.md).

Del Vasto-Terrientes et al. (ICISSP 2025) rank a categorical attribute's values by their exact
frequencies. Mapping noisy ranks back to labels through this order is not post-processing (one
substitution can swap two labels everywhere), so it is not a release mechanism: only the evaluation's
labelled reproduction of the paper's figures and the audit that shows the leak use it. It lives in
``fragrelease.experiments``, which no release-path module may import (``tests/test_architecture.py``).
"""
from __future__ import annotations

from typing import Mapping, Sequence

#: The paper's data-dependent order's name in the evaluation's settings (never a release's).
PAPER_ORDER = "data-frequency"


def data_frequency_order(counts: Mapping[str, int], categories: Sequence[str]) -> tuple[str, ...]:
    """The paper's order: exact frequencies, most frequent first, ties by name. NOT private.

    ``counts`` maps category → exact count (absent categories count 0); returns every category of
    ``categories`` once, rank 1 first.
    """
    return tuple(sorted(categories, key=lambda c: (-counts.get(c, 0), c)))
