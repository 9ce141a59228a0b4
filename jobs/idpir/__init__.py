"""iDP-IR releases on Spark: the parties of the fragmented-release protocol (docs/specification.md §1-§4).

- :mod:`~fragrelease.jobs.idpir.layout`: where each party reads and writes under ``work_dir``;
- :mod:`~fragrelease.jobs.idpir.context`: each party's context (what an owner or the aggregator owns), built
  once per party step and taken by the party functions;
- :mod:`~fragrelease.jobs.idpir.protect`: IR microaggregation and noise on a fragment (its numbered steps), with
  :mod:`~fragrelease.jobs.idpir.bucket_sort`, :mod:`~fragrelease.jobs.idpir.cluster_noise` and
  :mod:`~fragrelease.jobs.idpir.assembly`;
- :mod:`~fragrelease.jobs.idpir.fragment`, :mod:`~fragrelease.jobs.idpir.digests`: fragment checks and digests;
- :mod:`~fragrelease.jobs.idpir.ranking`: global ranks without moving all rows to one partition;
- :mod:`~fragrelease.jobs.idpir.owner`: a data owner's steps (metadata, protect);
- :mod:`~fragrelease.jobs.idpir.aggregator`: the aggregator's steps (plan, verify, combine, release);
- :mod:`~fragrelease.jobs.idpir.release`: the local driver that plays every party (below the Python API: it
  imports neither :mod:`fragrelease.jobs.api` nor :mod:`fragrelease.jobs.release_api`);
- :mod:`~fragrelease.jobs.idpir.simulate`: simulated owners (one table cut into fragments);
- :mod:`~fragrelease.jobs.idpir.ledger`: each owner's privacy-budget ledger;
- :mod:`~fragrelease.jobs.idpir.evaluate`, :mod:`~fragrelease.jobs.idpir.report`: MeanSSE on Spark and the utility reports.

The party modules import nothing from the command line (``fragrelease.jobs.cli``).
"""
