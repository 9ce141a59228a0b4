"""Small DataFrame helpers shared by the Spark jobs."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # no pyspark import at run time: callers that import Spark lazily may use this
    from pyspark.sql import DataFrame, Row


def aggregate_row(aggregated: DataFrame) -> Row:
    """The one row of a global aggregate (``df.agg(...)``, ``df.select(F.max(...))``).

    A global aggregate always has exactly one row, also over an empty input (its counts are 0, its
    other values null); this gives it typed as a :class:`~pyspark.sql.Row`, not ``Row | None``.

    Raises
    ------
    RuntimeError
        The frame has no row: it was not a global aggregate (a programming error, not bad input).
    """
    row = aggregated.first()
    if row is None:
        raise RuntimeError("a global aggregate returned no row")
    return row
