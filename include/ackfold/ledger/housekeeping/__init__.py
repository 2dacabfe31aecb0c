"""Ledger maintenance: retention, OPTIMIZE and VACUUM on Spark (`maintenance`) and the same
in delta-rs (`store_maintenance`), with Delta's logs that both share (`delta_logs`: what
VACUUM deleted, checkpoints and log cleanup). The run that takes the turn and calls them
is `ackfold.maintenance.run_maintenance`."""
