"""The rank order of a categorical attribute's categories, Spark-free (docs/specification.md §1).

IR microaggregation works on ranks: a categorical attribute's categories are put in an order,
every value becomes its category's rank in [1, |dom|], the ranks are clustered and noised, and the
rounded noisy rank is mapped back to a label **through the same order**. That last step makes the
order part of the release: if the order depended on the data without noise, one substitution could
swap two labels throughout the released column (the paper's frequency order does exactly that:
two categories with equal counts swap when one record changes). So the order is either public or
bought with budget:

``declared``
    The order the dataset schema declares (public, costs no budget). Right for ordinal attributes
    and when the declared order already follows a public reference frequency.
``dp-frequency``
    A share of the attribute's budget buys a Laplace histogram of the category counts; categories
    are ranked by noisy count, most frequent first, ties by declared order. Under substitution one
    record moves one unit from one count to another, so the histogram's L1 sensitivity is 2 and the
    scale is ``2 / ε_order`` (calibrated by OpenDP's map, :func:`histogram_scale`). The rest of the
    attribute's budget, ``ε_attr − ε_order``, goes to the centroids. Sequential composition of the
    two steps gives ``ε_attr`` for the attribute.

The paper's own reading (exact counts, no noise) is not a release mechanism: it lives in
:mod:`fragrelease.experiments.paper_order`, for the evaluation's labelled reproduction only.
"""
from __future__ import annotations

from fractions import Fraction
from typing import Annotated, Final, Mapping, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, PlainValidator, WithJsonSchema, model_validator

from fragrelease.budget import Epsilon, EpsilonPart, parse_epsilon
from fragrelease.errors import InvalidParameterError
from fragrelease.rng.laplace import LaplaceNoise, NoiseSource

#: Category orders a release may use (docs/specification.md §1).
CATEGORY_ORDERS = ("dp-frequency", "declared")
#: Default category order and the share of a categorical attribute's budget spent on the histogram.
DEFAULT_CATEGORY_ORDER: Final = "dp-frequency"
DEFAULT_ORDER_SHARE = Fraction(1, 10)
#: L1 sensitivity of a category-count histogram under substitution (one count −1, another +1).
HISTOGRAM_SENSITIVITY = 2


def parse_share(value: object, *, name: str = "category_order_share") -> Fraction:
    """The histogram's share of a categorical attribute's budget, an exact Fraction in (0, 1).

    Raises
    ------
    InvalidParameterError
        If the value is not a number strictly between 0 and 1 (the message repeats it).
    """
    share = parse_epsilon(value, name=name)
    if share >= 1:
        raise InvalidParameterError(f"{name} must be a number in (0, 1), not {value!r}")
    return share


#: The histogram's share as a field type: a Fraction in (0, 1) in Python, exact text on the wire.
Share = Annotated[Fraction, PlainValidator(lambda v: parse_share(v)), PlainSerializer(str, return_type=str, when_used="json"),
                  WithJsonSchema({"type": "string", "description": "exact rational in (0, 1), e.g. \"1/10\""})]


class AttributeBudget(BaseModel):
    """How one attribute's budget ε_attr is spent (exact; ``order + centroids == total``).

    ``order`` is the budget of the noisy category histogram (0 for numeric attributes and for the
    ``declared`` order); ``centroids`` is the budget of the Laplace draws on the centroid vector.
    On the wire (plans, manifests, provenance) the fields are ``attribute``, ``epsilon``,
    ``epsilon_order`` and ``epsilon_centroids``, each budget as exact text.

    Raises
    ------
    pydantic.ValidationError
        A negative or non-numeric part, or parts that do not add up to the total.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, serialize_by_alias=True)

    attribute: str
    total: Epsilon = Field(validation_alias="epsilon", serialization_alias="epsilon")
    order: EpsilonPart = Field(validation_alias="epsilon_order", serialization_alias="epsilon_order")
    centroids: Epsilon = Field(validation_alias="epsilon_centroids", serialization_alias="epsilon_centroids")

    @model_validator(mode="after")
    def _adds_up(self) -> AttributeBudget:
        if self.order + self.centroids != self.total:
            raise ValueError(f"budget of {self.attribute!r}: order {self.order} + centroids {self.centroids} "
                             f"is not its total {self.total}")
        return self

    def to_dict(self) -> dict:
        """Exact text form for plans, manifests and provenance."""
        return self.model_dump(mode="json")


def split_attribute_budget(attribute: str, epsilon_attribute: Fraction, *, categorical: bool,
                           category_order: str, share: Fraction) -> AttributeBudget:
    """Split ε_attr between the category histogram and the centroids (docs/specification.md §1).

    Numeric attributes and ``declared`` orders spend everything on the centroids; ``dp-frequency``
    spends ``share · ε_attr`` on the histogram and the rest on the centroids.

    Raises
    ------
    InvalidParameterError
        Unknown order, ε_attr ≤ 0 or a share outside (0, 1).
    """
    if category_order not in CATEGORY_ORDERS:
        raise InvalidParameterError(f"category_order must be one of {CATEGORY_ORDERS}, not {category_order!r}")
    eps = Fraction(epsilon_attribute)
    if eps <= 0:
        raise InvalidParameterError(f"epsilon per attribute must be > 0, not {epsilon_attribute}")
    share = parse_share(share)
    if not categorical or category_order == "declared":
        return AttributeBudget(attribute=attribute, total=eps, order=Fraction(0), centroids=eps)
    order = eps * share
    return AttributeBudget(attribute=attribute, total=eps, order=order, centroids=eps - order)


def histogram_noise(epsilon_order: Fraction | float, size: int) -> LaplaceNoise:
    """The Laplace noise of a histogram of ``size`` categories: sensitivity 2, budget ε_order (public).

    Raises
    ------
    InvalidParameterError
        If ε_order ≤ 0 or size < 1.
    """
    if epsilon_order <= 0:
        raise InvalidParameterError(f"the category histogram's epsilon must be > 0, not {epsilon_order}")
    return LaplaceNoise.calibrate(sensitivity=HISTOGRAM_SENSITIVITY, epsilon=epsilon_order, size=size)


def histogram_scale(epsilon_order: Fraction | float, size: int) -> float:
    """Laplace scale of a histogram of ``size`` categories: ``2 / ε_order`` checked by OpenDP's map.

    L1 sensitivity 2 under substitution; the scale is :func:`fragrelease.rng.laplace.calibrated_laplace_scale`
    ``(2, ε_order, size)``, the smallest float whose OpenDP privacy map (grid 2**-40, ``size``
    values) at ``d_in = 2`` is ≤ ε_order: about ``(2 + size·2**-40) / ε_order`` (docs/privacy.md).

    Raises
    ------
    InvalidParameterError
        If ε_order ≤ 0 or size < 1.
    """
    return histogram_noise(epsilon_order, size).scale


def noisy_category_counts(counts: Mapping[str, int], categories: Sequence[str], epsilon_order: Fraction | float,
                          noise: NoiseSource, *, attribute: str = "a") -> np.ndarray:
    """Laplace histogram of the category counts, shape (|dom|,) in declared order.

    ``counts`` maps category → count in the owner's fragment (categories absent from it count 0);
    a key that is not a declared category is refused. One draw per category, scale
    ``2 / ε_order`` (:func:`histogram_scale`); the noise source gets ``attribute + "#order"`` and the
    category index as its identifiers (test sources derive their noise from them).

    Raises
    ------
    InvalidParameterError
        An undeclared category, a negative count, or ε_order ≤ 0.
    """
    cats = list(categories)
    unknown = sorted(set(counts) - set(cats))
    if unknown:
        raise InvalidParameterError(f"value {unknown[0]!r} of {attribute!r} is not a declared category")
    exact = np.array([float(counts.get(c, 0)) for c in cats])
    if np.any(exact < 0):
        raise InvalidParameterError(f"category counts of {attribute!r} must be >= 0, not {exact.min()}")
    m = len(cats)
    return histogram_noise(epsilon_order, m).sample(values=exact, source=noise,
                                                    attributes=np.full(m, f"{attribute}#order", dtype=object),
                                                    clusters=np.arange(m))


def order_by_counts(scores: Sequence[float] | np.ndarray, categories: Sequence[str]) -> tuple[str, ...]:
    """Categories by decreasing score (rank 1 = largest), ties by declared order."""
    cats = list(categories)
    scores = np.asarray(scores, dtype=float)
    if scores.shape != (len(cats),):
        raise InvalidParameterError(f"expected {len(cats)} scores, got shape {scores.shape}")
    return tuple(cats[i] for i in np.lexsort((np.arange(len(cats)), -scores)))


def dp_frequency_order(counts: Mapping[str, int], categories: Sequence[str], epsilon_order: Fraction | float,
                       noise: NoiseSource, *, attribute: str = "a") -> tuple[str, ...]:
    """``dp-frequency``: categories ranked by their Laplace-noised counts (ε_order-DP).

    Returns the categories in rank order (rank 1 first). See :func:`noisy_category_counts`.
    """
    return order_by_counts(noisy_category_counts(counts, categories, epsilon_order, noise, attribute=attribute),
                           categories)


def declared_order(categories: Sequence[str]) -> tuple[str, ...]:
    """``declared``: the schema's order is the rank order (public, no budget)."""
    return tuple(categories)


def ranks_of(order: Sequence[str]) -> dict[str, int]:
    """Category → rank in [1, |dom|] for an order (rank 1 first)."""
    return {c: i + 1 for i, c in enumerate(order)}
