"""When the tests' `SparkSessions` reuses the running JVM and when it starts one anew
(`tests/spark_sessions.py`): decided on the settings alone, no JVM here. That the restart
happens, both ways, is `tests/stores/test_spark.py`'s."""

from __future__ import annotations

from tests.spark_sessions import fits

DELTA = "/jars/delta/delta-spark.jar"
GCS = "/jars/gcs/gcs-connector.jar"
SHARED = {"spark.master": "local[2]", "spark.jars": DELTA, "spark.driver.memory": "1g"}


def test_the_same_jars_in_another_order_reuse_the_jvm() -> None:
    running = SHARED | {"spark.jars": f"{GCS},{DELTA}"}
    assert fits(running, SHARED | {"spark.jars": f"{DELTA},{GCS}"})


def test_other_jars_start_a_jvm_anew_more_or_fewer() -> None:
    assert not fits(SHARED, SHARED | {"spark.jars": f"{DELTA},{GCS}"})
    assert not fits(SHARED | {"spark.jars": f"{DELTA},{GCS}"}, SHARED)


def test_a_start_up_setting_asked_otherwise_starts_a_jvm_anew() -> None:
    assert not fits(SHARED, SHARED | {"spark.master": "local[1]"})
    assert not fits(SHARED, SHARED | {"spark.driver.memory": "2g"})
    assert not fits(SHARED, SHARED | {"spark.hadoop.fs.gs.impl": "Gcs"})


def test_session_settings_and_spark_s_own_hadoop_defaults_reuse_the_jvm() -> None:
    # Spark adds these to a running JVM's settings itself; SQL settings are per session.
    running = SHARED | {"spark.hadoop.fs.s3a.vectored.read.min.seek.size": "128K"}
    assert fits(running, SHARED | {"spark.sql.shuffle.partitions": "2"})
