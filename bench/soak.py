"""A year of a production ledger, time-warped: a soak of ackfold (issue 47).

The clock is the soak's: producers stamp their events with it, and reconcile, replay,
quality and maintenance run at it (`now`), on their schedules, hour after simulated
hour:

- two producers outside Spark (`Tracker`, `LedgerWriter`) register a batch of roots in
  turn every `--produce-every` hours, and take back what replays send to their SQS queues
  (a real ElasticMQ); a
  tracked Spark app (`StageTracker`, its words table in the first tuple layout) runs a
  batch every `--spark-app-every` hours (bench/soak_world.py);
- reconcile every `--reconcile-every` hours, then the automatic replay; quality every
  `--quality-every` hours; maintenance daily (retention, Z-order, VACUUM, log cleanup and
  checkpoints);

with faults drawn from the seed:

- reconcile outages of 1 to 10 days (replay and quality stop too; maintenance goes on);
- a host paused past its lease while another runs: a reconcile frozen at one of its
  commits, another host (its own var dir, its clock past the lease's expiry) reconciles,
  then the frozen one wakes up, and must commit nothing;
- a kill at every commit point: reconciles killed before or after each of their fenced
  commits in turn, replays too, and producers between their two commits;
- engine switches both ways (embedded, Spark, embedded);
- an upgrade: the soak starts from a golden ledger (`--start-from CASE`, a copy of
  tests/golden/CASE/ledger; by default `contract-v1`, written by a producer that knows
  nothing of ackfold, so that the upgrade below has columns to add), then a day of it as
  an earlier ackfold left it (its mark in a file of the checkpoint directory, root_state
  in the older partition layout, the words table in the first tuple layout);
- a contract-v1 producer (`V1Producer`: plain `write_deltalake`, v1's columns) writing
  all year beside the tracked ones, and `ackfold upgrade` (`ackfold.ledger.setup.upgrade`) on
  `--upgrade-day`, after which it appends with `schema_mode="merge"`;
- claims that cannot read their table (a 503): the run stops (`FenceUnreadable`) and the
  next one catches up; a replay and a maintenance run paused past their lease while
  another host takes it: woken, the replay sends nothing and logs nothing, the
  maintenance commits nothing;
- on the S3 API (`--store s3`: versitygw, a Go S3 gateway keeping objects in files,
  `ackfold_dev.versitygw`; or moto behind its journal, `ackfold_dev.s3`, with
  `--s3-server moto`), server restarts (a SIGKILL, then a start on the same port and
  directory), some in the middle of a run.

At each checkpoint (`--check-every` days) and at the end, after a reconcile and a replay
have caught up, it checks that every root's status (and XOR, and event count) is the
reference fold's (`ackfold.reconcile.fold`) over every event ever written, that no root
is lost, counted twice or unsettled without a reason (a replay's backoff), that each
reconcile's cost follows its new events, not the ledger's age, and that storage stays
bounded by the retention.

Time that only Delta reads: VACUUM and log cleanup compare files' ages with the wall
clock, which no one can warp, and a soak's year takes an hour of it. The soak vacuums
with no retention (`maintenance.vacuum_retention` 0), but ackfold's VACUUM of
`ack_events` keeps the hours back to the first commit no reconcile has folded, one at
least: the soak's whole run. So after each maintenance the soak does by its own clock
what these do by the wall clock: it deletes the files of `ack_events` that neither its
current version nor an unfolded commit names, and it expires each table's log as Delta
does after `--log-retention` simulated days (30, Delta's default): the commits and
checkpoints before the newest checkpoint older than that. Without them, by day 90 of the
S3 run `ack_events` kept 2,840 files for 28 live ones, each log held every commit of
the simulated months (3,197 in `ack_events`'), and the store's listings grew with them.
The checkpoints are the one thing left to the wall clock: each carries the tombstones
younger than its table's `delta.deletedFileRetentionDuration` (the soak's whole run, for
`ack_events`). So "ack_events grew beyond its retention" bounds its data and commits, and
every newest checkpoint is checked to hold no tombstone older than that retention when it
was written (what Delta drops); their bytes are reported beside.

    python bench/soak.py --seeds 1 2 3 --days 365                 # local disk
    python bench/soak.py --seeds 4 --days 365 --store s3           # the local S3 API
    python bench/soak.py --days 3 --store s3 --s3-server moto      # moto, to compare
    python bench/soak.py --days 10 --start-from fresh              # no golden ledger

`--store s3` runs versitygw as `make emulators` built it (var/emulators/versitygw).

It exits 1 if a check fails, and prints a JSON summary last.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import checkout  # noqa: F401  (before settings load: the checkout's var/)
from soak_world import Faults, Killed, Producer, Record, SparkApp, V1Producer

from ackfold.config import Settings, load_settings
from ackfold.ledger.commits.fence import version_of
from ackfold.ledger.commits.lease import TTL, ledger_turn
from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.ledger.errors import FenceUnreadable, LeaseLost
from ackfold.ledger.housekeeping.delta_logs import interval
from ackfold.ledger.housekeeping.store_maintenance import RETENTION_PROPERTY
from ackfold.ledger.schema import status
from ackfold.ledger.schema.tables import (
    ACK_EVENTS,
    REPLAY_LOG,
    ROOT_STATE,
    TABLES,
    UNMATCHED_EVENTS,
    Ledger,
)
from ackfold.ledger.setup.upgrade import upgrade
from ackfold.ledger.storage.store import delta_uri, file_system, storage_options
from ackfold.maintenance import run_maintenance
from ackfold.reconcile.fold import classify, fold
from ackfold.runs.quality import run_quality
from ackfold.runs.reconcile import run_reconcile
from ackfold.runs.replay import automatic_replay

log = logging.getLogger("soak")
APPS = ("orders", "webhooks")
V1_APP = "legacy"  # the contract-v1 producer's app
GOLDEN = Path(__file__).resolve().parent.parent / "tests" / "golden"
TIMEOUT = timedelta(minutes=30)
BACKOFF = timedelta(hours=1)
MAX_ATTEMPTS = 3
# A complete tree: its status and its fold stay, whatever events come later.
COMPLETE = (status.COMPLETED, status.COMPLETED_LATE)
# Where a root may rest: complete, or handed to a new attempt or a dead-letter queue.
DONE = (*COMPLETE, status.REPLAYED, status.DEAD_LETTERED)
# The faults a reconcile or a replay can meet, each at least once in the first days.
FAULTS = ("paused host", "killed reconcile", "app run", "killed replay", "unreadable claim",
          "paused replay", "paused maintenance", "s3 restart", "s3 restart mid-run")  # fmt: skip
KILL_POINTS = [(commit, moment) for commit in range(1, 9) for moment in ("before", "after")]
# A replay with sends claims root_state, dead_letters and replay_log (commits 1 to 3, those
# that exist) before it sends, then logs and books what it sent: its points reach past them.
REPLAY_KILL_POINTS = [(c, m) for c in range(1, 7) for m in ("before", "after")]


class SoakFailed(AssertionError):
    """A check of the soak failed: what, and the first roots that break it."""


class Soak:
    """One seed's simulated year on one warehouse."""

    def __init__(
        self, args: argparse.Namespace, seed: int, home: Path, sqs: str, spark: Any, s3: Any
    ) -> None:
        self.args, self.seed, self.home, self.spark, self.s3 = args, seed, home, spark, s3
        self.rng = random.Random(seed)  # noqa: S311 (a seeded draw, no secret)
        self.start = datetime(2027, 1, 4, tzinfo=UTC)
        self.now = self.start
        self.settings = self._settings(home / "host-a", sqs)
        self.other_host = self._settings(home / "host-b", sqs)
        self.ledger = Ledger(self.settings.table_root)
        self.record = Record()
        self.writer = LedgerWriter(self.settings.table_root)
        self.producers = [
            Producer(app, f"soak-{seed}-{app}", self.writer, self.record, self.rng) for app in APPS
        ]
        self.v1 = V1Producer(V1_APP, f"soak-{seed}-{V1_APP}", self.settings.table_root,
                             storage_options(self.settings.table_root), self.record,
                             self.rng)  # fmt: skip
        self.upgrade_hour = 24 * (args.days // 2 if args.upgrade_day is None else args.upgrade_day)
        self.folded: dict[int, Any] = {}  # root -> its reference fold, at the last check
        self.faults = Faults()
        self.costs: list[dict[str, Any]] = []
        self.events_written_at_last_run = 0
        # (day, ack_events' data and commits, its checkpoints, the warehouse) bytes
        self.sizes: list[tuple[int, int, int, int]] = []
        self.stale_tombstones: dict[str, int] = {}  # table -> most kept past retention
        self.dead_files: dict[str, int] = {}  # table -> most files left unnamed by VACUUM
        self.fallbacks = _Counting("reading the whole table")
        logging.getLogger("ackfold.embedded").addHandler(self.fallbacks)
        self.counts: dict[str, int] = {}
        self.seconds: dict[str, float] = {}
        self.monthly: dict[int, dict[str, float]] = {}  # 30-day months: where growth shows
        self.log_versions: dict[str, list[tuple[int, int]]] = {}  # table -> (day, version)
        self.plan = self._fault_plan()
        self.outages = self._outages()
        self._later_faults()
        self.kills = 0
        self.spark_days = self._spark_days() if spark is not None else set()
        self.app = SparkApp(spark, self.settings.table_root, f"soak-{seed}-wordcount",
                            self.record, self.rng) if spark is not None else None  # fmt: skip
        self.queues = self._queues(sqs)

    # -- set-up -------------------------------------------------------------------------

    def _settings(self, var: Path, sqs: str) -> Settings:
        warehouse = self.args.warehouse.format(seed=self.seed) if self.args.warehouse else None
        apps = {
            app: {"source": "sqs", "source_queue": f"soak-{self.seed}-{app}",
                  "dead_letter_queue": f"soak-{self.seed}-{app}-dead"}
            for app in (*APPS, "wordcount", V1_APP)
        }  # fmt: skip
        settings = load_settings(
            var_dir=var,
            jars_dir=self.args.jars,
            warehouse=warehouse or str(self.home / "warehouse"),
            sqs={"endpoint_url": sqs},
            defaults={"timeout": "30m", "max_attempts": MAX_ATTEMPTS, "replay_backoff": "1h",
                      "replay_rate": 100_000},
            apps=apps,
            reconcile={"lookback": "2d"},
            maintenance={"retention": f"{self.args.retention}d", "progress_retention": "7d"},
            spark={"master": "local[2]", "shuffle_partitions": 2},
        )  # fmt: skip
        # VACUUM reads the wall clock: no retention, but what no reconcile has folded.
        kept = settings.maintenance.model_copy(update={"vacuum_retention": timedelta(0)})
        return settings.model_copy(update={"maintenance": kept})

    def _queues(self, sqs: str) -> dict[str, str]:
        from ackfold.sources.sqs_client import sqs_client

        client = sqs_client(self.settings)
        urls = {}
        for app in (*APPS, "wordcount", V1_APP):
            for suffix in ("", "-dead"):
                name = f"soak-{self.seed}-{app}{suffix}"
                urls[name] = client.create_queue(QueueName=name)["QueueUrl"]
        for name in self._golden_queues():  # where the golden roots' replays go (unread)
            urls[name] = client.create_queue(QueueName=name)["QueueUrl"]
        self.sqs = client
        return urls

    def _outages(self) -> list[tuple[datetime, datetime]]:
        """Reconcile outages of 1 to 10 days, one every 60 days or so, after each fault
        met a reconcile once."""
        out = []
        first = max(self.plan, default=0) + self.args.reconcile_every
        last = self.args.days * 24 - 24
        for _ in range(max(1, self.args.days // 60) if last > first else 0):
            begin = self.start + timedelta(hours=self.rng.randint(first, last))
            days = self.rng.randint(1, max(1, min(10, self.args.days // 3)))
            out.append((begin, begin + timedelta(days=days)))
        return out

    def _fault_plan(self) -> dict[int, str]:
        """The reconcile hours that meet a fault in the first days: each kind once."""
        kinds = [k for k in FAULTS if self.s3 is not None or not k.startswith("s3")]
        hours = list(range(0, self.args.days * 24, self.args.reconcile_every))
        early = hours[1 : 1 + 2 * len(kinds) : 2]
        return dict(zip(early, kinds, strict=False))

    def _later_faults(self) -> None:
        """After the first days, about one reconcile in ten meets a fault, drawn from the
        seed (none, when an outage stops the reconciles)."""
        kinds = [k for k in FAULTS if self.s3 is not None or not k.startswith("s3")]
        first = max(self.plan, default=0) + self.args.reconcile_every
        for hour in range(first, self.args.days * 24, self.args.reconcile_every):
            if self.rng.random() < 0.1:
                self.plan[hour] = self.rng.choice(kinds)

    def _spark_days(self) -> set[int]:
        """The days the reconciles run on Spark: the second (switched to on the first day
        after the upgrade, and back the day after), and a few stretches of 1 to 3 days."""
        days = {1}
        for _ in range(max(1, self.args.days // 90)):
            first = self.rng.randint(3, max(3, self.args.days - 4))
            days |= set(range(first, first + self.rng.randint(1, 3)))
        return days

    # -- the year -----------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        started = time.monotonic()
        self._start_from()
        self._older_ackfold()
        with self.faults.installed():
            for hour in range(self.args.days * 24):
                self.now = self.start + timedelta(hours=hour)
                self._hour(hour)
                day, at = divmod(hour, 24)
                if at == 23 and (day + 1) % self.args.check_every == 0:
                    with self._timed("checks"):
                        self.check()
        with self._timed("checks"):
            self.check()
        return self._summary(time.monotonic() - started)

    def _hour(self, hour: int) -> None:
        if hour % self.args.produce_every == 0:
            producer = self.producers[hour // self.args.produce_every % len(self.producers)]
            killed = self.rng.random() < 0.01
            with self._timed("producers"):
                producer.produce(self.now, self.args.roots, killed=killed)
                self._count("producer killed between commits", killed)
                for p in self.producers:
                    p.consume(self.sqs, self.queues[p.queue], self.now)
        if hour % self.args.produce_every == 1 % self.args.produce_every:
            with self._timed("producers"):
                self.v1.produce(self.now, max(1, self.args.roots // 2))
        if hour == self.upgrade_hour:
            with self._timed("upgrade"):
                self._upgrade()
        if self.app is not None and hour % self.args.spark_app_every == 0:
            with self._timed("spark app"):
                self.app.run(self.args.roots)
        down = any(begin <= self.now < end for begin, end in self.outages)
        self._count(
            "reconciles missed in an outage", down and hour % self.args.reconcile_every == 0
        )
        if hour % self.args.reconcile_every == 0 and not down:
            fault = self.plan.get(hour, "")
            with self._timed("reconciles"):
                if fault.startswith("s3 restart"):
                    self._restart_s3(mid_run=fault.endswith("mid-run"))
                self._reconcile_with_faults(fault)
            with self._timed("replays"):
                met = fault != "paused replay" or self._paused_replay()
                killed = self._replay(killed=fault == "killed replay")
                if not met or (fault == "killed replay" and not killed):
                    self._again(hour, fault)  # nothing to send, or no commit there: later
            if fault == "paused maintenance":
                with self._timed("maintenance"):
                    self._paused_maintenance()
        if hour % 24 == 2:
            with self._timed("maintenance"):
                self._maintain()
        if hour and hour % self.args.quality_every == 0 and not down:
            with self._timed("quality"):
                run_quality(self.settings, now=self.now)
            self._count("quality runs")

    @contextmanager
    def _timed(self, what: str) -> Iterator[None]:
        began = time.monotonic()
        try:
            yield
        finally:
            took = time.monotonic() - began
            self.seconds[what] = self.seconds.get(what, 0.0) + took
            month = self.monthly.setdefault((self.now - self.start).days // 30, {})
            month[what] = month.get(what, 0.0) + took

    def _engine(self) -> str:
        return "spark" if (self.now - self.start).days in self.spark_days else "embedded"

    def _reconcile(
        self, settings: Settings | None = None, app: str | None = None
    ) -> dict[str, Any]:
        began = time.monotonic()
        engine = self._engine()
        summary = run_reconcile(settings or self.settings, now=self.now, app=app, engine=engine,
                                spark=self.spark)  # fmt: skip
        seconds = time.monotonic() - began
        if app is None and summary["engine"] != "quiet":
            written = self.record.count()
            self.costs.append({
                "day": (self.now - self.start).days, "engine": engine, "seconds": seconds,
                "events_read": summary["events_read"],
                "events_new": written - self.events_written_at_last_run,
            })  # fmt: skip
            self.events_written_at_last_run = written
        self._count(f"reconciles ({summary['engine']})")
        return summary

    def _reconcile_with_faults(self, fault: str) -> None:
        if fault == "paused host" and self._engine() == "embedded":
            self._paused_host()
        elif fault == "killed reconcile":
            commit, moment = KILL_POINTS[self.kills % len(KILL_POINTS)]  # every point in turn
            self.kills += 1
            try:
                with self.faults.kill_at(commit, moment):
                    self._reconcile()
            except Killed:
                self._count("reconciles killed at a commit")
            self._reconcile()  # the next scheduled run, as the DAG's retry
        elif fault == "app run":
            self._reconcile(app=self.rng.choice(APPS))  # a run of one app, its own mark
            self._reconcile()
        elif fault == "unreadable claim":
            try:
                with self.faults.unreadable_claim():
                    self._reconcile()
                self._count("unreadable claims with no claim to make")  # a quiet run
            except FenceUnreadable:
                self._count("reconciles stopped by an unreadable claim")
            self._reconcile()  # the next run catches up
        else:
            self._reconcile()

    def _restart_s3(self, *, mid_run: bool) -> None:
        """The S3 server killed and started again (versitygw's files, or moto's journal,
        keep what it answered);
        `mid_run`: while a reconcile runs, which may fail (the next one carries on)."""
        if not mid_run:
            self.s3.kill()
            self.s3.start()
            self._count("s3 restarts")
            return

        def bounce() -> None:
            self.s3.kill()
            time.sleep(1)
            self.s3.start()

        timer = threading.Timer(0.3, bounce)
        timer.start()
        try:
            self._reconcile()
        except Exception as exc:  # what a store that went away mid-run does to it
            log.warning("soak: a reconcile failed as S3 restarted: %s", str(exc)[:200])
            self._count("reconciles failed by an s3 restart")
        finally:
            timer.join()
        self._count("s3 restarts mid-run")

    def _paused_host(self) -> None:
        """Host A's reconcile is frozen before one of its commits, past its lease; host B
        takes the lease and reconciles; A wakes up and must commit nothing."""
        run = lambda: run_reconcile(self.settings, now=self.now, engine="embedded")  # noqa: E731
        outcome = self._paused(run, self.rng.randint(2, 6), "before")
        if outcome is None:
            self._count("paused hosts that committed nothing to pause at")
            return
        error = outcome.get("error")
        if not isinstance(error, LeaseLost):
            raise SoakFailed(f"a reconcile that lost its lease ended with {outcome!r}")
        self._count("paused hosts fenced out")

    def _again(self, hour: int, fault: str) -> None:
        """`fault` at the next reconcile hour that meets none."""
        later = hour + self.args.reconcile_every
        while later in self.plan:
            later += self.args.reconcile_every
        self.plan[later] = fault
        self._count(f"{fault}: put off to a later run")

    def _paused_replay(self) -> bool:
        """A replay frozen at its first claim (before it, or after it and before its
        sends), past its lease, while host B takes the lease; woken, it must send nothing
        (no message in any queue) and log nothing (no commit to replay_log)."""
        run = lambda: automatic_replay(self.settings, now=self.now)  # noqa: E731
        moment = self.rng.choice(("before", "after"))
        seen: dict[str, Any] = {}

        def woken() -> None:  # what was there when A woke
            seen.update(messages=self._messages(), log=version_of(self._path(REPLAY_LOG)))

        outcome = self._paused(run, 1, moment, before_wake=woken)
        if outcome is None:
            return False  # nothing to send: no claim to pause at
        after = {"messages": self._messages(), "log": version_of(self._path(REPLAY_LOG))}
        if not isinstance(outcome.get("error"), LeaseLost) or after != seen:
            raise SoakFailed(f"a replay that lost its lease ended with {outcome!r}: "
                             f"before it woke {seen}, after {after}")  # fmt: skip
        self._count(f"paused replays fenced out ({moment} their claim)")
        return True

    def _paused_maintenance(self) -> None:
        """Maintenance frozen before one of its first commits (its claims), past its lease,
        while host B takes the lease; woken, it must commit nothing to any table."""
        run = lambda: run_maintenance(self.settings, engine="embedded", now=self.now)  # noqa: E731
        seen: dict[str, Any] = {}
        outcome = self._paused(run, self.rng.randint(1, 4), "before",
                               before_wake=lambda: seen.update(self._versions()))  # fmt: skip
        if outcome is None:
            self._count("paused maintenance with nothing to commit")
            return
        after = self._versions()
        if not isinstance(outcome.get("error"), LeaseLost) or after != seen:
            raise SoakFailed(f"maintenance that lost its lease ended with {outcome!r}: "
                             f"before it woke {seen}, after {after}")  # fmt: skip
        self._count("paused maintenance fenced out")

    def _paused(
        self, run: Any, commit: int, moment: str, before_wake: Any = None
    ) -> dict[str, Any] | None:
        """`run` in host A's thread, frozen `moment` its `commit`-th fenced commit; host B
        (its clock past A's last expiry: A's renewals stopped while it was frozen) takes
        the lease and reconciles; then `before_wake`, and A wakes. What A's run ended with
        (`summary` or `error`), or None if it never reached that commit."""
        wake, outcome = threading.Event(), {}

        def host_a() -> None:
            try:
                outcome["summary"] = run()
            except BaseException as exc:  # what host A's run ended with
                outcome["error"] = exc

        with self.faults.freeze_at(commit, wake, moment):
            a = threading.Thread(target=host_a, name="soak-host-a")
            a.start()
            while not self.faults.frozen.wait(0.05) and a.is_alive():
                pass
            frozen = self.faults.frozen.is_set()
        try:
            if frozen:
                ahead = lambda: datetime.now(UTC) + TTL + timedelta(minutes=1)  # noqa: E731
                with ledger_turn(self.other_host, "soak host b", clock=ahead):
                    self._reconcile(self.other_host)
                if before_wake is not None:
                    before_wake()
        finally:
            wake.set()
            a.join(600)
        return outcome if frozen else None

    def _messages(self) -> dict[str, int]:
        """Messages in each queue now (visible or in flight)."""
        found = {}
        for name, url in self.queues.items():
            attrs = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
                "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed"])  # fmt: skip
            found[name] = sum(int(v) for v in attrs["Attributes"].values())
        return found

    def _versions(self) -> dict[str, int | None]:
        """Each ledger table's version now."""
        names = (ACK_EVENTS, ROOT_STATE, UNMATCHED_EVENTS, REPLAY_LOG, "roots", "dead_letters",
                 "app_progress")  # fmt: skip
        return {name: version_of(self._path(name)) for name in names}

    def _path(self, name: str) -> str:
        return str(self.ledger.path(name))

    def _replay(self, *, killed: bool = False) -> bool:
        """The automatic replay; `killed` at a commit point drawn from the seed. Whether
        it was killed."""
        try:
            if killed:
                point = self.rng.choice(REPLAY_KILL_POINTS)
                with self.faults.kill_at(*point):
                    automatic_replay(self.settings, now=self.now)
            else:
                automatic_replay(self.settings, now=self.now)
        except Killed:
            self._count("replays killed at a commit")
            return True
        finally:
            self._count("replays")
        return False

    def _maintain(self) -> None:
        summary = run_maintenance(self.settings, engine="embedded", now=self.now)
        self._count("maintenance runs")
        self._count("maintenance runs that kept unfolded files", bool(summary.get("logs_kept")))
        self._expire_logs()
        for name, dead in self._dead_files().items():
            self.dead_files[name] = max(self.dead_files.get(name, 0), dead)
        if (self.now - self.start).days % 7 == 0:
            day = (self.now - self.start).days
            events = self._bytes(ACK_EVENTS)
            self.sizes.append(
                (day, events["data"], events["checkpoints"], sum(self._bytes().values()))
            )

    def _expire_logs(self) -> None:
        """Delta's log cleanup by the soak's clock: each table's commits, checkpoints and
        checksums before its newest checkpoint at or below the version it had
        `--log-retention` simulated days ago. A host whose kept snapshot is older reads
        the table afresh (`ackfold.ledger.storage.snapshots`), as after delta-rs's."""
        import pyarrow.fs as pafs

        day = (self.now - self.start).days
        store = self._store()
        self._vacuum_events(store)
        for table in store.get_file_info(pafs.FileSelector("", allow_not_found=True)):
            if table.type != pafs.FileType.Directory:
                continue
            log_dir = pafs.FileSelector(f"{table.path}/_delta_log", allow_not_found=True)
            files: dict[int, list[str]] = {}
            infos = {}  # path -> its listing's entry (a checkpoint's time)
            checkpoints = set()
            for entry in store.get_file_info(log_dir):
                head = entry.base_name.split(".", 1)[0]
                if entry.type != pafs.FileType.File or not head.isdigit():
                    continue  # _last_checkpoint, a temporary file
                files.setdefault(int(head), []).append(entry.path)
                infos[entry.path] = entry
                if ".checkpoint." in entry.base_name:
                    checkpoints.add(int(head))
            if not files:
                continue
            if checkpoints:
                newest = [infos[path] for path in files[max(checkpoints)]]
                stale = _stale_tombstones(store, newest)
                name = table.base_name
                self.stale_tombstones[name] = max(self.stale_tombstones.get(name, 0), stale)
            history = self.log_versions.setdefault(table.path, [])
            history.append((day, max(files)))
            expired = [v for d, v in history if d <= day - self.args.log_retention]
            del history[: max(len(expired) - 1, 0)]  # the newest of those is enough
            before = max((c for c in checkpoints if expired and c <= expired[-1]), default=0)
            gone = [path for v, paths in files.items() if v < before for path in paths]
            for path in gone:
                store.delete_file(path)
            self._count("log files expired", len(gone))

    def _store(self) -> Any:
        """The warehouse, as a pyarrow file system (local disk or the S3 API)."""
        import pyarrow.fs as pafs

        root = self.settings.table_root
        return pafs.PyFileSystem(file_system(delta_uri(root), storage_options(root)))

    def _dead_files(self) -> dict[str, int]:
        """Each ledger table's data files on the store that its current version does not
        name (but `ack_events`', vacuumed above by the soak's clock): right after a
        maintenance, whose VACUUM keeps no hours here, none should be left, whether a
        killed run wrote them or the log no longer records their removal."""
        store = self._store()
        return {
            name: len(_unnamed(store, name, _live_files(self.ledger.path(name))[1]))
            for name in TABLES
            if name != ACK_EVENTS
        }

    def _vacuum_events(self, store: Any) -> None:
        """ackfold's VACUUM of `ack_events` by versions, not the wall clock: every data file
        that neither its current version nor the appends no reconcile has folded yet name
        (`unfolded_since`, read as a reconcile reads them: `appended_since`). ackfold's own
        keeps the hours back to the first such commit's time on the wall clock, at least
        one: a soak's whole run, so nothing went."""
        from urllib.parse import unquote

        from ackfold.embedded.log import appended_since
        from ackfold.ledger.commits.marks import unfolded_since

        ledger = Ledger(self.settings.table_root)
        path = ledger.path(ACK_EVENTS)
        options = storage_options(path)
        table, kept = _live_files(path)
        unfolded = unfolded_since(ledger)
        if unfolded:
            base = table.table_uri.rstrip("/") + "/"
            appended = appended_since(delta_uri(path), unfolded[0] - 1, storage_options=options)
            kept |= {unquote(f.uri.removeprefix(base)) for f in appended.files}
        gone = _unnamed(store, ACK_EVENTS, kept)
        for name in gone:
            store.delete_file(name)
        self._count("ack_events files vacuumed", len(gone))

    # -- the golden ledger and the upgrade ----------------------------------------------------

    def _golden(self) -> Path | None:
        case = self.args.start_from
        return None if case == "fresh" else GOLDEN / case / "ledger"

    def _golden_queues(self) -> set[str]:
        golden = self._golden()
        if golden is None:
            return set()
        from deltalake import DeltaTable

        queues = DeltaTable(str(golden / "roots")).to_pyarrow_table(columns=["source_queue"])
        return {q for q in queues.column(0).to_pylist() if q}

    def _start_from(self) -> None:
        """The warehouse begins as a copy of the golden ledger (`--start-from`), whose
        events join the record; `fresh`: the tables are made by this release, and the v1
        producer merges its schema from the start (the upgrade then adds nothing)."""
        golden = self._golden()
        if golden is None:
            self.writer.create(["roots", "ack_events"])
            self.v1.merge = True
            return
        _copy_tree(golden, self.settings.table_root)
        from deltalake import DeltaTable

        events = DeltaTable(str(golden / ACK_EVENTS)).to_pyarrow_table().to_pylist()
        self.record.add(events)
        self._count("golden events", len(events))

    def _upgrade(self) -> None:
        """`ackfold upgrade` mid-year; the v1 producer appends with schema_mode="merge" from
        then on (docs/ledger.md)."""
        added = upgrade(self.writer)
        self.v1.merge = True
        for producer in self.producers:
            producer.scheme = None  # numeric ids from now on, where id_scheme was added
        self._count("upgrades")
        self._count("columns added by the upgrade", len(added))

    # -- the older ackfold ----------------------------------------------------------------

    def _older_ackfold(self) -> None:
        """A day of the ledger as an earlier ackfold left it: folded up to a version that
        its mark file names, root_state in the older layout (partitioned by day alone, with
        two more columns), and no mark in root_state."""
        for hour in range(24):
            self.now = self.start - timedelta(days=1) + timedelta(hours=hour)
            self.producers[hour % 2].produce(self.now, self.args.roots)
        summary = run_reconcile(self.settings, now=self.now, engine="embedded")
        from deltalake import DeltaTable

        from ackfold.ledger.commits.marks import LEGACY_MARK, reconcile_checkpoint

        events = DeltaTable(delta_uri(self.ledger.path("ack_events")),
                            storage_options=storage_options(self.ledger.root))  # fmt: skip
        mark = {"format": 1, "ack_events_id": events.metadata().id,
                "ack_events_version": events.version()}  # fmt: skip
        self._older_root_state()
        checkpoint = reconcile_checkpoint(self.ledger, None)
        _put(checkpoint, LEGACY_MARK, json.dumps(mark).encode())
        self.events_written_at_last_run = self.record.count()
        self._count("roots folded by the older ackfold", sum(summary["by_status"].values()))

    def _older_root_state(self) -> None:
        """root_state made anew as the older ackfold kept it: partitioned by day alone,
        two more columns, every column nullable, and no mark of this ackfold in it."""
        import pyarrow as pa
        from deltalake import write_deltalake

        path = self.ledger.path(ROOT_STATE)
        current = _arrow(self.ledger, ROOT_STATE)
        schema = pa.schema(
            [f.with_nullable(True) for f in current.schema]
            + [pa.field("last_event_id", pa.string()), pa.field("fail_event_id", pa.string())]
        )
        nulls = [pa.nulls(current.num_rows, pa.string()) for _ in range(2)]
        older = pa.Table.from_arrays([*current.columns, *nulls], schema=schema)
        _remove(path)
        write_deltalake(delta_uri(path), older, partition_by=["first_event_date"],
                        storage_options=storage_options(path))  # fmt: skip

    # -- the checks -----------------------------------------------------------------------

    def check(self) -> None:
        """After a reconcile and a replay have caught up: every root against the reference
        fold, none lost, none twice, none unsettled without a reason."""
        self._reconcile()
        automatic_replay(self.settings, now=self.now)
        state = _rows(self.ledger, ROOT_STATE)
        ids = [r["root_id"] for r in state]
        if len(ids) != len(set(ids)):
            raise SoakFailed(
                f"roots counted twice: {sorted({i for i in ids if ids.count(i) > 1})[:5]}"
            )
        by_root = {r["root_id"]: r for r in state}
        lost, wrong, stuck = [], [], []
        grace = TIMEOUT + timedelta(hours=self.args.reconcile_every)
        # The reference fold of the roots with new events only: the others' is unchanged.
        for root in self.record.dirty:
            self.folded[root] = fold(self.record.of(root))[root]
        self.record.dirty.clear()
        for root in self.record.events:
            row = by_root.get(root)
            folded = self.folded[root]
            if row is None:
                lost.append(root)
                continue
            ok, expected = self._agrees(row, folded)
            if not ok and row["status"] in COMPLETE:
                # A complete tree ignores every later event (docs/reconciler.md): a copy of
                # its message delivered after it completed (a replay killed between its send
                # and its mark sends once more) adds events no reconcile folds into it.
                folded = fold(
                    e for e in self.record.of(root) if e["event_time"] <= row["last_event_at"]
                )[root]
                ok, expected = self._agrees(row, folded)
                self._count("roots with events after their completion", ok)
            if not ok:
                wrong.append((root, row["status"], expected, row["xor_acc"], folded.xor_acc))
            elif row["status"] not in DONE and not self._waits(row, folded, grace):
                stuck.append((root, row["status"], row["attempt"]))
        waiting = _rows(self.ledger, UNMATCHED_EVENTS)
        problems: dict[str, list[Any]] = {
            "lost": lost,
            "wrong": wrong,
            "stuck": stuck,
            "waiting": waiting,
        }
        if any(problems.values()):
            found = {k: (len(v), v[:3]) for k, v in problems.items() if v}
            raise SoakFailed(f"day {(self.now - self.start).days}: {found}")
        self._count("checks passed")
        log.warning("soak seed %d: %s: %d roots checked", self.seed, self.now.date(), len(by_root))

    def _agrees(self, row: dict[str, Any], folded: Any) -> tuple[bool, str]:
        """Whether `root_state`'s `row` is what the reference `folded` says now: its status,
        XOR and event count; and the status the reference expects."""
        expected = classify(folded, now=self.now, timeout=TIMEOUT, prior_status=row["status"])
        if row["status"] in status.SUPERSEDED or row["status"] == status.COMPLETED_LATE:
            ok = expected == row["status"]
        else:
            ok = classify(folded, now=self.now, timeout=TIMEOUT) == row["status"]
        same = (row["xor_acc"], row["event_count"]) == (folded.xor_acc, folded.event_count)
        return ok and same, expected

    def _waits(self, row: dict[str, Any], folded: Any, grace: timedelta) -> bool:
        """Whether an unsettled root has a reason: younger than its timeout and a
        reconcile, or failed or timed out and waiting out its replay's backoff."""
        if folded.first_event_at >= self.now - grace:
            return True
        if row["status"] in (status.FAILED, status.TIMED_OUT):
            backoff = BACKOFF * 2 ** ((row["attempt"] or 1) - 1)
            return bool(row["status_changed_at"] + backoff > self.now)
        return False

    def _summary(self, seconds: float) -> dict[str, Any]:
        embedded = [c for c in self.costs if c["engine"] == "embedded"]
        months: dict[int, list[float]] = {}
        for c in embedded:
            months.setdefault(c["day"] // 30, []).append(c["seconds"])
        medians = {m: round(statistics.median(v), 3) for m, v in sorted(months.items())}
        first_month = medians.get(1) or next(iter(medians.values()), 0)
        # Wall time on a shared machine is noisy: the last months against the first,
        # with room; what each run read against what was new is exact.
        flat = max(medians.values(), default=0) <= max(5 * first_month, first_month + 2.0)
        reads = [c for c in embedded if c["events_read"] > c["events_new"] * 3 + 100]
        events_bytes = {d: b for d, b, _, _ in self.sizes}
        # Checkpoints apart: they carry the tombstones of the retention property's hours on
        # the wall clock (a soak's whole run), which `stale` checks Delta drops on time.
        steady = [b for d, b, _, _ in self.sizes if d >= 2 * self.args.retention]
        bounded = not steady or max(steady) <= 2 * min(steady) + (1 << 20)
        stale = {name: n for name, n in self.stale_tombstones.items() if n}
        dead = {name: n for name, n in self.dead_files.items() if n}
        failures = [
            what for what, ok in (
                ("a reconcile's cost grew with the ledger's age", flat),
                ("a reconcile read more than what was new", not reads),
                ("ack_events grew beyond its retention", bounded),
                (f"checkpoints kept tombstones past their retention: {stale}", not stale),
                (f"files no version names stayed after VACUUM: {dead}", not dead),
            ) if not ok
        ]  # fmt: skip
        if failures:
            raise SoakFailed("; ".join(failures))
        return {
            "seed": self.seed, "days": self.args.days, "store": self.args.store,
            "seconds": round(seconds, 1),
            "seconds_by_step": {k: round(v, 1) for k, v in sorted(self.seconds.items())},
            "seconds_by_month": {
                m: {k: round(v, 1) for k, v in sorted(steps.items())}
                for m, steps in sorted(self.monthly.items())
            },
            "roots": len(self.record.events),
            "events": self.record.count(), "counts": dict(sorted(self.counts.items())),
            "fates": {**{p.app: dict(p.fates) for p in self.producers}, V1_APP: self.v1.fates},
            "faults": dict(self.faults.hits),
            "reconcile_seconds_median_by_month": medians, "cost_flat": flat,
            "reconciles_reading_more_than_new": len(reads),
            "ack_events_data_bytes_by_day": events_bytes,
            "ack_events_checkpoint_bytes_by_day": {d: c for d, _, c, _ in self.sizes},
            "warehouse_bytes_by_day": {d: w for d, _, _, w in self.sizes},
            "storage_bounded": bounded,
            "tombstones_past_retention": self.stale_tombstones,
            "dead_files_after_maintenance": self.dead_files,
            "whole_table_reads": self.fallbacks.count,
        }  # fmt: skip

    def _count(self, what: str, happened: bool | int = True) -> None:
        self.counts[what] = self.counts.get(what, 0) + int(happened)

    def _bytes(self, table: str = "") -> dict[str, int]:
        """Bytes under the warehouse (or one of its tables): its `checkpoints`, and the rest
        (`data`: data files, commits)."""
        where = self.ledger.path(table) if table else self.settings.table_root
        if self.args.store == "s3":
            files = _object_sizes(where)
        else:
            files = [(p.name, p.stat().st_size) for p in Path(where).rglob("*") if p.is_file()]
        split = {"data": 0, "checkpoints": 0}
        for name, size in files:
            split["checkpoints" if ".checkpoint." in name else "data"] += size
        return split


class _Counting(logging.Handler):
    """Counts the log lines that say `text` (the whole-table reads after a stale mark)."""

    def __init__(self, text: str) -> None:
        super().__init__(logging.WARNING)
        self.text, self.count = text, 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += self.text in record.getMessage()


def _arrow(ledger: Ledger, name: str) -> Any:
    from deltalake import DeltaTable

    path = ledger.path(name)
    return DeltaTable(delta_uri(path), storage_options=storage_options(path)).to_pyarrow_table()


def _rows(ledger: Ledger, name: str) -> list[dict[str, Any]]:
    return list(_arrow(ledger, name).to_pylist())


def _copy_tree(source: Path, location: str) -> None:
    """Every file under `source`, copied under `location` (local, or objects on S3)."""
    if "://" not in location:
        shutil.copytree(source, location, dirs_exist_ok=True)
        return
    from ackfold.ledger.storage.store import s3_client

    bucket, _, prefix = delta_uri(location).removeprefix("s3://").partition("/")
    client = s3_client(storage_options(location) or {})
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        key = f"{prefix.strip('/')}/{path.relative_to(source).as_posix()}"
        client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())


def _put(location: str, name: str, data: bytes) -> None:
    """A file beside the tables, as the older ackfold wrote its mark (local or S3)."""
    if "://" not in location:
        Path(location).mkdir(parents=True, exist_ok=True)
        (Path(location) / name).write_bytes(data)
        return
    from ackfold.ledger.storage.store import s3_client

    bucket, _, prefix = delta_uri(location).removeprefix("s3://").partition("/")
    client = s3_client(storage_options(location) or {})
    client.put_object(Bucket=bucket, Key=f"{prefix.strip('/')}/{name}", Body=data)


def _remove(location: str) -> None:
    """A table's directory, gone (local, or its objects on S3)."""
    if "://" not in location:
        shutil.rmtree(location)
        return
    from ackfold.ledger.storage.store import s3_client

    bucket, _, prefix = delta_uri(location).removeprefix("s3://").partition("/")
    client = s3_client(storage_options(location) or {})
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            client.delete_object(Bucket=bucket, Key=item["Key"])


def _object_sizes(location: str) -> list[tuple[str, int]]:
    import pyarrow.fs as pafs

    store = pafs.PyFileSystem(file_system(delta_uri(location), storage_options(location)))
    found = store.get_file_info(pafs.FileSelector("", recursive=True))
    return [(f.base_name, f.size or 0) for f in found if f.type == pafs.FileType.File]


def _live_files(path: str) -> tuple[Any, set[str]]:
    """The Delta table at `path`, and the data files its current version names (relative,
    unquoted)."""
    from urllib.parse import unquote

    import pyarrow as pa
    from deltalake import DeltaTable

    table = DeltaTable(delta_uri(path), storage_options=storage_options(path))
    actions = pa.table(table.get_add_actions(flatten=True)).column("path")
    return table, {unquote(p) for p in actions.to_pylist()}


def _unnamed(store: Any, table: str, kept: set[str]) -> list[str]:
    """The data files of `table` on `store` (a pyarrow file system of the warehouse) that
    `kept` (paths relative to the table) does not name."""
    import pyarrow.fs as pafs

    found = store.get_file_info(pafs.FileSelector(table, recursive=True, allow_not_found=True))
    return [
        f.path for f in found
        if "/_delta_log/" not in f.path and f.path.endswith(".parquet")
        and f.path.removeprefix(f"{table}/") not in kept
    ]  # fmt: skip


def _stale_tombstones(store: Any, checkpoint: list[Any]) -> int:
    """The tombstones (`remove` actions) that the checkpoint of the listed files
    `checkpoint` (one, or the parts of one) kept though they were older than its table's
    `delta.deletedFileRetentionDuration` when it was written, a minute's leeway aside:
    Delta drops those, by the wall clock. (A v2 checkpoint's sidecars are not read: the
    ledger's tables stay at reader version 1.)"""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    parts = [f for f in checkpoint if f.path.endswith(".parquet")]
    if any(f.mtime is None for f in parts):
        raise SoakFailed(f"the store gave no time for the checkpoint {parts[0].path}")
    actions = {}
    for part in parts:
        with store.open_input_file(part.path) as source:
            actions[part.path] = pq.read_table(source, columns=["remove", "metaData"])
    # The table's metadata is in one part of a multi-part checkpoint: read it first.
    metadata = pa.concat_tables(actions.values()).column("metaData").drop_null().to_pylist()
    configuration = dict(metadata[0]["configuration"] or []) if metadata else {}
    retention = interval(configuration.get(RETENTION_PROPERTY, "interval 1 week"))
    stale = 0
    for part in parts:
        removes = actions[part.path].column("remove").drop_null()
        times = pc.struct_field(removes, "deletionTimestamp")
        oldest_kept = (part.mtime - retention - timedelta(minutes=1)).timestamp() * 1000
        stale += pc.sum(pc.less(times, oldest_kept)).as_py() or 0
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--days", type=int, default=365, help="simulated days")
    parser.add_argument("--store", choices=("local", "s3"), default="local")
    parser.add_argument(
        "--s3-server",
        choices=("versitygw", "moto"),
        default="versitygw",
        help="the local S3 API of --store s3 (default: versitygw, from `make emulators`)",
    )
    parser.add_argument("--roots", type=int, default=10, help="roots a producer registers a batch")
    parser.add_argument("--produce-every", type=int, default=2, help="hours between batches")
    parser.add_argument("--reconcile-every", type=int, default=8, help="hours")
    parser.add_argument("--quality-every", type=int, default=24 * 30, help="hours")
    parser.add_argument("--spark-app-every", type=int, default=24 * 7, help="hours")
    parser.add_argument("--check-every", type=int, default=30, help="days")
    parser.add_argument("--retention", type=int, default=30, help="days of events kept")
    parser.add_argument("--log-retention", type=int, default=30,
                        help="days of each table's log kept (Delta's default: 30)")  # fmt: skip
    cases = sorted(p.parent.name for p in GOLDEN.glob("*/ledger"))
    parser.add_argument(
        "--start-from",
        choices=[*cases, "fresh"],
        default="contract-v1",
        help="the golden ledger it starts from (tests/golden), or fresh",
    )
    parser.add_argument(
        "--upgrade-day", type=int, help="the simulated day of `ackfold upgrade` (default: mid-way)"
    )
    parser.add_argument("--no-spark", action="store_true", help="no Spark app, no Spark engine")
    parser.add_argument("--sqs", help="an SQS endpoint to use (default: start ElasticMQ)")
    parser.add_argument("--workdir", help="where the ledgers go (default: a temp dir)")
    parser.add_argument("--warehouse", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    # Stopped with SIGTERM, as with Ctrl-C: the servers it started stop with it.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    logging.basicConfig(level=logging.ERROR, format="%(asctime)s %(name)s: %(message)s")
    log.setLevel(logging.WARNING)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="ackfold-soak-"))
    results, failed = [], []
    with ExitStack() as stack:
        args.jars = load_settings().jars_dir  # the project's jar cache, wherever ledgers go
        base = load_settings(var_dir=work / "servers", jars_dir=args.jars)
        sqs = args.sqs or _start_sqs(stack, base)
        s3 = None
        if args.store == "s3":
            from ackfold_dev.s3 import LocalS3
            from ackfold_dev.versitygw import LocalVersityS3

            server = LocalVersityS3 if args.s3_server == "versitygw" else LocalS3
            s3 = stack.enter_context(server(work / "s3"))
            os.environ.update(s3.env())
            args.warehouse = f"s3://{s3.bucket}/soak-{{seed}}"
        spark = None
        if not args.no_spark and args.store == "local":  # Spark reads no s3a:// here
            from ackfold.spark import get_spark

            spark = get_spark(
                base.model_copy(
                    update={
                        "spark": base.spark.model_copy(
                            update={"master": "local[2]", "shuffle_partitions": 2}
                        )
                    }
                ),
                app_name="ackfold-soak",
            )
        for seed in args.seeds:
            soak = Soak(args, seed, work / f"seed-{seed}", sqs, spark, s3)
            try:
                summary = soak.run()
            except SoakFailed as exc:
                failed.append(seed)
                summary = {"seed": seed, "failed": str(exc), "counts": soak.counts}
            results.append(summary)
            print(json.dumps(summary, default=str), flush=True)
    print(json.dumps({"seeds": args.seeds, "failed": failed, "runs": results}, default=str))
    sys.stdout.flush()
    os._exit(1 if failed else 0)  # delta-rs may abort at interpreter exit (DESIGN.md)


def _start_sqs(stack: ExitStack, settings: Settings) -> str:
    from ackfold_dev.elasticmq import ElasticMQ
    from ackfold_dev.ports import free_port

    port = free_port()
    here = settings.model_copy(update={"sqs": settings.sqs.model_copy(
        update={"endpoint_url": f"http://127.0.0.1:{port}"})})  # fmt: skip
    return str(stack.enter_context(ElasticMQ(here, port=port)).endpoint_url)


if __name__ == "__main__":
    main()
