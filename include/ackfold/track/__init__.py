"""Tracking: what an app calls to register roots, anchor children, and ack or fail them.

- `tracker`: `Tracker`, Storm's OutputCollector in plain Python (no Spark): the spec the
  Spark API is tested against, and a writer for producers outside Spark;
- `stage`: `StageTracker`, the same verbs over whole DataFrames, for Structured Streaming
  apps (classic sessions and Spark Connect alike), built on `columns` (the `_ackfold`
  tuple column, in the versioned `layout`), `events` (the `ack_events` rows of acks and
  fails), `write` (a micro-batch's idempotent appends) and `sql_ids` (the ledger's
  derived ids as Spark SQL columns).

Importing this package imports neither Spark nor `stage`.
"""
