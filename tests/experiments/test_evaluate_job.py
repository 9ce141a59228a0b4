"""The evaluation job on Spark: results table, per-run rows and figures (a small grid)."""
import os

import pandas as pd
import pytest

from fragrelease.errors import ConfigError
from fragrelease.experiments.evaluate_grid import ORDER_SETTINGS, order_settings, postprocess_values, run_evaluation
from fragrelease.experiments.evaluation import OrderSetting
from fragrelease.jobs.cli import run_cli


@pytest.mark.slow  # whole releases end to end (minutes with the suite's load); CI runs it
def test_small_grid_writes_results_and_figures(spark, tmp_path):
    out = str(tmp_path / "eval")
    result = run_evaluation(spark, ["wine"], out, scenarios=["centralized", "horizontal", "vertical"],
                            splits=["equal", "by-attributes"], mechanisms=["idp-ir", "dp-ir"],
                            epsilons=["0.1", "1"], ks={"wine": [1, 50, 300]}, runs=3)
    table = pd.read_csv(result["results"])
    # 2 category orders (the release default and the paper's) x 2 postprocess x 4 scenario/split x 2 mechanisms
    # x 2 ε x 3 k
    assert len(table) == 2 * 2 * 4 * 2 * 2 * 3
    assert set(table["postprocess"]) == {"isotonic", "none"}
    assert set(table["runs"]) == {3}
    assert table["sampler"].str.contains("evaluation only").all()
    assert set(table.columns) >= {"dataset", "scenario", "mechanism", "split", "epsilon", "k", "mean_sse", "std",
                                  "category_order", "order_share", "category_tvd", "category_tvd_std"}
    assert set(table["category_order"]) == {o.order for o in ORDER_SETTINGS} >= {"data-frequency"}
    assert table["category_tvd"].isna().all()  # Wine has no categorical attribute
    runs = pd.read_csv(os.path.join(out, "runs.csv.gz"))
    assert len(runs) == len(table) * 3
    assert runs["category_order"].notna().all()
    names = sorted(os.path.basename(f) for f in result["figures"])
    assert names == ["postprocess-ratio.png", "wine-baseline.png", "wine-fragmented-minus-centralized.png",
                     "wine-idp-minus-dp.png", "wine-postprocess-ratio-all.png", "wine-postprocess.png"]
    paired = pd.read_csv(result["postprocess"])
    assert len(paired) == len(table) // 2  # one paired row per (order, scenario, split, mechanism, ε, k)
    assert set(paired["runs"]) == {3}
    # the ratio is the ratio of the two summary means of the same cell
    cell = lambda t: t[(t.scenario == "centralized") & (t.mechanism == "idp-ir") & (t.epsilon == 1.0) & (t.k == 50)
                       & (t.category_order == ORDER_SETTINGS[0].order)]
    means = cell(table).set_index("postprocess")["mean_sse"]
    assert cell(paired)["ratio"].item() == pytest.approx(means["isotonic"] / means["none"], rel=1e-9)
    for f in result["figures"]:
        assert open(f, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    central = table[(table.scenario == "centralized") & (table.mechanism == "idp-ir") & (table.postprocess == "none")
                    & (table.category_order == ORDER_SETTINGS[0].order)].set_index(["epsilon", "k"])
    assert central.loc[(1.0, 300), "mean_sse"] < central.loc[(0.1, 300), "mean_sse"]


def test_adult_orders_are_labelled_with_tvd(spark, tmp_path):
    """Every row names its order; the paper's order is there beside dp-frequency and declared; TVD in [0, 1]."""
    out = str(tmp_path / "adult")
    orders = order_settings(["dp-frequency", "declared", "data-frequency"], ["0.1"])
    result = run_evaluation(spark, ["adult"], out, scenarios=["centralized", "horizontal"], mechanisms=["idp-ir"],
                            epsilons=["1"], ks={"adult": [50, 2000]}, runs=2, orders=orders, postprocess=["none"])
    table = pd.read_csv(result["results"], dtype={"order_share": str})
    assert len(table) == 3 * 2 * 2
    assert sorted(zip(table.category_order, table.order_share)) == sorted(
        [(o.order, o.share) for o in orders] * 4)
    assert table["category_tvd"].between(0, 1).all()
    runs = pd.read_csv(os.path.join(out, "runs.csv.gz"), dtype={"order_share": str})
    assert set(runs.category_order) == {"dp-frequency", "declared", "data-frequency"}
    assert "adult-category-order.png" in {os.path.basename(f) for f in result["figures"]}
    assert set(table["postprocess"]) == {"none"} and "postprocess" not in result  # nothing to pair


def test_order_settings_from_options():
    assert order_settings(["dp-frequency", "data-frequency"], ["0.05", "0.2"]) == [
        OrderSetting("dp-frequency", "0.05"), OrderSetting("dp-frequency", "0.2"), OrderSetting("data-frequency")]
    with pytest.raises(ConfigError, match="'frequency'"):
        order_settings(["frequency"], [])
    with pytest.raises(ConfigError, match="needs at least one"):
        order_settings(["dp-frequency"], [])
    with pytest.raises(ConfigError, match=r"\['0.1'\]"):
        order_settings(["declared"], ["0.1"])
    with pytest.raises(ConfigError, match="1.2"):
        order_settings(["dp-frequency"], ["1.2"])


def test_cli_rejects_a_bad_order_before_spark(capsys):
    assert run_cli(["evaluate", "--category-order", "frequency", "--out", "/nonexistent/x"]) == 2
    assert "'frequency'" in capsys.readouterr().err


def test_cli_rejects_a_bad_postprocess_before_spark(capsys):
    assert run_cli(["evaluate", "--postprocess", "projection", "--out", "/nonexistent/x"]) == 2
    assert "'projection'" in capsys.readouterr().err
    assert postprocess_values(["none", "isotonic"]) == ["none", "isotonic"]
    with pytest.raises(ConfigError, match="distinct"):
        postprocess_values(["none", "none"])
