"""CSV fragments read as text without Spark's inference passes (fragrelease.jobs.storage.csv_source)."""
import pytest

from fragrelease.jobs.storage import csv_header, read_csv_text, read_source


def test_header_of_a_file_and_of_a_folder_as_spark_lists_it(tmp_path):
    (tmp_path / "a.csv").write_text("\ufeffrid,age,sex\r\n1,30,F\n")
    assert csv_header(str(tmp_path / "a.csv"), {}) == ["rid", "age", "sex"]  # BOM and CR dropped
    folder = tmp_path / "parts"
    folder.mkdir()
    (folder / "_SUCCESS").write_text("")
    (folder / ".part-0.csv.crc").write_text("xx")
    (folder / "part-1.csv").write_text("x;y\n3;4\n")
    (folder / "part-0.csv").write_text("x;y\n1;2\n")
    assert csv_header(str(folder), {"sep": ";", "header": "true"}) == ["x", "y"]


@pytest.mark.parametrize("text, options", [
    ('"a,b",c\n1,2\n', {}),  # a quoted name: Spark parses it
    ("a,a\n1,2\n", {}),  # duplicate names: Spark renames them
    ("a,,c\n1,2,3\n", {}),  # an empty name
    ("a,b\n1,2\n", {"encoding": "latin1"}),  # an option this reader does not apply
    ("a,b\n1,2\n", {"header": "false"}),
])
def test_anything_uncertain_is_left_to_spark(tmp_path, text, options):
    (tmp_path / "f.csv").write_text(text)
    assert csv_header(str(tmp_path / "f.csv"), options) is None


def test_globs_missing_paths_and_empty_folders_are_left_to_spark(tmp_path):
    (tmp_path / "f.csv").write_text("a\n1\n")
    (tmp_path / "empty").mkdir()
    assert csv_header(str(tmp_path / "*.csv"), {}) is None
    assert csv_header(str(tmp_path / "missing.csv"), {}) is None
    assert csv_header(str(tmp_path / "empty"), {}) is None


def test_text_read_runs_no_job_and_keeps_values_as_written(spark, tmp_path):
    path = tmp_path / "f.csv"
    path.write_text("rid,x,g\n1,007.50,a\n2,,b\n3,abc,c\n")
    tracker = spark.sparkContext.statusTracker()  # test only: counts the jobs the read itself starts
    before = set(tracker.getJobIdsForGroup(None))
    df = read_source(spark, str(path), "csv", text=True)
    assert set(tracker.getJobIdsForGroup(None)) == before
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("rid", "string"), ("x", "string"), ("g", "string")]
    assert [tuple(r) for r in df.orderBy("rid").collect()] == [("1", "007.50", "a"), ("2", None, "b"), ("3", "abc", "c")]
    inferred = read_source(spark, str(path), "csv")  # without text: Spark's inference, as before
    assert inferred.schema["rid"].dataType.simpleString() == "int"


def test_a_file_whose_header_differs_fails_the_read(spark, tmp_path):
    folder = tmp_path / "parts"
    folder.mkdir()
    (folder / "part-0.csv").write_text("rid,x\n1,2\n")
    (folder / "part-1.csv").write_text("rid,y\n3,4\n")
    df = read_csv_text(spark, str(folder))
    with pytest.raises(Exception, match="(?i)header|schema"):
        df.collect()
