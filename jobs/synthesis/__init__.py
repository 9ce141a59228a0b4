"""The marginal-synthesis release on Spark (docs/specification.md §10): owners' counts, the executors' rows."""
