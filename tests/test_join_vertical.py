"""The aggregator's vertical join: array groups lined up by id equal a plain pandas merge."""
import numpy as np
import pandas as pd
import pytest

import fragrelease.jobs.aggregator as aggregator


@pytest.fixture
def small_groups(monkeypatch):
    monkeypatch.setattr(aggregator, "_ROWS_PER_JOIN_GROUP", 150)  # 7 groups for 1,000 ids


def _fragments(spark, ids_per_fragment):
    rng = np.random.default_rng(11)
    frames, pdfs = [], []
    for i, ids in enumerate(ids_per_fragment):
        pdf = pd.DataFrame({"record_id": ids, f"num{i}": rng.normal(size=len(ids)),
                            f"cat{i}": rng.choice(["a", "b", "c"], size=len(ids))}).sample(frac=1, random_state=i)
        pdfs.append(pdf)
        frames.append(spark.createDataFrame(pdf, f"record_id long, num{i} double, cat{i} string").repartition(3))
    return frames, pdfs


def test_join_vertical_equals_a_pandas_merge(spark, small_groups):
    ids = np.random.default_rng(3).choice(10**12, size=1000, replace=False)
    frames, pdfs = _fragments(spark, [ids, ids, ids])
    got = aggregator.join_vertical(frames, "record_id", 1000).toPandas()
    expect = pdfs[0].merge(pdfs[1], on="record_id").merge(pdfs[2], on="record_id")
    assert got.columns.tolist() == expect.columns.tolist()
    pd.testing.assert_frame_equal(got.sort_values("record_id").reset_index(drop=True),
                                  expect.sort_values("record_id").reset_index(drop=True))


def test_join_vertical_refuses_fragments_with_different_ids(spark, small_groups):
    ids = np.arange(1000)
    frames, _ = _fragments(spark, [ids, np.where(ids == 417, 5000, ids)])
    with pytest.raises(Exception, match="record id 417 is not held by every vertical owner"):
        aggregator.join_vertical(frames, "record_id", 1000).collect()
