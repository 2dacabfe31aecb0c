"""The Spark fold's partitions grow with the new events' bytes, so that a large step's
aggregations fit in each task's memory (docs/benchmarks.md, 2026-12-06); a small step
keeps the session's shuffle partitions."""

from __future__ import annotations

import doctest

from ackfold.config.connections import SparkSettings
from ackfold.config.sections import ReconcileSettings
from ackfold.reconcile import spark_fold
from ackfold.reconcile.new_events import byte_limit
from ackfold.reconcile.spark_fold import FOLD_PARTITION_BYTES, fold_partitions


def test_one_partition_per_share_of_bytes_rounded_up() -> None:
    assert fold_partitions(0) == 1
    assert fold_partitions(FOLD_PARTITION_BYTES) == 1
    assert fold_partitions(FOLD_PARTITION_BYTES + 1) == 2
    assert fold_partitions(10 * FOLD_PARTITION_BYTES - 1) == 10


def test_a_default_step_is_smaller_than_a_small_machines_shuffle_and_a_full_slice_larger() -> None:
    configured = SparkSettings().shuffle_partitions  # the defaults, whatever the environment
    # 1M events of ackfold's writers: about 11 MB, fewer partitions than the session's.
    assert fold_partitions(11_000_000) < configured
    # A slice as large as `reconcile.max_bytes_per_batch` lets (512 MiB): 64 partitions.
    full = fold_partitions(byte_limit(ReconcileSettings().max_bytes_per_batch))
    assert full == 64 > configured


def test_doctests() -> None:
    assert doctest.testmod(spark_fold).failed == 0
