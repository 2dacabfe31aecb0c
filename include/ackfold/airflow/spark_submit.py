"""`AckfoldSparkSubmitOperator`: Airflow's SparkSubmitOperator, with ackfold's jars
resolved when the task runs, not when the DAG file is parsed.

Resolving them verifies the jar cache (and may fetch a store's connector from Maven
Central): a scheduler or DAG processor without the cache would otherwise fail the whole
DAG file, and every ackfold DAG with it, for one Spark task. Here the task fails, with the
cache's own error (`JarsError`: which jars, and how to fill the cache), and every other DAG
stays. This module imports the Spark provider: import it only where that is installed
(`ackfold.airflow.spark_jobs.spark_job`).
"""

from __future__ import annotations

from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from ackfold.config import Settings


class AckfoldSparkSubmitOperator(SparkSubmitOperator):
    """spark-submit of an ackfold job or tracked app, with `settings`' jars (Delta, the
    Kafka source, the warehouse's connector) resolved in `execute`."""

    def __init__(self, *, settings: Settings, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._ackfold_settings = settings

    def resolved_jars(self) -> str:
        """The jars, comma-separated, verified in the cache: what `execute` submits with."""
        from ackfold.spark import spark_jars

        return ",".join(spark_jars(self._ackfold_settings))

    def execute(self, context: Any) -> None:
        self.jars = self.resolved_jars()
        self._hook = None  # built from the attributes, jars included
        return super().execute(context)
