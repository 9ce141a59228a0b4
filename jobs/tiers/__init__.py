"""Tiered releases on Spark (docs/specification.md §6): :mod:`~fragrelease.jobs.tiers.runner` computes a
chain of tiers with the math of ``fragrelease.tiers``, node by node.
"""
