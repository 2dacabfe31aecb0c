"""What the quality checks look at, on the embedded engine: DuckDB over the ledger as
delta-rs reads it, in the calling process (no JVM).

The same batches as `ackfold.quality.batches` (the Spark engine), with the same meaning,
bounded by the same window: events written, roots registered, replays sent and
`root_state` partitions in it (a day more where rows of different writers are joined).
Each table is read once per run: the window's `roots` are de-duplicated into a temporary
table that every batch joins, and the large `ack_events` batch is checked in one
aggregation (`ackfold.quality.duck_checks`), never copied out of DuckDB.

The delivery batches come out small (a row per overdue root, per message, per app):
they are what Great Expectations validates as pandas frames.

Parameters (times, app names) reach DuckDB as bound values, never as SQL text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final

from ackfold.config import Settings
from ackfold.ledger.schema import status
from ackfold.ledger.schema.contract import CLOCK_SKEW
from ackfold.ledger.schema.tables import (
    ACK_EVENTS,
    DEAD_LETTERS,
    REPLAY_LOG,
    ROOT_STATE,
    ROOTS,
    SENT_MESSAGES,
    Ledger,
)
from ackfold.quality.batches import EVENT_CONTENT, ROOT_IDENTITY, VALID_CHAIN, Window
from ackfold.quality.duck_reads import read
from ackfold.quality.outcomes import overdue_outcome_sql
from ackfold.replay.bookkeeping import AUTOMATIC
from ackfold.replay.planner import REPLAY, SENT
from ackfold.sources.base import EXPIRED, NO_SENDER

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

# root_state columns the checks read (not `seen_event_hashes`, the largest).
STATE_COLUMNS: Final = (
    "root_id", "app", "status", "xor_acc", "event_count", "first_event_at", "last_event_at",
    "status_changed_at", "attempt", "origin_root_id", "last_stage", "fail_reason", "fail_at",
    "init_seen", "first_event_date",
)  # fmt: skip


@dataclass(frozen=True)
class Batch:
    """A ledger batch: the DuckDB view holding its rows, and its columns with their Delta
    types (what the schema checks read, whatever the files hold)."""

    view: str
    columns: dict[str, str]


class LedgerViews:
    """The batches of one quality run over the ledger at `settings.table_root`."""

    def __init__(
        self,
        db: duckdb.DuckDBPyConnection,
        settings: Settings,
        window: Window,
        *,
        app: str | None = None,
    ) -> None:
        self.db = db
        self.settings = settings
        self.window = window
        self.app = app
        self.ledger = Ledger(settings.table_root)
        self._kept: list[Any] = []  # the Arrow datasets the views read: alive while they are
        self._schemas: dict[str, dict[str, str]] = {}
        self._roots_ready = False

    # -- reading ---------------------------------------------------------------------------

    def _read(
        self,
        name: str,
        columns: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
        keep: Callable[[Mapping[str, str | None]], bool] | None = None,
    ) -> duckdb.DuckDBPyRelation:
        """Ledger table `name`, only `app`'s rows when the run is for one app, and of a
        partitioned table only the partitions `keep` accepts
        (`ackfold.quality.duck_reads.read`); its schema is kept for the checks."""
        relation, self._schemas[name] = read(
            self.db, self.ledger.path(name), columns, exclude, app=self.app, keep=keep
        )
        return relation

    def _view(self, view: str, relation: duckdb.DuckDBPyRelation) -> str:
        relation.create_view(view, replace=True)
        self._kept.append(relation)
        return view

    def _since(
        self,
        name: str,
        column: str,
        margin: timedelta = timedelta(0),
        columns: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
    ) -> duckdb.DuckDBPyRelation:
        import duckdb

        relation = self._read(name, columns, exclude)
        start = self.window.start - margin
        return relation.filter(duckdb.ColumnExpression(column) >= duckdb.ConstantExpression(start))

    def schema(self, name: str) -> dict[str, str]:
        return self._schemas[name]

    # -- ledger soundness ------------------------------------------------------------------

    def ack_events(self) -> Batch:
        """Events written in the window, as written (`ackfold.quality.duck_checks` groups
        them by the fold's key, root and id, in the same pass as the column checks)."""
        events = self._since(ACK_EVENTS, "event_time")
        schema = dict(self.schema(ACK_EVENTS))
        content = [c for c in EVENT_CONTENT if c in schema]
        says = "hash(" + ", ".join(_quoted(c) for c in content) + ")" if content else "0"
        view = self._view("q_ack_events", events.project(f"*, {says} AS says"))
        return Batch(view, {**schema, "says": "LongType"})

    def _window_roots(self) -> str:
        """The window's roots, one row per identity (redeliveries), with the earliest
        `ingested_at` of its copies; materialized once, every batch joins it."""
        if not self._roots_ready:
            # Not the payloads: nulled (their type is what the schema checks see).
            roots = self._since(ROOTS, "ingested_at", CLOCK_SKEW, exclude=("payload",))
            self._view("q_roots_read", roots)
            schema = self.schema(ROOTS)
            keys = [c for c in ROOT_IDENTITY if c in schema]
            # Grouped by the root id and one hash of the rest of the identity: numbers,
            # not strings, for the same groups.
            by = ", ".join(
                [_quoted(keys[0]), "hash(" + ", ".join(_quoted(k) for k in keys[1:]) + ")"]
                if len(keys) > 1 and keys[0] == "root_id"
                else [_quoted(k) for k in keys]
            )
            rest = [
                f"min({_quoted(c)}) AS {_quoted(c)}"
                if c == "ingested_at"
                else f"NULL::{'VARCHAR' if schema[c] == 'StringType' else 'BLOB'} AS payload"
                if c == "payload"
                else f"any_value({_quoted(c)}) AS {_quoted(c)}"
                for c in schema
            ]
            # Rows from a day before the window too: `sent` matches messages against them.
            self.db.execute(
                f"CREATE OR REPLACE TEMP TABLE q_roots_skew AS SELECT {', '.join(rest)} "  # noqa: S608
                f"FROM q_roots_read GROUP BY {by}"
            )
            self.db.execute(
                "CREATE OR REPLACE TEMP TABLE q_roots_window AS SELECT * FROM q_roots_skew "
                "WHERE ingested_at >= ?",
                [self.window.start],
            )
            self._roots_ready = True
        return "q_roots_window"

    def _replays_sent(self) -> str:
        """The sends in `replay_log` that made the roots of the window."""
        columns = ["new_root_id", "attempt", "origin_root_id", "requested_by", "event",
                   "action", "dry_run", "sent_at"]  # fmt: skip
        self._view("q_replays_read", self._since(REPLAY_LOG, "sent_at", CLOCK_SKEW, columns))
        self.db.execute(
            "CREATE OR REPLACE TEMP TABLE q_sends AS "
            "SELECT new_root_id AS root_id, attempt, origin_root_id, "
            "max(requested_by <> ?) AS by_hand FROM q_replays_read "
            "WHERE event = ? AND action = ? AND NOT dry_run AND new_root_id IS NOT NULL "
            "GROUP BY ALL",
            [AUTOMATIC, SENT, REPLAY],
        )
        return "q_sends"

    def _policies(self, apps: Sequence[str]) -> str:
        """A table of each app's policy values the checks read (`q_policy`)."""
        import pyarrow as pa

        names = sorted({*apps, *self.settings.apps})
        policies = [self.settings.app(name) for name in names]
        table = pa.table(
            {
                "app": pa.array(names, pa.string()),
                "max_attempts": pa.array([p.max_attempts for p in policies], pa.int32()),
            }
        )
        self._kept.append(table)
        self.db.register("q_policy", table)
        return "q_policy"

    def roots(self) -> Batch:
        """Roots registered in the window, with `origin_chain`, `max_attempts` and
        `sent_by_hand`, as `ackfold.quality.batches.LedgerFrames.roots` defines them."""
        roots = self._window_roots()
        sends = self._replays_sent()
        default = self.settings.defaults.max_attempts
        apps = [row[0] for row in self.db.execute(f"SELECT DISTINCT app FROM {roots}").fetchall()]  # noqa: S608
        policy = self._policies([a for a in apps if a is not None])
        self.db.execute(
            "CREATE OR REPLACE TEMP TABLE q_roots AS "  # noqa: S608
            "WITH previous AS ("
            f"  SELECT origin_root_id, attempt + 1 AS attempt FROM {roots} "
            f"  UNION SELECT origin_root_id, attempt FROM {sends}), "
            f"by_hand AS (SELECT DISTINCT root_id FROM {sends} WHERE by_hand) "
            "SELECT r.*, CASE "
            "  WHEN r.attempt = 1 AND r.origin_root_id <> r.root_id "
            "    THEN 'attempt 1 is not its own origin' "
            "  WHEN r.attempt > 1 AND r.origin_root_id = r.root_id "
            "    THEN 'attempt ' || r.attempt || ' names itself as its origin' "
            "  WHEN r.attempt > 1 AND NOT EXISTS (SELECT 1 FROM previous p "
            "    WHERE p.origin_root_id = r.origin_root_id AND p.attempt = r.attempt) "
            "    THEN 'attempt ' || (r.attempt - 1) || ' is not registered' "
            "  ELSE ? END AS origin_chain, "
            f"coalesce(pol.max_attempts, ?) AS max_attempts, "
            "h.root_id IS NOT NULL AS sent_by_hand "
            f"FROM {roots} r LEFT JOIN {policy} pol ON pol.app = r.app "
            "LEFT JOIN by_hand h ON h.root_id = r.root_id",
            [VALID_CHAIN, default],
        )
        columns = {
            **self.schema(ROOTS),
            "origin_chain": "StringType",
            "max_attempts": "IntegerType",
            "sent_by_hand": "BooleanType",
        }
        return Batch("q_roots", columns)

    def _states(self) -> str:
        """`root_state` rows first seen in the window less a day, and the unsettled roots
        first seen before it (partition filters only)."""
        import duckdb

        if "q_states" not in self._schemas:
            first_day = (self.window.start - CLOCK_SKEW).date()

            def kept(values: Mapping[str, str | None]) -> bool:
                # The files of those partitions only: the settled history is never opened.
                day, state = values["first_event_date"], values["status"]
                return state in status.UNSETTLED or (day is not None and day >= str(first_day))

            relation = self._read(ROOT_STATE, STATE_COLUMNS, keep=kept).filter(
                (
                    duckdb.ColumnExpression("first_event_date")
                    >= duckdb.ConstantExpression(first_day)
                )
                | duckdb.ColumnExpression("status").isin(
                    *(duckdb.ConstantExpression(s) for s in status.UNSETTLED)
                )
            )
            self._view("q_states_read", relation)
            # Read once: the root_state batch and every app's delivery batches join it.
            self.db.execute("CREATE OR REPLACE TEMP TABLE q_states AS SELECT * FROM q_states_read")
            self._schemas["q_states"] = self.schema(ROOT_STATE)
        return "q_states"

    def root_state(self) -> Batch:
        """`root_state` rows first seen in the window."""
        states = self._states()
        self.db.execute(
            f"CREATE OR REPLACE TEMP TABLE q_root_state AS SELECT * FROM {states} "  # noqa: S608
            "WHERE first_event_date >= ?",
            [self.window.start.date()],
        )
        return Batch("q_root_state", self.schema(ROOT_STATE))

    # -- delivery guarantees, per app ------------------------------------------------------

    def _overdue_roots(self, app: str) -> str:
        """(root_id, origin_root_id, attempt) of the app's roots that should have settled
        by now: registered in the window past their timeout and grace, and unsettled from
        before the window, however old (`LedgerFrames._overdue_roots`)."""
        roots, states = self._window_roots(), self._states()
        cutoff = self.window.overdue_before(self.settings.app(app))
        self.db.execute(
            "CREATE OR REPLACE TEMP TABLE q_overdue_roots AS "  # noqa: S608
            "SELECT root_id, any_value(origin_root_id) AS origin_root_id, "
            "any_value(attempt) AS attempt FROM ("
            f"  SELECT root_id, origin_root_id, attempt FROM {roots} "
            "   WHERE app = ? AND ingested_at < ? "
            f"  UNION ALL SELECT root_id, origin_root_id, attempt FROM {states} "
            "   WHERE status IN (SELECT unnest(?)) AND first_event_date < ? AND app = ?"
            ") GROUP BY root_id",
            [app, cutoff, list(status.UNSETTLED), self.window.start.date(), app],
        )
        return "q_overdue_roots"

    def overdue(self, app: str) -> pd.DataFrame:
        """One row per overdue root of `app` with its `outcome` (`overdue_outcome`'s)."""
        policy = self.settings.app(app)
        overdue, roots, states = self._overdue_roots(app), self._window_roots(), self._states()
        self._view(
            "q_dead_letters",
            self._since(DEAD_LETTERS, "dead_lettered_at", CLOCK_SKEW, ["root_id", "reason",
                        "dead_lettered_at"]),
        )  # fmt: skip
        outcome, params = overdue_outcome_sql(policy, self.window.now)
        query = (
            "WITH next AS (SELECT DISTINCT origin_root_id, attempt - 1 AS attempt "  # noqa: S608
            f"  FROM {roots} WHERE app = $app), "
            "expired AS (SELECT DISTINCT root_id FROM q_dead_letters WHERE reason = $expired), "
            "no_sender AS (SELECT DISTINCT root_id FROM q_dead_letters "
            "  WHERE starts_with(reason, $no_sender)) "
            "SELECT o.root_id, o.attempt, s.status, "
            f"{outcome} AS outcome FROM {overdue} o "
            f"LEFT JOIN {states} s ON s.root_id = o.root_id "
            "LEFT JOIN next n ON n.origin_root_id = o.origin_root_id AND n.attempt = o.attempt "
            "LEFT JOIN expired x ON x.root_id = o.root_id "
            "LEFT JOIN no_sender y ON y.root_id = o.root_id"
        )
        rows: Any = self.db.sql(
            query, params={"app": app, "expired": EXPIRED, "no_sender": NO_SENDER, **params}
        ).to_arrow_table()
        # A row per overdue root, a handful of distinct outcomes: categories for pandas.
        for name in ("status", "outcome"):
            index = rows.schema.get_field_index(name)
            rows = rows.set_column(index, name, rows.column(name).dictionary_encode())
        return rows.to_pandas()

    def sent(self, app: str) -> pd.DataFrame:
        """The messages producers report they sent for `app`, old enough to have been
        consumed, each with `registered` (a root of attempt 1 has their queue and id)."""
        self._window_roots()
        cutoff = self.window.overdue_before(self.settings.app(app))
        self._view(
            "q_sent",
            self._since(SENT_MESSAGES, "sent_at", columns=["app", "source_queue",
                        "source_message_id", "sent_at"]),
        )  # fmt: skip
        return self.db.execute(
            "WITH registered AS (SELECT DISTINCT source_queue, source_message_id "
            "  FROM q_roots_skew WHERE app = ? AND attempt = 1) "
            "SELECT s.source_queue, s.source_message_id, s.sent_at, "
            "  r.source_message_id IS NOT NULL AS registered "
            "FROM q_sent s LEFT JOIN registered r ON r.source_queue = s.source_queue "
            "  AND r.source_message_id = s.source_message_id "
            "WHERE s.app = ? AND s.sent_at < ?",
            [app, app, cutoff],
        ).df()

    def delivery(self, app: str) -> pd.DataFrame:
        """One row for `app`: duplicate and dead-letter rates over its overdue messages,
        and the complete latency's 99th percentile (`LedgerFrames.delivery`)."""
        overdue, states = self._overdue_roots(app), self._states()
        return self.db.execute(
            "WITH messages AS (SELECT DISTINCT origin_root_id FROM "  # noqa: S608
            f"  {overdue} WHERE attempt = 1), "
            f"st AS (SELECT * FROM {states} WHERE app = ?), "
            "per_message AS (SELECT origin_root_id, "
            "  max((status = ?)::INT) AS late, arg_max(status, attempt) AS last_status "
            "  FROM st WHERE origin_root_id IN (SELECT origin_root_id FROM messages) "
            "  GROUP BY origin_root_id), "
            "rates AS (SELECT sum(late) AS duplicated, sum((last_status = ?)::INT) AS dead "
            "  FROM per_message), "
            "latency AS (SELECT quantile_disc(latency_s, 0.99) AS p99, count(*) AS completed "
            "  FROM (SELECT epoch_us(last_event_at) / 1e6 - epoch_us(first_event_at) / 1e6 "
            "    AS latency_s FROM st WHERE status = ? AND status_changed_at >= ?)), "
            "counted AS (SELECT count(*) AS messages FROM messages) "
            "SELECT ? AS app, messages, "
            "  CASE WHEN messages > 0 THEN coalesce(duplicated, 0) / messages ELSE 0.0 END "
            "    AS duplicate_rate, "
            "  CASE WHEN messages > 0 THEN coalesce(dead, 0) / messages ELSE 0.0 END "
            "    AS dead_letter_rate, "
            "  completed, p99::DOUBLE AS latency_p99_s "
            "FROM counted, rates, latency",
            [app, status.COMPLETED_LATE, status.DEAD_LETTERED, status.COMPLETED,
             self.window.start, app],
        ).df()  # fmt: skip

    def apps(self) -> list[str]:
        """The run's app, or every app configured, with roots registered, or with
        messages reported sent in the window."""
        if self.app is not None:
            return [self.app]
        roots = self._window_roots()
        sent = self._since(SENT_MESSAGES, "sent_at", columns=["app", "sent_at"])
        self._view("q_sent_apps", sent)
        seen = self.db.execute(
            f"SELECT app FROM {roots} UNION SELECT app FROM q_sent_apps"  # noqa: S608
        ).fetchall()
        return sorted({*self.settings.apps, *(row[0] for row in seen if row[0] is not None)})


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
