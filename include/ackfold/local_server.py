"""What the servers ackfold runs on this machine share (ElasticMQ, a Spark standalone
cluster): start and stop as a context manager, and `serve_forever` for their CLI
commands (`ackfold sqs`, `ackfold cluster`)."""

from __future__ import annotations

import signal
import sys
from abc import ABC, abstractmethod
from types import FrameType, TracebackType
from typing import Self


class LocalServer(ABC):
    """A server of local processes: `start`, `stop` (idempotent), and what to print."""

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def stop(self) -> None: ...

    @abstractmethod
    def banner(self) -> str:
        """The line printed once the server is up: where it is, how to use it."""

    @abstractmethod
    def wait_for_exit(self) -> str:
        """Block until the server dies on its own; say which process, and where its log is."""

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def serve_forever(self) -> int:
        """Run until Ctrl-C or SIGTERM (0), or until the server dies (1): the CLI's exit code."""

        def _interrupt(signum: int, frame: FrameType | None) -> None:
            raise KeyboardInterrupt

        # Both handlers explicitly: a background launch inherits SIGINT ignored.
        previous = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            self.start()
            print(self.banner(), flush=True)
            print(self.wait_for_exit(), file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            return 0
        finally:
            # A second Ctrl-C must not cut the shutdown short and leave processes behind.
            for sig in previous:
                signal.signal(sig, signal.SIG_IGN)
            self.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
