"""The reports' statistics (one mapInPandas pass + percentile_approx) equal a direct pandas computation."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fragrelease.jobs.protocol.report import BINS, QUANTILES, table_summary
from fragrelease.schemas.base import Attribute

ATTRS = [
    Attribute(name="age", type="double", role="quasi-identifier", kind="numeric", domain=(0, 100)),
    Attribute(name="sex", type="string", role="quasi-identifier", kind="categorical", categories=("f", "m", "x")),
    Attribute(name="bp", type="double", role="quasi-identifier", kind="numeric", domain=(50, 250)),
    Attribute(name="w", type="double", role="quasi-identifier", kind="numeric", domain=(1e6, 1e6 + 10)),
]


def _table(n: int) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    age = np.round(rng.uniform(0, 100, n), 1)
    age[:3] = [0.0, 100.0, 99.99]  # the domain's edges land in the first and last bin
    return pd.DataFrame({
        "age": age,
        "sex": rng.choice(["f", "m"], n),  # "x" never occurs: its count must be 0
        "bp": 120 + 0.8 * age + rng.normal(0, 5, n),
        # large offset, small spread: a naive sum-of-squares formula loses the variance here
        "w": 1e6 + rng.uniform(0, 10, n),
    })


def test_table_summary_equals_pandas_on_many_partitions(spark):
    pdf = _table(3000)
    df = spark.createDataFrame(pdf).repartition(7)
    stats, corr = table_summary(df, ATTRS)
    for name in ("age", "bp", "w"):
        s, x = stats[name], pdf[name].to_numpy()
        assert s["mean"] == pytest.approx(x.mean(), rel=1e-12)
        assert s["std"] == pytest.approx(x.std(ddof=1), rel=1e-9)
        a = next(a for a in ATTRS if a.name == name)
        lo, hi = a.bounds()
        b = np.minimum(np.floor((x - lo) / ((hi - lo) / BINS)), BINS - 1).astype(int)
        assert s["hist"] == np.bincount(b[b >= 0], minlength=BINS).tolist()
        # approximate quantiles: within the sketch's rank error (1e-4 of 3,000 rows: exact here)
        for q, v in zip(QUANTILES, s["quantiles"]):
            first = np.searchsorted(np.sort(x), v, side="left") / x.size  # v's rank range (ties)
            last = np.searchsorted(np.sort(x), v, side="right") / x.size
            assert first - 2 / x.size <= q <= last + 2 / x.size
    assert stats["sex"]["freq"] == {"f": int((pdf.sex == "f").sum()), "m": int((pdf.sex == "m").sum()), "x": 0}
    expected = pdf[["age", "bp", "w"]].corr().to_numpy()
    np.testing.assert_allclose(corr, expected, atol=1e-12)
    assert list(stats) == [a.name for a in ATTRS]


def test_table_summary_of_a_constant_column_and_of_one_row(spark):
    pdf = pd.DataFrame({"age": [30.0, 30.0, 30.0], "sex": ["f", "m", "f"], "bp": [100.0, 110.0, 120.0],
                        "w": [1e6, 1e6 + 1, 1e6 + 2]})
    stats, corr = table_summary(spark.createDataFrame(pdf), ATTRS)
    assert stats["age"]["std"] == 0.0
    assert np.isnan(corr[0, 1]) and corr[0, 0] == 1.0  # no correlation with a constant column
    assert corr[1, 2] == pytest.approx(1.0)
    one, _ = table_summary(spark.createDataFrame(pdf.iloc[:1]), ATTRS)
    assert one["bp"]["std"] is None and one["bp"]["mean"] == 100.0
