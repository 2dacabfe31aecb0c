"""A class-data-sharing archive for the tests' Spark JVMs (JDK 13 and later).

A Spark driver loads the classes of Spark, Scala, Hadoop and Delta from their jars before
its first job: on this machine's 2 cores, a third of a short driver's CPU (a session, a
Delta write and read: its JVM 11 to 12 CPU-seconds, 7.5 to 8 with the archive). The suite
starts about 40 Spark JVMs (in-process drivers, spark-submits, the Connect server). The
archive holds those classes parsed and verified, and each JVM maps it instead of loading
them again.

It is made once per var dir, for the running JDK and pyspark's jars (`archive_path`): one
driver's run with `-XX:ArchiveClassesAtExit`, about 30 CPU-seconds. A JVM whose class path
differs (another virtualenv's pyspark, an executor) cannot use it and runs as before: the
JDK's own warning about that goes to stdout, where a spark-submit's output is read, so
the options silence the `cds` log (`jvm_options`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import sys
from pathlib import Path

# The JDK says why it cannot use an archive on stdout, as a `[warning][cds...]` line.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
# One short driver's work: a session with ackfold's jars, a Delta table written, merged
# into and read; the classes it loads are the archive's.
_DRIVER = """
import os, sys, tempfile
from ackfold.config import load_settings
from ackfold.spark import get_spark
var = tempfile.mkdtemp(prefix="ackfold-cds-")
settings = load_settings(var_dir=var, jars_dir=sys.argv[1],
                         spark={"master": "local[2]", "shuffle_partitions": 2})
spark = get_spark(settings, app_name="ackfold-cds")
spark.range(10).write.format("delta").save(f"{var}/t")
spark.range(5, 15).createOrReplaceTempView("new")
spark.sql(f"MERGE INTO delta.`{var}/t` t USING new n ON t.id = n.id "
          "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
assert spark.read.format("delta").load(f"{var}/t").count() == 15
from pyspark import SparkContext
spark.stop()
gateway = SparkContext._gateway
gateway.shutdown()
gateway.proc.stdin.close()  # the JVM exits, and writes the archive as it does
gateway.proc.wait(timeout=120)
os._exit(0)
"""


def archive_path(var_dir: Path) -> Path | None:
    """Where the archive for this JDK and pyspark's jars goes under `var_dir`; None if
    there is no `java` or no pyspark."""
    try:
        import pyspark
    except ImportError:
        return None
    try:
        version = subprocess.run(
            ["java", "-version"], capture_output=True, text=True, timeout=60, check=True
        ).stderr
    except (OSError, subprocess.SubprocessError):
        return None
    jars = Path(pyspark.__file__).parent / "jars"
    digest = hashlib.sha256(f"{version}\n{jars}\n".encode())
    for jar in sorted(jars.glob("*.jar")):
        stat = jar.stat()
        digest.update(f"{jar.name} {stat.st_size} {stat.st_mtime_ns}\n".encode())
    return var_dir / "cds" / f"spark-{digest.hexdigest()[:16]}.jsa"


def make_archive(archive: Path, jars_dir: Path, jvm: str, *, timeout: float = 600) -> bool:
    """Run one short driver with the JVM options `jvm` that writes `archive` as it exits;
    whether it did. Written under another name, then renamed: a JVM never maps half of it.
    The archives of another JDK or pyspark in its folder go (about 180 MB each)."""
    partial = archive.with_name(f"{archive.name}.{os.getpid()}.tmp")
    env = dict(os.environ, SPARK_SUBMIT_OPTS=f"{jvm} -XX:ArchiveClassesAtExit={partial} {QUIET}")
    try:
        archive.parent.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [sys.executable, "-c", _DRIVER, str(jars_dir)],
            env=env, capture_output=True, timeout=timeout, check=False,
        )  # fmt: skip
        if done.returncode == 0 and partial.is_file():
            os.replace(partial, archive)
            for stale in archive.parent.glob("spark-*.jsa"):  # an older JDK's or pyspark's
                if stale != archive:
                    stale.unlink()
            return True
    except (OSError, subprocess.SubprocessError):
        pass  # a var dir it cannot write, a driver that hung: the JVMs start as before
    with contextlib.suppress(OSError):
        partial.unlink(missing_ok=True)
    return False


def jvm_options(archive: Path | None) -> str:
    """The options that make a JVM map `archive` (if it exists), quietly if it cannot."""
    if archive is None or not archive.is_file():
        return ""
    return f"-XX:SharedArchiveFile={archive} {QUIET}"
