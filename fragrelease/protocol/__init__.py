"""The fragmented-release protocol, Spark-free, shared by every release kind (docs/specification.md §3).

The configuration (:mod:`~fragrelease.protocol.config`, :mod:`~fragrelease.protocol.options`), the
fragmentations and linkages (:mod:`~fragrelease.protocol.fragmentation`), the owners' metadata, the plan and
the manifests (:mod:`~fragrelease.protocol.messages`), an owner's check of the plan
(:mod:`~fragrelease.protocol.plan_check`) and the first difference of two public values
(:mod:`~fragrelease.protocol.difference`). What a release kind computes (its terms, checks, guarantee
text and preview) is in the kind's own package, reached through the kind's Spark-free interface
(``fragrelease.protocol.kind``) and the registry (:mod:`fragrelease.kinds`); these modules import no kind
and never branch on one.
"""
