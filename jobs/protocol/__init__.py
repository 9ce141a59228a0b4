"""The fragmented-release protocol on Spark, shared by every release kind (docs/specification.md §3; docs/architecture.md).

What every kind's release goes through, whatever its owners send: each party's context and folders
(:mod:`~fragrelease.jobs.protocol.context`, :mod:`~fragrelease.jobs.protocol.layout`,
:mod:`~fragrelease.jobs.protocol.workspace`), the plan and its pin, the owners' signed manifests and
digests (:mod:`~fragrelease.jobs.protocol.signatures`, :mod:`~fragrelease.jobs.protocol.digests`), the
owners' budget ledgers (:mod:`~fragrelease.jobs.protocol.ledger` and its chain, log and anchor), draw once
(:mod:`~fragrelease.jobs.protocol.draws`, :mod:`~fragrelease.jobs.protocol.publish`), resume
(:mod:`~fragrelease.jobs.protocol.resume`), the checks before Spark (:mod:`~fragrelease.jobs.protocol.preflight`,
:mod:`~fragrelease.jobs.protocol.placement`), simulated owners (:mod:`~fragrelease.jobs.protocol.simulate`,
:mod:`~fragrelease.jobs.protocol.ranking`), pseudonyms and the random row order
(:mod:`~fragrelease.jobs.protocol.shuffle`), the owner and aggregator drivers, the local driver that plays
every party (:mod:`~fragrelease.jobs.protocol.release`), the reports' pages
(:mod:`~fragrelease.jobs.protocol.report`, with its statistics and HTML) and the one commit of a release.
What a kind does in its rounds is the kind's: the protocol asks it through
:class:`~fragrelease.jobs.protocol.kind.KindJobs` (:mod:`~fragrelease.jobs.protocol.kind`), found by wire
name in the registry (:mod:`fragrelease.kinds`); these modules import no kind, never branch on one, and
import nothing from the command line (``fragrelease.jobs.cli``).
"""
