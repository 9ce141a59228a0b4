"""The marginal-synthesis release kind on Spark (``linkage: synthetic``; docs/specification.md §10).

- :mod:`~fragrelease.jobs.synthesis.kind`: the kind's Spark half (``SYNTHETIC_JOBS``), the
  :class:`~fragrelease.jobs.protocol.kind.KindJobs` the registry (:mod:`fragrelease.kinds`) names and the
  protocol calls (three rounds per owner);
- :mod:`~fragrelease.jobs.synthesis.counts`: an owner's exact marginal counts;
- :mod:`~fragrelease.jobs.synthesis.owner`: an owner's three rounds (a key-agreement key; masked 1-way and
  pair counts plus noise shares; masked clique counts plus shares), drawn once on its driver;
- :mod:`~fragrelease.jobs.synthesis.messages`: every party's reading of the owners' signed messages: the
  participants, the decoded sums and the structure;
- :mod:`~fragrelease.jobs.synthesis.aggregator`: the aggregator's verification of every round, the
  decoding, the model's fit and the executors' synthetic rows;
- :mod:`~fragrelease.jobs.synthesis.rounds`: what a party says when an owner's round is not there yet;
- :mod:`~fragrelease.jobs.synthesis.report_sections`: the kind's own sections of the public report.

The math is :mod:`fragrelease.synthesis`; the protocol reaches this package only through the registry, and
this package imports nothing of the IR kinds.
"""
