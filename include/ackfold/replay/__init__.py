"""Replaying: failed and timed-out roots go back to their source queues as new attempts;
roots out of attempts go to `dead_letters` and their dead-letter queue.

- `request`: `ReplayRequest`, what a replay is asked; `params`: the same as the
  `ackfold_manual_replay` DAG and the Reliability UI take it (a run conf);
- `planner`: a run's first half, `Plan` (select roots, decide per root);
- `replayer`: `Replayer` (plan, then execute: send at a rate, retry) and `replay()`,
  one run end to end;
- `queues`: where each root goes back to; `bookkeeping`: what a run records in the ledger.

Example:
    >>> from ackfold.replay import ReplayRequest, replay
    >>> replay(spark, settings, ReplayRequest(app="wordcount")).sent   # doctest: +SKIP
    12
"""

from ackfold.replay.replayer import Replayer, replay
from ackfold.replay.request import ReplayRequest

__all__ = ["ReplayRequest", "Replayer", "replay"]
