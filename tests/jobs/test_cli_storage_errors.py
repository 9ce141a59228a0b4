"""Storage failures reach the command line as one line and exit code 2 (issue 22, items 2 and 6)."""
import os

import pytest
import yaml

from fragrelease.jobs.cli import run_cli


@pytest.mark.slow  # a whole `fragrelease run` up to the owners' spend
def test_an_unwritable_ledger_stops_the_run_with_one_line_and_nothing_spent(spark, tmp_path, capsys, wine_pdf):
    from fragrelease.schemas.wine import SCHEMA

    source = str(tmp_path / "wine")
    spark.createDataFrame(wine_pdf.sample(200, random_state=3), SCHEMA.struct_type()).write.parquet(source)
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    ledger = str(blocker / "ledger")
    conf = tmp_path / "release.yaml"
    conf.write_text(yaml.safe_dump({
        "name": "cli-ledger", "dataset": "wine", "fragmentation": "horizontal", "epsilon": "1", "k": 10,
        "source": {"path": source, "format": "parquet"}, "reports": False,
        "owners": [{"name": "a", "rows": 100, "ledger": {"path": ledger, "lifetime_epsilon": "3"}},
                   {"name": "b", "rows": 100}],
        "work_dir": str(tmp_path / "work"), "output": str(tmp_path / "release")}))
    assert run_cli(["run", str(conf)]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert err == [f"error: budget ledger {ledger!r} cannot be created: Not a directory (ENOTDIR); nothing was spent"]
    assert blocker.read_text() == "x" and not os.path.exists(os.path.join(tmp_path, "release"))
