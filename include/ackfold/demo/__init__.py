"""ackfold's reference app and demo: Storm's word count as tracked Spark streaming apps.

- `feed`: the input, numbered sentences from a bundled public-domain text;
- `faults`: seeded fault injection (drops, fails, poison, slowness, killed queries);
- `wordcount`: the app, two streaming queries on the SQS source;
- `delivery`: the delivery report, computed from the ledger;
- `run`: `ackfold demo`, which drives it all in reconcile-and-replay cycles.
- `flags`: the run's size and faults as command-line flags (`ackfold demo`,
  `ackfold/jobs/wordcount.py`).
"""
