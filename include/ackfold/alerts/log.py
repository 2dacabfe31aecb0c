"""Which breaches are open, per channel: the `alert_log` table, and the transitions an
evaluation makes (a breach opens, or resolves) against it.

The state is an append-only Delta table next to the ledger, not an Airflow Variable:
- it lives, and is backed up, with the data it speaks of, and any worker that can read
  `root_state` can read and write it, without Airflow's metadata database;
- appends never conflict, and each rule has one evaluator (`ackfold_reconcile` owns the
  root_state rules, `ackfold_quality` the quality rule; each runs one at a time), so no
  read-modify-write race can send a message twice;
- it is the alerts' history, for audits and the UI, which a Variable would overwrite.

A row is appended only after its message went out on its channel: a channel that failed
gets the same message on the next evaluation, the others are not sent it again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from ackfold.alerts.rules import Finding
from ackfold.ledger.reading.sql import SqlReader, sql_str
from ackfold.ledger.schema.tables import ALERT_LOG
from ackfold.ledger.schema.values import utc

OPENED: Final = "opened"
RESOLVED: Final = "resolved"

Key = tuple[str, str]  # (app, rule)


@dataclass(frozen=True)
class Transition:
    """A breach that opens (`OPENED`) or ends (`RESOLVED`); `opened_at` is when it opened."""

    finding: Finding
    event: str
    opened_at: datetime


def transitions(
    findings: Sequence[Finding],
    open_now: dict[Key, datetime],
    rules: Iterable[str],
    now: datetime,
) -> list[Transition]:
    """What changed between the breaches open on a channel (`open_now`) and `findings`:
    a breach not yet open opens, an open one no longer breached resolves, and so does an
    open breach of `rules` that no finding mentions any more (its app has gone). Nothing
    for a breach that lasts.

    Example:
        >>> from datetime import datetime, timezone
        >>> t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
        >>> hit = Finding("a", "failed", True, "3", "at most 0", "3 roots failed")
        >>> [t.event for t in transitions([hit], {}, ["failed"], t0)]
        ['opened']
        >>> transitions([hit], {("a", "failed"): t0}, ["failed"], t0)
        []
    """
    owned = set(rules)
    seen: set[Key] = set()
    out = []
    for finding in findings:
        key = (finding.app, finding.rule)
        seen.add(key)
        if finding.breached and key not in open_now:
            out.append(Transition(finding, OPENED, now))
        elif not finding.breached and key in open_now:
            out.append(Transition(finding, RESOLVED, open_now[key]))
    for (app, rule), opened in sorted(open_now.items()):
        if rule in owned and (app, rule) not in seen:
            gone = Finding(app, rule, False, "no data", "-", f"{rule}: the app has no roots now")
            out.append(Transition(gone, RESOLVED, opened))
    return out


class AlertLog:
    """The `alert_log` table of the ledger under `warehouse`, read and appended without a
    JVM (delta-rs)."""

    def __init__(self, warehouse: str) -> None:
        self.warehouse = warehouse

    def open_breaches(self, channel: str) -> dict[Key, datetime]:
        """The breaches open on `channel`: (app, rule) -> when each opened."""
        rows = SqlReader(self.warehouse).query(
            ALERT_LOG,
            ["app", "rule", "event", "opened_at"],
            [f"channel = {sql_str(channel)}"],
            order="event_at, opened_at",
        )
        latest = {(row["app"], row["rule"]): row for row in rows}
        return {key: utc(row["opened_at"]) for key, row in latest.items() if row["event"] == OPENED}

    def record(
        self,
        channel: str,
        done: Sequence[Transition],
        now: datetime,
        airflow_run_id: str | None = None,
    ) -> None:
        """Append one row per transition sent on `channel` (one commit)."""
        if not done:
            return
        import pyarrow as pa

        from ackfold.ledger.commits.writer import LedgerWriter
        from ackfold.ledger.schema.contract import arrow_schema

        writer = LedgerWriter(self.warehouse)
        writer.create([ALERT_LOG])
        rows = [
            {
                "app": t.finding.app,
                "rule": t.finding.rule,
                "channel": channel,
                "event": t.event,
                "value": t.finding.value,
                "threshold": t.finding.threshold,
                "root_ids": list(t.finding.root_ids),
                "opened_at": t.opened_at,
                "event_at": now,
                "airflow_run_id": airflow_run_id,
            }
            for t in done
        ]
        table = pa.Table.from_pylist(rows, schema=arrow_schema(ALERT_LOG))
        writer.append_arrow(ALERT_LOG, table)  # delta-rs, with the store's options
