"""The embedded engine: the jobs Airflow runs, in the task's own process, with no JVM.

DuckDB computes; delta-rs reads the ledger's tables and commits what the jobs write. The
engine itself, as the verbs' run functions see it, is `ackfold.engines.embedded`; which
engine a run gets is chosen in `ackfold.engines` (`engine_for`, a floor above: it was
here before). Both engines give the same statuses row for row (`tests/conformance`).

- `duck`: a DuckDB connection bounded by `engine.memory_limit`, with the functions the
  jobs share (Spark's `xxhash64` of a string, for the event hashes `root_state` keeps).
- `log`: what a Delta table gained since a version, read from its log: the files of the
  appends that a reconcile has not folded yet.
- `tables`: a ledger table as DuckDB reads it (parquet files, or an Arrow dataset that
  delta-rs opens), and Arrow rows committed back through delta-rs.
"""

from __future__ import annotations
