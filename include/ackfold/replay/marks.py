"""Marking sent chunks in `replay_log` while the next chunks are being sent.

A replay run sends chunk by chunk (`replay.chunk`) and records each chunk's outcome (a
`sent` or `failed` row per message) once it is sent: that mark is what keeps a later run
from sending it again. A mark is a Delta append, which costs more than sending a chunk
to SQS or Kafka, so `Marker` appends in a thread of its own: each append covers every
chunk sent while the previous one was being written, and sending never waits for the
ledger unless `behind` chunks already wait for their mark.

What a crash can cost is unchanged in kind: messages sent but not yet marked are sent
again by the next run, which counts them (`resent`). At most the chunks waiting for their
mark, those in the append under way, and the chunk being sent are in that state.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from contextlib import nullcontext
from types import TracebackType

from ackfold.ledger.commits.fence import active, holding
from ackfold.replay.bookkeeping import Bookkeeper
from ackfold.replay.planner import Plan, Planned
from ackfold.sources.base import Sent


class Marker:
    """Appends the marks of sent chunks from a background thread; `close()` writes the
    rest and re-raises what an append raised (so does the next `add` after a failure)."""

    def __init__(self, books: Bookkeeper, plan: Plan, *, behind: int = 1) -> None:
        self._books = books
        self._plan = plan
        self._behind = behind
        self._waiting: list[tuple[Sequence[Planned], dict[int, Sent]]] = []
        self._closing = False
        self._error: BaseException | None = None
        self._changed = threading.Condition()
        # The marks are the run's commits: its thread's fence fences them in this one too.
        self._fence = active(books.ledger.root)
        self._thread = threading.Thread(target=self._run, name="ackfold-replay-marks")
        self._thread.start()

    def add(self, batch: Sequence[Planned], results: dict[int, Sent]) -> None:
        """Queue a sent chunk's marks; waits while `behind` chunks are already queued."""
        with self._changed:
            while len(self._waiting) >= self._behind and self._error is None:
                self._changed.wait()
            self._raise()
            self._waiting.append((batch, results))
            self._changed.notify_all()

    def close(self) -> None:
        """Append every queued mark, stop the thread, and raise an append's error."""
        with self._changed:
            self._closing = True
            self._changed.notify_all()
        self._thread.join()
        self._raise()

    def __enter__(self) -> Marker:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if error is None:
            self.close()
            return
        # Mark what was sent before the failure, but let the failure be what is raised.
        with self._changed:
            self._closing = True
            self._changed.notify_all()
        self._thread.join()

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._waiting and not self._closing:
                    self._changed.wait()
                taken, self._waiting = self._waiting, []
                self._changed.notify_all()
            if not taken:
                return
            batch = [p for chunk, _ in taken for p in chunk]
            results = {k: v for _, found in taken for k, v in found.items()}
            try:
                with holding(self._fence) if self._fence is not None else nullcontext():
                    self._books.mark(self._plan, batch, results)
            except BaseException as exc:  # re-raised in the sending thread
                with self._changed:
                    self._error = exc
                    self._changed.notify_all()
                return
