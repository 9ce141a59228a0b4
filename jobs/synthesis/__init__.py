"""The marginal-synthesis release kind on Spark (``linkage: synthetic``; docs/specification.md §10).

- :mod:`~fragrelease.jobs.synthesis.kind`: the kind's Spark half (``SYNTHETIC_JOBS``), the
  :class:`~fragrelease.jobs.protocol.kind.KindJobs` the registry (:mod:`fragrelease.kinds`) names and the
  protocol calls (two rounds per owner);
- :mod:`~fragrelease.jobs.synthesis.counts`: an owner's exact marginal counts;
- :mod:`~fragrelease.jobs.synthesis.owner`: an owner's two rounds (noisy marginals and tree edges, then
  clique marginals), drawn once on its driver;
- :mod:`~fragrelease.jobs.synthesis.aggregator`: the aggregator's verification of both rounds, the model's
  fit and the executors' synthetic rows;
- :mod:`~fragrelease.jobs.synthesis.rounds`: what a party says when an owner's round is not there yet;
- :mod:`~fragrelease.jobs.synthesis.report_sections`: the kind's own sections of the public report.

The math is :mod:`fragrelease.synthesis`; the protocol reaches this package only through the registry, and
this package imports nothing of the IR kinds.
"""
