"""The evaluation job on Spark: results table, per-run rows and figures (a small grid)."""
import os

import pandas as pd

from fragrelease.jobs.evaluate_grid import run_evaluation


def test_small_grid_writes_results_and_figures(spark, tmp_path):
    out = str(tmp_path / "eval")
    result = run_evaluation(spark, ["wine"], out, scenarios=["centralized", "horizontal", "vertical"],
                            splits=["equal", "by-attributes"], mechanisms=["idp-ir", "dp-ir"],
                            epsilons=["0.1", "1"], ks={"wine": [1, 50, 300]}, runs=3)
    table = pd.read_csv(result["results"])
    # 4 scenario/split combinations x 2 mechanisms x 2 ε x 3 k
    assert len(table) == 4 * 2 * 2 * 3
    assert set(table["runs"]) == {3}
    assert table["sampler"].str.contains("evaluation only").all()
    assert set(table.columns) >= {"dataset", "scenario", "mechanism", "split", "epsilon", "k", "mean_sse", "std"}
    runs = pd.read_csv(os.path.join(out, "runs.csv.gz"))
    assert len(runs) == len(table) * 3
    names = sorted(os.path.basename(f) for f in result["figures"])
    assert names == ["wine-baseline.png", "wine-fragmented-minus-centralized.png", "wine-idp-minus-dp.png"]
    for f in result["figures"]:
        assert open(f, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    central = table[(table.scenario == "centralized") & (table.mechanism == "idp-ir")].set_index(["epsilon", "k"])
    assert central.loc[(1.0, 300), "mean_sse"] < central.loc[(0.1, 300), "mean_sse"]
