"""Marginal synthesis over horizontal fragments: a whole-table ε-DP release that keeps attribute dependence.

Spark-free (numpy, and ``mbi`` for the aggregator's model). :mod:`fragrelease.synthesis.domain` codes the
attributes on public bins; :mod:`fragrelease.synthesis.mechanism` holds the owners' measurements, the
aggregator's tree, model and sampler. Source: docs/specification.md §10.
"""
