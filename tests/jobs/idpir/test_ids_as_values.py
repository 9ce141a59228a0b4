"""Ids compared as values, horizontal disjointness before the spend, the release's pseudonym context
and RFC 4180 CSV (issue 36 items 1, 6 and 7).

At 0.8.4 ids written ``01006``, ``+1006`` or `` 1006`` next to ``1006`` passed the owner (compared as
text), and the fragment failed at the aggregator after both ledgers were charged; ``1006.0`` failed
inside the noise job without owner or file; horizontal owners sharing records were refused only
after both spent and published; the pseudonym context was the plan id alone (chosen by the
aggregator); doubled quotes in a CSV were not unescaped and a quoted line break split its record.
"""
import json
import os

import pytest
import yaml

from fragrelease.errors import IdentifierError, ManifestMismatchError, ProtocolError
from fragrelease.jobs.idpir import owner_round
from fragrelease.jobs.protocol import aggregator
from fragrelease.jobs.protocol.context import aggregator_context, owner_context
from fragrelease.jobs.protocol.layout import metadata_path, nonce_path, plan_path
from fragrelease.jobs.protocol.owner import describe_fragment
from fragrelease.protocol.config import config_from_dict

SCHEMA = {"name": "clinic", "attributes": [
    {"name": "record_id", "type": "long", "role": "id"},
    {"name": "age", "type": "integer", "role": "quasi-identifier", "kind": "numeric", "domain": [0, 100]},
    {"name": "sex", "type": "string", "role": "sensitive", "kind": "categorical", "categories": ["Female", "Male"]},
]}
GOOD_B = "record_id,age,sex\n" + "".join(f"{i},{20 + i % 50},{'Male' if i % 2 else 'Female'}\n" for i in range(2000, 2010))
KEY = b"0123456789abcdef0123456789abcdef-ids-test"


def _cfg(tmp_path, a_text, b_text=GOOD_B, schema=SCHEMA, **kw):
    from signing_keys import with_keys  # tests/helpers: the owners sign their manifests

    (tmp_path / "schema.yaml").write_text(yaml.safe_dump(schema))
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "a.csv").write_text(a_text, encoding="utf-8")
    (src / "b.csv").write_text(b_text, encoding="utf-8")
    keyfile = tmp_path / "keys" / "k"
    keyfile.parent.mkdir(exist_ok=True)
    keyfile.write_bytes(KEY)
    keyfile.chmod(0o600)  # a key file others may read is refused
    owners = [{"name": n, "source": {"path": str(src / f"{n[-1]}.csv"), "format": "csv"},
               "pseudonym_key": {"file": str(keyfile)}, "private_dir": str(tmp_path / "private" / n),
               "ledger": {"path": str(tmp_path / "ledgers" / n), "lifetime_epsilon": "10"}}
              for n in ("clinic-a", "clinic-b")]
    cfg = config_from_dict(dict(name="ids", dataset=str(tmp_path / "schema.yaml"), fragmentation="horizontal",
                                mechanism="dp-ir", epsilon="1", k=3, owners=owners, work_dir=str(tmp_path / "work"),
                                output=str(tmp_path / "release"), reports=False, **kw))
    return with_keys(cfg, tmp_path / "signing")


@pytest.fixture(scope="module")
def described(spark, tmp_path_factory):
    """Both owners' metadata step run once (a: records 3001-3003, b: ``GOOD_B``): its folder and the
    two metadata; a test works on a copy (:func:`_copy`)."""
    root = tmp_path_factory.mktemp("described")
    cfg = _cfg(root, _rows(3001, 3002, 3003))
    return root, [describe_fragment(spark, owner_context(cfg, o.name)) for o in cfg.owners]


@pytest.fixture(scope="module")
def planned(spark, described, tmp_path_factory):
    """:func:`described` with the aggregator's plan issued: its folder, the metadata and the plan."""
    root = tmp_path_factory.mktemp("planned")
    cfg = _copy(described[0], root)
    return root, described[1], aggregator.issue_plan(aggregator_context(cfg), spark)


def _copy(state, tmp_path):
    """A fixture's folder copied into ``tmp_path`` (``copy_state``); the configuration of the copy."""
    from copied_state import copy_state  # tests/helpers

    copy_state(state, tmp_path)
    return _cfg(tmp_path, _rows(3001, 3002, 3003))


def _ledgers_untouched(tmp_path):
    return not os.path.exists(tmp_path / "ledgers")


def _rows(*ids):
    return "record_id,age,sex\n" + "".join(f"{i},{30 + n},Male\n" for n, i in enumerate(ids))


# ---- 1. ids parsed to the declared type and compared as values, in the metadata step -----------------

SAME_ID = [
    ("leading zero", "01006", "record id 1006 appears 2 times (written '01006' and '1006', the same long id)"),
    ("plus sign", "+1006", "record id 1006 appears 2 times (written '+1006' and '1006', the same long id)"),
    ("leading blank", " 1006", "record id 1006 appears 2 times (written ' 1006' and '1006', the same long id)"),
]


@pytest.mark.parametrize("case,written,said", SAME_ID, ids=[c[0] for c in SAME_ID])
def test_ids_written_differently_are_one_id_and_refused_in_the_metadata_step(spark, tmp_path, case, written, said):
    cfg = _cfg(tmp_path, _rows(1005, written, 1006, 1007))
    with pytest.raises(IdentifierError) as info:
        describe_fragment(spark, owner_context(cfg, "clinic-a"))
    assert str(info.value) == (f"owner 'clinic-a' (source {tmp_path / 'src' / 'a.csv'}): id column 'record_id': "
                               f"{said}; ids must be unique")
    assert not os.path.exists(metadata_path(cfg.work_dir, "clinic-a"))  # nothing sent: no plan can be made
    assert _ledgers_untouched(tmp_path)


def test_a_decimal_integer_id_is_refused_naming_owner_source_column_and_value(spark, tmp_path):
    cfg = _cfg(tmp_path, _rows(1005, "1006.0", 1007, "1e3"))
    with pytest.raises(IdentifierError) as info:
        describe_fragment(spark, owner_context(cfg, "clinic-a"))
    assert str(info.value) == (f"owner 'clinic-a' (source {tmp_path / 'src' / 'a.csv'}): id column 'record_id' "
                               "value '1006.0' is not an integer; the schema declares the id long (column type string)")
    assert _ledgers_untouched(tmp_path)


def test_the_cli_metadata_step_prints_the_one_line_and_exits_2(spark, tmp_path, capsys):
    from fragrelease.jobs.cli import run_cli

    cfg = _cfg(tmp_path, _rows(1006, "01006", 1007))
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(cfg.model_dump(mode="json", exclude_none=True)))
    assert run_cli(["owner", "metadata", "--config", str(config), "--owner", "clinic-a"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: owner 'clinic-a' (source {tmp_path / 'src' / 'a.csv'}): id column 'record_id': record id "
                   "1006 appears 2 times (written '01006' and '1006', the same long id); ids must be unique"]
    assert _ledgers_untouched(tmp_path)


def test_ids_written_differently_are_conformed_to_one_value(spark):
    from fragrelease.jobs.protocol.fragment import conform_id, validate_fragment
    from fragrelease.schemas.base import schema_from_dict

    schema = schema_from_dict(SCHEMA)
    df = spark.createDataFrame([("+7", 40, "Male"), (" 0008 ", 50, "Female"), ("-3", 50, "Female")],
                               "record_id string, age int, sex string")
    assert validate_fragment(df, list(schema.protected), "record_id", id_type="long").n_records == 3
    assert sorted(r.record_id for r in conform_id(df, "record_id", "long").collect()) == [-3, 7, 8]


def test_double_ids_are_compared_as_numbers(spark):
    from fragrelease.jobs.protocol.fragment import validate_fragment
    from fragrelease.schemas.base import schema_from_dict

    schema = schema_from_dict(SCHEMA)
    df = spark.createDataFrame([("1006.0", 40, "Male"), ("1006", 50, "Female")], "record_id string, age int, sex string")
    with pytest.raises(IdentifierError, match=r"record id 1006\.0 appears 2 times \(written '1006' and '1006\.0', "
                                              r"the same double id\)"):
        validate_fragment(df, list(schema.protected), "record_id", id_type="double")
    nan = spark.createDataFrame([("NaN", 40, "Male"), ("1", 50, "Female")], "record_id string, age int, sex string")
    with pytest.raises(IdentifierError, match="id column 'record_id' value 'NaN' is not a finite number"):
        validate_fragment(nan, list(schema.protected), "record_id", id_type="double")


def test_string_ids_are_compared_as_written_blanks_included(spark):
    from fragrelease.jobs.protocol.fragment import validate_fragment
    from fragrelease.schemas.base import schema_from_dict

    schema = schema_from_dict(SCHEMA)
    df = spark.createDataFrame([("A1", 40, "Male"), (" A1", 50, "Female"), ("01", 50, "Female"), ("1", 50, "Male")],
                               "record_id string, age int, sex string")
    assert validate_fragment(df, list(schema.protected), "record_id", id_type="string").n_records == 4
    dup = spark.createDataFrame([("A1", 40, "Male"), ("A1", 50, "Female")], "record_id string, age int, sex string")
    with pytest.raises(IdentifierError, match="record id 'A1' appears 2 times; ids must be unique"):
        validate_fragment(dup, list(schema.protected), "record_id", id_type="string")


# ---- 2. horizontal disjointness before anyone spends ------------------------------------------------------

def _b_described_and_a(spark, tmp_path, described, a_text):
    """The module's described state copied (clinic-b's metadata of ``GOOD_B`` kept), then clinic-a's
    source rewritten to ``a_text`` and its metadata step run again: the configuration."""
    _copy(described[0], tmp_path)
    cfg = _cfg(tmp_path, a_text)  # the same keys and folders as the copy's; a's new source
    describe_fragment(spark, owner_context(cfg, "clinic-a"))
    return cfg


def test_horizontal_owners_sharing_records_are_refused_at_the_plan_with_nothing_spent(spark, tmp_path, described):
    shared = "record_id,age,sex\n" + "".join(f"{i},{20 + i % 50},Male\n" for i in range(2005, 2015))
    # 2005..2009 are b's records too (written as b writes them)
    cfg = _b_described_and_a(spark, tmp_path, described, shared)
    with pytest.raises(IdentifierError) as info:
        aggregator.issue_plan(aggregator_context(cfg), spark)
    assert str(info.value) == ("owners 'clinic-a' and 'clinic-b' share 5 records (their keyed id digests match); "
                               "horizontal owners must hold disjoint records; no plan was issued and no budget was spent")
    assert not os.path.exists(plan_path(cfg.work_dir))
    assert _ledgers_untouched(tmp_path)
    with pytest.raises(Exception, match="plan.json"):  # no owner can protect (and spend) without a plan
        owner_round.protect_owner_fragment(spark, owner_context(cfg, "clinic-a"))
    assert _ledgers_untouched(tmp_path)


def test_shared_records_written_differently_are_refused_at_the_plan(spark, tmp_path, described):
    """``02005`` at one owner and ``2005`` at the other are one record (ids compared as values)."""
    cfg = _b_described_and_a(spark, tmp_path, described, _rows("02005", 3001, 3002))
    with pytest.raises(IdentifierError, match="owners 'clinic-a' and 'clinic-b' share 1 record "):
        aggregator.issue_plan(aggregator_context(cfg), spark)
    assert _ledgers_untouched(tmp_path)


def test_the_cli_plan_step_refuses_shared_records_in_one_line(spark, tmp_path, capsys):
    from fragrelease.jobs.cli import run_cli

    cfg = _cfg(tmp_path, _rows(2001, 2002, 3003))
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(cfg.model_dump(mode="json", exclude_none=True)))
    for o in cfg.owners:
        assert run_cli(["owner", "metadata", "--config", str(config), "--owner", o.name]) == 0
    capsys.readouterr()
    assert run_cli(["aggregator", "plan", "--config", str(config)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "error: owners 'clinic-a' and 'clinic-b' share 2 records (their keyed id digests match); horizontal owners "
        "must hold disjoint records; no plan was issued and no budget was spent"]
    assert not os.path.exists(plan_path(cfg.work_dir)) and _ledgers_untouched(tmp_path)


def test_the_aggregator_checks_the_id_digests_against_the_metadata(spark, tmp_path, described):
    """The digest tables lie on shared storage: one that does not match its owner's metadata is refused."""
    cfg = _copy(described[0], tmp_path)  # both owners described
    meta = json.loads(open(metadata_path(cfg.work_dir, "clinic-a")).read())
    meta["id_digest"] = "3:12345"
    open(metadata_path(cfg.work_dir, "clinic-a"), "w").write(json.dumps(meta))
    with pytest.raises(ProtocolError, match="the id-digest table of owner 'clinic-a' at .* does not match its metadata"):
        aggregator.issue_plan(aggregator_context(cfg), spark)
    meta.pop("id_digest")
    open(metadata_path(cfg.work_dir, "clinic-a"), "w").write(json.dumps(meta))
    with pytest.raises(ProtocolError, match="the metadata of owner 'clinic-a' has no id digests"):
        aggregator.issue_plan(aggregator_context(cfg), spark)
    assert not os.path.exists(plan_path(cfg.work_dir))


def test_the_metadata_shows_no_raw_id(spark, tmp_path, described):
    from fragrelease.jobs.protocol.digests import committed_rows
    from fragrelease.jobs.protocol.layout import id_digests_path
    from fragrelease.pseudonyms import METADATA_CONTEXT, derive_key, pseudonym

    cfg = _copy(described[0], tmp_path)
    meta = described[1][0]  # clinic-a's metadata step, records 3001-3003
    rows = committed_rows(spark, id_digests_path(cfg.work_dir, "clinic-a", meta.nonce)).collect()
    assert sorted(r.pseudonym for r in rows) == sorted(pseudonym(derive_key(KEY), i, context=METADATA_CONTEXT) for i in (3001, 3002, 3003))
    assert "3001" not in open(metadata_path(cfg.work_dir, "clinic-a")).read()


# ---- 6. the pseudonym context: plan id and every owner's nonce --------------------------------------------

def test_the_release_pseudonyms_use_the_plan_id_and_the_owners_nonces(spark, tmp_path, planned):
    from fragrelease.jobs.protocol.digests import committed_rows
    from fragrelease.jobs.protocol.layout import protected_path
    from fragrelease.pseudonyms import derive_key, pseudonym, release_context

    cfg = _copy(planned[0], tmp_path)  # both owners described, the plan issued
    metas, plan = planned[1], planned[2]
    assert [o.nonce for o in plan.owners] == [m.nonce for m in metas] and len({m.nonce for m in metas}) == 2
    context = release_context(plan.plan_id, [m.nonce for m in metas])
    assert plan.pseudonym_context() == context != plan.plan_id
    owner_round.protect_owner_fragment(spark, owner_context(cfg, "clinic-a"))
    got = {r.pseudonym for r in committed_rows(spark, protected_path(cfg.work_dir, "clinic-a")).collect()}
    assert got == {pseudonym(derive_key(KEY), i, context=context) for i in (3001, 3002, 3003)}


def test_an_owner_refuses_a_plan_without_its_latest_nonce_before_spending(spark, tmp_path, planned):
    cfg = _copy(planned[0], tmp_path)  # both owners described, the plan issued
    plan = json.loads(open(plan_path(cfg.work_dir)).read())
    plan["owners"][0]["nonce"] = "00" * 32  # an aggregator reusing an earlier release's nonces
    open(plan_path(cfg.work_dir), "w").write(json.dumps(plan))
    with pytest.raises(ManifestMismatchError) as info:
        owner_round.protect_owner_fragment(spark, owner_context(cfg, "clinic-a"))
    assert str(info.value) == (f"owner 'clinic-a': plan {plan['plan_id']} does not carry the nonce of this owner's "
                               f"latest metadata round (kept at {nonce_path(cfg.name, cfg.owners[0])!r}); the aggregator "
                               "must issue the plan from the current metadata")
    assert _ledgers_untouched(tmp_path)
    os.remove(nonce_path(cfg.name, cfg.owners[0]))
    with pytest.raises(ManifestMismatchError, match="owner 'clinic-a': no metadata nonce at"):
        owner_round.protect_owner_fragment(spark, owner_context(cfg, "clinic-a"))
    assert _ledgers_untouched(tmp_path)


def test_a_new_metadata_round_makes_the_old_plan_stale(spark, tmp_path, planned):
    cfg = _copy(planned[0], tmp_path)  # both owners described, the plan issued
    describe_fragment(spark, owner_context(cfg, "clinic-b"))  # a fresh nonce: the plan no longer carries b's latest
    with pytest.raises(ManifestMismatchError, match="does not carry the nonce"):
        owner_round.protect_owner_fragment(spark, owner_context(cfg, "clinic-b"))
    assert _ledgers_untouched(tmp_path)


# ---- 7. RFC 4180 CSV ------------------------------------------------------------------------------------------

QUOTED = {"name": "quoted", "attributes": [
    {"name": "record_id", "type": "long", "role": "id"},
    {"name": "age", "type": "integer", "role": "quasi-identifier", "kind": "numeric", "domain": [0, 100]},
    {"name": "name", "type": "string", "role": "sensitive", "kind": "categorical",
     "categories": ['Müller, "quoted"', "Smith, J", "two\nlines"]},
]}


def test_csv_quoted_fields_read_as_rfc_4180(spark, tmp_path):
    from fragrelease.jobs.storage import read_source

    path = tmp_path / "q.csv"
    path.write_text('record_id,age,name\n1,40,"Müller, ""quoted"""\n2,"5,0","Smith, J"\n3,60,"two\nlines"\n'
                    '4,70,plain\n', encoding="utf-8")
    for df in (read_source(spark, str(path), "csv", text=True), read_source(spark, str(path), "csv")):
        rows = sorted((str(r.record_id), str(r.age), r.name) for r in df.collect())
        assert rows == [("1", "40", 'Müller, "quoted"'), ("2", "5,0", "Smith, J"), ("3", "60", "two\nlines"),
                        ("4", "70", "plain")]


def test_doubled_quotes_and_quoted_line_breaks_pass_validation(spark, tmp_path):
    rows = 'record_id,age,name\n' + "".join(f'{i},{i % 90},"Müller, ""quoted"""\n' for i in range(1, 161)) + \
        '161,30,"Smith, J"\n162,31,"two\r\nlines"\n'
    cfg = _cfg(tmp_path, rows.replace("\r\n", "\n"), "record_id,age,name\n500,40,\"Smith, J\"\n501,41,x\n",
               schema=QUOTED)
    assert describe_fragment(spark, owner_context(cfg, "clinic-a")).n_records == 162


def test_a_bad_value_after_a_quoted_line_break_names_its_column_value_and_record(spark, tmp_path):
    text = 'record_id,age,name\n1,40,"two\nlines"\n2,50,"Müller, ""quoted"""\n3,60,"Jones, ""B"""\n4,70,"Smith, J"\n'
    cfg = _cfg(tmp_path, text, schema=QUOTED)
    with pytest.raises(Exception) as info:
        describe_fragment(spark, owner_context(cfg, "clinic-a"))
    assert str(info.value) == (
        f"owner 'clinic-a' (source {tmp_path / 'src' / 'a.csv'}): column 'name' value 'Jones, \"B\"' (record id 3) is "
        "not a declared category of ['Müller, \"quoted\"', 'Smith, J', 'two\\nlines'] (1 such value(s))")
    text = 'record_id,age,name\n1,40,"two\nlines"\n2,500,"Smith, J"\n3,60,"Smith, J"\n'
    cfg = _cfg(tmp_path, text, schema=QUOTED)
    with pytest.raises(Exception) as info:
        describe_fragment(spark, owner_context(cfg, "clinic-a"))
    assert str(info.value).endswith("column 'age' value '500' (record id 2) is outside its declared domain [0.0, 100.0] "
                                    "(1 such value(s))")
