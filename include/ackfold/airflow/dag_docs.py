"""What each of ackfold's DAGs shows on its page in Airflow (`doc_md`): what it runs, when,
what it reads and writes."""

from typing import Final

RECONCILE: Final = """
### ackfold reconcile
Folds the `ack_events` appended since the last run into `root_state`, XOR per root (Storm's
acker, in batch), then re-classifies the roots still in flight: each root becomes
`completed`, `failed`, `timed_out` (not complete within its app's `timeout`) or stays
`pending`.

- **Runs** on `airflow.reconcile_schedule` (default every 5 minutes), and after every
  successful run of an app's DAG (`ackfold_app_<app>`), one run at a time, once it is
  unpaused. Trigger it by hand any time: a run only reads what is new.
- **Reads** `ack_events` (a Delta stream with a checkpoint under
  `<warehouse>/_checkpoints/reconcile`), `roots`, `unmatched_events`, `root_state`.
- **Writes** `root_state` (the `ackfold_root_state` asset: each successful run triggers
  `ackfold_replay`) and `unmatched_events` (events whose root is not registered yet).
- `reconcile` runs on the engine `engine.kind` chooses: by default the embedded one
  (DuckDB over delta-rs) in the task's own process, with no JVM; with `spark`, it
  submits the packaged `reconcile.py` on `spark_default`. Its last log line is the run's
  JSON summary (events read, duplicates dropped, roots by status, the engine).
- `alerts` holds each app's thresholds (`defaults.alerts`, `apps.<app>.alerts`) against
  `root_state` and sends one message when a breach opens and one when it resolves, by
  e-mail and webhook (`alerts.*`; no JVM).
- `metrics` pushes roots by status, the oldest pending root's age and the time to detect
  over OTLP, when `metrics.endpoint` or `OTEL_EXPORTER_OTLP_ENDPOINT` is set (no JVM).
"""

REPLAY: Final = """
### ackfold automatic replay
Sends the `failed` and `timed_out` roots back to their source queue as new attempts,
under each app's policy (`apps.<app>` over `defaults`): attempt k waits
`replay_backoff * 2**(k-1)` after its failure, at most `replay_rate` messages per second,
at most `replay.max_per_run` per run. A root out of attempts (`max_attempts`) is
dead-lettered instead: a `dead_letters` row and a copy in its dead-letter queue.

- **Runs** whenever `ackfold_reconcile` updates the `ackfold_root_state` asset; trigger it
  by hand to replay without waiting for the next reconcile.
- **Reads** `root_state`, `roots` (the payloads), `replay_log`.
- **Writes** `replay_log` (each send `planned` before it is sent, then `sent` or
  `failed`), `root_state` (`replayed`, `dead_lettered`), `dead_letters`, and the SQS queues.
- The task runs on the engine `engine.kind` chooses: the embedded one (DuckDB and delta-rs
  in the task's own process, no JVM), or Spark (it submits the packaged `replay.py --auto`
  on `spark_default`). Its log ends with the run's JSON summary. It fails, naming the
  error, if messages could not be sent: they stay planned in `replay_log`, and the next
  run sends exactly those.
- For replays chosen by a person, use `ackfold_manual_replay`.
"""

MANUAL_REPLAY: Final = """
### ackfold manual replay
Sends the roots you pick back to their source queue as new attempts, whatever their app's
`max_attempts` and backoff (a person decided). **Dry run is on by default**: the run then
logs and returns what it would send, and sends nothing; untick it to send.

- **Trigger** it with *Trigger* and fill in the form (root ids, or filters: app,
  statuses, status-change time range, limit; the send rate), from the Reliability UI's
  replay button, or over the REST API with the same keys in `conf`
  (`ackfold.replay.params.CONF_KEYS`). A request with no root id, app or time range
  needs a limit to send. `dead_lettered` roots can be brought back this way.
- **validate** checks the conf again (REST calls skip the form) and fails at once, naming
  each bad field and its fix. **replay** plans, logs each send (root, status, target;
  never a payload), sends at the rate asked (or the app's `replay_rate`), and returns
  the summary: the task's return value (XCom `return_value`) in the UI.
- **Reads** `root_state`, `roots`, `replay_log`; **writes** `replay_log` (a dry run's
  rows are marked `dry_run`), `root_state` (`replayed`), `dead_letters` (redrives) and
  the queues. `requested_by` in `replay_log` is `airflow:<the user who triggered>`.

Why the replay runs in the task, not through spark-submit: one task plans, sends and
returns the exact summary (selected, sent, skipped and why, the sends themselves) as its
return value, with nothing to read back from the ledger afterwards. It starts Spark with
the same settings as the CLI (`spark.master`, so a cluster works as with spark-submit in
client mode); the work is small: a manual replay touches the roots picked, not the ledger.
"""

MANUAL_RETRACT: Final = """
### ackfold manual retract
Takes back what dead letters left behind: deletes the rows of the dead-lettered roots you
pick from their app's declared outputs (`ackfold outputs`), found by origin root. **Dry
run is on by default**: the run then logs and returns what it would delete, and deletes
nothing; untick it to delete.

- **Trigger** it with *Trigger* and fill in the form (root ids, or filters: app,
  status-change time range, limit), from the Reliability UI's retract button on a dead
  letter's page, or over the REST API with the same keys in `conf` (those of
  `ackfold_manual_replay` but `statuses` and `rate`). A request with no root id, app or
  time range needs a limit to delete.
- **validate** checks the conf again (REST calls skip the form) and fails at once, naming
  each bad field and its fix. **retract** selects the dead letters, refuses a root that
  is not dead-lettered, that a later attempt completed, or that a replay is bringing
  back, logs the rows it finds per root and output (counts, never values), and returns
  the summary: the task's return value (XCom `return_value`) in the UI.
- **Deletes** in one Delta commit per output table, by origin root, after writing the
  plan ahead to `retract_log` (`requested_by` is `airflow:<the user who triggered>`);
  like every derived write, only while it holds the ledger's lease.
- A count aggregated over many roots cannot be taken back by origin: keep per-origin rows
  in the output and the aggregate as a view over them (docs: Retract).
"""

QUALITY: Final = """
### ackfold quality
Checks, with Great Expectations, that the at-least-once promise held, and that the ledger
itself is sound, over the last `quality.window` (default 2 days):

- **Ledger**: schema and types, no nulls where the contract forbids them, `kind` and
  `status` in their domains, `event_id` and `root_id` unique, valid origin chains,
  attempts within `max_attempts`, XOR 0 for every completed root, a reason for every
  failed one.
- **Delivery, per app**: no lost roots (older than timeout plus `grace`, and neither
  completed, replayed nor dead-lettered), every message a producer reported sent is
  registered, duplicate rate, dead-letter rate and complete-latency p99 within the app's
  thresholds (`defaults.quality`, `apps.<app>.quality`).

- **Runs** whenever `ackfold_reconcile` updates the `ackfold_root_state` asset.
- `check` runs the checks in the task's own process on the embedded engine (DuckDB, no
  JVM), or submits the packaged `quality.py` when `engine.kind` is `spark`: one
  `quality_results` row per expectation, and Data Docs (the Reliability UI's *Quality*
  page links them).
- `verdict` fails when any expectation failed, listing each with its observed value.
- `alerts` (beside the verdict, after any check) sends one message per app when its checks
  start failing and one when they pass again (`alerts.*`, `apps.<app>.alerts.quality`).
"""

MAINTENANCE: Final = """
### ackfold maintenance
Keeps the ledger small and fast to read:

1. **Retention**: deletes the `ack_events` of roots that are `completed` (or
   `completed_late`) and have had no event for `maintenance.retention` (default 30 days).
   Their `roots` and `root_state` rows stay; roots in any other status keep every event.
2. **OPTIMIZE**: Z-orders `ack_events` and `roots` by `root_id` (fast `ackfold show` and
   UI lookups), compacts `replay_log`.
3. **VACUUM** every ledger table, keeping `maintenance.vacuum_retention` (default 7 days).
4. **Checkpoints** every table and cleans up its log.

- **Runs** on `airflow.maintenance_schedule` (default daily); trigger it by hand any time,
  or run `ackfold maintain` (the same run, `run_maintenance`; `--dry-run` shows what
  would go).
- **Reads** `root_state`; **rewrites** `ack_events`, `roots`, `replay_log`; vacuums all.
  Safe while apps and the reconciler run: the tables stay at reader version 1 (no
  deletion vectors), and the reconciler's stream skips the retention's delete commits.
- Takes the ledger's turn; every commit carries the lease's epoch.
- The task logs each step as it starts and ends, then the JSON summary (roots expired,
  events deleted, files and bytes VACUUM removed, seconds per step); on Spark it submits
  the packaged `maintenance.py` on `spark_default`, whose last log line is that summary.
"""

SMOKE: Final = """
### ackfold smoke test
Creates a Delta table with an explicit schema in the warehouse, appends, MERGEs,
time-travels and reads it back, and fails unless it reads exactly what it wrote. On the
embedded engine it does so with delta-rs in the task's own process (no JVM); on Spark it
runs the packaged `smoke.py` (`ackfold.jobs`): spark-submit on the `spark_default`
connection, or through Spark Connect when `spark.remote` is set. It runs once when the
stack first starts; trigger it again any time to check an environment.
"""
