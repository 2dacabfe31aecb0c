"""Why a root is pending: what its events say it waits for, and which stages' outputs no
stage has ever acked.

What the ledger can say, and what it cannot (docs/decisions/why-pending.md):

- A root's `xor_acc` is the XOR of its open edges, each a hash of (tuple, root, anchor,
  consumer). A hash cannot be undone, and a compact ack row XORs a stage's acks with the
  edges of everything it emitted: **which** stage's tuples are open is not in the events.
- What is there: the stages that wrote events of the root (each may have emitted the open
  tuples), when each last wrote, and the newest, where the root stopped. Nothing was acked
  after that event, so its stage's outputs are the likeliest to be waiting.
- Across the app: a stage that some completed root went through has had its outputs acked
  (or emitted none). A stage that no completed root went through, where roots stop, has
  outputs that no stage has ever acked: the classic mistake is a sink whose final table is
  emitted without `to=[]`, owing an ack to "any one stage" that never comes.

`explain_pending` builds the explanation of one root (for `ackfold show` and the root
page); `app_stages` reads what the app's completed roots went through, and
`AppStages.timeout_reason` is the reason a reconcile writes for a root that times out at
such a stage.

Example:
    >>> from datetime import datetime, timedelta, timezone
    >>> history = AppStages("wc", frozenset({"spout", "split"}), completed_checked=3)
    >>> history.timeout_reason("split") is None
    True
    >>> print(history.timeout_reason("count"))  # doctest: +NORMALIZE_WHITESPACE
    timed out at stage 'count', whose outputs no stage has ever acked in app 'wc' (none of
    its 3 completed roots went through it): if 'count' writes a final table, emit it with
    to=[]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from ackfold.ledger.reading.rows import Event, PendingExplanation, RootState, StageWait
from ackfold.ledger.reading.sql import SqlReader, select, sql_date, sql_str, sql_ts
from ackfold.ledger.schema import status
from ackfold.ledger.schema.contract import INIT
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOT_STATE

# How many of an app's newest completed roots `app_stages` looks at: enough to have seen
# every stage of a healthy app, few enough for one bounded read of their events.
RECENT_COMPLETED: Final = 1000
# The days before `now` those roots are looked for in first (`root_state`'s partitions),
# and how many of them are enough not to look further back: an app whose last week
# completed that many has shown its stages, and each older day read costs every reconcile.
RECENT_DAYS: Final = 7
ENOUGH_RECENT: Final = 100
# The days before `now` they are looked for at all: maintenance deletes a completed root's
# events after `maintenance.retention` (30 days by default), so an older root has no
# stages left to read, and a read of its id would grow with every day the ledger keeps.
HISTORY_DAYS: Final = 30
# A root that waits for events: its tree is open and no fail settled it.
WAITING: Final = (status.PENDING, status.TIMED_OUT, status.REPLAYED, status.DEAD_LETTERED)
COMPLETE: Final = (status.COMPLETED, status.COMPLETED_LATE)
# The text of `AppStages.reason`, with `%1$s` for the stage: a reconcile on Spark fills it
# with `format_string`, Python with `str.replace`. App names are `%`-escaped in it.
_STAGE: Final = "%1$s"
_DOCS: Final = "docs/tracking/python.md"


@dataclass(frozen=True)
class AppStages:
    """What an app's completed roots went through: `acked` holds every stage with an event
    in one of the `completed_checked` newest completed roots (`capped`: the app has more).

    A stage outside `acked` has never had its outputs acked in a root that completed."""

    app: str
    acked: frozenset[str]
    completed_checked: int
    capped: bool = False

    def never_acked(self, stage: str | None) -> bool:
        return stage is not None and stage not in self.acked

    def whose(self) -> str:
        """What the app's completed roots say of a stage outside `acked`."""
        if self.completed_checked == 0:
            return "no root of the app has completed yet"
        if self.capped:
            return f"none of its {self.completed_checked} newest completed roots went through it"
        return f"none of its {self.completed_checked} completed roots went through it"

    def template(self) -> str:
        """`timeout_reason` with `%1$s` for the stage (Spark's `format_string`)."""
        app = self.app.replace("%", "%%")
        return (
            f"timed out at stage '{_STAGE}', whose outputs no stage has ever acked in app "
            f"'{app}' ({self.whose()}): if '{_STAGE}' writes a final table, emit it with to=[]"
        )

    def timeout_reason(self, stage: str | None) -> str | None:
        """The reason of a root that timed out at `stage` (its `last_stage`), when no stage
        has ever acked that stage's outputs; None otherwise."""
        if stage is None or not self.never_acked(stage):
            return None
        return self.template().replace(_STAGE, stage).replace("%%", "%")


def explain_pending(
    state: RootState,
    events: Sequence[Event],
    history: AppStages | None,
    now: datetime,
) -> PendingExplanation | None:
    """Why `state`'s root has not completed, from its `events` (as `LedgerReader` reads
    them) and what its app's completed roots went through (`history`, None: not known).
    None when the root is settled: completed, or failed by a fail event.

    Tested on a real pipeline with the sink mistake in `tests/unit/test_why_pending.py`.
    """
    if state.status not in WAITING or state.fail_stage is not None or state.fail_at is not None:
        return None
    folded = [event for event in events if not event.duplicate]
    if state.init_seen and state.xor_acc == 0:
        if state.status == status.PENDING:
            return PendingExplanation(
                "waiting for the next reconcile: its events fold to a complete tree",
                _stages(folded, now),
                None,
                None,
                "",
            )
        return None
    stages = _stages(folded, now)
    stopped = stages[0].stage if stages else None
    if not folded:
        waiting = "waiting for its first event: no event of this root is in ack_events"
    elif not any(event.kind == INIT for event in folded):
        waiting = (
            "waiting for its init event: the spout's registration of the root is not in "
            "ack_events, so the tree cannot complete"
        )
    else:
        waiting = (
            "waiting for acks: tuples emitted in this root are not acked yet (xor_acc is not "
            "0); the stages that wrote its events, any of which may have emitted them:"
        )
    never = None
    if history is not None and history.never_acked(stopped) and stopped is not None:
        never = (
            f"stage '{stopped}' is where this root stopped, and its outputs have never been "
            f"acked by any stage in any root of app '{state.app}' ({history.whose()}). "
            f"If '{stopped}' writes the app's final table (a sink), emit that output with "
            "to=[] (a tuple emitted without `to` waits for an ack from some stage); "
            f"otherwise, check that the stage that reads its output runs ({_DOCS})."
        )
    note = ""
    if len(stages) > 1:
        note = (
            "Ack vals are XORs of edge hashes: which stage's tuples are open cannot be read "
            f"from the events; nothing was acked after the newest event, of '{stopped}'."
        )
    return PendingExplanation(waiting, stages, stopped, never, note)


def app_stages(
    reader: SqlReader, app: str, *, limit: int = RECENT_COMPLETED, now: datetime | None = None
) -> AppStages:
    """What `app`'s newest `limit` completed roots went through: the stages of their events
    (two bounded reads: their ids from `root_state`, their events from their first event on).
    With `now`, the roots first seen in the `RECENT_DAYS` before it, and older ones (up to
    `HISTORY_DAYS` before it) only when those are fewer than `ENOUGH_RECENT` (or
    `limit`, if lower)."""
    return apps_stages(reader, [app], limit=limit, now=now)[0]


def apps_stages(
    reader: SqlReader,
    apps: Sequence[str],
    *,
    limit: int = RECENT_COMPLETED,
    now: datetime | None = None,
) -> list[AppStages]:
    """`app_stages` of each of `apps`, in order, in the same two reads for all of them:
    a reconcile that timed out roots of several apps reads `root_state` and `ack_events`
    once, not once per app (and with `now`, `root_state`'s older partitions only for an
    app with fewer than `ENOUGH_RECENT` completed roots in the recent ones, none older than
    `HISTORY_DAYS`: the read is bounded by days, not by the ledger's age)."""
    if not apps:
        return []
    done: dict[str, list[dict[str, Any]]] = {app: [] for app in apps}
    if reader.table(ROOT_STATE, required=False) is not None:
        keep = int(limit) + 1  # one more says it has more
        recent = None if now is None else (now - timedelta(days=RECENT_DAYS)).date()
        if recent is not None:
            # The recent partitions first: a reconcile's read grows with the days kept,
            # not with the roots a healthy app completes in them.
            _newest_completed(reader, apps, keep, [f"first_event_date >= {sql_date(recent)}"], done)
        enough = keep if recent is None else min(keep, ENOUGH_RECENT)
        short = [app for app in apps if len(done[app]) < enough]
        if short:
            older = []
            if now is not None and recent is not None:
                oldest = (now - timedelta(days=HISTORY_DAYS)).date()
                older = [
                    f"first_event_date >= {sql_date(oldest)}",
                    f"first_event_date < {sql_date(recent)}",
                ]
            _newest_completed(reader, short, keep - min(len(done[a]) for a in short), older, done)
    capped = {app: len(rows) > limit for app, rows in done.items()}
    done = {app: rows[:limit] for app, rows in done.items()}
    ids = {app: {int(row["root_id"]) for row in rows} for app, rows in done.items()}
    since = {app: min(row["first_event_at"] for row in rows) for app, rows in done.items() if rows}
    acked: dict[str, set[str]] = {app: set() for app in apps}
    if since:
        # Each app's roots, from its own first event on: the bounds of one read per app.
        each = [
            f"app = {sql_str(app)} AND event_time >= {sql_ts(first)} "
            f"AND root_id IN ({', '.join(str(i) for i in sorted(ids[app]))})"
            for app, first in since.items()
        ]
        rows = reader.query(
            ACK_EVENTS,
            ["DISTINCT app, stage"],
            [f"event_time >= {sql_ts(min(since.values()))}", " OR ".join(f"({e})" for e in each)],
        )
        for row in rows:
            acked[row["app"]].add(str(row["stage"]))
    return [
        AppStages(app, frozenset(acked[app]), len(done[app]), capped[app]) if done[app]
        else AppStages(app, frozenset(), 0)
        for app in apps
    ]  # fmt: skip


def _newest_completed(
    reader: SqlReader,
    apps: Sequence[str],
    keep: int,
    where: list[str],
    done: dict[str, list[dict[str, Any]]],
) -> None:
    """Add to `done` each of `apps`' newest completed roots (at most `keep` of them) in the
    partitions `where` selects: their app, id and first event's time, newest first."""
    names = ", ".join(sql_str(app) for app in apps)
    complete = ", ".join(map(sql_str, COMPLETE))
    ranked = select(
        ROOT_STATE,
        [
            "app",
            "root_id",
            "first_event_at",
            "row_number() OVER (PARTITION BY app ORDER BY last_event_at DESC, root_id) AS n",
        ],
        [*where, f"app IN ({names})", f"status IN ({complete})"],
    )
    # Quoted by `select`, `sql_str` and `int`, as every query here.
    sql = f"SELECT app, root_id, first_event_at FROM ({ranked}) WHERE n <= {int(keep)}"  # noqa: S608
    sql += " ORDER BY app, n"
    for row in reader.arrow(ROOT_STATE, sql).to_pylist():
        done[row["app"]].append(row)


def _stages(events: Sequence[Event], now: datetime) -> tuple[StageWait, ...]:
    """The stages of `events`, newest last event first (then by name)."""
    counts: dict[str, int] = {}
    last: dict[str, datetime] = {}
    for event in events:
        counts[event.stage] = counts.get(event.stage, 0) + 1
        if event.stage not in last or event.event_time > last[event.stage]:
            last[event.stage] = event.event_time
    order = sorted(counts, key=lambda stage: (-last[stage].timestamp(), stage))
    return tuple(StageWait(s, counts[s], last[s], now - last[s]) for s in order)
