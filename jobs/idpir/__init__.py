"""The IR release kinds on Spark (``linkage: linked`` and ``unlinked``; docs/specification.md §1-§4).

What an owner computes on its fragment and what the aggregator does with the protected fragments, for
the two IR kinds; the protocol around them (contexts, layout, plan, manifests, ledgers, the owner and
aggregator drivers, the local driver) is :mod:`fragrelease.jobs.protocol`, which reaches this package
only through the registry (:mod:`fragrelease.kinds`).

- :mod:`~fragrelease.jobs.idpir.kind`: the kinds' Spark half (``LINKED_JOBS``, ``UNLINKED_JOBS``), the
  :class:`~fragrelease.jobs.protocol.kind.KindJobs` the protocol calls;
- :mod:`~fragrelease.jobs.idpir.protect`: IR microaggregation and noise on a fragment (its numbered steps), with
  :mod:`~fragrelease.jobs.idpir.bucket_sort`, :mod:`~fragrelease.jobs.idpir.cluster_noise` and
  :mod:`~fragrelease.jobs.idpir.assembly`;
- :mod:`~fragrelease.jobs.idpir.ranking`: global ranks without moving all rows to one partition;
- :mod:`~fragrelease.jobs.idpir.unlink`: every column in its own random order (``linkage: unlinked``);
- :mod:`~fragrelease.jobs.idpir.owner_preview`: an owner's private accuracy preview on its own fragment;
- :mod:`~fragrelease.jobs.idpir.risk_check`: the owner's advisory risk check of its released rows;
- :mod:`~fragrelease.jobs.idpir.evaluate`: MeanSSE on Spark.

These modules import nothing from the command line (``fragrelease.jobs.cli``).
"""
