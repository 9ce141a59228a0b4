"""``fragrelease owner preview``: an owner's private preview of its own fragment (fragrelease.jobs.idpir.owner_preview).

Adult records in two owners' CSV files: the owner's figures equal the Spark-free simulation on its own
sorted values and category counts (the same seeded draws), it warns on native-country (worse than
releasing "United-States" for everyone) and not on sex, nothing is written anywhere, and its errors are
one line naming the owner.
"""
import os
from fractions import Fraction

import numpy as np
import pytest
import yaml

from fragrelease.idpir.preview_error import combine, simulate_categorical, simulate_numeric
from fragrelease.jobs.protocol.context import owner_context
from fragrelease.protocol.config import config_from_dict
from fragrelease.rng.simulation import SeededSimulation

COLUMNS = ["record_id", "age", "workclass", "education", "marital-status", "occupation", "relationship", "race", "sex",
           "hours-per-week", "native-country"]


def _config(tmp_path, adult_pdf, rows=(3000, 2000)):
    src = tmp_path / "src"
    src.mkdir()
    frame = adult_pdf.reset_index(drop=True).iloc[:sum(rows)].copy()
    frame["record_id"] = np.arange(len(frame))
    frame[COLUMNS].iloc[:rows[0]].to_csv(src / "a.csv", index=False)
    frame[COLUMNS].iloc[rows[0]:].to_csv(src / "b.csv", index=False)
    cfg = config_from_dict(dict(
        name="pv", dataset="adult", fragmentation="horizontal", mechanism="idp-ir", epsilon="1", k=20,
        owners=[{"name": "a", "source": {"path": str(src / "a.csv"), "format": "csv"}},
                {"name": "b", "source": {"path": str(src / "b.csv"), "format": "csv"}}],
        work_dir=str(tmp_path / "work"), output=str(tmp_path / "release")))
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg.model_dump(mode="json", exclude_none=True)))
    return cfg, path, frame.iloc[:rows[0]]


def _tree(root):
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


def test_owner_preview_is_the_simulation_on_its_own_data(spark, tmp_path, adult_pdf):
    from fragrelease.jobs.idpir.owner_preview import owner_preview

    cfg, _, own = _config(tmp_path, adult_pdf)
    pv = owner_preview(spark, owner_context(cfg, "a"), runs=8, randomness=SeededSimulation(3))
    assert pv.n == 3000 and [a.attribute for a in pv.attributes] == COLUMNS[1:]
    by = {a.attribute: a for a in pv.attributes}
    # age: the task's simulation on the owner's own sorted values, the same seeded draws
    ages = np.sort(own["age"].to_numpy(float))
    ref = combine("age", False, [simulate_numeric(ages, mechanism="idp-ir", k=20, lo=0.0, hi=100.0,
                                                  epsilon_centroids=Fraction(1, 10), runs=8,
                                                  randomness=SeededSimulation(3))])
    assert by["age"].error.released == pytest.approx(ref.released, rel=1e-12)
    assert by["age"].error.baseline == pytest.approx(np.std(ages), rel=1e-9)  # the owner's own mean
    assert by["age"].scale == ref.scale and by["age"].epsilon == Fraction(1, 10)
    # native-country: about 9 in 10 of the owner's records are United-States; 41 categories at b = 8.9 ranks
    top = own["native-country"].value_counts().iloc[0] / 3000
    assert by["native-country"].error.baseline == pytest.approx(1 - top) and 1 - top < 0.1
    assert 0.35 < by["native-country"].error.released < 0.65  # docs/usage.md: about half of its labels change
    assert by["native-country"].warn and not by["sex"].warn and not by["age"].warn
    assert pv.ranking()[-1] == "native-country"
    counts = own["sex"].value_counts()
    sex = simulate_categorical([counts.get("Female", 0), counts.get("Male", 0)], mechanism="idp-ir", k=20,
                               epsilon_centroids=Fraction(9, 100), epsilon_order=Fraction(1, 100), runs=8,
                               randomness=SeededSimulation(5))
    assert by["sex"].error.baseline == pytest.approx(sex.baseline / 3000)
    text = pv.warning_text()
    assert text is not None and text.startswith("owner 'a': ") and "worst: native-country" in text


def test_owner_preview_command_prints_to_the_owner_only(spark, tmp_path, adult_pdf, capsys, caplog):
    import logging

    from fragrelease.jobs.cli import run_cli

    _, path, _ = _config(tmp_path, adult_pdf)
    before = _tree(tmp_path)
    with caplog.at_level(logging.DEBUG, logger="fragrelease"):
        assert run_cli(["owner", "preview", "--config", str(path), "--owner", "b", "--runs", "4"]) == 0
    # no log line carries an attribute's figure (the figures are printed to the owner only)
    assert not [r for r in caplog.records if r.name.startswith("fragrelease") and "native-country" in r.getMessage()]
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.split()}
    assert rows["native-country"][-1] == "WARN" and rows["sex"][-1] == "ok"
    assert "owner b (source " in out and "2,000 records" in out
    assert "private: computed from this owner's own data" in out
    assert "warning: owner 'b': " in out
    assert _tree(tmp_path) == before  # nothing written: no work_dir, no report, no private file
    assert not (tmp_path / "work").exists()


def test_owner_preview_errors_are_one_line(spark, tmp_path, adult_pdf, capsys):
    from fragrelease.jobs.cli import run_cli

    _, path, _ = _config(tmp_path, adult_pdf)
    assert run_cli(["owner", "preview", "--config", str(path), "--owner", "nobody"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --owner: 'nobody' is not an owner of configuration 'pv'; owners: ['a', 'b']"]
    assert run_cli(["owner", "preview", "--config", str(path), "--owner", "a", "--runs", "0"]) == 2
    assert capsys.readouterr().err.strip() == "error: --runs: must be >= 1, not 0"
    (tmp_path / "src" / "a.csv").write_text("record_id,age\n1,40\n")
    assert run_cli(["owner", "preview", "--config", str(path), "--owner", "a"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: owner 'a' (source {tmp_path / 'src' / 'a.csv'}): ")
    os.remove(tmp_path / "src" / "a.csv")
    assert run_cli(["owner", "preview", "--config", str(path), "--owner", "a"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: owners[0].source.path: no such file or folder {str(tmp_path / 'src' / 'a.csv')!r}"]


def test_the_release_api_previews_one_owner_without_writing(spark, tmp_path, adult_pdf):
    from fragrelease.jobs.api import Release

    frame = adult_pdf.iloc[:1200]
    release = Release("adult", epsilon="1", k=20, output=str(tmp_path / "release"), reports=False,
                      work_dir=str(tmp_path / "work"), spark=spark)
    release.add_owner("a", frame.iloc[:700]).add_owner("b", frame.iloc[700:])
    pv = release.owner_preview("b", runs=2)
    assert pv.owner == "b" and pv.n == 500 and len(pv.attributes) == 10
    assert not (tmp_path / "work").exists() and not (tmp_path / "release").exists()
    from fragrelease.errors import ConfigError

    with pytest.raises(ConfigError, match="'c' is not an owner"):
        release.owner_preview("c")
