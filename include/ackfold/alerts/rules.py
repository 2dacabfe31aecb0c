"""The alert rules: each app's thresholds (`defaults.alerts`, `apps.<app>.alerts`) held
against what the reconcile and the quality checks wrote, read without a JVM.

- after each reconcile (`evaluate_state`, over `root_state`): roots found `failed`,
  `timed_out` and `dead_lettered` within `alerts.window`; the age of the oldest root
  still unsettled; the complete latency p99 of the roots completed within the window;
- after each quality run (`evaluate_quality`, over its `quality_results`): a failed
  verdict, per app (the ledger's own soundness checks under the app `*`).

Every finding names the app, the value, the limit and, for a breach, the worst roots
(ids only, never a payload) with a link to them in the Reliability UI.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final
from urllib.parse import quote, urlencode

from ackfold.config import Settings
from ackfold.config.policy import AppPolicy
from ackfold.ledger.errors import NoLedger
from ackfold.ledger.reading import progress
from ackfold.ledger.reading.progress import liveness
from ackfold.ledger.reading.sql import SqlReader, sql_str, sql_ts
from ackfold.ledger.schema import status
from ackfold.ledger.schema.ids import format_id
from ackfold.ledger.schema.tables import ROOT_STATE
from ackfold.ledger.schema.values import utc

# A root-count rule is named after the status it counts.
FAILED: Final = status.FAILED
TIMED_OUT: Final = status.TIMED_OUT
DEAD_LETTERED: Final = status.DEAD_LETTERED
UNSETTLED_AGE: Final = "unsettled_age"
LATENCY_P99: Final = "latency_p99"
QUALITY: Final = "quality"
STALLED: Final = "stalled"
# The rules each evaluation owns: only it opens or resolves their breaches.
STATE_RULES: Final = (FAILED, TIMED_OUT, DEAD_LETTERED, UNSETTLED_AGE, LATENCY_P99, STALLED)
QUALITY_RULES: Final = (QUALITY,)
# The app of the ledger's own soundness checks, which belong to no app.
LEDGER_APP: Final = "*"

# When a reconcile marked a root failed or timed out (`ackfold.ledger.reading.recovery`): a replay
# restamps status_changed_at, but not reconciled_at.
_MARKED: Final = (
    f"CASE WHEN status IN ({sql_str(status.FAILED)}, {sql_str(status.TIMED_OUT)}) "
    "THEN status_changed_at ELSE least(reconciled_at, status_changed_at) END"
)
_FOUND: Final = (status.FAILED, status.TIMED_OUT, status.REPLAYED, status.DEAD_LETTERED)
_KIND: Final = f"CASE WHEN fail_at IS NULL THEN {sql_str(TIMED_OUT)} ELSE {sql_str(FAILED)} END"
_LATENCY: Final = "date_part('epoch', last_event_at) - date_part('epoch', first_event_at)"


@dataclass(frozen=True)
class Finding:
    """One rule held against one app: its value, its limit, whether it breached, and the
    worst roots with a link to them (a path under the Reliability UI)."""

    app: str
    rule: str
    breached: bool
    value: str
    threshold: str
    headline: str
    root_ids: tuple[int, ...] = ()
    link: str | None = None


def span(seconds: float) -> str:
    """A duration for people: 45s, 12m 5s, 3h 20m, 2d 4h.

    Example:
        >>> span(45.2), span(725), span(12000), span(187200)
        ('45s', '12m 5s', '3h 20m', '2d 4h')
    """
    total = round(seconds)
    for unit, size, sub, sub_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60)):
        if total >= size:
            whole, rest = divmod(total, size)
            part = rest // sub_size
            return f"{whole}{unit} {part}{sub}" if part else f"{whole}{unit}"
    if total >= 60:
        minutes, rest = divmod(total, 60)
        return f"{minutes}m {rest}s" if rest else f"{minutes}m"
    return f"{total}s"


def roots_link(app: str, root_ids: Sequence[int]) -> str:
    """The Reliability UI's roots table narrowed to `root_ids` of `app`, any status."""
    pairs = [("app", app), *(("root_id", format_id(root_id)) for root_id in root_ids)]
    return "/roots?" + urlencode(pairs)


def app_link(app: str) -> str:
    """The Reliability UI's page of `app`: alive or stalled, its rates, its roots."""
    return "/apps/" + quote(app, safe="")


def heartbeat_limit(policy: AppPolicy) -> timedelta | None:
    """How long an app may go without a heartbeat, or None when the rule is off."""
    limit = policy.alerts.max_heartbeat_age
    if limit == "off":
        return None
    return limit or progress.DEFAULT_STALL_AFTER


def unsettled_limit(policy: AppPolicy) -> timedelta | None:
    """The age of the oldest unsettled root that breaches, or None when the rule is off."""
    limit = policy.alerts.max_unsettled_age
    if limit == "off":
        return None
    return limit or policy.timeout + policy.quality.grace


def latency_limit(policy: AppPolicy) -> timedelta | None:
    """The complete latency p99 that breaches, or None when the rule is off."""
    limit = policy.alerts.max_latency_p99
    if limit == "off":
        return None
    return limit or policy.quality.latency_p99 or policy.timeout


class StateRules:
    """The rules over `root_state` at `now`: one finding per rule and app."""

    def __init__(self, reader: SqlReader, settings: Settings, now: datetime) -> None:
        self.reader = reader
        self.settings = settings
        self.now = utc(now)
        self.window = settings.alerts.window
        self.since = self.now - self.window
        self.worst = settings.alerts.worst_roots

    def evaluate(self, apps: Sequence[str] = ()) -> list[Finding]:
        """Findings for every app of the ledger and of `apps`; none before a reconcile
        wrote `root_state`."""
        try:
            found = self._grouped(f"{_KIND} AS kind", "count(*) AS n", where=self._found())
        except NoLedger:
            return []
        counts = {(r["app"], r["kind"]): int(r["n"]) for r in found}
        counts |= {
            (r["app"], DEAD_LETTERED): int(r["n"])
            for r in self._grouped("count(*) AS n", where=self._dead_lettered())
        }
        unsettled = [self._in(status.UNSETTLED)]
        oldest = {
            r["app"]: utc(r["oldest"])
            for r in self._grouped("min(first_event_at) AS oldest", where=unsettled)
        }
        p99 = {
            r["app"]: float(r["p99"])
            for r in self._grouped(
                f"approx_percentile_cont({_LATENCY}, 0.99) AS p99", where=self._completed()
            )
            if r["p99"] is not None
        }
        everyone = {app for app, _ in counts} | set(oldest) | set(p99) | set(apps)
        findings = []
        for app in sorted(everyone):
            policy = self.settings.app(app)
            limits = policy.alerts
            for rule, limit in (
                (FAILED, limits.max_failed),
                (TIMED_OUT, limits.max_timed_out),
                (DEAD_LETTERED, limits.max_dead_lettered),
            ):
                findings.append(self._count(app, rule, counts.get((app, rule), 0), limit))
            findings.append(self._unsettled(app, oldest.get(app), unsettled_limit(policy)))
            findings.append(self._latency(app, p99.get(app), latency_limit(policy)))
            findings.append(self._stalled(app, heartbeat_limit(policy)))
        return findings

    # -- the rules ---------------------------------------------------------------------

    def _count(self, app: str, rule: str, n: int, limit: int | str) -> Finding:
        what = {FAILED: "failed", TIMED_OUT: "timed out", DEAD_LETTERED: "dead-lettered"}[rule]
        headline = f"{n} root(s) {what} in the last {self._window}"
        if limit == "off":
            return Finding(app, rule, False, str(n), "off", headline)
        breached = n > int(limit)
        return self._finding(app, rule, breached, str(n), f"at most {limit}", headline)

    def _unsettled(self, app: str, oldest: datetime | None, limit: timedelta | None) -> Finding:
        age = max(0.0, (self.now - oldest).total_seconds()) if oldest else 0.0
        value = span(age) if oldest else "none unsettled"
        headline = f"oldest unsettled root is {span(age)} old" if oldest else "no unsettled root"
        if limit is None:
            return Finding(app, UNSETTLED_AGE, False, value, "off", headline)
        breached = age > limit.total_seconds()
        allowed = f"at most {span(limit.total_seconds())}"
        over = [f"first_event_at < {sql_ts(self.now - limit)}"]
        return self._finding(app, UNSETTLED_AGE, breached, value, allowed, headline, over)

    def _latency(self, app: str, p99: float | None, limit: timedelta | None) -> Finding:
        value = span(p99) if p99 is not None else "no root completed"
        headline = f"complete latency p99 is {value} over the last {self._window}"
        if limit is None:
            return Finding(app, LATENCY_P99, False, value, "off", headline)
        breached = p99 is not None and p99 > limit.total_seconds()
        allowed = f"at most {span(limit.total_seconds())}"
        over = [f"{_LATENCY} > {limit.total_seconds()!r}"]
        return self._finding(app, LATENCY_P99, breached, value, allowed, headline, over)

    def _stalled(self, app: str, limit: timedelta | None) -> Finding:
        """The app's heartbeat (`ledger.progress`); an app without one is not judged."""
        if limit is None:
            return Finding(app, STALLED, False, "-", "off", "heartbeat not checked")
        alive = liveness(self.reader, app, self.now, limit)
        allowed = f"a heartbeat within {span(limit.total_seconds())}"
        headline = f"{app} is {alive.state}: {alive.why}"
        breached = alive.state == progress.STALLED
        return Finding(app, STALLED, breached, alive.state, allowed, headline, (), app_link(app))

    def _finding(
        self,
        app: str,
        rule: str,
        breached: bool,
        value: str,
        allowed: str,
        headline: str,
        over: Sequence[str] = (),
    ) -> Finding:
        """A finding with a limit; a breach names its worst roots (those `over` the limit,
        where a root can be) and links to them."""
        ids = self._worst(app, rule, over) if breached else ()
        link = roots_link(app, ids) if ids else None
        return Finding(app, rule, breached, value, allowed, f"{headline} ({allowed})", ids, link)

    @property
    def _window(self) -> str:
        return span(self.window.total_seconds())

    # -- queries -------------------------------------------------------------------------

    def _worst(self, app: str, rule: str, over: Sequence[str]) -> tuple[int, ...]:
        """The ids of the roots behind a breach: the longest waiting first, the slowest
        for the latency."""
        if rule == DEAD_LETTERED:
            return self._ids(app, self._dead_lettered(), "status_changed_at")
        if rule == UNSETTLED_AGE:
            return self._ids(app, [self._in(status.UNSETTLED), *over], "first_event_at")
        if rule == LATENCY_P99:
            return self._ids(app, [*self._completed(), *over], f"{_LATENCY} DESC")
        return self._ids(app, [*self._found(), f"{_KIND} = {sql_str(rule)}"], "first_event_at")

    def _ids(self, app: str, where: list[str], order: str) -> tuple[int, ...]:
        rows = self.reader.query(
            ROOT_STATE,
            ["root_id"],
            [*where, f"app = {sql_str(app)}"],
            order=f"{order}, root_id",
            limit=self.worst,
            required=True,
        )
        return tuple(int(row["root_id"]) for row in rows)

    def _grouped(self, *columns: str, where: list[str]) -> list[dict[str, Any]]:
        """`columns` per app (and per the first column's expression, for `_KIND`)."""
        group = f"app, {_KIND}" if columns[0].startswith(_KIND) else "app"
        return self.reader.query(ROOT_STATE, ["app", *columns], where, group=group, required=True)

    def _found(self) -> list[str]:
        """Roots a reconcile marked failed or timed out within the window, whatever became
        of them since (status_changed_at is never earlier: it prunes files)."""
        return [
            self._in(_FOUND),
            f"status_changed_at >= {sql_ts(self.since)}",
            f"{_MARKED} >= {sql_ts(self.since)}",
        ]

    def _in(self, statuses: Sequence[str]) -> str:
        return f"status IN ({', '.join(sql_str(s) for s in statuses)})"

    def _dead_lettered(self) -> list[str]:
        return [
            f"status = {sql_str(status.DEAD_LETTERED)}",
            f"status_changed_at >= {sql_ts(self.since)}",
        ]

    def _completed(self) -> list[str]:
        return [
            f"status = {sql_str(status.COMPLETED)}",
            f"status_changed_at >= {sql_ts(self.since)}",
        ]


def evaluate_state(
    reader: SqlReader, settings: Settings, now: datetime, apps: Sequence[str] = ()
) -> list[Finding]:
    """The findings of `STATE_RULES` for every app in `root_state` and in `apps`."""
    return StateRules(reader, settings, now).evaluate([*settings.apps, *apps])


def evaluate_quality(
    rows: Sequence[Mapping[str, Any]], settings: Settings, apps: Sequence[str] = ()
) -> list[Finding]:
    """The `quality` finding of each app in one quality run's `quality_results` rows (and
    of `apps`, which pass when the run has no check of theirs)."""
    by_app: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        by_app[row["app"] or LEDGER_APP].append(row)
    run = str(rows[0]["run_id"]) if rows else "-"
    findings = []
    for app in sorted(set(by_app) | set(apps)):
        checks = by_app.get(app, [])
        failed = sorted({str(row["check_name"]) for row in checks if not row["success"]})
        policy = settings.defaults if app == LEDGER_APP else settings.app(app)
        enabled = policy.alerts.quality
        value = f"{len(failed)} of {len(checks)} check(s) failed"
        headline = f"quality run {run}: {value}" + (f": {', '.join(failed)}" if failed else "")
        findings.append(
            Finding(
                app,
                QUALITY,
                enabled and bool(failed),
                value,
                "all pass" if enabled else "off",
                headline,
                link="/quality",
            )
        )
    return findings
