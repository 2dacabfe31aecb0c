"""The ledger: the Delta tables every part of ackfold reads and writes, and their rules.

- `tables`: names, explicit schemas, layout (`Ledger`); `create`: their idempotent
  creation from Spark;
- `contract`: the contract as Delta, Arrow, JSON Schema and SQL, and the check of a row;
- `writer`: `LedgerWriter`, the tables created and appended without a JVM (delta-rs);
- `store`: where the warehouse lives (local, S3, GCS, ADLS), its delta-rs URI and
  storage options; `protocol`: who commits each table there, and the checks that refuse
  an unsafe setup at start;
- `ids`: derived ids of roots, tuples, edges and events; `status`: a root's statuses;
- `reader`: the ledger read without a JVM (delta-rs), for the CLI and the UI;
- `lock`, `lease`: one writer of `root_state` at a time, on a host and on every host;
- `errors`: the ledger's errors (`LedgerError` and its kinds), which every module imports;
- `conflicts`: Delta's concurrent-modification conflicts, retried by every writer;
- `maintenance`: retention, OPTIMIZE, VACUUM on Spark; `store_maintenance`: the same in
  delta-rs (the embedded engine, and every object store). The run that takes the turn
  and calls them is `ackfold.maintenance.run_maintenance`.

(The synthetic ledgers of the benchmarks are `bench/synth.py` and `bench/arrow_ledger.py`.)
"""
