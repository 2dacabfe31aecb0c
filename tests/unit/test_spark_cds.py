"""The Spark class-data archive of the tests' JVMs (`tests/spark_cds.py`): made only for a
run that may start Spark, mapped by every JVM that can, and silent in one that cannot."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from tests import spark_cds
from tests.conftest import _may_start_spark


def test_only_a_run_beyond_the_fast_tiers_may_start_spark() -> None:
    assert _may_start_spark([])  # the test paths: the whole suite
    assert _may_start_spark(["tests"])
    assert _may_start_spark(["tests/unit", "tests/spark/test_tracking.py::test_x"])
    assert _may_start_spark(["tests/conformance/test_golden.py::test_golden_ledger[spark-i47]"])
    assert not _may_start_spark(["tests/unit/test_ids.py::test_x", "tests/ui", "tests/deploy"])


def test_the_options_map_the_archive_only_once_it_is_there(tmp_path: Path) -> None:
    assert spark_cds.jvm_options(None) == ""
    archive = tmp_path / "cds" / "spark.jsa"
    assert spark_cds.jvm_options(archive) == ""
    archive.parent.mkdir()
    archive.write_bytes(b"made")
    options = spark_cds.jvm_options(archive)
    assert f"-XX:SharedArchiveFile={archive}" in options.split()
    assert set(spark_cds.QUIET.split()) <= set(options.split())


@pytest.mark.skipif(shutil.which("javac") is None, reason="no JDK on PATH")
def test_a_jvm_that_cannot_use_the_archive_says_nothing_on_stdout(tmp_path: Path) -> None:
    """A class path other than the archive's (another virtualenv's pyspark, an executor):
    the JDK says so on stdout, where a spark-submit's output is read. A class of one line,
    archived from one jar and run from another; no Spark."""
    (tmp_path / "H.java").write_text("public class H { public static void main(String[] a) {} }")
    subprocess.run(["javac", "H.java"], cwd=tmp_path, check=True, capture_output=True)
    for jar in ("archived.jar", "other.jar"):
        with zipfile.ZipFile(tmp_path / jar, "w") as archive:
            archive.write(tmp_path / "H.class", "H.class")
    made = tmp_path / "h.jsa"
    dump = ["java", f"-XX:ArchiveClassesAtExit={made}", "-cp", "archived.jar", "H"]
    subprocess.run(dump, cwd=tmp_path, check=True, capture_output=True)

    def stdout(*options: str) -> str:
        argv = ["java", *options, f"-XX:SharedArchiveFile={made}", "-cp", "other.jar", "H"]
        return subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, check=True).stdout

    assert "Unable to use shared archive" in stdout(), "the JDK's warning, without the options"
    assert stdout(*spark_cds.QUIET.split()) == ""


@pytest.mark.skipif(shutil.which("java") is None, reason="no java on PATH")
def test_the_archive_is_the_var_dirs_for_this_jdk_and_pysparks_jars(tmp_path: Path) -> None:
    path = spark_cds.archive_path(tmp_path)
    assert path is not None
    assert path.parent == tmp_path / "cds"
    assert path.name.startswith("spark-")
    assert path.suffix == ".jsa"
    assert spark_cds.archive_path(tmp_path) == path, "the same JDK and jars, the same file"


def test_an_archive_that_cannot_be_made_leaves_the_jvms_as_they_were(tmp_path: Path) -> None:
    """A var dir it cannot write (here a file where its folder would go): no archive, no
    error, and the JVMs get no option for it."""
    (tmp_path / "cds").write_text("a file, not a folder")
    archive = tmp_path / "cds" / "spark.jsa"
    assert not spark_cds.make_archive(archive, tmp_path, "")
    assert spark_cds.jvm_options(archive) == ""
