"""`ackfold demo`: feed the word count, drive reconcile-and-replay cycles, report delivery.

Each cycle runs the app to the end of what its queue holds (ingest, split, count), then
reconciles and sends the automatic replays, then prints the roots by status. Because the
app's queries run to the end of their input before each reconcile, the same seed gives
the same report; the demo stops when every message it sent is settled (completed or
dead-lettered), or after `demo.max_cycles`.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ackfold.config import Settings
from ackfold.config.demo import FaultSettings
from ackfold.config.values import APP_DAG_PREFIX
from ackfold.demo.delivery import assess
from ackfold.demo.feed import Feed
from ackfold.demo.report import DeliveryReport
from ackfold.demo.wordcount import APP, STAGES, WordCount, demo_topics, with_demo_policy
from ackfold.ledger.commits.lock import app_lock
from ackfold.progress import Progress
from ackfold.replay.request import ReplayRequest
from ackfold.runs.reconcile import run_reconcile
from ackfold.runs.replay import run_replay
from ackfold.runs.replayer import ReplaySummary
from ackfold.sources.kafka import KafkaTopic
from ackfold.sources.kafka_client import create_topics
from ackfold.sources.sent import record_sent
from ackfold.sources.sqs import SqsQueue
from ackfold.track.heartbeat import install_heartbeat, remove_heartbeat

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Say = Callable[[str], None]
IDLE_WAIT = 2.0  # seconds, when a cycle did nothing but wait for timeouts and backoffs
DEMO_DAG_ID = f"{APP_DAG_PREFIX}{APP}"  # the word count's DAG, when it has one (make run)


def status_file(settings: Settings, app: str) -> Path:
    """Where a running app writes its status (`ackfold status` reads it)."""
    return settings.var_dir / "run" / f"{app}.json"


def write_status(settings: Settings, app: str, **fields: Any) -> None:
    """Update the app's status file with `fields` and the time; what they leave out (the
    roots by status of the demo's last reconcile, say) stays as it was."""
    path = status_file(settings, app)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        state: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        state = {}
    state.update(app=app, **fields, updated_at=datetime.now(UTC).isoformat())
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(state, indent=2))
    tmp.replace(path)


def demo_lock(settings: Settings, holder: str, say: Say = print) -> AbstractContextManager[None]:
    """The word count's lock (`ackfold.ledger.commits.lock.app_lock`): a demo holds it from before
    it makes its tables until it hands the app over, and each run of the app's DAG
    (`run_available_now`) for the run, so the app's checkpoints have one driver."""
    return app_lock(settings.var_dir, settings.table_root, APP, holder, say=say)


def run_available_now(
    start_spark: Callable[[], SparkSession], settings: Settings, say: Say = print
) -> int:
    """One run of the word count as its Airflow DAG runs it: take what its source holds,
    run split and count to the end of their input, and stop. Waits while `ackfold demo`
    drives the app (its report), so the app's checkpoints have one driver; the session
    starts (`start_spark`) once the wait is over, so a waiting run holds none, and stops
    at the end. Returns the messages taken."""
    settings = with_demo_policy(settings)
    holder = DEMO_DAG_ID if settings.apps[APP].dag else "ackfold/jobs/wordcount_app.py"
    with demo_lock(settings, holder, say=say):
        spark = start_spark()
        beat = install_heartbeat(spark, settings, APP)  # alive while it runs, stopped after
        try:
            app = WordCount(spark, settings)
            taken = app.step()
        finally:
            remove_heartbeat(spark, beat)
            spark.stop()
    write_status(settings, APP, phase=f"running as {holder}", last_run_taken=taken,
                 queries_restarted=app.restarts)  # fmt: skip
    say(f"{APP}: took {taken:,} message(s); split and count ran to the end of their input")
    return taken


def run_continuously(
    start_spark: Callable[[], SparkSession],
    settings: Settings,
    say: Say = print,
    *,
    stop: threading.Event | None = None,
    every: float = 5.0,
) -> None:
    """The word count as its continuous app DAG runs it (`apps.wordcount.dag.mode:
    continuous`): its queries on their triggers, its heartbeat in `app_progress`, until
    `stop` is set or the app fails; a failure raises, so that Airflow restarts the task
    (from the checkpoints: nothing is lost)."""
    settings = with_demo_policy(settings)
    stop = stop or threading.Event()
    with demo_lock(settings, f"{DEMO_DAG_ID} (continuous)", say=say):
        spark = start_spark()
        try:
            app = WordCount(spark, settings)
            worker = threading.Thread(target=app.start, args=(stop,), daemon=True)
            worker.start()
            write_status(settings, APP, phase=f"running as {DEMO_DAG_ID} (continuous)")
            say(f"{APP}: running continuously (its heartbeat: app_progress)")
            failure = None
            while not stop.wait(every):
                failure = app.failure()
                if failure is not None or not worker.is_alive():
                    break
            stop.set()
            worker.join(timeout=60)
        finally:
            spark.stop()
    if failure is not None or not stop.is_set():
        raise RuntimeError(f"{APP}: {failure or 'the ingest loop stopped'}")


class Demo:
    def __init__(
        self,
        spark: SparkSession,
        settings: Settings,
        *,
        messages: int | None = None,
        faults: FaultSettings | None = None,
        say: Say = print,
    ) -> None:
        self.settings = with_demo_policy(settings)
        self.spark = spark
        self.messages = messages or settings.demo.messages
        self.faults = faults if faults is not None else settings.demo.faults
        self.say = say
        self.feed = Feed.build(self.messages, self.faults)
        self.by_status: dict[str, int] = {}  # roots by status, from the last reconcile
        self.message_ids: list[str] = []  # what `run` sent, in feed order
        self.cycles = 0
        if self.settings.apps[APP].source == KafkaTopic.source:
            # The demo creates its topics, as it creates its SQS queues; an app's own
            # topics must exist before it starts (WordCount checks).
            create_topics(self.settings, demo_topics(self.settings))
        self.app = WordCount(spark, self.settings, faults=self.faults, stuck=self.feed.stuck)

    def run(self) -> DeliveryReport:
        """Send the feed, run cycles until every message is settled, and report. The
        caller holds the app's lock (`demo_lock`) from before this Demo is made. The app's
        heartbeat shows it running through the cycles."""
        beat = install_heartbeat(self.spark, self.settings, APP)
        try:
            return self._run()
        finally:
            remove_heartbeat(self.spark, beat)

    def _run(self) -> DeliveryReport:
        started = time.monotonic()
        # From its start, for `ackfold status`.
        self._write_status("sending", {})
        queue = self.app.queue
        where = "Kafka topic" if isinstance(queue, KafkaTopic) else "SQS queue"
        self.say(f"demo: word count on {where} {queue.queue}, {self.faults.describe()}")
        sending = Progress("sending sentences", self.messages, unit="sent")
        if isinstance(queue, SqsQueue):
            url = _ensure_queue(queue.client, queue.queue, queue.dead_letter_queue)
            message_ids = self.feed.send(queue.client, url, sending.update)
        else:
            message_ids = self.feed.publish(self.settings, queue.queue, sending.update)
        sending.close()
        self.message_ids = message_ids
        # What was sent, for the quality check that every sent message is registered.
        record_sent(
            self.spark, self.app.ledger, app=APP, source=queue.source,
            source_queue=queue.queue, message_ids=message_ids,
        )  # fmt: skip
        cycles = 0
        for cycles in range(1, self.settings.demo.max_cycles + 1):
            taken = self.app.step()
            by_status, replayed = self._reconcile_and_replay()
            report = self._assess(message_ids, check_words=False)
            self._show(cycles, taken, by_status, replayed, report)
            if report.settled == report.sent:
                break
            if not taken and not replayed.sent and not replayed.dead_lettered:
                time.sleep(IDLE_WAIT)  # only timeouts and backoffs are left to wait for
        self.cycles = cycles
        report = self._assess(message_ids, check_words=True)
        report.cycles = cycles
        report.seconds = time.monotonic() - started
        for line in report.lines():
            self.say(line)
        return report

    def report(self) -> DeliveryReport:
        """The delivery report of the messages `run` sent, as the ledger and the outputs
        are now: after `ackfold retract` took back what the dead letters left, say."""
        report = self._assess(self.message_ids, check_words=True)
        report.cycles = self.cycles
        return report

    def keep_running(
        self, stop: threading.Event, every: float = 30.0, *, airflow: bool = False
    ) -> None:
        """After the report: the app keeps running. With `airflow` (as under `make run`),
        the Airflow DAGs reconcile and replay, and an app that has its own DAG
        (`apps.wordcount.dag`) is left to it. Else the app runs here continuously, and
        every `every` s the demo reconciles and replays."""
        dag = self.settings.apps[APP].dag if airflow else None
        if dag is not None:
            self._write_status(f"running as {DEMO_DAG_ID}", self.by_status)
            if dag.mode == "continuous":
                how = ("continuous: one long task, restarted if its driver stops; "
                       "ackfold_reconcile runs on its schedule")  # fmt: skip
            else:
                how = f"{dag.schedule}; each run triggers ackfold_reconcile"
            self.say(f"demo: the app keeps running as the Airflow DAG {DEMO_DAG_ID} ({how}), "
                     "and ackfold_replay follows the reconcile")  # fmt: skip
            return
        if airflow:
            self.say("demo: the app keeps running (Ctrl-C stops it); the Airflow DAGs "
                     "ackfold_reconcile and ackfold_replay reconcile and replay it")  # fmt: skip
        else:
            self.say("demo: the app keeps running (Ctrl-C stops it); reconcile and replay "
                     f"every {every:g}s")  # fmt: skip
        worker = threading.Thread(target=self.app.start, args=(stop,), daemon=True)
        worker.start()
        by_status = self.by_status
        try:
            while not stop.wait(every):
                failure = self.app.failure()
                if failure is not None or not worker.is_alive():
                    raise RuntimeError(failure or "the app's ingest loop stopped")
                if airflow:
                    self._write_status("running", by_status)
                    continue
                by_status, replayed = self._reconcile_and_replay()
                self._write_status("running", by_status)
                self.say(f"demo: {_by_status(by_status)}; replayed {replayed.sent}")
        finally:
            stop.set()
            worker.join(timeout=60)
            self._write_status("stopped", by_status)

    def _reconcile_and_replay(self) -> tuple[dict[str, int], ReplaySummary]:
        """Fold the new events, then send the automatic replays: roots by status, and
        what the replay did."""
        # The Airflow DAGs may be reconciling too: each run takes the ledger's turn (one
        # writer of root_state at a time) and says who holds it while it waits.
        summary = run_reconcile(
            self.settings, app=APP, spark=self.spark, holder="ackfold demo", say=self.say
        )
        self.by_status = summary["by_status"]
        request = ReplayRequest(automatic=True, app=APP, requested_by="demo")
        replayed = run_replay(
            self.settings, request, spark=self.spark, holder="ackfold demo", say=self.say
        )
        return self.by_status, replayed

    def _assess(self, message_ids: list[str], *, check_words: bool) -> DeliveryReport:
        from ackfold.effects.outputs import declared_outputs

        outputs = declared_outputs(self.settings, APP) if check_words else []
        report = assess(
            self.spark, self.app.ledger, APP, self.feed, message_ids, self.app.counted_path,
            faults=self.faults.describe(), check_words=check_words,
            policy_of=self.settings.app if check_words else None, outputs=outputs,
        )  # fmt: skip
        report.queries_restarted = self.app.restarts
        return report

    def _show(
        self,
        cycle: int,
        taken: int,
        by_status: dict[str, int],
        replayed: ReplaySummary,
        report: DeliveryReport,
    ) -> None:
        self._write_status(f"cycle {cycle}", by_status)
        self.say(
            f"cycle {cycle:>2}: took {taken:,} message(s); reconciled: {_by_status(by_status)}; "
            f"then replayed {replayed.sent:,}, dead-lettered {replayed.dead_lettered:,}; "
            f"settled {report.settled:,}/{report.sent:,}"
        )

    def _write_status(self, phase: str, by_status: dict[str, int]) -> None:
        write_status(self.settings, APP, phase=phase, ingested=self.app.taken,
                     queries_restarted=self.app.restarts, roots_by_status=by_status)  # fmt: skip


def faults_from_flags(
    base: FaultSettings,
    *,
    no_faults: bool = False,
    seed: str | None = None,
    drop: list[str] | None = None,
    fail: list[str] | None = None,
    poison: str | None = None,
    stuck: str | None = None,
    slow: list[str] | None = None,
    kill: list[str] | None = None,
    stages: tuple[str, ...] = STAGES,
) -> FaultSettings:
    """The faults of `ackfold demo`: the configured ones (or none), changed by its flags.
    Raises ValueError, naming the flag, for a bad value or a stage the app lacks."""
    from pydantic import ValidationError

    fields = FaultSettings().model_dump() if no_faults else base.model_dump()
    for name, pairs in (("drop", drop), ("fail", fail), ("slow", slow)):
        for pair in pairs or ():
            stage, sep, value = pair.partition("=")
            if not sep or not stage:
                raise ValueError(f"--{name} takes STAGE=VALUE, got {pair!r}")
            fields[name] = {**fields[name], stage: value}
    if seed is not None:
        fields["seed"] = seed
    if poison is not None:
        fields["poison"] = poison
    if stuck is not None:
        fields["stuck"] = stuck
    if kill:
        fields["kill"] = tuple(kill)
    try:
        faults = FaultSettings.model_validate(fields)
    except ValidationError as exc:
        problems = "; ".join(
            f"--{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise ValueError(f"bad fault flags: {problems}") from None
    unknown = sorted(faults.stages() - set(stages))
    if unknown:
        raise ValueError(
            f"no stage named {', '.join(unknown)}: the word count's stages are {', '.join(stages)}"
        )
    return faults


def _by_status(by_status: dict[str, int]) -> str:
    return ", ".join(f"{name} {n:,}" for name, n in sorted(by_status.items())) or "no roots yet"


def _ensure_queue(client: Any, queue: str, dead_letter_queue: str) -> str:
    """The queue's URL, creating it and its dead-letter queue where they do not exist
    (the demo's own ElasticMQ has them already; another server may not)."""
    fifo = {"FifoQueue": "true"} if queue.endswith(".fifo") else {}
    urls = []
    for name in (dead_letter_queue, queue):
        try:
            urls.append(str(client.get_queue_url(QueueName=name)["QueueUrl"]))
        except client.exceptions.QueueDoesNotExist:
            urls.append(str(client.create_queue(QueueName=name, Attributes=fifo)["QueueUrl"]))
    return urls[-1]
