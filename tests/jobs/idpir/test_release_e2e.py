"""End-to-end small releases: owners, aggregator, a real Delta table read back with delta-rs.

One horizontal release (module fixture ``horizontal_release``) serves every test that only reads
it or tampers with a copy of what it wrote; a whole release costs 20-60 Spark jobs.
"""
import json
import re
import shutil

import pytest
from deltalake import DeltaTable

from fragrelease.errors import ManifestMismatchError, ReleaseExistsError
from fragrelease.jobs.protocol import aggregator
from fragrelease.jobs.protocol.context import aggregator_context
from fragrelease.jobs.protocol.layout import manifest_path, owner_report_path, plan_path, protected_path
from fragrelease.jobs.protocol.release import run_local_release
from fragrelease.jobs.storage import read_delta, table_provenance
from fragrelease.protocol.config import config_from_dict
from fragrelease.protocol.messages import Plan
from fragrelease.schemas.adult import RELEASED as ADULT_RELEASED
from fragrelease.schemas.wine import RELEASED as WINE_RELEASED
from fragrelease.version import __version__


@pytest.fixture(scope="module")
def adult_source(spark, adult_pdf, tmp_path_factory):
    from fragrelease.schemas.adult import SCHEMA

    path = str(tmp_path_factory.mktemp("src") / "adult_sample")
    spark.createDataFrame(adult_pdf.sample(2_000, random_state=11), SCHEMA.struct_type()).write.parquet(path)
    return path


def horizontal_cfg(tmp, source, **kw):
    data = dict(name="t-h", dataset="adult", fragmentation="horizontal", mechanism="idp-ir", epsilon="1", k=20,
                source={"path": source, "format": "parquet"},
                owners=[{"name": "o1", "rows": 700}, {"name": "o2", "rows": 800}, {"name": "o3", "rows": 500}],
                work_dir=str(tmp / "work"), output=str(tmp / "release"))
    data.update(kw)
    return config_from_dict(data)


@pytest.fixture(scope="module")
def horizontal_release(spark, tmp_path_factory, adult_source):
    """One three-owner release with reports (owners' key pairs in files, so that a second aggregator
    run can verify the manifests): ``(tmp, cfg, result)``. Tests must not change what it wrote, or
    must restore it."""
    from signing_keys import with_keys

    tmp = tmp_path_factory.mktemp("horizontal")
    cfg = with_keys(horizontal_cfg(tmp, adult_source), tmp / "keys")
    return tmp, cfg, run_local_release(spark, cfg)


@pytest.mark.slow  # whole releases end to end (minutes with the suite's load); CI runs it
def test_horizontal_release_is_a_real_delta_table(spark, horizontal_release, adult_source):
    tmp_path, cfg, result = horizontal_release
    dt = DeltaTable(cfg.output)
    assert dt.version() == 0
    table = dt.to_pyarrow_table()
    assert table.num_rows == 2_000
    assert table.column_names == list(ADULT_RELEASED)  # record id dropped
    assert str(table.schema.field("age").type) == "int32"  # declared integer: rounded noisy value
    assert str(table.schema.field("sex").type) in ("string", "large_string", "string_view")
    prov = table_provenance(cfg.output)
    assert prov["epsilon"] == "1" and prov["composition"] == "parallel" and prov["k"] == 20
    assert prov["mechanism"] == "idp-ir" and [o["name"] for o in prov["owners"]] == ["o1", "o2", "o3"]
    assert prov["plan_id"] == result.plan.plan_id
    assert set(prov) == {"role", "plan_id", "dataset", "fragmentation", "mechanism", "k", "epsilon", "composition",
                         "epsilon_split", "owners", "attributes", "keep_id", "category_order", "category_order_share",
                         "linkage", "postprocess", "guarantee", "fragrelease_version", "system"}
    assert prov["system"] == "idpir"  # the commit contract's stamp (fragrelease.jobs.storage.commit)
    assert {k for o in prov["owners"] for k in o} == {"name", "epsilon", "epsilon_per_attribute", "attributes", "n_records",
                                                      "budgets", "nonce"}
    # the nonces are random, data-independent, and with the plan id the pseudonym context (keep_id: key holders map back)
    assert all(len(bytes.fromhex(o["nonce"])) == 32 for o in prov["owners"])
    assert (prov["category_order"], prov["category_order_share"], prov["linkage"]) == ("dp-frequency", "1/10", "linked")
    assert "no epsilon bound" in prov["guarantee"]["table"] and "eps_attr-iDP" in prov["guarantee"]["per_column"]
    sex = next(b for b in prov["owners"][0]["budgets"] if b["attribute"] == "sex")
    assert (sex["epsilon"], sex["epsilon_order"], sex["epsilon_centroids"]) == ("1/10", "1/100", "9/100")
    assert {k for a in prov["attributes"] for k in a} <= {"name", "kind", "domain", "categories"}
    assert 0 < result.mean_sse < 10
    # reports: the public one beside the table holds release statistics only; owners' are private
    public = open(result.report, encoding="utf-8").read()
    assert result.report.endswith("release_reports/release-v0.html")
    # a distribution chart per attribute, in HTML (no image)
    assert public.count('<figure class="dist') == len(prov["attributes"]) and "<img" not in public
    assert "plan id" in public and result.plan.plan_id in public
    assert "original" not in public.lower() and "MeanSSE" not in public
    # the public report opens with the table, its version, its rows and the guarantee (issue 38, item 5)
    head = re.search(r'<p class="headline" id="headline">(.*?)</p>', public, re.S)
    assert head is not None and head.start() < public.index("<h2>")
    assert f"<b>{cfg.output}</b>, version 0 (written by fragrelease {__version__}): 2,000 rows." in head.group(1)
    assert "Guarantee against release recipients" in head.group(1) and "no epsilon bound" in head.group(1)
    private = open(owner_report_path(cfg.name, cfg.owners[0]), encoding="utf-8").read()
    assert "For the data owner's eyes only" in private and "MeanSSE" in private
    assert private.count('<figure class="dist') == len(prov["attributes"]) and "<img" not in private  # horizontal: all
    # the owner sees its values as the table stores them: age (declared integer) rounded, so its quantiles are whole
    assert "age, hours-per-week rounded half to even to integers, as the release table holds them" in private
    row = re.search(r"<tr><td>age \(released\)</td>((?:<td(?: class=\"text\")?>[^<]*</td>)+)</tr>", private)
    assert row is not None
    assert all(float(q) == round(float(q)) for q in re.findall(r"<td(?: class=\"text\")?>([^<]*)</td>", row.group(1))[2:])
    # every released value is in its declared domain / category list
    pdf = table.to_pandas()
    assert pdf["age"].between(0, 100).all() and pdf["hours-per-week"].between(1, 99).all()
    # a second release to the same place is refused by default ...
    with pytest.raises(ReleaseExistsError):
        aggregator.release(spark, aggregator_context(cfg))
    with pytest.raises(ReleaseExistsError):  # refused before owners spend budget on a new plan
        aggregator.issue_plan(aggregator_context(cfg))
    assert DeltaTable(cfg.output).version() == 0
    # ... or becomes a new version, the first staying readable
    # (its own work folder: the first release's stays as it was for the other tests)
    cfg2 = horizontal_cfg(tmp_path, adult_source, if_exists="new-version", epsilon="0.5", reports=False,
                          work_dir=str(tmp_path / "work-2"))
    run_local_release(spark, cfg2)
    dt = DeltaTable(cfg.output)
    assert dt.version() == 1
    assert dt.to_pyarrow_table().num_rows == 2_000
    assert DeltaTable(cfg.output, version=0).to_pyarrow_table().num_rows == 2_000
    assert table_provenance(cfg.output)["epsilon"] == "1/2"
    assert table_provenance(cfg.output, version=0)["epsilon"] == "1"
    assert read_delta(spark, cfg.output).count() == 2_000  # active files only, not both versions


@pytest.mark.slow  # whole releases end to end (minutes with the suite's load); CI runs it
def test_aggregator_refuses_tampered_manifest_and_fragment(spark, horizontal_release, adult_source):
    from signing_keys import with_keys  # owners' keys, so that a second aggregator run can verify

    tmp_path, cfg, _ = horizontal_release
    # tamper with copies: the shared release's owner o2 is restored afterwards
    saved = tmp_path / "o2-saved"
    shutil.copytree(protected_path(cfg.work_dir, "o2"), saved / "protected")
    shutil.copy(manifest_path(cfg.work_dir, "o2"), saved / "manifest.json")
    try:
        tamper_and_check(spark, tmp_path, cfg, adult_source, with_keys)
    finally:
        shutil.rmtree(protected_path(cfg.work_dir, "o2"))
        shutil.copytree(saved / "protected", protected_path(cfg.work_dir, "o2"))
        shutil.copy(saved / "manifest.json", manifest_path(cfg.work_dir, "o2"))


def tamper_and_check(spark, tmp_path, cfg, adult_source, with_keys) -> None:
    mpath = manifest_path(cfg.work_dir, "o2")
    original = open(mpath).read()
    manifest = json.loads(original)
    manifest["epsilon"] = "2"
    open(mpath, "w").write(json.dumps(manifest))
    cfg_new = with_keys(horizontal_cfg(tmp_path, adult_source, output=str(tmp_path / "other"), reports=False),
                        tmp_path / "keys")
    # a separate aggregator step accepts only a pinned plan; the single-command run kept its plan in memory
    aggregator.pin_plan(aggregator_context(cfg_new), Plan.model_validate_json(open(plan_path(cfg.work_dir)).read()))
    with pytest.raises(ManifestMismatchError, match="manifest of owner 'o2' does not verify"):
        aggregator.release(spark, aggregator_context(cfg_new))
    open(mpath, "w").write(original)
    # replace o2's protected data with different rows (a new Delta version): the signed version differs
    from fragrelease.jobs.storage import commit_delta

    tampered = read_delta(spark, protected_path(cfg.work_dir, "o2")).limit(799)
    tampered = tampered.localCheckpoint(eager=True)
    commit_delta(tampered, protected_path(cfg.work_dir, "o2"), provenance={}, if_exists="new-version")
    with pytest.raises(ManifestMismatchError, match="'o2' is at Delta version 1, its signed manifest says 0"):
        aggregator.release(spark, aggregator_context(cfg_new))
    assert not DeltaTable.is_deltatable(str(tmp_path / "other"))  # nothing half-written


@pytest.mark.slow  # whole releases end to end (minutes with the suite's load); CI runs it
def test_vertical_release_joins_by_pseudonym(spark, tmp_path, wine_pdf):
    from fragrelease.schemas.wine import SCHEMA

    src = str(tmp_path / "wine_sample")
    spark.createDataFrame(wine_pdf.sample(600, random_state=2), SCHEMA.struct_type()).write.parquet(src)
    cfg = config_from_dict(dict(
        name="t-v", dataset="wine", fragmentation="vertical", epsilon="1", k=10, epsilon_split="by-attributes",
        source={"path": src, "format": "parquet"}, keep_id=True,
        owners=[{"name": "acid", "attributes": ["fixed_acidity", "volatile_acidity", "citric_acid"]},
                {"name": "sugar", "attributes": ["residual_sugar", "chlorides", "free_sulfur_dioxide", "total_sulfur_dioxide"]},
                {"name": "phys", "attributes": ["density", "pH", "sulphates", "alcohol"]}],
        work_dir=str(tmp_path / "work"), output=str(tmp_path / "release"), reports=False))
    result = run_local_release(spark, cfg)
    table = DeltaTable(cfg.output).to_pandas()
    # keep_id publishes the pseudonym, which only a key holder maps back to the record ids
    assert len(table) == 600 and table["pseudonym"].is_unique
    assert list(table.columns) == ["pseudonym", *WINE_RELEASED]
    from fragrelease.jobs.protocol.keys import generated_key_path
    from fragrelease.pseudonyms import derive_key, pseudonyms

    key = open(generated_key_path(cfg, cfg.owners[0]), "rb").read()
    ids = wine_pdf.sample(600, random_state=2)["record_id"].tolist()
    assert set(table["pseudonym"]) == set(pseudonyms(derive_key(key), ids, context=result.plan.pseudonym_context()))
    prov = result.provenance
    assert prov["composition"] == "sequential" and prov["epsilon_split"] == "by-attributes"
    assert [o["epsilon"] for o in prov["owners"]] == ["3/11", "4/11", "4/11"]
    assert {o["epsilon_per_attribute"] for o in prov["owners"]} == {"1/11"}


@pytest.mark.slow  # whole releases end to end (minutes with the suite's load); CI runs it
def test_nothing_under_the_shared_work_dir_is_derived_from_original_data(horizontal_release):
    """Owners' reports and simulated raw fragments stay in their private folders (issue: private reports)."""
    import os

    _, cfg, _ = horizontal_release
    work = cfg.work_dir
    found = set()
    for root, dirs, files in os.walk(work):
        rel = os.path.relpath(root, work)
        parts = [] if rel == "." else rel.split(os.sep)
        if len(parts) >= 3 and parts[0] == "owners" and parts[2] == "protected":
            continue  # inside an owner's protected Delta table
        if len(parts) >= 4 and parts[:2] == ["metadata", "ids"]:
            continue  # inside an owner's id-digest table (keyed digests of its ids, context "metadata")
        for name in dirs + files:
            found.add("/".join([*parts, name]))
    owners = [o.name for o in cfg.owners]
    nonces = {o: json.loads(open(os.path.join(work, "metadata", f"{o}.json")).read())["nonce"] for o in owners}
    allowed = ({"metadata", "plan.json", "owners", "metadata/ids"} | {f"metadata/{o}.json" for o in owners}
               | {f"metadata/ids/{o}" for o in owners} | {f"metadata/ids/{o}/{nonces[o]}" for o in owners}
               | {f"owners/{o}" for o in owners} | {f"owners/{o}/protected" for o in owners}
               | {f"owners/{o}/manifest.json" for o in owners})
    # public protocol messages, protected tables and manifests only (Spark's checksum files aside)
    assert {f for f in found if not f.split("/")[-1].startswith(".")} <= allowed
    for o in cfg.owners:  # the private report and the simulated fragment are in the owner's folder
        assert os.path.exists(owner_report_path(cfg.name, o))
        assert not owner_report_path(cfg.name, o).startswith(os.path.realpath(work))


def test_private_dir_under_the_shared_work_dir_is_refused(tmp_path, adult_source):
    from fragrelease.errors import ConfigError

    with pytest.raises(ConfigError, match="private_dir .* lies under the shared work_dir"):
        horizontal_cfg(tmp_path, adult_source,
                       owners=[{"name": "o1", "rows": 700, "private_dir": str(tmp_path / "work" / "o1")},
                               {"name": "o2", "rows": 1300}])
