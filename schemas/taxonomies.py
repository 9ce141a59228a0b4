"""Adult's taxonomies and predictors: one loader, two tree models (docs/specification.md §5, §7, §8).

:func:`adult_taxonomy_paths` is the one place that reads an Adult taxonomy: the vendored ARX
hierarchy (:func:`fragrelease.schemas.datasets.load_adult_taxonomy`), or for ``relationship``,
which has none there, a one-level taxonomy (root → its six values). Two Spark-free models are
built from those root-ward paths, because the systems walk the tree in opposite directions:

- :class:`fragrelease.taxonomy.Taxonomy`, the **generalization hierarchy** of Mondrian, cloning and
  the composition audit (leaf → ancestor heights, lowest common ancestors, intersections), through
  :func:`adult_quasi_identifiers`;
- :class:`fragrelease.diffgen.predictors.SpecializationTaxonomy`, DiffGen's **specialization taxonomy**
  (root → children, unique node labels), through :func:`adult_predictors`.

The DiffGen paper's Adult setup has 6 numeric and 8 categorical predictors and the income class.
Numeric predictors are split by DiffGen itself inside their **declared** domains below, which are
public facts about the census coding (adult.names and the Census Bureau's top-coding), not the
observed minima and maxima.
"""
from __future__ import annotations

from typing import Sequence

from fragrelease.diffgen.predictors import NumericDomain, Predictor, taxonomy_from_paths
from fragrelease.errors import ConfigError
from fragrelease.taxonomy import QuasiIdentifier, Taxonomy

from .adult import RELATIONSHIP, SCHEMA
from .datasets import load_adult_taxonomy

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


def adult_taxonomy_paths(attribute: str) -> list[list[str]]:
    """Root-ward paths ``[leaf, level 1, ..., "*"]`` of one Adult attribute's taxonomy, one per leaf.

    The vendored ARX hierarchy (see :func:`fragrelease.schemas.datasets.load_adult_taxonomy`), or
    ``[[value, "*"], ...]`` over the six values of ``relationship``, which has no ARX hierarchy.

    Raises
    ------
    ConfigError
        An attribute with no taxonomy (``fnlwgt``, ``capital-gain``, ...) or a checksum mismatch.
    """
    if attribute == "relationship":
        return [[v, "*"] for v in RELATIONSHIP]
    return load_adult_taxonomy(attribute)


def adult_hierarchy(attribute: str) -> Taxonomy:
    """The generalization hierarchy of one Adult attribute (:func:`adult_taxonomy_paths`)."""
    return Taxonomy(attribute, adult_taxonomy_paths(attribute))


def adult_quasi_identifiers(names: Sequence[str]) -> list[QuasiIdentifier]:
    """Quasi-identifiers of Adult with their vendored taxonomies and the schema's declared domains.

    Raises
    ------
    ConfigError
        A name that is not an Adult attribute with a taxonomy.
    """
    attrs = {a.name: a for a in SCHEMA.attributes}
    out = []
    for n in names:
        if n not in attrs:
            raise ConfigError(f"{n!r} is not an Adult attribute")
        a = attrs[n]
        if a.kind == "numeric":
            assert a.domain is not None  # a numeric attribute declares its domain
            out.append(QuasiIdentifier(n, "numeric", adult_hierarchy(n), (float(a.domain[0]), float(a.domain[1]))))
        else:
            out.append(QuasiIdentifier(n, "categorical", adult_hierarchy(n)))
    return out


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
            out.append(taxonomy_from_paths(a, adult_taxonomy_paths(a)))
        else:
            raise ConfigError(f"{a!r} is not an Adult predictor; choose from {list(ADULT_PREDICTORS)}")
    return out
