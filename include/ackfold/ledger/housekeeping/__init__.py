"""Ledger maintenance: retention, OPTIMIZE and VACUUM on Spark (`maintenance`) and the same
in delta-rs (`store_maintenance`). The run that takes the turn and calls them is
`ackfold.maintenance.run_maintenance`."""
