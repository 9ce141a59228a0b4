"""Adult predictors for DiffGen (docs/specification.md §7): taxonomy trees and declared numeric domains.

The DiffGen paper's Adult setup has 6 numeric and 8 categorical predictors and the income class.
Categorical taxonomies come from the vendored ARX hierarchies
(:func:`fragrelease.schemas.datasets.load_adult_taxonomy`); ``relationship`` has none there and gets
a one-level taxonomy (root → its six values). Numeric predictors are split by DiffGen itself inside
their **declared** domains below, which are public facts about the census coding (adult.names and
the Census Bureau's top-coding), not the observed minima and maxima.
"""
from __future__ import annotations

from typing import Sequence

from .diffgen import NumericDomain, Predictor, Taxonomy, flat_taxonomy, taxonomy_from_paths
from .errors import ConfigError

#: Declared domains of Adult's numeric predictors [lo, hi] (integers).
ADULT_NUMERIC_DOMAINS: dict[str, tuple[int, int]] = {
    "age": (0, 100),               # years, as in the Adult schema (docs/specification.md §2)
    "education-num": (1, 16),      # the 16 education levels of adult.names
    "fnlwgt": (0, 1_500_000),      # census sampling weight
    "capital-gain": (0, 99_999),   # 99999 is the census top code
    "capital-loss": (0, 99_999),   # same coding as capital-gain
    "hours-per-week": (1, 99),     # hours, as in the Adult schema (docs/specification.md §2)
}
#: Adult's categorical predictors (DiffGen's 8).
ADULT_CATEGORICAL: tuple[str, ...] = ("workclass", "education", "marital-status", "occupation", "relationship",
                                      "race", "sex", "native-country")
#: All 14 Adult predictors, in adult.names order.
ADULT_PREDICTORS: tuple[str, ...] = ("age", "workclass", "fnlwgt", "education", "education-num", "marital-status",
                                     "occupation", "relationship", "race", "sex", "capital-gain", "capital-loss",
                                     "hours-per-week", "native-country")
#: The class attribute and its values.
ADULT_CLASS = "income"
ADULT_CLASS_VALUES: tuple[str, ...] = ("<=50K", ">50K")


def adult_taxonomy(attribute: str) -> Taxonomy:
    """The taxonomy tree of one categorical Adult predictor (ARX file, or flat for ``relationship``)."""
    from .schemas.adult import RELATIONSHIP
    from .schemas.datasets import load_adult_taxonomy

    if attribute == "relationship":
        return flat_taxonomy(attribute, RELATIONSHIP)
    return taxonomy_from_paths(attribute, load_adult_taxonomy(attribute))


def adult_predictors(attributes: Sequence[str] = ADULT_PREDICTORS) -> list[Predictor]:
    """DiffGen predictors for the given Adult attributes (numeric domains and taxonomies).

    Raises
    ------
    ConfigError
        An attribute that is not one of :data:`ADULT_PREDICTORS`.
    """
    out: list[Predictor] = []
    for a in attributes:
        if a in ADULT_NUMERIC_DOMAINS:
            lo, hi = ADULT_NUMERIC_DOMAINS[a]
            out.append(NumericDomain(a, float(lo), float(hi), integer=True))
        elif a in ADULT_CATEGORICAL:
            out.append(adult_taxonomy(a))
        else:
            raise ConfigError(f"{a!r} is not an Adult predictor; choose from {list(ADULT_PREDICTORS)}")
    return out
