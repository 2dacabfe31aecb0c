"""The ledger: the Delta tables every part of ackfold reads and writes, and their rules.

Its rooms, each importing only the ones listed before it (and `errors`):

- `errors`: the ledger's errors (`LedgerError` and its kinds), which every room imports;
- `schema`: the contract and its schemas: the tables (`Ledger`), the contract as Delta,
  Arrow, JSON Schema and SQL, ids, id schemes, statuses, the parquet encoding;
- `storage`: where the warehouse lives (local, S3, GCS, ADLS) and how a commit reaches it:
  the store (one `Store` per run: `storage.run_store`), the commit protocol of each
  table, snapshots, conflicts, checkpoints;
- `reading`: the ledger read without a JVM, for the CLI, the UI and the alerts;
- `commits`: the lease, the fence and the lock (one writer of `root_state` at a time),
  `LedgerWriter` (the tables created and appended without a JVM), the fold's mark;
- `setup`: the tables created from Spark, and upgrades of a ledger an older ackfold wrote;
- `housekeeping`: retention, OPTIMIZE, VACUUM, on Spark and in delta-rs. The run that takes
  the turn and calls them is `ackfold.maintenance.run_maintenance`.

(The synthetic ledgers of the benchmarks are `bench/synth.py` and `bench/arrow_ledger.py`.)
"""
