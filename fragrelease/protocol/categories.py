"""The most categories a released categorical attribute may declare, checked before Spark starts (every kind).

An engineering bound of the protocol's fragment checks (:mod:`fragrelease.jobs.protocol.fragment` counts
each declared category), not a privacy one: docs/known-limitations.md #20. Everything here is public.
"""
from __future__ import annotations

from typing import Final, Sequence

from fragrelease.errors import InvalidParameterError

#: The most categories one released categorical attribute may declare (iDP-IR and synthetic releases;
#: docs/known-limitations.md #20). An engineering bound, not a privacy one: every owner's validation pass
#: counts each declared category (one aggregate per category for ``dp-frequency``; measured on 2 shared
#: cores: 1,000 categories added about 80 s to that pass and 5,000 about 280 s, so 200,000 would run for
#: hours with nothing printed), and the metadata, the plan, every manifest, the provenance and the
#: reports list every category; a synthetic release's 2-way marginals hold |A|·|B| cells.
MAX_CATEGORIES: Final = 1_000


def check_category_counts(attributes: Sequence, *, dataset: str) -> None:
    """Refuse, before Spark starts, a released categorical attribute declaring more than :data:`MAX_CATEGORIES`.

    ``attributes``: the released attributes (:class:`fragrelease.schemas.base.Attribute`); ``dataset``: the
    configuration's ``dataset`` as written, named in the message. Counts only (no category is compared).

    Raises
    ------
    InvalidParameterError
        ``dataset 'x.yaml': attribute 'city' declares 200,000 categories; a release allows at most 1,000 per
        categorical attribute ...`` for the first such attribute.
    """
    for a in attributes:
        n = len(getattr(a, "categories", None) or ())
        if getattr(a, "categorical", False) and n > MAX_CATEGORIES:
            raise InvalidParameterError(
                f"dataset {dataset!r}: attribute {a.name!r} declares {n:,} categories; a release allows at most "
                f"{MAX_CATEGORIES:,} per categorical attribute (docs/known-limitations.md #20): group rare "
                "categories or generalize them (e.g. a ZIP code's first digits), or make the column not-released")
