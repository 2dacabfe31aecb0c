"""What the servers ackfold runs on this machine share (ElasticMQ, a Kafka broker, a Spark
standalone cluster): start and stop as a context manager, `serve_forever` for their CLI
commands (`ackfold sqs`, `ackfold kafka`, `ackfold cluster`), and `JvmProcess`."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from types import FrameType, TracebackType
from typing import IO, Self


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


def java() -> str:
    """The `java` to run a local server with: `$JAVA_HOME/bin/java`, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home, "bin", "java")) if home else shutil.which("java")
    if found is None or not Path(found).is_file():
        raise FileNotFoundError("java is not on PATH (nor in JAVA_HOME): install Java 17 or newer")
    return found


class JvmProcess:
    """One JVM in a process group of its own, its output appended to `log_file`.

    What ElasticMQ and the Kafka broker share: start it, read what it logged since, tell
    why it failed (the messages, not the stack frames), and stop the whole group.
    """

    def __init__(self, name: str, log_file: Path) -> None:
        self.name = name
        self.log_file = log_file
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.offset = 0  # where this run's output starts in the log

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def running(self) -> bool:
        return self._proc is not None

    def start(
        self, args: list[str], *, command: str | None = None, env: dict[str, str] | None = None
    ) -> None:
        """`java <args>` (or `<command> <args>`, a launcher such as spark-submit); the child
        inherits os.environ (so the `ackfold up` marker), with `env` on top."""
        argv = [command or java(), *args]
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_file.open("ab")
        self.offset = self._log.tell()
        self._proc = subprocess.Popen(
            argv,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )

    def exit_code(self) -> int | None:
        """The JVM's exit code once it has exited, else None."""
        return self._proc.poll() if self._proc else None

    def logged(self) -> bytes:
        """What this run has logged so far."""
        with self.log_file.open("rb") as handle:
            handle.seek(self.offset)
            return handle.read()

    def failure(self, what: str) -> str:
        """`<name> <what>`, with the end of this run's log."""
        lines = self.logged().decode(errors="replace").splitlines()
        # The message, not the stack frames: a JVM failure is mostly "\tat ..." lines.
        tail = [line for line in lines if not line.lstrip().startswith("at ")][-20:]
        return f"{self.name} {what}; the end of {self.log_file}:\n" + "\n".join(tail)

    def wait(self) -> int:
        assert self._proc is not None
        return self._proc.wait()

    def stop(self, grace: float = 15, *, leader_first: bool = False) -> None:
        """SIGTERM to the group, then SIGKILL after `grace` s. Idempotent.

        `leader_first`: SIGTERM to the group's leader alone, which stops its children
        itself, and to the group only if it is still there after `grace` s."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if leader_first:
                with contextlib.suppress(ProcessLookupError, subprocess.TimeoutExpired):
                    proc.send_signal(signal.SIGTERM)
                    proc.wait(grace)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def kill(self) -> None:
        """SIGKILL the group at once, as a crash would, then reap it."""
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
        self.stop(grace=5)


class JvmServer(LocalServer):
    """A local server that is one JVM (`self._jvm`): its pid, stop and exit are the JVM's."""

    _jvm: JvmProcess
    error: type[Exception] = RuntimeError  # what start() raises

    def _wait_ready(self, timeout: float, answers: Callable[[], bool], where: str) -> None:
        """Poll `answers` until it says the server is up; raise `error` with the end of the
        log if the JVM exits first or `timeout` s pass."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code = self._jvm.exit_code()
            if code is not None:
                raise self.error(self._jvm.failure(f"exited with {code}"))
            if answers():
                return
            time.sleep(0.25)
        raise self.error(self._jvm.failure(f"did not answer on {where} within {timeout:g} s"))

    @property
    def pid(self) -> int | None:
        """The JVM's process id while it runs."""
        return self._jvm.pid

    def stop(self, grace: float = 15) -> None:
        """Stop the server's process group: SIGTERM, then SIGKILL after `grace` s. Idempotent."""
        self._jvm.stop(grace)

    def wait_for_exit(self) -> str:
        code = self._jvm.wait()
        return f"{self._jvm.name} exited with {code}; see {self._jvm.log_file}"
