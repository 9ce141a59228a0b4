"""Independent publications of overlapping people, Spark-free (docs/specification.md §5 and §8).

Source: Baig et al., "Cloning for privacy protection in multiple independent data publications"
(CIKM 2011). The Spark jobs are in ``fragrelease.jobs.publications``.

- :mod:`~fragrelease.publications.mondrian`: Mondrian partitioning with k-anonymity and distinct ℓ-diversity;
- :mod:`~fragrelease.publications.cloning`: δ-cloning by micro-statistics;
- :mod:`~fragrelease.publications.composition`: the composition attack and its audit;
- COUNT-query workloads over anonymized releases are evaluation-only: :mod:`fragrelease.experiments.workload`.
"""
