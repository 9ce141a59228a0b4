"""The aggregator's vertical join equals a plain pandas merge; id digests tell id sets apart."""
import numpy as np
import pandas as pd
from chispa import assert_df_equality

import fragrelease.jobs.idpir.combine as combine


def _fragments(spark, ids_per_fragment):
    rng = np.random.default_rng(11)
    frames, pdfs = [], []
    for i, ids in enumerate(ids_per_fragment):
        pdf = pd.DataFrame({"record_id": ids, f"num{i}": rng.normal(size=len(ids)),
                            f"cat{i}": rng.choice(["a", "b", "c"], size=len(ids))}).sample(frac=1, random_state=i)
        pdfs.append(pdf)
        frames.append(spark.createDataFrame(pdf, f"record_id long, num{i} double, cat{i} string").repartition(3))
    return frames, pdfs


def test_join_vertical_equals_a_pandas_merge(spark):
    ids = np.random.default_rng(3).choice(10**12, size=1000, replace=False)
    frames, pdfs = _fragments(spark, [ids, ids, ids])
    got = combine.join_vertical(frames, "record_id")
    expect = pdfs[0].merge(pdfs[1], on="record_id").merge(pdfs[2], on="record_id")
    schema = "record_id long, " + ", ".join(f"num{i} double, cat{i} string" for i in range(3))
    # same column names, order and types, the same rows (exact values), in any order
    assert_df_equality(got, spark.createDataFrame(expect, schema), ignore_row_order=True)


def test_fragment_digests_tell_id_sets_apart(spark):
    from fragrelease.jobs.protocol.digests import content_digest, fragment_digests, id_digest

    frames, _ = _fragments(spark, [np.arange(1000), np.arange(1000), np.where(np.arange(1000) == 417, 5000, np.arange(1000))])
    digests = [fragment_digests(f, "record_id") for f in frames]
    assert digests[0][1] == digests[1][1] != digests[2][1]
    assert digests[0][0] == content_digest(frames[0]) and digests[0][1] == id_digest(frames[0], "record_id")
