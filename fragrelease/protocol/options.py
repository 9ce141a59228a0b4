"""The release options of an iDP-IR release: one typed model, declared once, carried everywhere.

A release option is a public choice that changes how every owner protects its fragment or how the
aggregator combines them: the categorical rank order and its budget share, the linkage of the
released rows and the post-processing of the noisy centroids. Each is a field of
:class:`ReleaseOptions`, and that one declaration is what every layer reads:

- the release configuration (:class:`fragrelease.protocol.config.ReleaseConfig`) inherits the fields,
  so YAML keys, defaults and validation come from here;
- the plan and the manifest (:class:`fragrelease.protocol.messages.Plan`, ``Manifest``) inherit them,
  so they travel on the wire under the same names (flat, as before this module existed);
- the owner's check of the plan (:func:`fragrelease.protocol.plan_check.check_plan_for_owner`) and the
  aggregator's check of each manifest (:func:`fragrelease.protocol.messages.check_manifest`) compare
  every field of :data:`OPTION_NAMES`, whatever it is;
- an owner's frozen :class:`~fragrelease.idpir.spec.ProtectionSpec` holds the model itself
  (``spec.options``), and the release's provenance and summary list :meth:`ReleaseOptions.wire`.

A new option is therefore one field here, the code that acts on it (which reads
``spec.options.<name>`` or ``plan.<name>``), and, if wanted, its command-line flag.

Every field is public: declared by the configuration, never derived from the data
(docs/specification.md §3, "Only public parameters travel").
"""
from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fragrelease.errors import InvalidParameterError
from fragrelease.idpir.category_order import DEFAULT_CATEGORY_ORDER, DEFAULT_ORDER_SHARE, Share
from fragrelease.idpir.postprocess import DEFAULT_POSTPROCESS
from fragrelease.protocol.fragmentation import LinkageName
from fragrelease.validation import format_validation_error


class ReleaseOptions(BaseModel):
    """The options every owner and the aggregator of one release must agree on (frozen, exact).

    Fields (their wire and YAML names)
    ----------------------------------
    category_order : ``"dp-frequency"`` (default: a Laplace histogram of each categorical attribute
        fixes its rank order, bought with ``category_order_share`` of the attribute's ε) or
        ``"declared"`` (the schema's category order, no budget). docs/specification.md §1.
    category_order_share : the histogram's share of a categorical attribute's ε, an exact fraction
        in (0, 1); default 1/10. Written as exact text (``"1/10"``) on the wire.
    linkage : ``"linked"`` (default: the paper's rows, one per record), ``"unlinked"`` (every
        column shuffled on its own; an ε bound on the whole table) or ``"synthetic"`` (marginal
        synthesis over horizontal fragments: rows drawn from a graphical model fitted to the owners'
        noisy marginals; the whole table is ε-DP and keeps the dependence between attributes;
        docs/specification.md §10). docs/privacy.md.
    synthesis_target : ``linkage: synthetic`` only: the attribute a user will predict (the label); the
        owners measure its 2-way marginal with every other attribute. Default: none.
    synthesis_bins : ``linkage: synthetic`` only: equal-width bins of each numeric attribute's declared
        domain (whole-number edges for integer attributes); default 10.
    synthesis_collusion : ``linkage: synthetic`` only: t, how many owners may collude with the aggregator
        while every record keeps its ε (0 ≤ t < m); default none: ⌊m/3⌋ (m − 1 for two owners, 0 for
        one). The noise variance grows as m/(m − t); t = m − 1 is every owner adding a whole noise.
        docs/privacy.md, "Synthetic releases".
    postprocess : ``"isotonic"`` (default: consistency post-processing of the noisy centroids) or
        ``"none"`` (the paper's output). docs/specification.md §9.

    Raises
    ------
    pydantic.ValidationError
        (on construction) a value outside its field's set or range; :meth:`of` raises
        :class:`~fragrelease.errors.InvalidParameterError` instead.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: rank order of categorical attributes (docs/specification.md §1): dp-frequency or declared
    category_order: Literal["dp-frequency", "declared"] = Field(default=DEFAULT_CATEGORY_ORDER)
    #: share of each categorical attribute's ε spent on the dp-frequency histogram, in (0, 1)
    category_order_share: Share = Field(default=DEFAULT_ORDER_SHARE)
    #: linked (the paper's rows), unlinked (every column shuffled on its own) or synthetic (marginal
    #: synthesis, docs/specification.md §10); docs/privacy.md
    linkage: LinkageName = Field(default="linked")
    #: isotonic (default: consistency post-processing of the noisy centroids) or none (the paper)
    postprocess: Literal["isotonic", "none"] = Field(default=DEFAULT_POSTPROCESS)
    #: linkage synthetic: the declared label attribute (its 2-way marginal with every other attribute is measured)
    synthesis_target: Optional[str] = Field(default=None, min_length=1)
    #: linkage synthetic: equal-width bins of each numeric attribute's declared domain
    synthesis_bins: int = Field(default=10, ge=2, le=1000)
    #: linkage synthetic: t, the owners that may collude with the aggregator (None: the default ⌊m/3⌋)
    synthesis_collusion: Optional[int] = Field(default=None, ge=0)

    @classmethod
    def of(cls, **values: Any) -> ReleaseOptions:
        """The options from keyword values (text or typed; ``None`` means the default).

        Raises
        ------
        InvalidParameterError
            An unknown option or a value outside its set or range, one line per problem naming the
            option and the value as written (``linkage: Input should be 'linked' or 'unlinked' (got 'joined')``).
        """
        try:
            return ReleaseOptions.model_validate({k: v for k, v in values.items() if v is not None})
        except ValidationError as exc:
            raise InvalidParameterError(format_validation_error(exc)) from None

    @property
    def options(self) -> ReleaseOptions:
        """Just the release options of this object (a configuration, a plan or a manifest inherits them)."""
        return ReleaseOptions.model_validate({name: getattr(self, name) for name in OPTION_NAMES})

    def option_values(self) -> dict[str, Any]:
        """The options as typed Python values (``category_order_share`` a Fraction), by name, in declaration order."""
        return {name: getattr(self, name) for name in OPTION_NAMES}

    def wire(self) -> dict[str, str]:
        """The options as their wire text, by name, in declaration order (what provenance and summaries show)."""
        return {name: ("none" if value is None else str(value))
                for name, value in self.options.model_dump(mode="json").items()}


#: The names of the release options, in declaration order.
OPTION_NAMES: tuple[str, ...] = tuple(ReleaseOptions.model_fields)

#: Every option at its default.
DEFAULT_OPTIONS = ReleaseOptions()
