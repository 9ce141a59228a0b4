"""Everything drawn on the executors: the one folder to audit for executor-side randomness.

Every random draw that runs inside a Spark task is written here, as a pandas UDF or as a function
a task calls: the release's centroid noise (:mod:`fragrelease.udfs.noise`), the random keys of
shuffles, unlinking and surrogate ids and Spark's seeded samples (:mod:`fragrelease.udfs.keys`),
DiffGen's leaf-count noise and Gumbel variables (:mod:`fragrelease.udfs.noise`) and the synthetic
rows (:mod:`fragrelease.udfs.synthesis`). The draws themselves come from :mod:`fragrelease.rng`.
The rule and its test: docs/architecture.md, "Randomness"; tests/test_architecture.py.
"""
