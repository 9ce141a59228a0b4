"""What the aggregator reads: keyed pseudonyms, shuffled rows, unlinked fragments, and its refusals.

Small releases of a two-attribute schema (ids 1..n) through the owners' and the aggregator's own
functions (the ones ``fragrelease owner ...`` / ``aggregator ...`` run): the owners' fragments under
``work_dir`` carry no raw id and are not in id order, vertical fragments join on pseudonyms,
horizontal owners that share records are refused, and keys are found or refused as documented.
"""
import os
import stat

import pandas as pd
import pytest
import yaml

from fragrelease.errors import IdentifierError, PseudonymKeyError
from fragrelease.jobs.idpir import combine, owner_round
from fragrelease.jobs.protocol import aggregator, owner
from fragrelease.jobs.protocol.context import aggregator_context, owner_context
from fragrelease.jobs.protocol.keys import generated_key_path, owner_pseudonym_key
from fragrelease.jobs.protocol.layout import manifest_path, plan_path, plan_pin_path, protected_path, pseudonyms_path
from fragrelease.jobs.protocol.release import run_local_release
from fragrelease.jobs.storage import read_delta
from fragrelease.protocol.config import config_from_dict
from fragrelease.pseudonyms import derive_key, pseudonym

SCHEMA = dict(name="pseudo-test", attributes=[
    {"name": "rid", "type": "long", "role": "id"},
    {"name": "x", "type": "double", "role": "quasi-identifier", "kind": "numeric", "domain": [0, 100]},
    {"name": "y", "type": "double", "role": "sensitive", "kind": "numeric", "domain": [0, 100]},
])
KEY = b"0123456789abcdef0123456789abcdef-test-key"  # the secret in the owners' key file
DERIVED = derive_key(KEY)  # the HMAC key the owners use (HKDF-SHA-256 of the secret)


@pytest.fixture(scope="module")
def schema_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("schema") / "schema.yaml"
    path.write_text(yaml.safe_dump(SCHEMA))
    return str(path)


def write_source(spark, folder, ids, cols=("x", "y")):
    pdf = pd.DataFrame({"rid": list(ids), **{c: [float((7 * i + 3 * j) % 100) for i in ids]
                                             for j, c in enumerate(cols)}})
    spark.createDataFrame(pdf, "rid long, " + ", ".join(f"{c} double" for c in cols)).write.parquet(str(folder))
    return {"path": str(folder), "format": "parquet"}


def key_file(tmp_path, key=KEY):
    path = tmp_path / "keys" / "owners.key"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(key)
    path.chmod(0o600)  # a key file others may read is refused
    return str(path)


def config(tmp_path, schema_path, owners, fragmentation="horizontal", **kw):
    from signing_keys import with_keys  # tests/helpers: the owners sign their manifests

    return with_keys(config_from_dict(dict(name="pseudo", dataset=schema_path, fragmentation=fragmentation,
                                           mechanism="dp-ir", epsilon="1", k=3, owners=owners,
                                           work_dir=str(tmp_path / "work"), output=str(tmp_path / "release"),
                                           reports=False, **kw)), tmp_path / "signing")


def play(spark, cfg):
    """Every party's step, as the separate commands run them."""
    for o in cfg.owners:
        owner.describe_fragment(spark, owner_context(cfg, o.name))
    plan = aggregator.issue_plan(aggregator_context(cfg), spark)
    for o in cfg.owners:
        owner_round.protect_owner_fragment(spark, owner_context(cfg, o.name))
    return plan


@pytest.mark.slow  # a whole release end to end (or processes of their own): CI runs it; the quick loop leaves it out
def test_owner_fragment_has_pseudonyms_not_ids_and_is_not_in_id_order(spark, tmp_path, schema_path):
    kf = key_file(tmp_path)
    ids_a, ids_b = range(1, 41), range(41, 71)
    cfg = config(tmp_path, schema_path, [
        {"name": "a", "source": write_source(spark, tmp_path / "a", ids_a), "pseudonym_key": {"file": kf}},
        {"name": "b", "source": write_source(spark, tmp_path / "b", ids_b), "pseudonym_key": {"file": kf}}],
        keep_id=True)
    plan = play(spark, cfg)
    frag = read_delta(spark, protected_path(cfg.work_dir, "a")).toPandas()  # what the aggregator reads
    assert list(frag.columns) == ["pseudonym", "x", "y"]  # no raw id column
    back = {pseudonym(DERIVED, i, context=plan.pseudonym_context()): i for i in ids_a}  # only a key holder can do this
    assert set(frag["pseudonym"]) == set(back)
    assert not set(frag["pseudonym"]) & {str(i) for i in ids_a}
    order = [back[p] for p in frag["pseudonym"]]
    assert order != sorted(order)  # rows shuffled: 1/40! to be sorted by chance
    assert not os.path.exists(pseudonyms_path(cfg.work_dir, "a"))  # linked: the pseudonyms travel in the rows
    out = aggregator.release(spark, aggregator_context(cfg))
    rel = read_delta(spark, out.path).toPandas()
    assert list(rel.columns) == ["pseudonym", "x", "y"] and len(rel) == 70  # keep_id publishes pseudonyms
    assert set(rel["pseudonym"]) == set(back) | {pseudonym(DERIVED, i, context=plan.pseudonym_context()) for i in ids_b}
    assert "pseudonym" in out.provenance["guarantee"]["against"]
    assert "keep_id" in out.provenance["guarantee"]["against"]
    assert "The aggregator does not hold the key unless" in out.provenance["guarantee"]["against"]


@pytest.mark.slow  # a whole release end to end (or processes of their own): CI runs it; the quick loop leaves it out
def test_horizontal_owners_sharing_records_are_refused(spark, tmp_path, schema_path):
    kf = key_file(tmp_path)
    cfg = config(tmp_path, schema_path, [
        {"name": "a", "source": write_source(spark, tmp_path / "a", range(1, 61)), "pseudonym_key": {"file": kf}},
        {"name": "b", "source": write_source(spark, tmp_path / "b", range(41, 91)), "pseudonym_key": {"file": kf}},
        {"name": "c", "source": write_source(spark, tmp_path / "c", range(91, 101)), "pseudonym_key": {"file": kf}}])
    for o in cfg.owners:
        owner.describe_fragment(spark, owner_context(cfg, o.name))
    with pytest.raises(IdentifierError) as e:  # at the plan, from the metadata round's id digests: nobody spent
        aggregator.issue_plan(aggregator_context(cfg), spark)
    assert str(e.value) == ("owners 'a' and 'b' share 20 records (their keyed id digests match); horizontal owners "
                            "must hold disjoint records; no plan was issued and no budget was spent")
    assert not os.path.exists(plan_path(cfg.work_dir)) and not os.path.exists(cfg.output)  # nothing planned or committed


@pytest.mark.slow  # a whole release end to end (or processes of their own): CI runs it; the quick loop leaves it out
def test_horizontal_owners_with_different_keys_are_refused_at_the_plan(spark, tmp_path, schema_path):
    from fragrelease.errors import ProtocolError

    k1, k2 = key_file(tmp_path), str(tmp_path / "other.key")
    open(k2, "wb").write(b"another key of at least 32 bytes!!")
    os.chmod(k2, 0o600)
    cfg = config(tmp_path, schema_path, [
        {"name": "a", "source": write_source(spark, tmp_path / "a", range(1, 11)), "pseudonym_key": {"file": k1}},
        {"name": "b", "source": write_source(spark, tmp_path / "b", range(1, 11)), "pseudonym_key": {"file": k2}}])
    for o in cfg.owners:
        owner.describe_fragment(spark, owner_context(cfg, o.name))
    with pytest.raises(ProtocolError, match="owners 'a' and 'b' use different pseudonym keys"):
        aggregator.issue_plan(aggregator_context(cfg), spark)


@pytest.mark.slow  # a whole release end to end (or processes of their own): CI runs it; the quick loop leaves it out
def test_vertical_fragments_join_on_pseudonyms(spark, tmp_path, schema_path):
    kf = key_file(tmp_path)
    ids = range(1, 31)
    cfg = config(tmp_path, schema_path, [
        {"name": "a", "attributes": ["x"], "source": write_source(spark, tmp_path / "a", ids, ("x",)),
         "pseudonym_key": {"file": kf}},
        {"name": "b", "attributes": ["y"], "source": write_source(spark, tmp_path / "b", ids, ("y",)),
         "pseudonym_key": {"file": kf}}], fragmentation="vertical", keep_id=True)
    plan = play(spark, cfg)
    fa = read_delta(spark, protected_path(cfg.work_dir, "a")).toPandas()
    fb = read_delta(spark, protected_path(cfg.work_dir, "b")).toPandas()
    assert list(fa.columns) == ["pseudonym", "x"] and list(fb.columns) == ["pseudonym", "y"]
    rel = read_delta(spark, aggregator.release(spark, aggregator_context(cfg)).path).toPandas()
    want = fa.merge(fb, on="pseudonym")
    assert len(want) == 30
    pd.testing.assert_frame_equal(rel.sort_values("pseudonym").reset_index(drop=True),
                                  want[["pseudonym", "x", "y"]].sort_values("pseudonym").reset_index(drop=True))
    assert set(rel["pseudonym"]) == {pseudonym(DERIVED, i, context=plan.pseudonym_context()) for i in ids}


@pytest.mark.slow  # a whole release end to end (or processes of their own): CI runs it; the quick loop leaves it out
def test_vertical_pseudonym_sets_that_differ_are_refused(spark, tmp_path, schema_path):
    kf = key_file(tmp_path)
    cfg = config(tmp_path, schema_path, [
        {"name": "a", "attributes": ["x"], "source": write_source(spark, tmp_path / "a", range(1, 21), ("x",)),
         "pseudonym_key": {"file": kf}},
        {"name": "b", "attributes": ["y"], "source": {"path": str(tmp_path / "b"), "format": "parquet"},
         "pseudonym_key": {"file": kf}}], fragmentation="vertical")
    write_source(spark, tmp_path / "b", range(1, 21), ("y",))
    for o in cfg.owners:
        owner.describe_fragment(spark, owner_context(cfg, o.name))
    aggregator.issue_plan(aggregator_context(cfg), spark)
    # owner b's table changes after the plan: one record replaced by another (same count)
    import shutil

    shutil.rmtree(tmp_path / "b")
    write_source(spark, tmp_path / "b", [*range(1, 20), 99], ("y",))
    for o in cfg.owners:
        owner_round.protect_owner_fragment(spark, owner_context(cfg, o.name))
    with pytest.raises(IdentifierError) as e:
        aggregator.release(spark, aggregator_context(cfg))
    assert str(e.value) == ("the protected fragments of 'a' and 'b' hold different sets of pseudonyms "
                            "(their pseudonym-set digests differ)")


def unlinked_owners(spark, tmp_path, schema_path, fragmentation):
    """Two owners (a: records 1..30; b: 31..50 horizontal, 1..30 vertical), ``linkage: unlinked``,
    every party's step played up to the aggregator's release: ``(cfg, plan)``."""
    kf = key_file(tmp_path)
    if fragmentation == "horizontal":
        owners = [{"name": "a", "source": write_source(spark, tmp_path / "a", range(1, 31))},
                  {"name": "b", "source": write_source(spark, tmp_path / "b", range(31, 51))}]
    else:
        owners = [{"name": "a", "attributes": ["x"], "source": write_source(spark, tmp_path / "a", range(1, 31), ("x",))},
                  {"name": "b", "attributes": ["y"], "source": write_source(spark, tmp_path / "b", range(1, 31), ("y",))}]
    for o in owners:
        o["pseudonym_key"] = {"file": kf}
    cfg = config(tmp_path, schema_path, owners, fragmentation=fragmentation, linkage="unlinked")
    return cfg, play(spark, cfg)


@pytest.fixture(scope="module")
def unlinked_horizontal(spark, tmp_path_factory, schema_path):
    """The horizontal unlinked owners' steps, played once for the two tests that read them (the
    second forges owner b's pseudonym set and so runs after the first)."""
    return unlinked_owners(spark, tmp_path_factory.mktemp("unlinked-h"), schema_path, "horizontal")


@pytest.mark.slow  # a whole release end to end (or processes of their own): CI runs it; the quick loop leaves it out
@pytest.mark.parametrize("fragmentation", ["horizontal", "vertical"])
def test_unlinked_owners_unlink_their_columns_and_send_pseudonyms_apart(spark, tmp_path, schema_path, fragmentation,
                                                                        request):
    if fragmentation == "horizontal":
        cfg, plan = request.getfixturevalue("unlinked_horizontal")
    else:
        cfg, plan = unlinked_owners(spark, tmp_path, schema_path, fragmentation)
    frag = read_delta(spark, protected_path(cfg.work_dir, "a")).toPandas()
    assert list(frag.columns) == (["x", "y"] if fragmentation == "horizontal" else ["x"])  # no pseudonym in the rows
    pset = read_delta(spark, pseudonyms_path(cfg.work_dir, "a")).toPandas()
    assert list(pset.columns) == ["pseudonym"]
    assert set(pset["pseudonym"]) == {pseudonym(DERIVED, i, context=plan.pseudonym_context()) for i in range(1, 31)}
    manifest = open(manifest_path(cfg.work_dir, "a")).read()
    assert '"pseudonym_digest": "30:' in manifest
    rel = read_delta(spark, aggregator.release(spark, aggregator_context(cfg)).path).toPandas()
    assert list(rel.columns) == ["x", "y"] and len(rel) == (50 if fragmentation == "horizontal" else 30)
    # each released column is the multiset of the owners' columns
    if fragmentation == "vertical":
        fb = read_delta(spark, protected_path(cfg.work_dir, "b")).toPandas()
        assert sorted(rel["x"]) == sorted(frag["x"]) and sorted(rel["y"]) == sorted(fb["y"])


@pytest.mark.slow  # a whole release end to end (or processes of their own): CI runs it; the quick loop leaves it out
def test_owner_steps_alone_need_a_key_unless_owners_share_one_private_root(spark, tmp_path, schema_path, monkeypatch):
    src = write_source(spark, tmp_path / "a", range(1, 11))
    own = [{"name": "a", "source": src, "private_dir": str(tmp_path / "pa")},
           {"name": "b", "source": src, "private_dir": str(tmp_path / "pb")}]
    cfg = config(tmp_path, schema_path, own)
    path = generated_key_path(cfg, cfg.owners[0])
    with pytest.raises(PseudonymKeyError) as e:
        owner.describe_fragment(spark, owner_context(cfg, "a"))
    assert str(e.value) == (f"owner 'a' has no pseudonym_key in its configuration and no generated release key at "
                            f"{path!r}; name the key the owners share ({{file: PATH}} or {{env: VAR}})")
    assert path == str(tmp_path / "pa" / "pseudonym-key")
    # one private root (no private_dir): the first owner step creates the release key, the others read it
    monkeypatch.setenv("FRAGRELEASE_PRIVATE_ROOT", str(tmp_path / "root"))
    shared = config(tmp_path, schema_path, [{"name": "a", "source": src}, {"name": "b", "source": src}])
    ka = owner_pseudonym_key(owner_context(shared, shared.owners[0].name))
    assert owner_pseudonym_key(owner_context(shared, shared.owners[1].name)) == ka and len(ka) == 32
    kp = tmp_path / "root" / "pseudo" / "pseudonym-key"
    assert len(kp.read_bytes()) == 64 and ka == derive_key(kp.read_bytes())  # the file holds the secret, hex
    assert stat.S_IMODE(os.stat(kp).st_mode) == 0o600 and stat.S_IMODE(os.stat(kp.parent).st_mode) == 0o700
    # a configured key that is missing or short
    missing = config(tmp_path, schema_path, [{"name": n, "source": src, "pseudonym_key": {"env": "FR_NO_SUCH_KEY"}}
                                             for n in ("a", "b")])
    monkeypatch.delenv("FR_NO_SUCH_KEY", raising=False)
    with pytest.raises(PseudonymKeyError, match="^owner 'a': pseudonym key environment variable 'FR_NO_SUCH_KEY' is not set$"):
        owner.describe_fragment(spark, owner_context(missing, "a"))
    monkeypatch.setenv("FR_NO_SUCH_KEY", "short")
    with pytest.raises(PseudonymKeyError, match="is 5 bytes; at least 32 are required$"):
        owner.describe_fragment(spark, owner_context(missing, "a"))


@pytest.mark.slow  # a whole release end to end (or processes of their own): CI runs it; the quick loop leaves it out
def test_single_command_release_generates_a_fresh_private_key_per_release(spark, tmp_path, schema_path):
    own = [{"name": "a", "source": write_source(spark, tmp_path / "a", range(1, 21)), "private_dir": str(tmp_path / "pa")},
           {"name": "b", "source": write_source(spark, tmp_path / "b", range(21, 41)), "private_dir": str(tmp_path / "pb")}]
    cfg = config(tmp_path, schema_path, own, if_exists="new-version")
    first = run_local_release(spark, cfg)
    ka = open(tmp_path / "pa" / "pseudonym-key", "rb").read()
    assert open(tmp_path / "pb" / "pseudonym-key", "rb").read() == ka and len(ka) == 64
    for folder in ("pa", "pb"):
        assert stat.S_IMODE(os.stat(tmp_path / folder / "pseudonym-key").st_mode) == 0o600
        assert stat.S_IMODE(os.stat(tmp_path / folder).st_mode) == 0o700
    frag = read_delta(spark, protected_path(cfg.work_dir, "a")).toPandas()
    assert set(frag["pseudonym"]) == {pseudonym(derive_key(ka), i, context=first.plan.pseudonym_context()) for i in range(1, 21)}
    # one process generated the key and played the aggregator: the recorded guarantee says so
    assert "one process played every party" in first.provenance["guarantee"]["against"]
    assert os.path.exists(plan_pin_path(cfg.name, cfg.work_dir))  # pinned: a later run can resume it (issue 49)
    assert first.mean_sse is None or first.mean_sse >= 0
    run_local_release(spark, cfg, new_plan=True)  # a new release (the first one is committed)
    assert open(tmp_path / "pa" / "pseudonym-key", "rb").read() != ka  # one key per release


def test_the_key_is_not_in_the_spark_plan(spark):
    from fragrelease.jobs.protocol.shuffle import pseudonymize

    df = spark.createDataFrame([(1, 2.0), (2, 3.0)], "rid long, x double")
    out = pseudonymize(df, "rid", KEY, "plan-x")
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        out.explain(True)
    plan = buf.getvalue()
    assert "pseudonymize" in plan  # the control: the plan was captured
    for needle in (KEY.decode(), KEY.hex(), "0123456789abcdef"):
        assert needle not in plan
    assert sorted(r["pseudonym"] for r in out.collect()) == sorted(pseudonym(KEY, i, context="plan-x") for i in (1, 2))


@pytest.mark.slow  # a whole release end to end (or processes of their own): CI runs it; the quick loop leaves it out
def test_fragments_written_under_another_key_than_the_plans_are_refused(spark, tmp_path, schema_path):
    """The key changes between the metadata and the protect step (e.g. two runs racing on one key
    file): shared records would then hide behind different pseudonyms, so the aggregator refuses."""
    from fragrelease.errors import ManifestMismatchError

    kf = key_file(tmp_path)
    srcs = {"a": write_source(spark, tmp_path / "a", range(1, 21)), "b": write_source(spark, tmp_path / "b", range(21, 41))}
    cfg = config(tmp_path, schema_path, [{"name": n, "source": srcs[n], "pseudonym_key": {"file": kf}} for n in ("a", "b")])
    for o in cfg.owners:
        owner.describe_fragment(spark, owner_context(cfg, o.name))
    aggregator.issue_plan(aggregator_context(cfg), spark)
    owner_round.protect_owner_fragment(spark, owner_context(cfg, "a"))
    open(kf, "wb").write(b"a different key of 32 bytes or more")
    owner_round.protect_owner_fragment(spark, owner_context(cfg, "b"))
    with pytest.raises(ManifestMismatchError) as e:
        aggregator.release(spark, aggregator_context(cfg))
    assert str(e.value) == ("owners 'a' and 'b' wrote their fragments under different pseudonym keys "
                            "(their key checks differ)")


def test_disjointness_check_counts_shared_and_repeated_pseudonyms_without_showing_them(spark):
    def frame(values):
        return spark.createDataFrame([(v,) for v in values], "pseudonym string")

    combine.check_disjoint_pseudonyms({"a": frame(["p1", "p2"]), "b": frame(["p3"]), "c": frame(["p4"])})  # disjoint
    with pytest.raises(IdentifierError) as e:
        combine.check_disjoint_pseudonyms({"a": frame(["p1", "p2", "p9"]), "b": frame(["p5"]),
                                              "c": frame(["p1", "p2", "p5"])})
    assert str(e.value).startswith("owners 'a' and 'c' hold 2 records with the same pseudonym;")  # the largest pair
    assert "p1" not in str(e.value) and "p2" not in str(e.value)
    with pytest.raises(IdentifierError) as e:
        combine.check_disjoint_pseudonyms({"a": frame(["p1", "p1", "p2"]), "b": frame(["p3"])})
    assert str(e.value) == ("the protected fragment of 'a' holds 1 pseudonym more than once; "
                            "a horizontal owner holds each record once")


@pytest.mark.slow  # a whole release end to end (or processes of their own): CI runs it; the quick loop leaves it out
def test_a_changed_pseudonym_set_of_an_unlinked_owner_is_refused(spark, tmp_path, unlinked_horizontal):
    """The pseudonym-set table travels apart from the rows; the owner's signature covers it too."""
    from deltalake import write_deltalake

    from fragrelease.errors import ManifestMismatchError

    cfg, _ = unlinked_horizontal
    # the owners' steps of the shared fixture; its release (if the other test made one) is elsewhere
    cfg = cfg.model_copy(update={"output": str(tmp_path / "release")})
    # someone with write access to work_dir replaces b's pseudonym set by a's (a second commit)
    forged = read_delta(spark, pseudonyms_path(cfg.work_dir, "a")).toPandas()
    write_deltalake(pseudonyms_path(cfg.work_dir, "b"), forged, mode="overwrite")
    with pytest.raises(ManifestMismatchError,
                       match=r"^pseudonym-set table of owner 'b' is at Delta version 1, its signed manifest says 0"):
        aggregator.release(spark, aggregator_context(cfg))
