"""Declared datasets: Spark StructType plus per-attribute role, kind and public domain."""
