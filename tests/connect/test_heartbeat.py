"""The heartbeat through Spark Connect: the classic tier's test, unchanged, on a Connect
session. pyspark 4.1 delivers the listener's events to the client
(`StreamingQueryListenerBus`), where the rows are written with delta-rs."""

from __future__ import annotations

from tests.spark.test_heartbeat import test_progress_is_recorded_throttled_with_start_and_end

__all__ = ["test_progress_is_recorded_throttled_with_start_and_end"]
