"""fragrelease.jobs.protocol.preflight: configuration checks that need no data (before Spark starts)."""
import pytest

from fragrelease.errors import ConfigError
from fragrelease.jobs.protocol.preflight import BUILTIN_ROWS, check_source_exists, is_local_path, preflight
from fragrelease.protocol.config import config_from_dict
from fragrelease.schemas.datasets import BUILTIN_SCHEMAS, load_builtin_pandas


def test_builtin_row_counts_match_the_loaders():
    assert set(BUILTIN_ROWS) == set(BUILTIN_SCHEMAS)
    for name, n in BUILTIN_ROWS.items():
        assert len(load_builtin_pandas(name)) == n, name


@pytest.mark.parametrize("path,local", [("/data/x", True), ("rel/x", True), ("~/x", True), ("file:/tmp/x", True),
                                        ("file:///tmp/x", True), ("s3a://b/x", False), ("abfss://c@a/x", False),
                                        ("dbfs:/mnt/x", False)])
def test_local_paths_are_told_from_uris(path, local):
    assert is_local_path(path) is local


def test_missing_local_source_is_refused_uris_are_not_checked(tmp_path):
    check_source_exists(str(tmp_path), key="source.path")
    check_source_exists(f"file://{tmp_path}", key="source.path")
    check_source_exists("s3a://no-such-bucket/x", key="source.path")
    check_source_exists("dbfs:/no/such/x", key="source.path")
    with pytest.raises(ConfigError, match=r"source\.path: no such file or folder '.*/missing'"):
        check_source_exists(str(tmp_path / "missing"), key="source.path")


def _cfg(tmp_path, **kw):
    d = dict(name="p", dataset="adult", fragmentation="horizontal", epsilon="1", k=50,
             owners=[{"name": "a", "source": {"path": str(tmp_path / "a")}},
                     {"name": "b", "source": {"path": str(tmp_path / "b")}}], work_dir="w", output="o")
    d.update(kw)
    return config_from_dict(d)


def test_each_party_checks_only_the_sources_it_reads(tmp_path):
    (tmp_path / "a").mkdir()  # owner b's source is on another machine
    cfg = _cfg(tmp_path)
    preflight(cfg, party="owner", owner="a")
    preflight(cfg, party="aggregator")
    preflight(cfg.model_copy(update={"dataset": "schema-only-at-the-owners.yaml"}), party="aggregator")
    with pytest.raises(ConfigError, match=r"owners\[1\]\.source\.path: no such file or folder"):
        preflight(cfg, party="owner", owner="b")
    with pytest.raises(ConfigError, match=r"owners\[1\]\.source\.path"):
        preflight(cfg, party="run")


def test_simulated_release_needs_a_table_to_cut(tmp_path):
    cfg = config_from_dict(dict(name="p", dataset="conf/schema-example.yaml", fragmentation="horizontal", epsilon="1",
                                k=5, owners=[{"name": "a", "rows": 10}, {"name": "b", "rows": 10}], work_dir="w",
                                output="o"))
    with pytest.raises(ConfigError, match="'conf/schema-example.yaml' is not built in: give 'source'"):
        preflight(cfg, party="run")
    with_source = config_from_dict(dict(cfg.model_dump(exclude_none=True), source={"path": str(tmp_path / "t.csv"),
                                                                                  "format": "csv"}))
    with pytest.raises(ConfigError, match=r"source\.path: no such file or folder '.*t\.csv'"):
        preflight(with_source, party="split")
    (tmp_path / "t.csv").write_text("record_id\n")
    preflight(with_source, party="split")


def test_plain_idp_ignores_k_against_the_table(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    # mechanism idp uses cluster size 1 whatever k says; k only has to be >= 1
    config_from_dict(dict(name="p", dataset="wine", fragmentation="vertical", epsilon="1", k=1, mechanism="idp",
                          owners=[{"name": "a", "attributes": ["pH"]}, {"name": "b", "attributes": ["alcohol"]}],
                          work_dir="w", output="o"))
    with pytest.raises(ConfigError, match="k: must be >= 1 for mechanism 'idp', not 0"):
        config_from_dict(dict(name="p", dataset="wine", fragmentation="vertical", epsilon="1", k=0, mechanism="idp",
                              owners=[{"name": "a", "attributes": ["pH"]}, {"name": "b", "attributes": ["alcohol"]}],
                              work_dir="w", output="o"))


def test_vertical_owner_listing_an_unreleased_attribute(tmp_path):
    cfg = config_from_dict(dict(name="p", dataset="wine", fragmentation="vertical", epsilon="1", k=50,
                                owners=[{"name": "a", "attributes": ["pH"]}, {"name": "b", "attributes": ["color"]}],
                                work_dir="w", output="o"))
    with pytest.raises(ConfigError, match=r"owners\[1\]\.attributes: 'color' has role .* not released \(owner 'b'\)"):
        preflight(cfg)


def test_all_problems_of_a_configuration_are_listed_one_per_line():
    with pytest.raises(ConfigError) as info:
        config_from_dict(dict(name="p", dataset="adult", fragmentation="vertical", epsilon="1", k=2,
                              owners=[{"name": "a", "rows": 5}, {"name": "a"}], work_dir="w", output="o"))
    lines = str(info.value).splitlines()
    assert lines[0] == "invalid configuration <dict>:"
    assert [ln.strip() for ln in lines[1:]] == [
        "k: must be >= 3 for mechanism 'idp-ir', not 2",
        "owners[0].rows: for horizontal releases only (owner 'a')",
        "owners[0].attributes: required for a vertical owner (owner 'a')",
        "owners[1].name: owner name 'a' appears twice",
        "owners[1].attributes: required for a vertical owner (owner 'a')",
    ]
