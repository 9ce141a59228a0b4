"""The IR release kinds on Spark (``linkage: linked`` and ``unlinked``; docs/specification.md §1-§4).

A plug-in of the protocol (:mod:`fragrelease.jobs.protocol`): :mod:`~fragrelease.jobs.idpir.kind` is what the
registry (:mod:`fragrelease.kinds`) names, and calls

- :mod:`~fragrelease.jobs.idpir.owner_round`: an owner's one round, protect its fragment once under the plan;
- :mod:`~fragrelease.jobs.idpir.protect`: IR microaggregation and noise on a fragment (its numbered steps), with
  :mod:`~fragrelease.jobs.idpir.bucket_sort`, :mod:`~fragrelease.jobs.idpir.cluster_noise`,
  :mod:`~fragrelease.jobs.idpir.assembly` and :mod:`~fragrelease.jobs.idpir.unlink`;
- :mod:`~fragrelease.jobs.idpir.risk_check`: the owner's advisory measured risk (``risk_check``);
- :mod:`~fragrelease.jobs.idpir.combine`: the aggregator's verification and combination of the fragments;
- :mod:`~fragrelease.jobs.idpir.evaluate`: MeanSSE on Spark (the single-machine driver's score);
- :mod:`~fragrelease.jobs.idpir.owner_preview`: an owner's accuracy preview.

The kind's modules import the protocol's, never the command line (``fragrelease.jobs.cli``) nor another kind.
"""
