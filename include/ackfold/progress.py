"""Progress of long work on stderr: a line redrawn in place on a terminal, and a plain
line every few seconds in a log (Airflow task logs, CI), so neither floods nor goes quiet.

Example:
    >>> progress = Progress("replay", total=500, unit="sent")
    >>> progress.update(120)  # doctest: +SKIP
    replay: 120/500 sent (24%, 61/s)
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """Report `done` out of `total` items; `close()` prints the last figure once."""

    def __init__(
        self,
        label: str,
        total: int,
        *,
        unit: str = "done",
        stream: TextIO | None = None,
        every: float = 5.0,
    ) -> None:
        self.label = label
        self.total = total
        self.unit = unit
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty()
        self.every = 0.2 if self.live else every
        self.started = time.monotonic()
        self.shown_at = 0.0
        self.done = 0

    def update(self, done: int, total: int | None = None) -> None:
        self.done = done
        self.total = total if total is not None else self.total
        now = time.monotonic()
        if now - self.shown_at >= self.every or done >= self.total:
            self.shown_at = now
            self._show(final=False)

    def close(self) -> None:
        self._show(final=True)

    def _show(self, *, final: bool) -> None:
        elapsed = max(time.monotonic() - self.started, 1e-6)
        share = f"{100 * self.done // self.total}%, " if self.total else ""
        text = (
            f"{self.label}: {self.done}/{self.total} {self.unit} "
            f"({share}{self.done / elapsed:.0f}/s)"
        )
        if self.live:
            self.stream.write(f"\r\x1b[K{text}" + ("\n" if final else ""))
        elif final or self.done < self.total:
            self.stream.write(text + "\n")
        self.stream.flush()
