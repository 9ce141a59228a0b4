"""The fragmented-release protocol, Spark-free, shared by every release kind (docs/specification.md §3).

The configuration (:mod:`~fragrelease.protocol.config`, :mod:`~fragrelease.protocol.options`), the
fragmentations and the linkages' names (:mod:`~fragrelease.protocol.fragmentation`), the owners' metadata,
the plan and the manifests (:mod:`~fragrelease.protocol.messages`), an owner's check of the plan
(:mod:`~fragrelease.protocol.plan_check`), the membership exposure every kind states
(:mod:`~fragrelease.protocol.membership`) and the first difference of two public values
(:mod:`~fragrelease.protocol.difference`). What a release kind computes is in the kind's own package; the
protocol asks it through the kind's Spark-free interface (:class:`~fragrelease.protocol.kind.ReleaseKind` in
:mod:`~fragrelease.protocol.kind`: its configuration checks, guarantee, provenance terms, checks before
Spark and what the command line shows of it), found by wire name in the registry (:mod:`fragrelease.kinds`).
These modules import no kind and never branch on one (docs/architecture.md, "Release kinds").
"""
