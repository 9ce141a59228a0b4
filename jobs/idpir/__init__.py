"""iDP-IR releases on Spark: the parties of the fragmented-release protocol (docs/specification.md §1-§4).

- :mod:`~fragrelease.jobs.protocol.layout`: where each party reads and writes under ``work_dir``;
- :mod:`~fragrelease.jobs.protocol.context`: each party's context (what an owner or the aggregator owns), built
  once per party step and taken by the party functions;
- :mod:`~fragrelease.jobs.idpir.protect`: IR microaggregation and noise on a fragment (its numbered steps), with
  :mod:`~fragrelease.jobs.idpir.bucket_sort`, :mod:`~fragrelease.jobs.idpir.cluster_noise` and
  :mod:`~fragrelease.jobs.idpir.assembly`;
- :mod:`~fragrelease.jobs.protocol.fragment`, :mod:`~fragrelease.jobs.protocol.digests`: fragment checks and digests;
- :mod:`~fragrelease.jobs.idpir.ranking`: global ranks without moving all rows to one partition;
- :mod:`~fragrelease.jobs.protocol.owner`: a data owner's steps (metadata, protect);
- :mod:`~fragrelease.jobs.protocol.aggregator`: the aggregator's steps (plan, verify, combine, release);
- :mod:`~fragrelease.jobs.protocol.release`: the local driver that plays every party (below the Python API: it
  imports neither :mod:`fragrelease.jobs.api` nor :mod:`fragrelease.jobs.release_api`);
- :mod:`~fragrelease.jobs.protocol.simulate`: simulated owners (one table cut into fragments);
- :mod:`~fragrelease.jobs.protocol.ledger`: each owner's privacy-budget ledger;
- :mod:`~fragrelease.jobs.idpir.evaluate`, :mod:`~fragrelease.jobs.idpir.report_sections`: MeanSSE on Spark and the IR
  sections of the utility reports (:mod:`~fragrelease.jobs.protocol.report` writes the pages).

The party modules import nothing from the command line (``fragrelease.jobs.cli``).
"""
