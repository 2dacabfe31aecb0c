"""A console session's JVM says nothing of its own at start: its stderr goes through a
filter that drops the one notice Java prints for the Vector API module Spark always adds,
and passes every other line, for the JVM's whole life. No JVM here: a child process
stands in for it, as the JVM inherits this process's stderr the same way."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from ackfold.spark.session import jvm_notices_dropped

CHILD = (
    "import sys, time\n"
    "sys.stderr.write('WARNING: Using incubator modules: jdk.incubator.vector\\n')\n"
    "sys.stderr.flush()\n"
    "time.sleep(0.5)\n"  # still writing after the session is made
    "sys.stderr.write('26/11/25 01:58:55 ERROR Executor: a real error\\n')\n"
)


def test_the_jvms_notice_is_dropped_and_every_other_line_kept(
    capfd: pytest.CaptureFixture[str],
) -> None:
    with jvm_notices_dropped():
        child = subprocess.Popen([sys.executable, "-c", CHILD])
    print("ackfold's own line", file=sys.stderr)  # straight to stderr again
    assert child.wait(timeout=30) == 0
    err = ""
    deadline = time.monotonic() + 10
    while "a real error" not in err and time.monotonic() < deadline:
        time.sleep(0.05)
        err += capfd.readouterr().err
    assert err.splitlines() == [
        "ackfold's own line",
        "26/11/25 01:58:55 ERROR Executor: a real error",
    ]
