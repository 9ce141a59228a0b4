"""The accuracy tables of the reports: the public report's noise table (public parameters only) and the owner
report's actual error per attribute (mean shift, sd ratio, MeanSSE contribution)."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from fragrelease.idpir.metrics import mean_sse as numpy_mean_sse
from fragrelease.jobs.idpir.evaluate import mean_sse, mean_sse_by_attribute
from fragrelease.jobs.idpir.report_sections import report_sections
from fragrelease.jobs.protocol.report import owner_report, public_report
from fragrelease.schemas.base import Attribute

ATTRS = [
    Attribute(name="age", type="double", role="quasi-identifier", kind="numeric", domain=(0, 100)),
    Attribute(name="sex", type="string", role="quasi-identifier", kind="categorical", categories=("f", "m", "x")),
]


def _tables(n: int = 400):
    rng = np.random.default_rng(5)
    orig = pd.DataFrame({"rid": np.arange(n), "age": np.round(rng.uniform(20, 80, n), 1),
                         "sex": rng.choice(["f", "m"], n)})
    prot = orig.copy()
    prot["age"] = np.clip(orig["age"] * 0.5 + 30.0, 0, 100)  # mean shifts, sd halves
    prot.loc[: n // 4 - 1, "sex"] = "x"  # a quarter of the labels changed
    return orig, prot


def test_contributions_add_up_to_mean_sse_and_match_numpy(spark):
    orig, prot = _tables()
    o, p = spark.createDataFrame(orig), spark.createDataFrame(prot)
    parts = mean_sse_by_attribute(o, p, ATTRS, "rid")
    want = numpy_mean_sse({a.name: orig[a.name].to_numpy() for a in ATTRS},
                          {a.name: prot[a.name].to_numpy() for a in ATTRS}, {"age": False, "sex": True})
    assert sum(parts.values()) == pytest.approx(want, rel=1e-12)
    assert mean_sse(o, p, ATTRS, "rid") == pytest.approx(want, rel=1e-12)
    assert parts["sex"] == pytest.approx(0.25 * 4 / 2, rel=1e-12)  # 1/4 changed, (1/0.5)², l = 2


def test_owner_report_shows_the_error_of_each_attribute(spark, tmp_path):
    orig, prot = _tables()
    path = owner_report(spark.createDataFrame(orig), spark.createDataFrame(prot), ATTRS, "rid",
                        {"owner": "a", "mechanism": "idp-ir", "k": 5}, str(tmp_path / "r.html"))
    text = open(path, encoding="utf-8").read()
    assert "Error per attribute (this fragment)" in text
    shift = float(prot["age"].mean() - orig["age"].mean())
    ratio = float(prot["age"].std() / orig["age"].std())
    row = re.search(r"<tr><td>age</td><td class=\"text\">numeric</td><td>([^<]+)</td><td>([^<]+)</td><td>([^<]+)</td>", text)
    assert row is not None
    assert float(row.group(1)) == pytest.approx(shift, rel=1e-3)
    assert float(row.group(3)) == pytest.approx(ratio, rel=1e-3) and float(row.group(3)) == pytest.approx(0.5, 1e-3)
    assert "25.0% labels changed" in text
    assert "0 = every released value equals the original" in text


def test_public_report_shows_the_noise_table_from_public_parameters_only(spark, tmp_path):
    _, prot = _tables()
    prov = {"dataset": "d", "fragmentation": "horizontal", "mechanism": "dp-ir", "k": 5, "epsilon": "1",
            "category_order": "declared", "category_order_share": "1/10",
            "attributes": [a.public_spec() for a in ATTRS],
            "owners": [{"name": o, "n_records": 200, "epsilon": "1", "epsilon_per_attribute": "1/2",
                        "attributes": ["age", "sex"],
                        "budgets": [{"attribute": x, "epsilon": "1/2", "epsilon_order": "0",
                                     "epsilon_centroids": "1/2"} for x in ("age", "sex")]} for o in ("a", "b")]}
    # the IR kind's sections, as the aggregator passes them (this provenance names no linkage)
    path = public_report(spark.createDataFrame(prot[["age", "sex"]]), ATTRS, prov, str(tmp_path / "p.html"),
                         extra_sections=report_sections(prov, ATTRS))
    text = open(path, encoding="utf-8").read()
    assert "Noise per attribute" in text and "exact (DP-IR)" in text
    assert "original" not in text.lower() and "MeanSSE" not in text  # nothing computed from the original data
    # age: Δ = 100/5, ε = 1/2 -> b = 40 (+ the 2^-40 grid allowance), ±119.8, 240 % of the domain
    # then the expected released error after the projection (data spread over [0, 100]) against the mean's 28.9
    row = re.search(r"<tr><td>age</td><td class=\"text\">num</td><td>1/2</td><td>40</td><td>119.8</td><td>240%</td><td></td>"
                    r"<td>([0-9.]+)</td><td>28.9</td><td class=\"text\">(WARN|ok)</td></tr>", text)
    assert row is not None and 0 < float(row.group(1)) < 40
    assert row.group(2) == ("WARN" if float(row.group(1)) >= 0.5 * 28.87 else "ok")
