"""Replaying: failed and timed-out roots go back to their source queues as new attempts;
roots out of attempts go to `dead_letters` and their dead-letter queue.

- `replayer`: `Replayer` (plan, then execute) and `replay()`, one run end to end;
- `params`: a manual replay request as the `ackfold_manual_replay` DAG and the UI take it.
"""
