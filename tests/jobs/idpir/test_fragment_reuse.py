"""Fewer Spark jobs in a small release (issue 41): validation reused for the same source bytes, one
task for a small CSV, several digests in one pass, MeanSSE and quantiles in one aggregation."""
import pandas as pd
import pytest

from fragrelease.errors import DomainError, IdentifierError
from fragrelease.jobs.protocol import fragment
from fragrelease.jobs.protocol.fragment import (
    FragmentContext,
    local_source_digest,
    validate_fragment,
    validate_source_fragment,
)
from fragrelease.jobs.storage import read_configured
from fragrelease.protocol.config import SourceConfig
from fragrelease.schemas.base import Attribute

ATTRS = [Attribute(name="age", type="integer", role="quasi-identifier", kind="numeric", domain=(0, 120)),
         Attribute(name="sex", type="string", role="quasi-identifier", kind="categorical", categories=("F", "M"))]


def _jobs(spark):
    return set(spark.sparkContext.statusTracker().getJobIdsForGroup(None))  # test only: counts Spark jobs


@pytest.fixture
def counted(monkeypatch):
    """Count the full validations validate_source_fragment runs."""
    calls = []
    real = fragment.validate_fragment

    def wrapper(*args, **kwargs):
        calls.append(kwargs.get("count_categories", False))
        return real(*args, **kwargs)

    monkeypatch.setattr(fragment, "validate_fragment", wrapper)
    fragment._VALIDATED.clear()
    yield calls
    fragment._VALIDATED.clear()


def _write(path, rows):
    path.write_text("rid,age,sex\n" + "".join(f"{r},{a},{s}\n" for r, a, s in rows))


def _validate(spark, path, **kw):
    source = SourceConfig(path=str(path), format="csv")
    df = read_configured(spark, source, text=True)
    return validate_source_fragment(df, source, ATTRS, "rid", FragmentContext("clinic-a", str(path)),
                                    id_type="long", text=True, **kw)


def test_the_same_bytes_are_validated_once_per_process(spark, tmp_path, counted):
    path = tmp_path / "a.csv"
    _write(path, [(1, 30, "F"), (2, 40, "M"), (3, 50, "F")])
    first = _validate(spark, path)
    before = _jobs(spark)
    assert _validate(spark, path) is first and first.n_records == 3
    assert _jobs(spark) == before  # no Spark job for the kept check
    assert counted == [False]
    # the dp-frequency counts are not in the kept check: validated again, then kept with them
    counts = _validate(spark, path, count_categories=True)
    assert counts.category_counts == {"sex": {"F": 2, "M": 1}}
    assert _validate(spark, path, count_categories=True) is counts
    assert _validate(spark, path) is counts  # a check with counts answers a call without them too
    assert counted == [False, True]


def test_a_changed_byte_or_another_owner_is_validated_again(spark, tmp_path, counted):
    path = tmp_path / "a.csv"
    _write(path, [(1, 30, "F"), (2, 40, "M"), (3, 50, "F")])
    assert _validate(spark, path).n_records == 3
    _write(path, [(1, 30, "F"), (2, 40, "M"), (3, 51, "F")])  # same size, one byte differs
    assert _validate(spark, path).n_records == 3
    assert len(counted) == 2
    _write(path, [(1, 30, "F"), (2, 40, "M")])
    assert _validate(spark, path).n_records == 2
    source = SourceConfig(path=str(path), format="csv")
    df = read_configured(spark, source, text=True)
    validate_source_fragment(df, source, ATTRS, "rid", FragmentContext("clinic-b", str(path)), id_type="long", text=True)
    validate_source_fragment(df, source, ATTRS[:1], "rid", FragmentContext("clinic-a", str(path)), id_type="long",
                             text=True)
    assert len(counted) == 5


def test_a_failed_validation_is_not_kept(spark, tmp_path, counted):
    path = tmp_path / "a.csv"
    _write(path, [(1, 30, "F"), (1, 40, "M")])
    for _ in range(2):
        with pytest.raises(IdentifierError) as e:
            _validate(spark, path)
        assert str(e.value) == (f"owner 'clinic-a' (source {path}): id column 'rid': record id 1 appears 2 times; "
                                "ids must be unique")
    assert len(counted) == 2 and not fragment._VALIDATED


def test_a_file_that_changes_during_the_validation_is_not_kept(spark, tmp_path, monkeypatch):
    path = tmp_path / "a.csv"
    _write(path, [(1, 30, "F"), (2, 40, "M")])
    real = fragment.validate_fragment

    def changing(*args, **kwargs):
        out = real(*args, **kwargs)
        _write(path, [(1, 30, "F"), (2, 40, "F")])
        return out

    monkeypatch.setattr(fragment, "validate_fragment", changing)
    fragment._VALIDATED.clear()
    _validate(spark, path)
    assert not fragment._VALIDATED


def test_only_one_local_file_has_a_digest(tmp_path, monkeypatch):
    path = tmp_path / "a.csv"
    path.write_bytes(b"rid\n1\n")
    import hashlib

    want = hashlib.sha256(b"rid\n1\n").hexdigest()
    assert local_source_digest(SourceConfig(path=str(path), format="csv")) == want
    assert local_source_digest(SourceConfig(path=f"file://{path}", format="csv")) == want
    assert local_source_digest(SourceConfig(path=str(tmp_path), format="csv")) is None  # a folder
    assert local_source_digest(SourceConfig(path=str(tmp_path / "*.csv"), format="csv")) is None
    assert local_source_digest(SourceConfig(path=str(tmp_path / "missing.csv"), format="csv")) is None
    assert local_source_digest(SourceConfig(path="s3a://bucket/a.csv", format="csv")) is None
    assert local_source_digest(SourceConfig(table="db.t")) is None
    monkeypatch.setattr(fragment, "REUSE_BYTES", path.stat().st_size - 1)  # too large to hash
    assert local_source_digest(SourceConfig(path=str(path), format="csv")) is None


@pytest.mark.parametrize("rows, error, message", [
    ([(1, 30, "F"), (2, 130, "M")], DomainError,
     "column 'age' value '130' (record id 2) is outside its declared domain [0.0, 120.0] (1 such value(s))"),
    ([(1, 30, "F"), (2, 40, "X")], DomainError,
     "column 'sex' value 'X' (record id 2) is not a declared category of ['F', 'M'] (1 such value(s))"),
    ([(1, 30, "F"), ("01", 40, "M")], IdentifierError,
     "id column 'rid': record id 1 appears 2 times (written '01' and '1', the same long id); ids must be unique"),
    ([(1, 30, "F"), ("x2", 40, "M")], IdentifierError,
     "id column 'rid' value 'x2' is not an integer; the schema declares the id long (column type string)"),
])
def test_one_task_gives_the_same_checks_and_messages_in_fewer_jobs(spark, tmp_path, rows, error, message):
    path = tmp_path / "a.csv"
    _write(path, rows)
    df = read_configured(spark, SourceConfig(path=str(path), format="csv"), text=True)
    jobs = []
    for single in (False, True):
        before = _jobs(spark)
        with pytest.raises(error) as e:
            validate_fragment(df, ATTRS, "rid", FragmentContext("clinic-a", str(path)), id_type="long", text=True,
                              single_partition=single)
        assert str(e.value) == f"owner 'clinic-a' (source {path}): {message}"
        jobs.append(len(_jobs(spark) - before))
    assert jobs[1] < jobs[0]


def test_one_task_validates_a_valid_fragment_in_two_jobs(spark, tmp_path):
    path = tmp_path / "a.csv"
    _write(path, [(i, 20 + i % 50, "FM"[i % 2]) for i in range(200)])
    df = read_configured(spark, SourceConfig(path=str(path), format="csv"), text=True)
    checks, jobs = [], []
    for single in (False, True):
        before = _jobs(spark)
        checks.append(validate_fragment(df, ATTRS, "rid", id_type="long", text=True, count_categories=True,
                                        single_partition=single))
        jobs.append(len(_jobs(spark) - before))
    assert checks[0] == checks[1] and checks[0].category_counts == checks[1].category_counts == {
        "sex": {"F": 100, "M": 100}}
    assert jobs == [4, 2]  # the aggregation and the grouped count: one job each, no shuffle


def test_digests_of_several_frames_in_one_pass(spark):
    from fragrelease.jobs.protocol.shuffle import pseudonym_set_digest, pseudonym_set_digests

    frames = [spark.createDataFrame(pd.DataFrame({"pseudonym": [f"p{i}" for i in range(n)]}), "pseudonym string")
              for n in (5, 0, 3)]
    before = _jobs(spark)
    together = pseudonym_set_digests(frames)
    one_pass = len(_jobs(spark) - before)
    before = _jobs(spark)
    assert together == [pseudonym_set_digest(f) for f in frames]
    assert one_pass < len(_jobs(spark) - before)
    assert together[1] == "0:0"
    assert pseudonym_set_digests([]) == []


def test_mean_sse_and_both_tables_quantiles_in_one_aggregation(spark):
    from fragrelease.jobs.idpir.evaluate import mean_sse_by_attribute, mean_sse_with_quantiles
    from fragrelease.jobs.protocol.report import _RELATIVE_ERROR, QUANTILES, _quantiles

    pdf = pd.DataFrame({"rid": range(300), "age": [float(20 + (i * 7) % 90) for i in range(300)],
                        "sex": ["FM"[i % 3 == 0] for i in range(300)]})
    prot = pdf.assign(age=[float((i * 13) % 120) for i in range(300)], sex=["FM"[i % 2] for i in range(300)])
    o = spark.createDataFrame(pdf, "rid long, age double, sex string")
    p = spark.createDataFrame(prot.sample(frac=1, random_state=3), "rid long, age double, sex string")
    before = _jobs(spark)
    contributions, qo, qp = mean_sse_with_quantiles(o, p, ATTRS, "rid", list(QUANTILES), int(round(1 / _RELATIVE_ERROR)))
    one_pass = len(_jobs(spark) - before)
    before = _jobs(spark)  # the three passes apart, run once: their jobs counted, their results compared
    separate = mean_sse_by_attribute(o, p, ATTRS, "rid"), _quantiles(o, ATTRS), _quantiles(p, ATTRS)
    separate_jobs = len(_jobs(spark) - before)
    assert contributions == pytest.approx(separate[0], rel=1e-12)
    assert qo == separate[1] and qp == separate[2]
    assert set(qo) == {"age"} and qo["age"][2] == pytest.approx(pdf["age"].median(), abs=1.0)
    assert one_pass < separate_jobs


SCHEMA = {"name": "clinic", "attributes": [
    {"name": "record_id", "type": "long", "role": "id"},
    {"name": "age", "type": "integer", "role": "quasi-identifier", "kind": "numeric", "domain": [0, 100]},
    {"name": "sex", "type": "string", "role": "sensitive", "kind": "categorical", "categories": ["Female", "Male"]},
]}
KEY = b"0123456789abcdef0123456789abcdef-reuse-test"


def _rows(ids, age=30):
    return "record_id,age,sex\n" + "".join(f"{i},{age + n % 40},{'Male' if n % 2 else 'Female'}\n"
                                           for n, i in enumerate(ids))


def _cfg(tmp_path):
    import yaml
    from signing_keys import with_keys  # tests/helpers: the owners sign their manifests

    from fragrelease.protocol.config import config_from_dict

    (tmp_path / "schema.yaml").write_text(yaml.safe_dump(SCHEMA))
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "a.csv").write_text(_rows(range(1000, 1012)))
    (src / "b.csv").write_text(_rows(range(2000, 2012)))
    keyfile = tmp_path / "keys" / "k"
    keyfile.parent.mkdir(exist_ok=True)
    keyfile.write_bytes(KEY)
    keyfile.chmod(0o600)
    owners = [{"name": n, "source": {"path": str(src / f"{n[-1]}.csv"), "format": "csv"},
               "pseudonym_key": {"file": str(keyfile)}, "private_dir": str(tmp_path / "private" / n),
               "ledger": {"path": str(tmp_path / "ledgers" / n), "lifetime_epsilon": "10"}}
              for n in ("clinic-a", "clinic-b")]
    cfg = config_from_dict(dict(name="reuse", dataset=str(tmp_path / "schema.yaml"), fragmentation="horizontal",
                                mechanism="dp-ir", epsilon="1", k=3, owners=owners, work_dir=str(tmp_path / "work"),
                                output=str(tmp_path / "release"), reports=False))
    return with_keys(cfg, tmp_path / "signing")


def test_the_protect_step_reuses_the_metadata_steps_validation_of_the_same_bytes(spark, tmp_path, counted):
    import os

    from fragrelease.jobs.idpir.owner_round import protect_owner_fragment
    from fragrelease.jobs.protocol import aggregator
    from fragrelease.jobs.protocol.context import aggregator_context, owner_context
    from fragrelease.jobs.protocol.owner import describe_fragment

    cfg = _cfg(tmp_path)
    for o in cfg.owners:
        describe_fragment(spark, owner_context(cfg, o.name))
    aggregator.issue_plan(aggregator_context(cfg), spark)
    assert counted == [True, True]  # the metadata steps count the categories for the dp-frequency order
    protect_owner_fragment(spark, owner_context(cfg, "clinic-a"))
    assert counted == [True, True]  # the same bytes: not validated again
    # clinic-b's fragment now holds a value outside its domain (same record count): validated again and
    # refused before its ledger is touched
    src = tmp_path / "src" / "b.csv"
    src.write_text(_rows(range(2000, 2012)).replace("2011,41,Male", "2011,141,Male"))
    with pytest.raises(DomainError) as e:
        protect_owner_fragment(spark, owner_context(cfg, "clinic-b"))
    assert str(e.value) == (f"owner 'clinic-b' (source {src}): column 'age' value '141' (record id 2011) is outside "
                            "its declared domain [0.0, 100.0] (1 such value(s))")
    assert len(counted) == 3
    assert not os.path.exists(tmp_path / "ledgers" / "clinic-b")
