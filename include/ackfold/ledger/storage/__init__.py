"""Where the warehouse lives and how a commit reaches it: the store and its delta-rs URI
and options (`store`), the one `Store` a run resolves and hands down (`run_store`), the
commit protocol of each table (`protocol`), the tables kept open across a run
(`snapshots`), Delta's conflicts retried, checkpoints and deletion vectors."""
