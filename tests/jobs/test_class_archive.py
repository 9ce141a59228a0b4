"""The embedded session's class-data-sharing archive (fragrelease.jobs.class_archive)."""
import os
import subprocess

import pytest

from fragrelease.jobs import class_archive, session


def test_the_archive_lives_in_the_environment_unless_named(monkeypatch, tmp_path):
    monkeypatch.delenv("FRAGRELEASE_CLASS_ARCHIVE", raising=False)
    assert class_archive.archive_path().endswith(os.path.join("fragrelease-jars", "spark-classes.jsa"))
    monkeypatch.setenv("FRAGRELEASE_CLASS_ARCHIVE", str(tmp_path / "a.jsa"))
    assert class_archive.archive_path() == str(tmp_path / "a.jsa")


def test_options_only_for_an_archive_that_exists_and_is_not_turned_off(monkeypatch, tmp_path):
    path = tmp_path / "a.jsa"
    monkeypatch.setenv("FRAGRELEASE_CLASS_ARCHIVE", str(path))
    assert class_archive.java_options() is None  # not built
    path.write_bytes(b"x")
    assert class_archive.java_options() == f"-XX:SharedArchiveFile={path} -Xlog:cds*=off"
    monkeypatch.setenv("FRAGRELEASE_CLASS_ARCHIVE", "off")
    assert class_archive.java_options() is None


@pytest.mark.parametrize("content", [b"not an archive", None])
def test_a_bad_or_missing_archive_leaves_the_jvm_running_and_silent(tmp_path, content):
    """The JVM checks the archive itself; one it cannot use (another JDK build, another class path,
    garbage, gone) is ignored without a word, so a stale archive never breaks or clutters a session."""
    path = tmp_path / "a.jsa"
    if content is not None:
        path.write_bytes(content)
    home = session.ensure_java()
    java = os.path.join(home, "bin", "java") if os.path.isdir(home) else home
    out = subprocess.run([java, f"-XX:SharedArchiveFile={path}", class_archive.QUIET, "-version"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    assert "cds" not in (out.stdout + out.stderr).lower() and "archive" not in (out.stdout + out.stderr).lower()


def test_the_test_session_maps_the_archive_setup_built(spark):
    """scripts/setup.sh builds the archive (CI runs it on a new machine) and the embedded session maps it."""
    options = spark.conf.get("spark.driver.defaultJavaOptions", None)
    if not os.path.isfile(class_archive.archive_path()):
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but scripts/setup.sh built no class archive at {class_archive.archive_path()}")
        assert "SharedArchiveFile" not in (options or "")
        pytest.skip("no class archive built here (scripts/setup.sh builds one)")
    assert options.startswith(f"{class_archive.java_options()} ")  # then the JVM's logging (session.log4j_java_options)
    assert f"-XX:SharedArchiveFile={class_archive.archive_path()}" in options


def test_the_build_leaves_a_file_it_did_not_write_alone(monkeypatch, tmp_path, capsys):
    from fragrelease.jobs.class_archive_build import build

    foreign = tmp_path / "mine.jsa"
    foreign.write_bytes(b"a user's file")
    monkeypatch.setenv("FRAGRELEASE_CLASS_ARCHIVE", str(foreign))
    assert build() is None  # refused before any JVM starts
    assert foreign.read_bytes() == b"a user's file" and sorted(p.name for p in tmp_path.iterdir()) == ["mine.jsa"]
    assert "was not built by this tool" in capsys.readouterr().err
