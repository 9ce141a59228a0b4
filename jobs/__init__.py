"""Spark jobs of fragrelease: the IR step, data owner and aggregator jobs, local driver, Delta I/O, CLI."""
