"""fragrelease: privacy-preserving releases over fragmented data; this package is the Spark-free math.

It imports nothing from the Spark side (``tests/test_architecture.py`` checks it). Shared core:
:mod:`~fragrelease.errors`, :mod:`~fragrelease.rng` (the one source of randomness),
:mod:`~fragrelease.budget` (exact ε arithmetic), :mod:`~fragrelease.validation` and
:mod:`~fragrelease.taxonomy` (the generalization hierarchy). One subpackage per system:

- :mod:`fragrelease.idpir`: iDP-IR microaggregation releases over fragmented data;
- :mod:`fragrelease.publications`: Mondrian, cloning and the composition-attack audit;
- :mod:`fragrelease.tiers`: tiered releases with increasing privacy;
- :mod:`fragrelease.diffgen`: DiffGen and two-party DistDiffGen.

The Spark jobs that apply it are in ``fragrelease.jobs`` (repository folder ``jobs/``), the pandas
UDFs in ``fragrelease.udfs`` (``udfs/``), the dataset declarations in ``fragrelease.schemas``
(``schemas/``) and the paper reproductions in ``fragrelease.experiments`` (``experiments/``).
"""

__version__ = "0.4.0"
