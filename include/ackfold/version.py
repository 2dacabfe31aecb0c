"""ackfold's release, in the bottom layer: the ledger names it in its leases and its
errors, and nothing here imports the package (`pyproject.toml` holds the same)."""

__version__ = "0.2.0"
