"""Replaying: failed and timed-out roots go back to their source queues as new attempts;
roots out of attempts go to `dead_letters` and their dead-letter queue.

- `request`: `ReplayRequest`, what a replay is asked; `params`: the same as the
  `ackfold_manual_replay` DAG and the Reliability UI take it (a run conf);
- `planner`: a run's first half, `Plan` (select roots, decide per root), read by
  `spark_planner` (Spark) or `duck_planner` (the embedded engine: DuckDB, delta-rs);
- `queues`: where each root goes back to, made by its source's sender (`senders`: the
  `ackfold.senders` entry points; a source with none is dead-lettered at once);
  `bookkeeping`: what a run records in the ledger (`embedded_books`: the same through
  delta-rs).

The run, `run_replay` (the ledger's turn, the engine, the metrics; what the DAGs, the
CLI and the demo call) and `Replayer` (plan, then execute: send in batches at a rate,
retry), choose the engine, so they stand above it: `ackfold.runs`.

Example:
    >>> from ackfold.replay import ReplayRequest
    >>> from ackfold.runs import run_replay
    >>> run_replay(settings, ReplayRequest(app="wordcount")).sent   # doctest: +SKIP
    12
"""

from ackfold.replay.request import ReplayRequest

__all__ = ["ReplayRequest"]
