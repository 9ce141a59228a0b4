"""An owner's exact marginal counts on Spark, for the marginal-synthesis release (docs/specification.md §10).

The owner's fragment is coded in the JVM (:func:`coded_columns`: a category's index in the declared
order, a number's bin among the public edges), checked (:func:`first_bad_value`), and every marginal
the protocol needs is counted in **one** aggregation (:func:`marginal_counts`): each row emits, per
marginal, the flat index of its cell; one ``groupBy(marginal, cell).count()`` gives every count.
Only aggregates (at most the marginals' cells) reach the driver, never a row. The counts are exact and
private: they go straight into :mod:`fragrelease.synthesis.mechanism`'s noisy measurements and are
never logged or written.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Optional, Sequence

import numpy as np

from fragrelease.errors import InvalidParameterError
from fragrelease.synthesis.domain import SynthesisDomain

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


def _code_column(domain: SynthesisDomain, name: str) -> Column:
    """The code of attribute ``name`` as a Spark int column (null for a null or out-of-domain value)."""
    from pyspark.sql import functions as F

    attr = domain[name]
    col = F.col(f"`{name}`")
    if attr.categorical:
        index = F.create_map(*[x for i, c in enumerate(attr.categories) for x in (F.lit(c), F.lit(i))])
        return index[col.cast("string")].cast("int")
    x = col.cast("double")
    edges = attr.edges
    inside = x.isNotNull() & ~F.isnan(x) & (x >= F.lit(edges[0])) & (x <= F.lit(edges[-1]))
    code = F.lit(0)
    for i, e in enumerate(edges[1:-1], start=1):  # left-open bins: bin 0 is [lo, e1], bin i is (e_i, e_i+1]
        code = F.when(x > F.lit(e), F.lit(i)).otherwise(code)
    return F.when(inside, code).cast("int")


def coded_columns(df: DataFrame, domain: SynthesisDomain) -> DataFrame:
    """``df``'s attributes as codes: columns ``domain.names`` (int, null where the value is bad) plus
    ``_raw_<name>`` holding each value as written (string), for error messages."""
    from pyspark.sql import functions as F

    missing = [n for n in domain.names if n not in df.columns]
    if missing:
        raise InvalidParameterError(f"missing column(s) {missing}")
    return df.select(*[_code_column(domain, n).alias(n) for n in domain.names],
                     *[F.col(f"`{n}`").cast("string").alias(f"_raw_{n}") for n in domain.names])


def first_bad_value(coded: DataFrame, domain: SynthesisDomain, *, source: str) -> Optional[str]:
    """One line naming the source, a column and one bad value as written, or None when every value codes.

    One Spark job: the first row with a null code. Runs before any noise is drawn.
    """
    from pyspark.sql import functions as F

    bad = coded.filter(F.greatest(*[F.col(f"`{n}`").isNull().cast("int") for n in domain.names]) > 0).first()
    if bad is None:
        return None
    for n in domain.names:
        if bad[n] is None:
            attr = domain[n]
            raw = bad[f"_raw_{n}"]
            what = ("is not one of the declared categories" if attr.categorical
                    else f"lies outside the declared domain [{attr.edges[0]:g}, {attr.edges[-1]:g}]")
            return f"{source}: column {n!r}: value {raw!r} {what}" if raw is not None else \
                f"{source}: column {n!r}: a null value (every protected value must be present)"
    return None  # pragma: no cover - the filter found a null code


def marginal_counts(coded: DataFrame, domain: SynthesisDomain, cliques: Sequence[tuple[str, ...]]
                    ) -> Mapping[tuple[str, ...], np.ndarray]:
    """Exact counts of every clique in one aggregation: {clique: float64 array of its attributes' sizes}.

    ``coded``: :func:`coded_columns` with no bad value. The Spark counterpart of
    :func:`fragrelease.synthesis.domain.contingency` (tests check them equal).
    """
    from pyspark.sql import functions as F

    sizes = domain.sizes
    cells = []
    for i, clique in enumerate(cliques):
        flat = F.lit(0)
        for a in clique:
            flat = flat * F.lit(sizes[a]) + F.col(f"`{a}`")
        cells.append(F.struct(F.lit(i).alias("m"), flat.cast("long").alias("cell")))
    rows = (coded.select(F.explode(F.array(*cells)).alias("c"))
            .groupBy("c.m", "c.cell").count().collect())  # aggregates only: at most Σ cells rows
    out = {c: np.zeros(int(np.prod([sizes[a] for a in c]))) for c in cliques}
    for r in rows:
        out[cliques[r["m"]]][int(r["cell"])] = float(r["count"])
    return {c: v.reshape(tuple(sizes[a] for a in c)) for c, v in out.items()}
