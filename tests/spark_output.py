"""What Spark's own log lines look like on a console, for the tests that check that the CLI
and the demo keep them out by default and show them with `--verbose`.

The kinds one `ackfold demo` used to print 37 of (issue 25), none of use to a user."""

from __future__ import annotations

import re

# Spark's console layout: `%d{yy/MM/dd HH:mm:ss} %p %c{1}: %m`.
SPARK_WARNING = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d WARN \w+: ", re.MULTILINE)
NOISE = (
    "ResolveWriteToStream: spark.sql.adaptive.enabled is not supported in streaming",
    "LogicalRDD: The output columns are expected to the same",
    "locally checkpointed",
    "Unable to load native-hadoop library",
    # The JVM's own notice at start, and Spark's about its log level (a PySpark driver
    # counts as a shell).
    "WARNING: Using incubator modules",
    'Setting default log level to "WARN"',
)


def spark_warnings(output: str) -> list[str]:
    """The lines of `output` that are Spark warnings, or any of the noise above."""
    return [
        line
        for line in output.splitlines()
        if SPARK_WARNING.match(line) or any(noise in line for noise in NOISE)
    ]
