"""fragrelease: individual-DP (iDP-IR) releases over fragmented data.

This package holds the Spark-free privacy math (IR microaggregation, sensitivities, budgets,
samplers, metrics and the protocol's plan/manifest objects). The Spark jobs that apply it are in
``fragrelease.jobs`` (repository folder ``jobs/``), the pandas UDFs in ``fragrelease.udfs``
(``udfs/``) and the dataset declarations in ``fragrelease.schemas`` (``schemas/``).
"""

__version__ = "0.2.0"
