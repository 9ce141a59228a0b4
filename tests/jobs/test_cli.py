"""The command line's handling of expected errors (no Spark needed: they fail before a session starts)."""
from fragrelease.jobs.cli import run_cli


def test_missing_config_exits_2_with_message(capsys, tmp_path):
    assert run_cli(["run", str(tmp_path / "nope.yaml")]) == 2
    assert "nope.yaml" in capsys.readouterr().err


def test_invalid_override_exits_2_naming_value(capsys):
    assert run_cli(["run", "conf/adult-horizontal.yaml", "--epsilon", "-3"]) == 2
    assert "-3" in capsys.readouterr().err


def test_unknown_owner_exits_2(capsys):
    from fragrelease.jobs.cli import owner_main

    assert owner_main(["metadata", "--config", "conf/adult-horizontal.yaml", "--owner", "owner-9"]) == 2
    assert "'owner-9'" in capsys.readouterr().err


def test_usage_error_is_not_a_crash():
    assert run_cli(["owner", "protect"]) == 2


def test_an_error_naming_a_long_path_keeps_it_on_one_line(capsys, tmp_path):
    deep = tmp_path / ("a-rather-long-folder-name-" * 6) / "missing-configuration.yaml"
    assert run_cli(["run", str(deep)]) == 2
    err = capsys.readouterr().err
    assert str(deep) in err and len(err.strip().splitlines()) == 1
