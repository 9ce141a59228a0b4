"""Signed manifests bind each protected fragment to its owner (issue: fragments bound to their owners).

One two-owner horizontal work_dir is protected once (module fixture); every tampering case works on
its own copy (shutil.copytree) and the aggregator must refuse it with one line naming the owner.
The untouched copy releases fine. Every case here was accepted before manifests were signed
(the aggregator compared ``manifest.owner`` with the plan only and trusted an unkeyed digest).

The aggregator verifies the owners in plan order (a, then b): the checks that read no data (the
manifest, its signature, the keys, the Delta version, the files' hashes) for each owner in turn, then
every owner's digests in one Spark pass, a digest mismatch of owner a told before any refusal of owner
b. Cases whose check reads no data therefore tamper with owner a and are refused before any Spark job;
the cases refused by a check of b's data (a recomputed digest, a rewritten data file) tamper with
owner b, so every check is also seen to run for an owner after the first.
"""
import json
import os
import shutil

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from fragrelease.errors import ManifestMismatchError, SignatureError
from fragrelease.jobs.idpir import combine, owner_round
from fragrelease.jobs.protocol import aggregator, owner, simulate
from fragrelease.jobs.protocol.context import aggregator_context, owner_context
from fragrelease.jobs.protocol.digests import content_digest
from fragrelease.jobs.protocol.layout import manifest_path, plan_path, protected_path
from fragrelease.jobs.storage import read_delta
from fragrelease.protocol.config import config_from_dict
from fragrelease.protocol.messages import Manifest, Plan
from fragrelease.schemas.datasets import resolve_schema
from fragrelease.signing import generate_private_key, sign_manifest_fields, write_key_pair


def _data(tmp, source, work, keys, out="release"):
    return dict(name="signed", dataset="wine", fragmentation="horizontal", epsilon="1", k=10,
                source={"path": source, "format": "parquet"}, reports=False,
                owners=[{"name": "a", "rows": 150, **keys["a"]}, {"name": "b", "rows": 150, **keys["b"]}],
                work_dir=str(work), output=str(tmp / out))


@pytest.fixture(scope="module")
def protected(spark, wine_pdf, tmp_path_factory):
    """(tmp root, source, keys, work_dir) after both owners protected and signed their fragments."""
    from fragrelease.schemas.wine import SCHEMA

    tmp = tmp_path_factory.mktemp("signed")
    source = str(tmp / "wine")
    spark.createDataFrame(wine_pdf.sample(300, random_state=22), SCHEMA.struct_type()).write.parquet(source)
    keys = {}
    for name in ("a", "b"):
        path, pub = write_key_pair(str(tmp / "keys" / name), name)
        keys[name] = {"signing_key": path, "public_key": pub}
    cfg = config_from_dict(_data(tmp, source, tmp / "work", keys))
    schema = resolve_schema(cfg.dataset)
    simulate.split_fragments(spark, cfg, schema, simulate.load_dataset(spark, cfg, schema))
    for o in cfg.owners:
        owner.describe_fragment(spark, owner_context(cfg, o.name))
    aggregator.issue_plan(aggregator_context(cfg))
    for o in cfg.owners:
        owner_round.protect_owner_fragment(spark, owner_context(cfg, o.name))
    return tmp, source, keys, tmp / "work"


_copies = iter(range(1000))


def copy_of(protected, keys=None):
    """A fresh copy of the protected work_dir and a configuration pointing at it (own output)."""
    tmp, source, default_keys, work = protected
    i = next(_copies)
    dst = tmp / f"copy-{i}"
    shutil.copytree(work, dst)
    cfg = config_from_dict(_data(tmp, source, dst, keys or default_keys, out=f"release-{i}"))
    # the aggregator pins the plan it issued per work folder; the copy's is the one it issued
    aggregator.pin_plan(aggregator_context(cfg), Plan.model_validate_json(open(plan_path(cfg.work_dir)).read()))
    return cfg


def refused(spark, cfg, match):
    with pytest.raises(ManifestMismatchError, match=match) as exc:
        aggregator.release(spark, aggregator_context(cfg))
    msg = str(exc.value)
    assert len(msg.splitlines()) == 1
    assert not DeltaTable.is_deltatable(cfg.output)  # nothing committed
    print(f"\nREFUSED: {msg}")
    return msg


def _owner_dir(cfg, name):
    return os.path.dirname(manifest_path(cfg.work_dir, name))


def test_untouched_copy_releases(spark, protected):
    cfg = copy_of(protected)
    out = aggregator.release(spark, aggregator_context(cfg))
    assert out.version == 0 and out.rows == 300
    assert DeltaTable(cfg.output).to_pyarrow_table().num_rows == 300
    m = Manifest.model_validate_json(open(manifest_path(cfg.work_dir, "a")).read())
    assert m.signature and m.table_version == 0 and m.files and m.delta_log
    assert all(set(f) == {"path", "size", "sha256"} and not f["path"].startswith("/") for f in m.files)


def test_copied_fragment_is_refused(spark, protected):
    # owner b's folder copied over owner a's: the old aggregator committed 300 rows with b's twice
    cfg = copy_of(protected)
    shutil.rmtree(_owner_dir(cfg, "a"))
    shutil.copytree(_owner_dir(cfg, "b"), _owner_dir(cfg, "a"))
    refused(spark, cfg, r"^the manifest in the folder of owner 'a' names owner 'b': refused")


def test_swapped_folders_are_refused(spark, protected):
    cfg = copy_of(protected)
    a, b = _owner_dir(cfg, "a"), _owner_dir(cfg, "b")
    os.rename(a, a + ".tmp")
    os.rename(b, a)
    os.rename(a + ".tmp", b)
    refused(spark, cfg, r"^the manifest in the folder of owner 'a' names owner 'b': refused")


def test_manifest_renamed_to_the_folder_owner_is_refused(spark, protected):
    # b's folder copied over a's, the manifest's owner field edited to 'a': the signature breaks
    cfg = copy_of(protected)
    shutil.rmtree(_owner_dir(cfg, "a"))
    shutil.copytree(_owner_dir(cfg, "b"), _owner_dir(cfg, "a"))
    m = json.loads(open(manifest_path(cfg.work_dir, "a")).read())
    m["owner"] = "a"
    open(manifest_path(cfg.work_dir, "a"), "w").write(json.dumps(m))
    refused(spark, cfg, r"^manifest of owner 'a' does not verify under the public key configured for owner 'a'")


def test_redigested_change_is_refused(spark, protected):
    # one value changed (the table rewritten with delta-rs), the manifest's digest recomputed
    cfg = copy_of(protected)
    path = protected_path(cfg.work_dir, "b")
    t = DeltaTable(path).to_pyarrow_table()
    col = "alcohol"
    values = t.column(col).to_pylist()
    values[0] = values[0] + 1.0
    t = t.set_column(t.schema.get_field_index(col), col, pa.array(values, t.schema.field(col).type))
    write_deltalake(path, t, mode="overwrite")
    m = json.loads(open(manifest_path(cfg.work_dir, "b")).read())
    new_digest = content_digest(read_delta(spark, path))
    assert new_digest != m["content_digest"]
    m["content_digest"] = new_digest
    open(manifest_path(cfg.work_dir, "b"), "w").write(json.dumps(m))
    refused(spark, cfg, r"^manifest of owner 'b' does not verify under the public key configured for owner 'b': "
                        r"it was changed after signing or signed with another key$")


def test_extra_commit_is_refused(spark, protected):
    cfg = copy_of(protected)
    path = protected_path(cfg.work_dir, "a")
    t = DeltaTable(path).to_pyarrow_table()
    write_deltalake(path, t.slice(0, 1), mode="append")
    refused(spark, cfg, r"^protected table of owner 'a' is at Delta version 1, its signed manifest says 0: "
                        r"a commit was added or removed$")


def test_data_file_rewritten_in_place_is_refused(spark, protected):
    # same path, same size, other bytes: the Delta log cannot see it, the signed SHA-256 does
    cfg = copy_of(protected)
    m = Manifest.model_validate_json(open(manifest_path(cfg.work_dir, "b")).read())
    victim = os.path.join(protected_path(cfg.work_dir, "b"), m.files[0]["path"])
    data = bytearray(open(victim, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(victim, "wb").write(bytes(data))
    # a small local table's files are hashed on the driver (signatures.DRIVER_HASH_BYTES), which does not
    # read Hadoop's .crc sidecar: the signed SHA-256 names the changed file whether or not a stale sidecar
    # is left (object stores have none)
    crc = os.path.join(os.path.dirname(victim), "." + os.path.basename(victim) + ".crc")
    if os.path.exists(crc):
        refused(spark, cfg, r"^protected table of owner 'b': data file '.*' was changed after the owner signed it$")
        os.remove(crc)
    refused(spark, cfg, r"^protected table of owner 'b': data file '.*' was changed after the owner signed it$")


def test_a_large_or_unreadable_table_is_hashed_by_spark_with_the_same_result(spark, protected, monkeypatch):
    from fragrelease.jobs.protocol import signatures

    cfg = copy_of(protected)
    path = protected_path(cfg.work_dir, "b")
    tracker = spark.sparkContext.statusTracker()  # test only: counts the Spark jobs
    before = set(tracker.getJobIdsForGroup(None))
    on_driver = signatures.describe_table(spark, path)
    assert set(tracker.getJobIdsForGroup(None)) == before  # a small local table: hashed without a Spark job
    monkeypatch.setattr(signatures, "DRIVER_HASH_BYTES", 0)  # every table "large": the executors hash it
    assert signatures.describe_table(spark, path) == on_driver
    assert set(tracker.getJobIdsForGroup(None)) != before
    m = Manifest.model_validate_json(open(manifest_path(cfg.work_dir, "b")).read())
    os.remove(os.path.join(path, m.files[0]["path"]))
    monkeypatch.undo()  # a missing file: Spark's read names the cause, as before
    refused(spark, cfg, r"^protected table of owner 'b' cannot be read: ")


def test_rewritten_delta_log_is_refused(spark, protected):
    cfg = copy_of(protected)
    log = os.path.join(protected_path(cfg.work_dir, "a"), "_delta_log", f"{0:020d}.json")
    with open(log, "a") as f:
        f.write("\n")
    refused(spark, cfg, r"^protected table of owner 'a': its Delta log was rewritten after the owner signed it$")


def test_forged_manifest_is_refused(spark, protected):
    # someone with write access re-signs a's manifest (here with the digest of other data) with a key of its own
    cfg = copy_of(protected)
    m = Manifest.model_validate_json(open(manifest_path(cfg.work_dir, "a")).read())
    forged = m.model_copy(update={"content_digest": "sha256-sum60:150:1"})
    forged = forged.model_copy(update={"signature": sign_manifest_fields(generate_private_key(), forged.signed_fields())})
    open(manifest_path(cfg.work_dir, "a"), "w").write(forged.to_json())
    refused(spark, cfg, r"^manifest of owner 'a' does not verify under the public key configured for owner 'a'")
    # b's key signing a's manifest is no better
    tmp, _, keys, _ = protected
    from fragrelease.signing import load_private_key

    b_key = load_private_key(keys["b"]["signing_key"], owner="b")
    open(manifest_path(cfg.work_dir, "a"), "w").write(m.model_copy(update={"signature": sign_manifest_fields(
        b_key, m.signed_fields())}).to_json())
    refused(spark, cfg, r"^manifest of owner 'a' does not verify")


def _signed_with_wrong_digest(protected, cfg):
    """Owner a's manifest, re-signed with a's own key, naming a content digest its data does not have."""
    from fragrelease.signing import load_private_key

    _, _, keys, _ = protected
    m = Manifest.model_validate_json(open(manifest_path(cfg.work_dir, "a")).read())
    wrong = m.model_copy(update={"content_digest": "sha256-sum60:150:1"})
    key = load_private_key(keys["a"]["signing_key"], owner="a")
    wrong = wrong.model_copy(update={"signature": sign_manifest_fields(key, wrong.signed_fields())})
    open(manifest_path(cfg.work_dir, "a"), "w").write(wrong.to_json())


def test_an_earlier_owners_digest_mismatch_is_told_before_a_later_owners_refusal(spark, protected):
    # issue 41, session 5: the owners' digests come from one pass after every owner's no-data checks;
    # the first refusal in plan order is still the one told
    cfg = copy_of(protected)
    _signed_with_wrong_digest(protected, cfg)
    os.remove(manifest_path(cfg.work_dir, "b"))
    refused(spark, cfg, r"^protected fragment of 'a' does not match its manifest: content digest "
                        r"sha256-sum60:150:\d+ != sha256-sum60:150:1$")


def test_a_failed_digest_pass_checks_each_owner_on_its_own(spark, protected, monkeypatch):
    # the one pass failing (as a data file Spark cannot read would make it): each owner is checked alone,
    # with the same refusals, and a sound release still commits
    def failing(*args, **kwargs):
        raise RuntimeError("a data file cannot be read")

    monkeypatch.setattr(combine, "set_checks", failing)
    cfg = copy_of(protected)
    assert aggregator.release(spark, aggregator_context(cfg)).rows == 300
    cfg = copy_of(protected)
    _signed_with_wrong_digest(protected, cfg)
    refused(spark, cfg, r"^protected fragment of 'a' does not match its manifest: content digest "
                        r"sha256-sum60:150:\d+ != sha256-sum60:150:1$")


def test_unsigned_manifest_is_refused(spark, protected):
    cfg = copy_of(protected)
    m = json.loads(open(manifest_path(cfg.work_dir, "a")).read())
    del m["signature"]
    open(manifest_path(cfg.work_dir, "a"), "w").write(json.dumps(m))
    with pytest.raises(SignatureError):  # the ManifestMismatchError subclass of signature failures
        aggregator.release(spark, aggregator_context(cfg))
    refused(spark, cfg, r"^manifest of owner 'a' is not signed; the aggregator accepts only manifests signed with "
                        r"the owner's configured key$")


def test_missing_public_key_is_refused(spark, protected):
    tmp, _, keys, _ = protected
    cfg = copy_of(protected, keys={"a": {}, "b": keys["b"]})
    refused(spark, cfg, r"^no public key is configured for owner 'a' \(owners\[\]\.public_key\): its manifest "
                        r"cannot be verified, refused$")


def test_another_owners_public_key_is_refused(spark, protected):
    # the configuration names b's key for a: a's genuine manifest does not verify under it
    tmp, _, keys, _ = protected
    cfg = copy_of(protected, keys={"a": {"public_key": keys["b"]["public_key"]}, "b": keys["b"]})
    refused(spark, cfg, r"^manifest of owner 'a' does not verify under the public key configured for owner 'a'")


# ---------------------------------------------------------------- single-command releases (no Spark)
def _plain_cfg(tmp, **b):
    return config_from_dict(dict(name="one-shot", dataset="wine", fragmentation="horizontal", epsilon="1", k=10,
                                 owners=[{"name": "a", "rows": 3000}, {"name": "b", "rows": 3497, **b}],
                                 work_dir=str(tmp / "work"), output=str(tmp / "out")))


def test_single_command_release_generates_private_keys_per_owner_and_release(tmp_path, monkeypatch):
    import stat

    from fragrelease.jobs.protocol.layout import PRIVATE_ROOT_ENV, owner_private_dir
    from fragrelease.jobs.protocol.signatures import owner_signing_key, with_release_keys
    from fragrelease.signing import public_key_text

    monkeypatch.setenv(PRIVATE_ROOT_ENV, str(tmp_path / "private"))
    cfg = _plain_cfg(tmp_path)
    first, second = with_release_keys(cfg), with_release_keys(cfg)
    for o, o2 in zip(first.owners, second.owners):
        folder = owner_private_dir(cfg.name, o)
        assert os.path.dirname(o.signing_key) == folder
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(o.signing_key).st_mode) == 0o600
        assert public_key_text(owner_signing_key(owner_context(first, o.name))) == o.public_key
        assert o2.signing_key != o.signing_key and o2.public_key != o.public_key  # a new pair per release
        assert os.path.exists(o.signing_key)  # the earlier release's key is never overwritten
    assert all(o.signing_key is None and o.public_key is None for o in cfg.owners)  # the caller's cfg untouched


def test_single_command_release_refuses_keys_in_shared_folders_before_writing(tmp_path, monkeypatch):
    from fragrelease.errors import ConfigError, SigningKeyError
    from fragrelease.jobs.protocol.layout import PRIVATE_ROOT_ENV
    from fragrelease.jobs.protocol.signatures import with_release_keys

    monkeypatch.setenv(PRIVATE_ROOT_ENV, str(tmp_path / "work" / "private"))
    # the configuration itself refuses a default private root (where generated keys would go) under work_dir
    with pytest.raises(ConfigError, match=r"the default private root '.*' of owners \['a', 'b'\] lies under the shared work_dir"):
        with_release_keys(_plain_cfg(tmp_path))
    assert not (tmp_path / "work").exists()  # nothing secret was written to the shared folder
    monkeypatch.setenv(PRIVATE_ROOT_ENV, str(tmp_path / "private"))
    _, pub = write_key_pair(str(tmp_path / "k"), "b")
    with pytest.raises(SigningKeyError, match="owner 'b' declares a public_key but no signing_key"):
        with_release_keys(_plain_cfg(tmp_path, public_key=pub))
