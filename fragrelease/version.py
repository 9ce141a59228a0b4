"""The one version number of fragrelease (setup.py reads it from here; provenance records it).

A module of its own, so that the Spark side stamps releases with ``fragrelease.version.__version__``
without importing the package facade (:mod:`fragrelease`, whose lazy ``__getattr__`` imports
:mod:`fragrelease.jobs.api`): no import path leads from a job back through the facade.
"""

__version__ = "0.20.0"
