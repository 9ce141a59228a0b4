"""The Spark MeanSSE (records matched by id) equals the numpy definition on the same records."""
import numpy as np
import pandas as pd
import pytest

from fragrelease.errors import InvalidParameterError
from fragrelease.idpir.metrics import mean_sse as numpy_mean_sse
from fragrelease.jobs.idpir.evaluate import mean_sse
from fragrelease.schemas.base import Attribute

ATTRS = [
    Attribute(name="age", type="double", role="quasi-identifier", kind="numeric", domain=(0.0, 100.0)),
    Attribute(name="hours", type="double", role="quasi-identifier", kind="numeric", domain=(0.0, 100.0)),
    Attribute(name="sex", type="string", role="quasi-identifier", kind="categorical", categories=("F", "M")),
]


def _tables(seed: int = 3, n: int = 200):
    rng = np.random.default_rng(seed)
    orig = pd.DataFrame({"rid": np.arange(n), "age": rng.uniform(0, 100, n), "hours": rng.normal(40, 10, n).clip(0, 100),
                         "sex": rng.choice(["F", "M"], n)})
    prot = orig.copy()
    prot["age"] = (prot["age"] + rng.normal(0, 5, n)).clip(0, 100)
    prot["hours"] = prot["hours"].round(-1)
    flip = rng.random(n) < 0.2
    prot.loc[flip, "sex"] = np.where(prot.loc[flip, "sex"] == "F", "M", "F")
    return orig, prot


@pytest.mark.parametrize("convention", ["authors", "paper"])
def test_spark_mean_sse_equals_the_numpy_definition(spark, convention):
    orig, prot = _tables()
    shuffled = prot.sample(frac=1.0, random_state=1)  # matched by id, not by position
    got = mean_sse(spark.createDataFrame(orig), spark.createDataFrame(shuffled), ATTRS, "rid", convention)
    cat = {a.name: a.categorical for a in ATTRS}
    want = numpy_mean_sse({a.name: orig[a.name].to_numpy() for a in ATTRS},
                          {a.name: prot[a.name].to_numpy() for a in ATTRS}, cat, convention)
    assert got == pytest.approx(want, rel=1e-12)


def test_spark_mean_sse_refuses_unmatched_ids_and_zero_spread(spark):
    orig, prot = _tables(n=50)
    with pytest.raises(InvalidParameterError, match="3 records could not be matched"):
        mean_sse(spark.createDataFrame(orig), spark.createDataFrame(prot.iloc[3:]), ATTRS, "rid")
    flat = orig.assign(age=7.0)
    with pytest.raises(InvalidParameterError, match="'age' has zero spread"):
        mean_sse(spark.createDataFrame(flat), spark.createDataFrame(prot), ATTRS, "rid")
