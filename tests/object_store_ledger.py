"""No commit lost, whoever writes at once (invariant 14), on any object store: the run that
tests/s3 and tests/stores share (`lose_nothing`).

Two producers outside Spark, each in its own process, commit batches to one warehouse at
once through `LedgerWriter`, beside a tracked Spark app (a classic session whose driver
commits each micro-batch's roots and events through delta-rs; a third producer instead,
where the tests leave the JVM out), while a maintenance run
compacts and vacuums the same tables in delta-rs and replay runs append their replay_log
rows, each taking the ledger's turn. One producer is SIGKILLed just after a batch, in the
next batch's commits, and restarted; the store is restarted once while all write (SIGKILL
where the store keeps what it answered across one: S3, GCS; Azurite is stopped, since it
saves its metadata only every 5 s and on SIGTERM). Every root and event that a writer
reported committed (its "messages deleted from the queue") must be in the tables: zero
lost, and no root unregistered whose message was deleted.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa

from ackfold import LedgerWriter
from ackfold.config import load_settings
from ackfold.ledger.commits.lease import ledger_turn
from ackfold.ledger.schema.contract import arrow_schema
from ackfold.ledger.schema.tables import ACK_EVENTS, REPLAY_LOG, ROOTS
from ackfold.ledger.storage.store import delta_uri, storage_options
from ackfold.maintenance import run_maintenance
from tests.conftest import PROJECT_DIR

BATCHES, SIZE = 30, 5
LOG = arrow_schema(REPLAY_LOG)


def _log_row(replay_id: str, root: int) -> dict[str, Any]:
    now = datetime.now(UTC)
    return {name: None for name in LOG.names} | {
        "replay_id": replay_id, "event": "planned", "requested_by": "test", "request": "{}",
        "root_id": root, "app": "orders", "action": "replay", "prior_status": "failed",
        "attempt": 2, "origin_root_id": root, "source": "sqs", "target": "orders",
        "first_event_date": now.date(), "dry_run": False, "planned_at": now,
    }  # fmt: skip


def _start(warehouse: str, name: str, report: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.s3.producer", warehouse, name, str(BATCHES), str(SIZE),
         str(report)],
        cwd=PROJECT_DIR, env=env, stderr=subprocess.PIPE,
    )  # fmt: skip


def _confirmed(report: Path) -> list[dict[str, Any]]:
    if not report.exists():
        return []
    return [json.loads(line) for line in report.read_text().splitlines() if line.endswith("}")]


def _wait_for(report: Path, batches: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 300
    while len(_confirmed(report)) < batches:
        assert proc.poll() is None, f"producer exited with {proc.returncode} early"
        assert time.monotonic() < deadline, f"{report} never reached {batches} batches"
        time.sleep(0.01)


def _ids(warehouse: str, table: str, column: str) -> list[Any]:
    from deltalake import DeltaTable

    uri = f"{warehouse}/{table}"
    dt = DeltaTable(delta_uri(uri), storage_options=storage_options(uri))
    return list(dt.to_pyarrow_table(columns=[column]).column(column).to_pylist())


class Store(Protocol):
    """A local object store that can be started, stopped, killed and started again."""

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def kill(self) -> None: ...
    def env(self) -> dict[str, str]: ...


def lose_nothing(
    tmp_path: Path, server: Store, warehouse: str, *, kill: bool = True, spark_app: bool = True
) -> str:
    """The run on `server` (stopped; started here, stopped at the end), the ledger at
    `warehouse` on it; asserts that nothing was lost and returns its report line.

    Without `spark_app`, a third producer writes in the Spark app's place: the app commits
    through delta-rs like the producers (the store's part is the same), and its own part,
    its batches rewritten after a failed commit, is the S3 run's to show (tests/s3)."""
    server.start()
    try:
        env = {**os.environ, **server.env(), "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
        os.environ.update(server.env())
        spark_report, stop = tmp_path / "spark.jsonl", tmp_path / "stop"
        spark_log = (tmp_path / "spark.log").open("wb")
        names = ["alpha", "beta"]
        if spark_app:
            # The Spark app first: its JVM takes a while to start.
            app = subprocess.Popen(
                [sys.executable, "-m", "tests.s3.spark_writer", warehouse, str(spark_report),
                 str(tmp_path / "spark"), str(stop)],
                cwd=PROJECT_DIR, env=env, stdout=spark_log, stderr=subprocess.STDOUT,
            )  # fmt: skip
            _wait_for(spark_report, 1, app)
        else:
            names.append("gamma")
        reports = {name: tmp_path / f"{name}.jsonl" for name in names}
        procs = {name: _start(warehouse, name, reports[name], env) for name in reports}
        settings = load_settings(var_dir=tmp_path / "var", warehouse=warehouse)
        maintenance: list[Any] = []

        def maintain_meanwhile() -> None:
            try:
                maintenance.append(run_maintenance(settings, engine="embedded"))
            except BaseException as exc:
                maintenance.append(exc)

        # Replay bookkeeping: each run takes the ledger's turn (lease) and appends its
        # replay_log rows, taking turns with maintenance.
        logged: list[int] = []

        def replay_meanwhile() -> None:
            writer = LedgerWriter(warehouse)
            for run in range(4):
                rows = [_log_row(f"replay-{run}", root) for root in range(3)]
                with ledger_turn(settings, f"replay {run}"):
                    writer.append_arrow(REPLAY_LOG, pa.Table.from_pylist(rows, schema=LOG))
                logged.append(len(rows))

        # alpha: killed in the middle of its writes, then restarted where its report ends.
        _wait_for(reports["alpha"], 6, procs["alpha"])
        time.sleep(random.uniform(0, 0.05))
        procs["alpha"].send_signal(signal.SIGKILL)
        procs["alpha"].wait()
        killed_at = len(_confirmed(reports["alpha"]))
        procs["alpha"] = _start(warehouse, "alpha", reports["alpha"], env)

        # The store: restarted once while both write, and back on the same port.
        _wait_for(reports["beta"], 12, procs["beta"])
        down_at = time.time()
        if kill:
            server.kill()
        else:
            server.stop()
        # Down long enough that a producer's append meets it down, even on a loaded
        # machine where a batch takes a second or more.
        time.sleep(4)
        server.start()
        up_at = time.time()

        runner = threading.Thread(target=maintain_meanwhile)
        replayer = threading.Thread(target=replay_meanwhile)
        runner.start()
        replayer.start()
        retried = 0
        for name, proc in procs.items():
            _, err = proc.communicate(timeout=600)
            assert proc.returncode == 0, f"{name}: {err.decode()[-2000:]}"
            retried += err.decode().count("; again")
        runner.join(timeout=600)
        replayer.join(timeout=600)
        if spark_app:
            # The Spark app goes on past the restart by a few batches, then stops.
            _wait_for(spark_report, len(_confirmed(spark_report)) + 3, app)
            stop.touch()
            assert app.wait(timeout=300) == 0, (tmp_path / "spark.log").read_text()[-3000:]
        spark_log.close()
        retried += (tmp_path / "spark.log").read_text(errors="replace").count("; again")
        assert len(maintenance) == 1
        assert not isinstance(maintenance[0], BaseException), maintenance

        roots = _ids(warehouse, ROOTS, "root_id")
        events = _ids(warehouse, ACK_EVENTS, "event_id")
        confirmed = {name: _confirmed(report) for name, report in reports.items()}
        for name, batches in confirmed.items():
            assert [b["batch"] for b in batches] == list(range(BATCHES)), name
        every = [b for batches in confirmed.values() for b in batches]
        across = [b for b in every if b["started"] < up_at and b["ended"] > down_at]
        said_roots = {r for b in every for r in b["roots"]}
        said_events = {e for b in every for e in b["events"]}
        lost_roots = said_roots - set(roots)
        lost_events = said_events - set(events)
        spark_roots = {r for b in _confirmed(spark_report) for r in b["roots"]}
        lost_spark = spark_roots - set(roots)
        with_init = set(_ids(warehouse, ACK_EVENTS, "root_id"))
        report = (
            f"committed as reported: {len(said_roots)} roots, {len(said_events)} events by "
            f"the producers, {len(spark_roots)} roots and their init events by the Spark app; "
            f"in the tables: {len(roots)} root rows, {len(events)} event rows; "
            f"lost: {len(lost_roots) + len(lost_spark)} roots, {len(lost_events)} events; "
            f"alpha killed after "
            f"batch {killed_at}; server restarted once ({retried} appends failed meanwhile "
            f"and were tried again; {len(across)} spanned the outage)"
        )
        print(report)
        # An append met the server away: it failed and was tried again, or the store's
        # client retried it inside (object_store retries a refused connection) and its span
        # covers part of the outage.
        assert retried or across, "the server's restart met no append: it tested nothing"
        assert lost_roots == set()  # no root unregistered whose message left its queue
        assert lost_events == set()
        assert lost_spark == set()
        assert len(_ids(warehouse, REPLAY_LOG, "replay_id")) == sum(logged) == 12
        assert spark_roots <= with_init  # each Spark root's init event too
        assert len(said_roots) == len(reports) * BATCHES * SIZE
        # Each producer batch was committed once: the killed batch's retry skipped what had
        # landed (a Spark batch written again may append copies, which the fold reads once).
        producer_rows = [r for r in roots if r in said_roots]
        assert len(producer_rows) == len(said_roots)
        return report
    finally:
        server.stop()
