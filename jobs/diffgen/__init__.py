"""DiffGen and DistDiffGen on Spark (docs/specification.md §7).

- :mod:`~fragrelease.jobs.diffgen.runner`: DiffGen releases (marginals, noisy leaf counts, synthetic
  microdata) and the two-party release's Delta tables;
- :mod:`~fragrelease.jobs.diffgen.processes`: the hospital and the insurer as two OS processes;
- :mod:`~fragrelease.jobs.diffgen.party`: a party whose records live in its own SparkSession.
"""
