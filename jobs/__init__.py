"""The Spark side of fragrelease (repository folder ``jobs/``): jobs that apply the Spark-free math.

- :mod:`~fragrelease.jobs.cli`: the ``fragrelease`` command line and the party entry points;
- :mod:`~fragrelease.jobs.idpir`: iDP-IR parties (owner, aggregator, local driver, protect, ledger, reports);
- :mod:`~fragrelease.jobs.publications`, :mod:`~fragrelease.jobs.tiers`, :mod:`~fragrelease.jobs.diffgen`:
  the other three systems' Spark jobs (DiffGen's party processes included);
- :mod:`~fragrelease.jobs.session`, :mod:`~fragrelease.jobs.storage`: the SparkSession and Delta I/O.
"""
