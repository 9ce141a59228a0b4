"""Names are names, one line for damaged protocol files, the aggregator pins its plan (issue 36).

Found on 0.8.4: ``name: ../..`` passed ``validate`` and wrote keys two folders above the private
root, which was then chmod-ed 0700; a non-JSON ``plan.json`` or metadata file crashed with a
traceback; the aggregator's release step read ``plan.json`` back from ``work_dir``, so an earlier
plan swapped in was committed again. Everything here runs without Spark.
"""
import os
import stat

import pytest
import yaml

from fragrelease.errors import ConfigError
from fragrelease.jobs.cli import run_cli
from fragrelease.jobs.protocol.aggregator import pin_plan
from fragrelease.jobs.protocol.context import aggregator_context
from fragrelease.jobs.protocol.layout import metadata_path, plan_path, plan_pin_path
from fragrelease.jobs.protocol.workspace import claim_work_dir, ensure_private_dir
from fragrelease.protocol.config import config_from_dict
from fragrelease.protocol.messages import OwnerMetadata, make_plan
from fragrelease.schemas.adult import SCHEMA


class SparkStarted(AssertionError):
    pass


@pytest.fixture
def no_spark(monkeypatch):
    import fragrelease.jobs.session as session

    def refuse(*a, **k):
        raise SparkStarted("a SparkSession was requested before the check")

    monkeypatch.setattr(session, "get_spark", refuse)


@pytest.fixture
def root(tmp_path, monkeypatch):
    r = tmp_path / "private-root"
    monkeypatch.setenv("FRAGRELEASE_PRIVATE_ROOT", str(r))
    return r


def _csv(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("record_id,age,sex\n1,40,Male\n")
    return path


def _base(tmp, **kw):
    d = dict(name="guard", dataset="adult", fragmentation="horizontal", epsilon="1", k=3,
             owners=[{"name": "a", "source": {"path": _csv(str(tmp / "src" / "a.csv")), "format": "csv"}},
                     {"name": "b", "source": {"path": _csv(str(tmp / "src" / "b.csv")), "format": "csv"}}],
             work_dir=str(tmp / "work"), output=str(tmp / "release"))
    d.update(kw)
    return d


def _write(tmp, data):
    path = tmp / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def _one_line(capsys):
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err.removeprefix("error: ")


# ---------------------------------------------------------------- names are names
@pytest.mark.parametrize("name", ["../..", "..", "a/b", "/etc", "a..b", ".hidden", "-x", "", "a b", "a\\b"])
def test_release_name_that_is_a_path_is_refused_by_validate(tmp_path, root, capsys, name, no_spark):
    config = _write(tmp_path, _base(tmp_path, name=name))
    assert run_cli(["validate", config]) == 2
    line = _one_line(capsys)
    assert line == (f"invalid configuration {config}: name: not a safe name (a letter or digit, then letters, "
                    f"digits, '_', '.' or '-', without '..'); it becomes a folder name (got {name!r})")
    assert not root.exists() and sorted(os.listdir(tmp_path)) == ["c.yaml", "src"]


@pytest.mark.parametrize("name", ["../x", "a/b", "/abs", "x..y"])
def test_owner_name_that_is_a_path_is_refused(tmp_path, name):
    data = _base(tmp_path)
    data["owners"][1]["name"] = name
    with pytest.raises(ConfigError) as e:
        config_from_dict(data)
    assert (f"owners[1].name: not a safe name (a letter or digit, then letters, digits, '_', '.' or '-', without "
            f"'..'); it becomes a folder name (got {name!r})") in str(e.value)


def test_safe_names_pass(tmp_path):
    cfg = config_from_dict(_base(tmp_path, name="adult-h.v1_2"))
    assert cfg.name == "adult-h.v1_2"


def test_keys_generate_refuses_an_owner_name_with_a_separator(tmp_path, capsys):
    assert run_cli(["keys", "generate", "--owner", "../a", "--out", str(tmp_path / "k")]) == 2
    assert _one_line(capsys) == ("--owner: '../a' is not a safe name (a letter or digit, then letters, digits, '_', "
                                 "'.' or '-', without '..'); it becomes a folder name")
    assert not (tmp_path / "k").exists()


# ---------------------------------------------------------------- private folders
def test_private_folders_are_created_0700_with_their_missing_parents_under_umask_022(tmp_path):
    old = os.umask(0o022)
    try:
        made = tmp_path / "root" / "rel" / "owner"
        ensure_private_dir(str(made), who="owner 'a'")
        ensure_private_dir(str(made), who="owner 'a'")  # exists, owner-only: accepted as it is
    finally:
        os.umask(old)
    for p in (tmp_path / "root", tmp_path / "root" / "rel", made):
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o700, p


def test_an_existing_private_folder_open_to_others_is_refused_and_keeps_its_mode(tmp_path):
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o755)
    ensure_private_dir(str(open_dir / "sub"), who="owner 'a'")  # a new child of an open parent: created 0700
    assert stat.S_IMODE(os.stat(open_dir / "sub").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(open_dir).st_mode) == 0o755  # the parent this run did not create: untouched
    with pytest.raises(ConfigError) as e:
        ensure_private_dir(str(open_dir), who="owner 'a'")
    assert str(e.value) == (f"owner 'a': private folder {str(open_dir)!r} is readable or writable by group or "
                            f"others (mode 0755); run 'chmod 700 {open_dir}'")
    assert stat.S_IMODE(os.stat(open_dir).st_mode) == 0o755


# ---------------------------------------------------------------- damaged protocol files, one line
def _metadata(owner, n=10):
    return OwnerMetadata(owner=owner, dataset="adult", fragmentation="horizontal", n_records=n,
                         id_column="record_id", attributes=tuple(a.public_spec() for a in SCHEMA.protected))


def _plan(cfg):
    return make_plan([_metadata(o.name) for o in cfg.owners], fragmentation="horizontal", mechanism=cfg.mechanism,
                     k=cfg.k, epsilon=cfg.epsilon)


@pytest.mark.parametrize("text, cause", [
    ('{"owner": "a", "dataset": "ad', "Invalid JSON: EOF while parsing a string at line 1 column 29"),
    ("not json", "Invalid JSON: expected ident at line 1 column 2"),
    ('{"owner": "a"}', "dataset: required; "),
])
def test_damaged_metadata_is_one_line_for_the_aggregator(tmp_path, root, capsys, no_spark, text, cause):
    config = _write(tmp_path, _base(tmp_path))
    cfg = config_from_dict(_base(tmp_path))
    claim_work_dir(cfg)
    for o in ("a", "b"):
        path = metadata_path(cfg.work_dir, o)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text if o == "a" else _metadata("b").model_dump_json())
    assert run_cli(["aggregator", "plan", "--config", config]) == 2
    line = _one_line(capsys)
    path = metadata_path(cfg.work_dir, "a")
    assert line.startswith(f"aggregator: metadata of owner 'a' {path!r} cannot be used ({cause}")
    assert line.endswith("); it was damaged or not written by fragrelease: refusing")
    assert not os.path.exists(plan_path(cfg.work_dir)) and not os.path.exists(plan_pin_path(cfg.name, cfg.work_dir))


@pytest.mark.parametrize("party", ["owner", "aggregator"])
@pytest.mark.parametrize("text, cause", [
    ('{"plan_id": "x", "k": 3', "Invalid JSON: EOF while parsing an object at line 1 column 23"),
    ("\xff\xfe", None),
    ('{"plan_id": "x"}', "dataset: required; "),
])
def test_damaged_plan_json_is_one_line_for_owner_and_aggregator(tmp_path, root, capsys, no_spark, party, text, cause):
    from signing_keys import with_keys

    cfg = with_keys(config_from_dict(_base(tmp_path)), tmp_path / "keys")
    config = _write(tmp_path, cfg.model_dump(mode="json", exclude_none=True))
    claim_work_dir(cfg)
    with open(plan_path(cfg.work_dir), "wb") as f:
        f.write(text.encode("latin-1"))
    argv = (["owner", "protect", "--config", config, "--owner", "a"] if party == "owner"
            else ["aggregator", "release", "--config", config])
    who = "owner 'a'" if party == "owner" else "aggregator"
    assert run_cli(argv) == 2
    line = _one_line(capsys)
    expected_cause = "not UTF-8 text" if cause is None else cause
    assert line.startswith(f"{who}: plan.json {plan_path(cfg.work_dir)!r} cannot be used ({expected_cause}"), line
    assert line.endswith("); it was damaged or not written by fragrelease: refusing")


# ---------------------------------------------------------------- the aggregator pins its plan
def test_an_earlier_plan_swapped_into_work_dir_is_refused_by_the_release_step(tmp_path, root, capsys, no_spark):
    """An owner who writes work_dir puts back the plan.json of an earlier release (same configuration):
    its terms match the configuration, only its id differs; the release step refuses it before Spark."""
    config = _write(tmp_path, _base(tmp_path))
    cfg = config_from_dict(_base(tmp_path))
    claim_work_dir(cfg)
    earlier, issued = _plan(cfg), _plan(cfg)
    assert earlier.plan_id != issued.plan_id
    pin = pin_plan(aggregator_context(cfg), issued)  # what issue_plan does before writing plan.json
    assert pin.startswith(str(root)) and not pin.startswith(cfg.work_dir)
    assert stat.S_IMODE(os.stat(pin).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(pin)).st_mode) == 0o700
    with open(plan_path(cfg.work_dir), "w") as f:  # the copy kept from the earlier release's work_dir
        f.write(earlier.to_json())
    assert run_cli(["aggregator", "release", "--config", config]) == 2
    assert _one_line(capsys) == (f"aggregator: plan.json in work_dir is not the plan this aggregator issued "
                                 f"(plan id {earlier.plan_id}, expected {issued.plan_id}); refusing")


def test_a_plan_with_the_issued_id_but_other_terms_is_refused(tmp_path, root, capsys, no_spark):
    config = _write(tmp_path, _base(tmp_path))
    cfg = config_from_dict(_base(tmp_path))
    claim_work_dir(cfg)
    issued = _plan(cfg)
    pin_plan(aggregator_context(cfg), issued)
    forged = issued.model_copy(update={"k": 4})
    with open(plan_path(cfg.work_dir), "w") as f:
        f.write(forged.to_json())
    assert run_cli(["aggregator", "release", "--config", config]) == 2
    assert _one_line(capsys) == (f"aggregator: plan.json in work_dir is not the plan this aggregator issued "
                                 f"(plan id {issued.plan_id}, but its content differs from the issued plan's); "
                                 "refusing")


def test_no_pin_or_a_damaged_pin_is_refused_never_read_as_empty(tmp_path, root, capsys, no_spark):
    config = _write(tmp_path, _base(tmp_path))
    cfg = config_from_dict(_base(tmp_path))
    claim_work_dir(cfg)
    with open(plan_path(cfg.work_dir), "w") as f:
        f.write(_plan(cfg).to_json())
    assert run_cli(["aggregator", "release", "--config", config]) == 2
    assert _one_line(capsys) == (f"aggregator: no pinned plan at {plan_pin_path(cfg.name, cfg.work_dir)!r} (written by 'fragrelease "
                                 "aggregator plan' with this FRAGRELEASE_PRIVATE_ROOT); refusing plan.json from "
                                 "work_dir")
    pin_plan(aggregator_context(cfg), _plan(cfg))
    with open(plan_pin_path(cfg.name, cfg.work_dir), "w") as f:
        f.write('{"plan_id": ')
    assert run_cli(["aggregator", "release", "--config", config]) == 2
    assert _one_line(capsys) == (f"aggregator: the pinned plan {plan_pin_path(cfg.name, cfg.work_dir)!r} cannot be read "
                                 "(JSONDecodeError); refusing: issue the plan again")


def test_the_pinned_plan_passes_to_the_release_step(tmp_path, root, capsys, no_spark):
    """The issued plan itself gets past the pin (to the Spark session, which this test refuses)."""
    config = _write(tmp_path, _base(tmp_path))
    cfg = config_from_dict(_base(tmp_path))
    claim_work_dir(cfg)
    issued = _plan(cfg)
    pin_plan(aggregator_context(cfg), issued)
    with open(plan_path(cfg.work_dir), "w") as f:
        f.write(issued.to_json())
    with pytest.raises(SparkStarted):
        run_cli(["aggregator", "release", "--config", config])


@pytest.mark.parametrize("text, cause", [
    ('{"plan_id": "p", "owner": "a"', "Invalid JSON: EOF while parsing an object at line 1 column 29"),
    ('{"plan_id": "p"}', "owner: required; "),
])
def test_a_damaged_manifest_is_one_line_naming_the_owner_and_the_path(tmp_path, root, text, cause):
    from fragrelease.errors import ManifestMismatchError
    from fragrelease.jobs.idpir.combine import load_verified_fragment
    from fragrelease.jobs.protocol.layout import manifest_path

    cfg = config_from_dict(_base(tmp_path))
    path = manifest_path(cfg.work_dir, "a")
    os.makedirs(os.path.dirname(path))
    with open(path, "w") as f:
        f.write(text)
    with pytest.raises(ManifestMismatchError) as e:
        load_verified_fragment(None, aggregator_context(cfg), _plan(cfg), "a")  # refused before any table is read
    assert str(e.value).startswith(f"aggregator: manifest of owner 'a' {path!r} cannot be used ({cause}")
    assert str(e.value).endswith("); it was damaged or not written by fragrelease: refusing")
    assert "\n" not in str(e.value)


def test_two_work_folders_of_one_release_name_keep_their_own_pins(tmp_path, root):
    one = config_from_dict(_base(tmp_path))
    two = config_from_dict(_base(tmp_path, work_dir=str(tmp_path / "work-2")))
    assert plan_pin_path(one.name, one.work_dir) != plan_pin_path(two.name, two.work_dir)
    assert os.path.dirname(plan_pin_path(one.name, one.work_dir)) == str(root / "guard" / "_aggregator")
    p1, p2 = _plan(one), _plan(two)
    pin_plan(aggregator_context(one), p1)
    pin_plan(aggregator_context(two), p2)
    from fragrelease.jobs.protocol.aggregator import check_pinned_plan

    check_pinned_plan(aggregator_context(one), p1)  # the second pin did not replace the first
    check_pinned_plan(aggregator_context(two), p2)


def test_plan_id_option_refuses_any_other_plan(tmp_path, root, capsys, no_spark):
    config = _write(tmp_path, _base(tmp_path))
    cfg = config_from_dict(_base(tmp_path))
    claim_work_dir(cfg)
    issued = _plan(cfg)
    pin_plan(aggregator_context(cfg), issued)
    with open(plan_path(cfg.work_dir), "w") as f:
        f.write(issued.to_json())
    assert run_cli(["aggregator", "release", "--config", config, "--plan-id", "another-id"]) == 2
    assert _one_line(capsys) == (f"aggregator: plan.json in work_dir is not the plan this aggregator issued "
                                 f"(plan id {issued.plan_id}, expected another-id from --plan-id); refusing")
    with pytest.raises(SparkStarted):  # the right id passes to the Spark step
        run_cli(["aggregator", "release", "--config", config, "--plan-id", issued.plan_id])


def test_plan_id_stands_in_for_a_missing_pin_but_a_pin_is_still_checked(tmp_path, root, capsys, no_spark):
    """The release step on another machine (no access to the plan step's private folder) names the id."""
    config = _write(tmp_path, _base(tmp_path))
    cfg = config_from_dict(_base(tmp_path))
    claim_work_dir(cfg)
    issued = _plan(cfg)
    with open(plan_path(cfg.work_dir), "w") as f:
        f.write(issued.to_json())
    with pytest.raises(SparkStarted):  # no pin here, the right id: accepted up to the Spark step
        run_cli(["aggregator", "release", "--config", config, "--plan-id", issued.plan_id])
    other = _plan(cfg)
    pin_plan(aggregator_context(cfg), other)  # a pin that names another plan is still refused
    assert run_cli(["aggregator", "release", "--config", config, "--plan-id", issued.plan_id]) == 2
    assert _one_line(capsys) == (f"aggregator: plan.json in work_dir is not the plan this aggregator issued "
                                 f"(plan id {issued.plan_id}, expected {other.plan_id}); refusing")
