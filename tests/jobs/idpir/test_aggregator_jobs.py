"""The aggregator's checks in fewer Spark jobs (issue 41, session 5): every owner's digests and the
records horizontal owners share from one pass (:func:`fragrelease.jobs.protocol.digests.set_checks`),
with the same digests, the same pair and the same messages as checking each table on its own."""

import pytest
from spark_jobs import job_ids, job_names

from fragrelease.errors import IdentifierError
from fragrelease.jobs.idpir.combine import check_disjoint_pseudonyms
from fragrelease.jobs.protocol.digests import content_digest, set_checks
from fragrelease.jobs.protocol.shuffle import pseudonym_set_digest


def _frame(spark, pseudonyms, offset=0.0):
    rows = [(p, i * 0.5 + offset, f"c{i % 3}") for i, p in enumerate(pseudonyms)]
    return spark.createDataFrame(rows, "pseudonym string, x double, g string")


def _pair(frames):
    """What check_disjoint_pseudonyms reports on ``frames``: (a, b, count), or None."""
    try:
        check_disjoint_pseudonyms(frames)
    except IdentifierError as exc:
        return str(exc)
    return None


CASES = {
    "disjoint": ({"a": [f"p{i}" for i in range(40)], "b": [f"q{i}" for i in range(30)]}),
    "two share": ({"a": [f"p{i}" for i in range(40)], "b": [f"p{i}" for i in range(37, 60)],
                   "c": [f"q{i}" for i in range(30)]}),
    "one repeats": ({"a": ["p1", "p1", "p2", "p3", "p3", "p4"], "b": ["q1", "q2"]}),
    "tie by name": ({"b": ["p1", "p2", "x"], "a": ["p1", "p2", "y"], "c": ["x", "y", "z"]}),
    "three hold one": ({"c": ["p1", "p9"], "b": ["p1"], "a": ["p1", "p2"], "d": ["p2"]}),
    "empty one": ({"a": ["p1", "p2"], "b": []}),
}


@pytest.mark.parametrize("single_task", [True, False])
@pytest.mark.parametrize("case", list(CASES))
def test_one_pass_gives_each_tables_digests_and_the_pair_each_check_gives(spark, case, single_task):
    frames = {name: _frame(spark, ps, offset=i) for i, (name, ps) in enumerate(CASES[case].items())}
    got = set_checks(frames, "pseudonym", contents=True, overlaps=True, single_task=single_task)
    assert list(got.pseudonyms) == [pseudonym_set_digest(f) for f in frames.values()]
    assert list(got.contents or ()) == [content_digest(f) for f in frames.values()]
    expected = _pair(frames)
    if expected is None:
        assert got.shared is None
    else:
        a, b, count = got.shared
        assert expected.startswith(f"owners {a!r} and {b!r} hold {count} records" if b is not None
                                   else f"the protected fragment of {a!r} holds {count} pseudonym")
    # without overlaps: the same digests from one global aggregation
    alone = set_checks(frames, "pseudonym", overlaps=False)
    assert alone.pseudonyms == got.pseudonyms and alone.contents is None and alone.shared is None


def test_the_pass_over_small_tables_is_one_spark_job(spark):
    frames = {name: _frame(spark, ps) for name, ps in CASES["two share"].items()}
    before = job_ids(spark)
    got = set_checks(frames, "pseudonym", contents=True, overlaps=True, single_task=True)
    jobs = job_ids(spark) - before
    assert len(jobs) == 1, job_names(spark, jobs)
    assert got.shared == ("a", "b", 3)
