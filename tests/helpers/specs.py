"""Test-only: build an owner's :class:`fragrelease.idpir.spec.ProtectionSpec` from loose parameters.

Production code gets its spec from the plan (:func:`fragrelease.protocol.plan_check.verified_spec`) or
from :func:`fragrelease.jobs.api.protect`; the Spark equality tests protect one fragment directly,
so they build the spec here through the same :func:`fragrelease.idpir.spec.protection_spec`.
"""
from __future__ import annotations

from fractions import Fraction

from fragrelease.idpir.category_order import DEFAULT_CATEGORY_ORDER, DEFAULT_ORDER_SHARE
from fragrelease.idpir.postprocess import DEFAULT_POSTPROCESS
from fragrelease.idpir.spec import ProtectionSpec, protection_spec
from fragrelease.protocol.options import ReleaseOptions


def spec_for(df, attrs, *, k: int, epsilon_per_attribute, mechanism: str, n_records: int | None = None,
             category_order: str = DEFAULT_CATEGORY_ORDER, category_order_share=DEFAULT_ORDER_SHARE,
             postprocess: str = DEFAULT_POSTPROCESS, owner: str = "test-owner", dataset: str = "test") -> ProtectionSpec:
    """The spec of one owner protecting ``attrs`` of ``df`` with ε_attr = ``epsilon_per_attribute`` each."""
    attrs = list(attrs)
    return protection_spec(owner=owner, dataset=dataset, plan_id="test", attributes=[(a.name, a.categorical) for a in attrs],
                           mechanism=mechanism, k=k, epsilon=Fraction(epsilon_per_attribute) * len(attrs),
                           options=ReleaseOptions.of(category_order=category_order, category_order_share=category_order_share,
                                                     postprocess=postprocess),
                           n_records=n_records if n_records is not None else df.count())


def protect_with(df, attrs, *, id_column: str, noise=None, **params):
    """:func:`fragrelease.jobs.idpir.protect.protect_fragment` under :func:`spec_for` ``(df, attrs, **params)``."""
    from fragrelease.jobs.idpir.protect import protect_fragment

    return protect_fragment(df, list(attrs), spec_for(df, attrs, **params), id_column=id_column, noise=noise)
