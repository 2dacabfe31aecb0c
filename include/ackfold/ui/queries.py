"""Read models of the Reliability UI: the overview, the roots table, the dead letters.

Every query runs in delta-rs through `LedgerReader` (no JVM), names its columns and
builds its SQL only from this module's constants and from the typed filters of
`ackfold.ui.filters`, quoted by the ledger's SQL helpers: user text never reaches the
SQL raw.

Costs on a large ledger (`bench/ui.py` measures them):
- the roots table, newest first, reads only the newest files (`LedgerReader.newest`);
  other sort orders scan the filter and sort columns of the whole table;
- its total is a `count(*)` over the filter columns;
- the overview counts roots by bucket and status: for every app over all time, from the
  row counts of the Delta log's files (one `first_event_date` and `status` partition
  each: no data read); else one aggregation grouped by `app` and the partition values (a
  bucket of whole days is a set of `first_event_date` partitions), `since` and `until`
  prune partitions. Its latency percentiles are one more aggregation over the completed
  roots, a uniform sample of them above `LATENCY_SAMPLE`, grouped by app too: the sample
  is drawn by `root_id` before any `app` is decoded;
- the app list (every page's app filter) is kept per version of `root_state`;
- the time to detect and to recover (`ackfold.ledger.reading.recovery.read_recovery`) read the
  roots that went wrong and their later attempts, and no healthy first attempt.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from ackfold.ledger.errors import NoLedger
from ackfold.ledger.reading.reader import LedgerReader
from ackfold.ledger.reading.rows import STATE_COLUMNS, state_from_row
from ackfold.ledger.reading.sql import app_since, sql_date, sql_str, sql_ts
from ackfold.ledger.schema import status
from ackfold.ledger.schema.tables import DEAD_LETTERS, ROOT_STATE, ROOT_STATE_PARTITIONS
from ackfold.ledger.schema.values import utc
from ackfold.ui.filters import DeadLetterFilter, RootFilter
from ackfold.ui.results import (
    DEAD_LETTER_COLUMNS,
    Bucket,
    DeadLetter,
    DeadLettersPage,
    Overview,
    RootsPage,
    bucket_width,
)

EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH: Final = "TIMESTAMP '1970-01-01T00:00:00Z'"
# Over more completed roots than this, the overview's latency percentiles are those of a
# uniform sample of about this many: a p99 off by a hundredth of a percentile, in a
# fraction of the time of a t-digest over every root.
LATENCY_SAMPLE: Final = 500_000
# The least sample of one app's own roots the sample of every app's may leave it.
LATENCY_MIN_SAMPLE: Final = 50_000
# Each warehouse's apps at a version of `root_state` (`UiReader.apps`): one entry each.
_APPS_AT: dict[str, tuple[tuple[str, int], list[str]]] = {}
# Complete latency, in seconds: from a root's first event (its init) to its last one
# (the ack that completed its tree; a complete tree ignores later events).
_LATENCY: Final = "date_part('epoch', last_event_at) - date_part('epoch', first_event_at)"


# --- queries --------------------------------------------------------------------------


class UiReader(LedgerReader):
    """`LedgerReader` with the UI's read models. One per request: it caches the tables'
    snapshots."""

    def apps(self) -> list[str]:
        """The apps with roots in `root_state`; none while there is no ledger.

        Kept per version of the table (a scan of every row's `app`): a request after the
        first at a version, or an overview of the whole history (its counts are grouped
        by app), reads no row for them."""
        try:
            version = self._version()
        except NoLedger:
            return []
        known = _APPS_AT.get(self.warehouse)
        if known is None or known[0] != version:
            known = _APPS_AT[self.warehouse] = (version, self.known_apps())
        return list(known[1])

    def _version(self) -> tuple[str, int]:
        """`root_state`'s identity and version: its apps change with them only."""
        table = self.table(ROOT_STATE, required=True)
        with self.reading(ROOT_STATE):
            return str(table.metadata().id), int(table.version())

    def quality_history(self, limit: int = 20) -> list[dict[str, Any]]:
        """The newest quality runs: id, time, checks and failures; none before the first."""
        from ackfold.ledger.schema.tables import QUALITY_RESULTS

        return self.query(
            QUALITY_RESULTS,
            [
                "run_id",
                "max(run_at) AS run_at",
                "count(*) AS checks",
                "sum(CASE WHEN success THEN 0 ELSE 1 END) AS failed",
            ],
            group="run_id",
            order="run_at DESC",
            limit=limit,
        )

    def roots_page(self, f: RootFilter) -> RootsPage:
        """A page of `root_state` rows matching `f` (NoLedger when there is no ledger)."""
        total = self.count_roots(f)
        if f.sort == "last_event_at" and f.order == "desc":
            rows = self.newest(STATE_COLUMNS, f.where(), f.limit, since=f.since, offset=f.offset)
        else:
            # Ties broken by root_id keep pages stable.
            rows = self.query(
                ROOT_STATE,
                STATE_COLUMNS,
                f.where(),
                order=f"{f.sort} {f.order.upper()} NULLS LAST, root_id ASC",
                limit=f.limit,
                offset=f.offset,
                required=True,
            )
        return RootsPage([state_from_row(row) for row in rows], total, f)

    def count_roots(self, f: RootFilter) -> int:
        rows = self.query(ROOT_STATE, ["count(*) AS n"], f.where(), required=True)
        return int(rows[0]["n"])

    def count_by_status(self, f: RootFilter) -> dict[str, int]:
        """How many roots match `f`, by status (statuses with none left out)."""
        rows = self.query(
            ROOT_STATE, ["status", "count(*) AS n"], f.where(), group="status", required=True
        )
        return {str(row["status"]): int(row["n"]) for row in rows}

    def matching_ids(self, f: RootFilter, cap: int) -> list[int]:
        """The ids of the first `cap` roots matching `f`, newest first (a replay of the
        filter narrows `f.statuses` to the replayable ones first, so that the cap counts
        only those)."""
        rows = self.newest(["root_id"], f.where(), cap, since=f.since)
        return [int(row["root_id"]) for row in rows]

    def statuses_of(self, root_ids: Sequence[int]) -> dict[int, str]:
        """The status of each of `root_ids` that `root_state` has."""
        if not root_ids:
            return {}
        where = [f"root_id IN ({', '.join(str(int(r)) for r in root_ids)})"]
        rows = self.query(ROOT_STATE, ["root_id", "status"], where, required=True)
        return {int(row["root_id"]): str(row["status"]) for row in rows}

    def overview(
        self, app: str | None, since: datetime | None = None, until: datetime | None = None
    ) -> Overview:
        """Roots by status over time for `app` (every app if None), first events in
        [since, until).

        Grouped by app rather than filtered on it: decoding the `app` column of every row
        costs as much as grouping by it, and the groups give every app's counts at once
        (the app list, when the range is the whole history)."""
        where = app_since(None, since)
        if until is not None:
            where.append(f"first_event_at < {sql_ts(until)}")
            where.append(f"first_event_date <= {sql_date(until.date())}")
        files = self._files()
        low, high = self._first_event_span(files)
        start, end = since or low, until or high
        width = bucket_width(end - start if start and end and end > start else timedelta(0))
        # Buckets of whole days hold whole `first_event_date` partitions: binned by that
        # partition value, no timestamp is decoded to place a root.
        binned = "CAST(first_event_date AS TIMESTAMP)" if width % 86400 == 0 else "first_event_at"
        bucket = f"date_bin(INTERVAL '{width} seconds', {binned}, {_EPOCH})"
        whole = since is None and until is None
        # Every app's every day, in buckets of whole days: the log's row counts say it,
        # unless a file has a deletion vector (its count includes the rows deleted).
        by_day = app is None and whole and width % 86400 == 0 and not self._has_vectors()
        counted = _counts_from_log(files, width) if by_day else None
        everyone: int | None = None  # completed roots of every app, where not `counted`'s
        if counted is None:  # not every day of every app, or no partition to count
            rows = self.query(
                ROOT_STATE,
                ["app", f"{bucket} AS bucket", "status", "count(*) AS n"],
                where,
                group="app, bucket, status",
                required=True,
            )
            if whole:
                _APPS_AT[self.warehouse] = (self._version(), sorted({str(r["app"]) for r in rows}))
            counted = [
                (utc(row["bucket"]), str(row["status"]), int(row["n"]))
                for row in rows
                if app in (None, row["app"])
            ]
            everyone = sum(int(r["n"]) for r in rows if r["status"] == status.COMPLETED)
        by_bucket: dict[datetime, dict[str, int]] = {}
        for start_at, name, n in counted:
            counts_at = by_bucket.setdefault(start_at, {})
            counts_at[name] = counts_at.get(name, 0) + n
        counts = dict.fromkeys(status.ALL, 0)
        for bucket_counts in by_bucket.values():
            for name, n in bucket_counts.items():
                counts[name] = counts.get(name, 0) + n
        completed = counts.get(status.COMPLETED, 0)
        overall, per_bucket = self._latency(
            where, bucket, app, completed, completed if everyone is None else everyone
        )
        buckets = [
            Bucket(
                start_at,
                by_bucket[start_at],
                _seconds(per_bucket.get(start_at, {}).get("p50")),
                _seconds(per_bucket.get(start_at, {}).get("p99")),
            )
            for start_at in sorted(by_bucket)
        ]
        return Overview(
            app=app,
            since=since,
            until=until,
            ingested=sum(counts.values()),
            counts=counts,
            p50_seconds=_seconds(overall.get("p50")),
            p99_seconds=_seconds(overall.get("p99")),
            bucket_seconds=width,
            buckets=buckets,
        )

    def _latency(
        self, where: list[str], bucket: str, app: str | None, completed: int, everyone: int
    ) -> tuple[dict[str, Any], dict[datetime, dict[str, Any]]]:
        """The complete latency's p50 and p99 of the `completed` roots of `app` (every
        app if None) matching `where`: over all of them, and per `bucket`. Over more than
        `LATENCY_SAMPLE` roots, of a uniform sample of them (one root in `k`, by its id:
        ids are hashes).

        For one app, the sample is drawn from every app's roots (`everyone` completed) and
        grouped by app, as the counts are, while that leaves the app `LATENCY_MIN_SAMPLE`
        of its own; an app too small for that is sampled alone, filtered on its name."""
        every = max(1, -(-everyone // LATENCY_SAMPLE))  # ceil
        by_app = app is not None and (every == 1 or completed // every >= LATENCY_MIN_SAMPLE)
        done = [*where, f"status = {sql_str(status.COMPLETED)}"]
        if app is not None and not by_app:
            done.append(f"app = {sql_str(app)}")
            every = max(1, -(-completed // LATENCY_SAMPLE))
        if every > 1:
            done.append(f"root_id % {int(every)} = 0")
        latency = [
            f"approx_percentile_cont({_LATENCY}, 0.5) AS p50",
            f"approx_percentile_cont({_LATENCY}, 0.99) AS p99",
        ]
        keys = "app, " if by_app else ""
        rows = self.query(
            ROOT_STATE,
            [*(["app"] if by_app else []), f"{bucket} AS bucket", *latency],
            done,
            group=f"GROUPING SETS (({keys}{bucket}), ({keys.rstrip(', ')}))",
        )
        overall: dict[str, Any] = {}
        per_bucket: dict[datetime, dict[str, Any]] = {}
        for row in rows:
            if by_app and row["app"] != app:
                continue
            if row["bucket"] is None:
                overall = row
            else:
                per_bucket[utc(row["bucket"])] = row
        return overall, per_bucket

    def _files(self) -> Any:
        """`root_state`'s files, as the Delta log lists them: partition values, row counts
        and statistics, no data read."""
        table = self.table(ROOT_STATE, required=True)
        with self.reading(ROOT_STATE):
            return table.get_add_actions(flatten=True)

    def _has_vectors(self) -> bool:
        """Whether a file of `root_state` has a deletion vector (read from the log)."""
        from ackfold.ledger.storage.vectors import files_with_deletion_vectors

        table = self.table(ROOT_STATE, required=True)
        if "deletionVectors" not in (table.protocol().reader_features or []):
            return False
        with self.reading(ROOT_STATE):
            return bool(files_with_deletion_vectors(table))

    def _first_event_span(self, actions: Any) -> tuple[datetime | None, datetime | None]:
        """The earliest and latest `first_event_at` from the files' statistics in the Delta
        log (no data read); None where a file has none."""
        names = actions.column_names
        if "min.first_event_at" not in names or "max.first_event_at" not in names:
            return None, None
        lows = actions.column("min.first_event_at").to_pylist()
        highs = actions.column("max.first_event_at").to_pylist()
        if not lows or None in lows or None in highs:
            return None, None
        return utc(min(lows)), utc(max(highs))

    def dead_letters(self, f: DeadLetterFilter) -> DeadLettersPage:
        """A page of `dead_letters`, newest first (empty while the table does not exist)."""
        rows = self.query(
            DEAD_LETTERS,
            DEAD_LETTER_COLUMNS,
            f.where(),
            order="dead_lettered_at DESC, root_id ASC",
            limit=f.limit + 1,
            offset=f.offset,
        )
        letters = []
        for row in rows[: f.limit]:
            for name in ("dead_lettered_at", "redriven_at"):
                if row[name] is not None:
                    row[name] = utc(row[name])
            letters.append(DeadLetter(**row))
        return DeadLettersPage(letters, len(rows) > f.limit, f)


def _counts_from_log(actions: Any, width: int) -> list[tuple[datetime, str, int]] | None:
    """Roots by bucket (`width` seconds, whole days) and status, from the row counts of
    `root_state`'s files: each sits in one `first_event_date` and one `status` partition,
    and a day lies in one bucket. None when the table is not partitioned so."""
    names = actions.column_names
    date_col, status_col = (f"partition.{name}" for name in ROOT_STATE_PARTITIONS)
    if date_col not in names or status_col not in names:
        return None
    counted = []
    for day, name, n in zip(
        actions.column(date_col).to_pylist(),
        actions.column(status_col).to_pylist(),
        actions.column("num_records").to_pylist(),
        strict=True,
    ):
        if day is None or name is None or n is None:
            return None
        midnight = datetime(day.year, day.month, day.day, tzinfo=UTC)
        start = EPOCH + timedelta(seconds=(midnight - EPOCH).total_seconds() // width * width)
        counted.append((start, str(name), int(n)))
    return counted


def _seconds(value: Any) -> float | None:
    return None if value is None else round(float(value), 3)
