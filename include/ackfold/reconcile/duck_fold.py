"""The reconciler's algorithm in DuckDB SQL: the embedded engine's `spark_fold`.

Three queries, each the twin of a Spark function, and all three matching the plain
Python reference (`ackfold.reconcile.fold`) row for row:

- `FOLD_SQL` and `NEW_SQL` (`spark_fold.fold_events`): copies of one event dropped, the
  events a root has folded already (`SEEN_SQL`) left out, the others XORed per root,
  with what the state keeps of them;
- `COMBINE_SQL` (`spark_fold.combine`): that fold joined to the roots' prior state,
  every open root classified again, and what to do with each row (`change`);
- `HASHES_SQL`: the hashes of the events folded into roots that stay open.

Within a run, copies are told apart by DuckDB's own 64-bit `hash` of the event id. What
`root_state` keeps across runs (`seen_event_hashes`) is Spark's `xxhash64`, shared by both
engines; it is computed only for the events of roots whose state keeps hashes: the few
still open, not the many that complete.

Times are compared as microseconds since the epoch and dates are taken in UTC, as the
Spark session does (`spark.sql.session.timeZone=UTC`), whatever DuckDB's time zone.
"""

from __future__ import annotations

from typing import Final

from ackfold.ledger.schema import status

# What `COMBINE_SQL` says to do with each row, as `spark_fold` does.
UPDATE: Final = "update"
INSERT: Final = "insert"
PARK: Final = "park"


def _quoted(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{status.checked(v)}'" for v in values)


# Input `events`: ack_events columns and a boolean `waiting`. Input `prior_seen`:
# (root_id, seen_event_hashes) of the roots with open state. Event ids are not carried
# through the fold: the few that must be hashed with `xxhash64` (those of roots whose
# state keeps hashes) are looked up in `events` again (`SEEN_SQL`, `HASHES_SQL`).
SEEN_SQL: Final = """
SELECT DISTINCT e.root_id, hash(e.event_id) AS h
FROM events e JOIN prior_seen p USING (root_id)
WHERE len(p.seen_event_hashes) > 0
  AND list_contains(p.seen_event_hashes, xxhash64(e.event_id))
"""

FOLD_SQL: Final = """
WITH copies AS (
    SELECT root_id, hash(event_id) AS h, app, kind, stage, reason, ack_val,
           min(event_time) AS event_time,  -- the earliest copy wins
           count(*) FILTER (WHERE NOT waiting) AS read,
           count(*) FILTER (WHERE waiting) AS waited
    FROM events
    GROUP BY root_id, h, app, kind, stage, reason, ack_val
)
SELECT c.*, s.h IS NULL AS fresh
FROM copies c LEFT JOIN seen s USING (root_id, h)
"""

NEW_SQL: Final = """
SELECT root_id,
       min(app) AS app,
       coalesce(bit_xor(ack_val) FILTER (WHERE fresh), 0::BIGINT) AS xor,
       count(*) FILTER (WHERE fresh) AS fresh,
       coalesce(bool_or(kind = 'init') FILTER (WHERE fresh), false) AS init_seen,
       min(event_time) FILTER (WHERE fresh) AS first_event_at,
       max({'event_time': event_time, 'stage': stage}) FILTER (WHERE fresh) AS last,
       min({'event_time': event_time, 'stage': stage, 'reason': coalesce(reason, '')})
           FILTER (WHERE fresh AND kind = 'fail') AS fail,
       sum(read) AS read,
       sum(waited) AS waited
FROM marked
GROUP BY root_id
"""

# The same when no event of the step was folded before (`seen` is empty), the common case:
# every row is fresh, and the aggregates need no filter, which costs a pass each.
NEW_SQL_ALL_FRESH: Final = NEW_SQL.replace(" FILTER (WHERE fresh)", "").replace(
    "FILTER (WHERE fresh AND kind = 'fail')", "FILTER (WHERE kind = 'fail')"
)

# Inputs: `new` (NEW_SQL), `prior` (open root_state rows), `settled` (root_id of the other
# roots with state that an event may name), `registered` (root_id, attempt,
# origin_root_id), `policy` (app, timeout_us, idle_us; app NULL: the defaults).
# Parameters: $now (timestamp with time zone).
COMBINE_SQL: Final = f"""
WITH joined AS (
    SELECT coalesce(n.root_id, s.root_id) AS root_id,
           coalesce(s.app, n.app) AS app,
           s.status AS prior_status,
           s.first_event_date AS prior_date,
           s.root_id IS NOT NULL AS has_prior,
           k.root_id IS NOT NULL AS settled,
           coalesce(n.fresh, 0) AS fresh,
           xor(coalesce(s.xor_acc, 0::BIGINT), coalesce(n.xor, 0::BIGINT)) AS xor_acc,
           coalesce(s.event_count, 0) + coalesce(n.fresh, 0) AS event_count,
           greatest(
               CASE WHEN s.root_id IS NOT NULL
                    THEN {{'event_time': s.last_event_at, 'stage': s.last_stage}} END,
               n.last
           ) AS last,
           least(
               CASE WHEN s.fail_at IS NOT NULL
                    THEN {{'event_time': s.fail_at, 'stage': s.fail_stage,
                           'reason': coalesce(s.fail_reason, '')}} END,
               n.fail
           ) AS fail,
           coalesce(s.init_seen, false) OR coalesce(n.init_seen, false) AS init_seen,
           least(s.first_event_at, n.first_event_at) AS first_event_at,
           s.status_changed_at AS prior_changed_at,
           coalesce(s.attempt, r.attempt) AS attempt,
           coalesce(s.origin_root_id, r.origin_root_id) AS origin_root_id,
           coalesce(s.seen_event_hashes, []::BIGINT[]) AS prior_seen,
           coalesce(
               s.first_event_date,
               DATE '1970-01-01' + CAST(floor(epoch_us(n.first_event_at) / 86400000000) AS INT)
           ) AS first_event_date,
           coalesce(n.read, 0) AS read,
           coalesce(n.waited, 0) AS waited,
           -- A reason without a fail event: why the root timed out (`reconcile.timeouts`).
           CASE WHEN s.fail_at IS NULL THEN s.fail_reason END AS prior_reason
    FROM new n
    FULL OUTER JOIN prior s ON n.root_id = s.root_id
    LEFT JOIN settled k ON k.root_id = coalesce(n.root_id, s.root_id)
    LEFT JOIN registered r ON r.root_id = coalesce(n.root_id, s.root_id)
),
timed AS (
    SELECT j.*,
           coalesce(p.timeout_us, d.timeout_us) AS timeout_us,
           CASE WHEN p.app IS NOT NULL THEN p.idle_us ELSE d.idle_us END AS idle_us
    FROM joined j
    LEFT JOIN policy p ON p.app = j.app
    CROSS JOIN (SELECT timeout_us, idle_us FROM policy WHERE app IS NULL) d
),
classified AS (
    SELECT *,
        CASE
            WHEN prior_status IN ('{status.COMPLETED}', '{status.COMPLETED_LATE}')
                THEN prior_status
            WHEN fail IS NOT NULL
                THEN CASE WHEN prior_status IN ({_quoted(status.SUPERSEDED)})
                          THEN prior_status ELSE '{status.FAILED}' END
            WHEN init_seen AND xor_acc = 0
                THEN CASE WHEN prior_status IN ({_quoted(status.SUPERSEDED)})
                          THEN '{status.COMPLETED_LATE}' ELSE '{status.COMPLETED}' END
            WHEN prior_status IN ({_quoted(status.SUPERSEDED)}) THEN prior_status
            WHEN epoch_us($now) - epoch_us(first_event_at) > timeout_us
                 AND (idle_us IS NULL OR epoch_us($now) - epoch_us(last.event_time) > idle_us)
                THEN '{status.TIMED_OUT}'
            ELSE '{status.PENDING}'
        END AS status
    FROM timed
)
SELECT root_id, app, status, xor_acc, event_count, first_event_at,
       last.event_time AS last_event_at,
       CASE WHEN status = prior_status THEN prior_changed_at ELSE $now END
           AS status_changed_at,
       attempt, origin_root_id,
       last.stage AS last_stage,
       coalesce(nullif(fail.reason, ''), CASE WHEN fail IS NULL THEN prior_reason END)
           AS fail_reason,
       fail.stage AS fail_stage,
       fail.event_time AS fail_at,
       init_seen,
       prior_seen,
       $now AS reconciled_at,
       first_event_date, prior_status, prior_date,
       CASE WHEN has_prior THEN
                CASE WHEN fresh > 0 OR status <> prior_status THEN '{UPDATE}' END
            WHEN settled THEN NULL
            WHEN init_seen THEN '{INSERT}'
            ELSE '{PARK}'
       END AS change,
       fresh, read, waited
FROM classified
"""  # noqa: S608 (built from ackfold's own names and statuses only)

# The rows to write (changed or new), with the state's event hashes: none for a completed
# tree (it ignores every later event), else the prior ones and those of the events this
# run folded. Inputs: `rows` (COMBINE_SQL), `marked` (FOLD_SQL) and `events`.
HASHES_SQL: Final = f"""
WITH written AS (
    SELECT * FROM rows WHERE change IN ('{UPDATE}', '{INSERT}')
),
kept AS (
    SELECT root_id FROM written
    WHERE status NOT IN ('{status.COMPLETED}', '{status.COMPLETED_LATE}')
),
kept_fresh AS (  -- the events folded into the kept roots, by root and id hash
    SELECT root_id, h FROM marked SEMI JOIN kept USING (root_id) WHERE fresh
),
ids AS (
    SELECT DISTINCT e.root_id, hash(e.event_id) AS h, e.event_id
    FROM events e SEMI JOIN kept USING (root_id)
),
folded AS (
    SELECT i.root_id, list(xxhash64(i.event_id)) AS hashes
    FROM ids i SEMI JOIN kept_fresh k ON k.root_id = i.root_id AND k.h = i.h
    GROUP BY i.root_id
)
SELECT r.* EXCLUDE (prior_seen),
       CASE WHEN r.status IN ('{status.COMPLETED}', '{status.COMPLETED_LATE}')
            THEN []::BIGINT[]
            ELSE list_concat(r.prior_seen, coalesce(f.hashes, []::BIGINT[]))
       END AS seen_event_hashes
FROM written r LEFT JOIN folded f USING (root_id)
"""  # noqa: S608 (built from ackfold's own names and statuses only)
