"""Declared datasets: Spark StructType plus per-attribute role, kind and public domain, and their taxonomies.

- :mod:`~fragrelease.schemas.base`: the schema model; :mod:`~fragrelease.schemas.adult`,
  :mod:`~fragrelease.schemas.wine`: the built-in declarations;
- :mod:`~fragrelease.schemas.datasets`: loading the built-in (checksummed) data files;
- :mod:`~fragrelease.schemas.taxonomies`: Adult's taxonomies (one loader) and DiffGen's Adult predictors.
"""
