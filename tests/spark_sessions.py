"""One classic Spark session per set of jars, for every tier that runs Spark in-process.

A JVM's class path (`spark.jars`), its master, its driver's memory and its Hadoop settings
(`spark.hadoop.*`) are fixed when it starts: a session asked for with others cannot reuse
the running JVM, whose `getOrCreate` would hand back a session without them. `SparkSessions`
stops that JVM then and starts one with what was asked; with the same start-up settings, the
running session is reused. So a module that needs the stores' connectors can run before or
after the modules of the shared session, on the same xdist worker.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ackfold.config import Settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The settings a running JVM cannot take on: its class path, its master, its heap.
_AT_START = ("spark.jars", "spark.master", "spark.driver.memory")
_HADOOP = "spark.hadoop."


def start_up_key(conf: Mapping[str, str]) -> dict[str, str]:
    """What of `conf` a JVM fixes at its start. The jars are a set: their order does not
    change the class path's content (the stores' connectors share a few).

    >>> start_up_key({"spark.jars": "b.jar,a.jar", "spark.sql.shuffle.partitions": "2"})
    {'spark.jars': 'a.jar,b.jar'}
    """
    key = {}
    for name, value in conf.items():
        if name == "spark.jars":
            value = ",".join(sorted(jar for jar in value.split(",") if jar))
        if name in _AT_START or name.startswith(_HADOOP):
            key[name] = value
    return key


def fits(running: Mapping[str, str], wanted: Mapping[str, str]) -> bool:
    """Whether a JVM started with `running` serves a session that asks for `wanted`: the
    same jars, and each start-up setting asked for. Spark adds Hadoop settings of its own
    (`fs.s3a.vectored.read.*`) to a running JVM's: those not asked for are no reason to
    start anew.

    >>> fits({"spark.jars": "a.jar", "spark.hadoop.x": "1"}, {"spark.jars": "a.jar"})
    True
    >>> fits({"spark.jars": "a.jar,gcs.jar"}, {"spark.jars": "a.jar"})
    False
    """
    have, need = start_up_key(running), start_up_key(wanted)
    if have.get("spark.jars", "") != need.get("spark.jars", ""):
        return False
    return all(have.get(name) == value for name, value in need.items())


def wanted_conf(settings: Settings) -> dict[str, str]:
    """The start-up settings a session for `settings` asks for, as `get_spark` sets them."""
    from ackfold.spark.conf import spark_conf

    return {**spark_conf(settings), "spark.master": settings.spark.master}


class SparkSessions:
    """The classic session of this process, for the start-up settings a test asks for."""

    def __init__(self) -> None:
        self.starts = 0  # JVMs started here: a restart is seconds of CPU, worth seeing

    def get(self, settings: Settings, app_name: str = "ackfold-tests") -> SparkSession:
        """The running session if its JVM started with what `settings` asks for; else a new
        JVM (the running one stopped first) with it."""
        from pyspark import SparkContext
        from pyspark.sql import SparkSession

        from ackfold.spark import get_spark
        from tests.conftest import long_lived_jvm, stop_jvm

        wanted = wanted_conf(settings)
        context = SparkContext._active_spark_context
        if context is not None:
            running = dict(context.getConf().getAll())
            # The session `getOrCreate` returns (`getActiveSession` wraps the JVM's anew).
            session = SparkSession._instantiatedSession
            if fits(running, wanted) and session is not None and session._sc is context:
                # Through `get_spark` as before: `getOrCreate` sets the settings' session
                # options again (a test or another module may have changed them).
                return get_spark(settings, app_name=app_name)
        if SparkContext._gateway is not None:
            # Another class path, or a JVM whose session was stopped (its class path is
            # unknown: a new context on it would only add the jars to its executors).
            stop_jvm()
        with long_lived_jvm():
            started = get_spark(settings, app_name=app_name)
        self.starts += 1
        return started
