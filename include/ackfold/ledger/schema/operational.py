"""The schemas of the ledger's operational tables: what runs, producers and users keep
beside the contract (`ack_events`, `roots`) and the fold's `root_state`, all in
`ackfold.ledger.schema.tables`: replays and dead letters, sends, quality results, alerts,
heartbeats, declared outputs and retracts. Each is Spark DDL, as the contract's are."""

from __future__ import annotations

# The replay log, append-only like `ack_events`: for each message a replay run sends (or
# would send, in a dry run), a `planned` row BEFORE it is sent, then a `sent` row (with
# `sent_at` and the new `message_id`) or a `failed` row (with the `error`). A send planned
# but never sent is what a crash or an unreachable queue left behind: the next run sends
# exactly those. (root_id, action) identifies one send across runs; dry runs never count.
REPLAY_LOG_DDL = """
    replay_id STRING NOT NULL,
    event STRING NOT NULL,
    requested_by STRING NOT NULL,
    request STRING NOT NULL,
    root_id BIGINT NOT NULL,
    app STRING NOT NULL,
    action STRING NOT NULL,
    prior_status STRING NOT NULL,
    attempt INT NOT NULL,
    origin_root_id BIGINT NOT NULL,
    new_root_id BIGINT,
    source STRING NOT NULL,
    target STRING NOT NULL,
    reason STRING,
    last_stage STRING,
    first_event_date DATE NOT NULL,
    dry_run BOOLEAN NOT NULL,
    planned_at TIMESTAMP NOT NULL,
    sent_at TIMESTAMP,
    message_id STRING,
    error STRING
"""

# Roots that ran out of attempts, with why and how far they got. `redriven_at` is set when
# a replay brings one back (as an SQS redrive would).
DEAD_LETTERS_DDL = """
    root_id BIGINT NOT NULL,
    app STRING NOT NULL,
    origin_root_id BIGINT NOT NULL,
    attempt INT NOT NULL,
    source STRING NOT NULL,
    source_queue STRING,
    dead_letter_queue STRING NOT NULL,
    reason STRING NOT NULL,
    last_stage STRING,
    message_id STRING,
    dead_lettered_at TIMESTAMP NOT NULL,
    redriven_at TIMESTAMP,
    redrive_root_id BIGINT
"""

# What a producer sent to a source queue, for producers that can say so (the demo's feed
# does): the quality checks expect every sent message to be registered as a root. Optional;
# `source_message_id` is what the app's spout registers (SQS: the MessageId).
SENT_MESSAGES_DDL = """
    app STRING NOT NULL,
    source STRING NOT NULL,
    source_queue STRING NOT NULL,
    source_message_id STRING NOT NULL,
    sent_at TIMESTAMP NOT NULL
"""

# One row per expectation per quality run (`ackfold quality`, `ackfold_quality`), for
# trends. `run_at` is when it ran, `window_start` where its window began; `scope` is
# `all apps` or `app <name>` (`--app`); `app` is null for the ledger soundness checks.
QUALITY_RESULTS_DDL = """
    run_id STRING NOT NULL,
    run_at TIMESTAMP NOT NULL,
    window_start TIMESTAMP NOT NULL,
    scope STRING NOT NULL,
    suite STRING NOT NULL,
    app STRING,
    check_name STRING NOT NULL,
    expectation STRING NOT NULL,
    description STRING NOT NULL,
    success BOOLEAN NOT NULL,
    observed STRING NOT NULL,
    element_count BIGINT,
    unexpected_count BIGINT,
    unexpected_sample STRING,
    threshold STRING
"""

# The alerts' open/resolved log (`ackfold.alerts`), append only: one row each time a breach
# of `rule` for `app` opens or resolves on `channel` and the message went out. A key's
# latest row says whether its breach is open: nothing is re-sent while it lasts.
ALERT_LOG_DDL = """
    app STRING NOT NULL,
    rule STRING NOT NULL,
    channel STRING NOT NULL,
    event STRING NOT NULL,
    value STRING NOT NULL,
    threshold STRING NOT NULL,
    root_ids ARRAY<BIGINT> NOT NULL,
    opened_at TIMESTAMP NOT NULL,
    event_at TIMESTAMP NOT NULL,
    airflow_run_id STRING
"""

# The apps' heartbeat (`ackfold.track.heartbeat`), append only: each streaming query's latest
# progress, at most one row per query per `heartbeat.interval`, written by the tracked
# session's listener with delta-rs. `event`: progress, idle (a heartbeat without a batch),
# started or terminated (`exception` says why, if it failed). `source_lag`: the largest
# offsets-behind-latest any source reports (Kafka), null where none does.
APP_PROGRESS_DDL = """
    app STRING NOT NULL,
    query_id STRING NOT NULL,
    run_id STRING NOT NULL,
    query_name STRING,
    event STRING NOT NULL,
    batch_id BIGINT,
    batch_at TIMESTAMP,
    input_rows BIGINT,
    input_rows_per_second DOUBLE,
    processed_rows_per_second DOUBLE,
    source_lag BIGINT,
    exception STRING,
    recorded_at TIMESTAMP NOT NULL
"""

# Where each app's effects live (`ackfold.ledger.commits.outputs`), append only, optional: a ledger
# without it has no declared outputs. One row per declaration of output table `output` (its
# location as the app writes it) by `app`; the newest row per (app, output) holds.
# `origin_column` holds the origin root id of each of its rows; `clean`: no dead letter may
# have rows there (a quality expectation). `declared_by`: `write_batch` (declared by default
# on an app's first write to it), or who called `declare_output` (`ackfold outputs`).
DECLARED_OUTPUTS_DDL = """
    app STRING NOT NULL,
    output STRING NOT NULL,
    origin_column STRING NOT NULL,
    clean BOOLEAN NOT NULL,
    declared_by STRING NOT NULL,
    declared_at TIMESTAMP NOT NULL
"""

# The retract audit log (`ackfold.effects.retract`), append only, written ahead: a
# `planned` row per dead letter and output BEFORE the delete (`row_count`: its rows found there,
# `sample`: a few of them as JSON), then, after each table's one delete commit, a `deleted`
# row per dead letter of it (`table_version`: the commit; `table_rows`: what the commit
# deleted in all), or a `failed` row (with the `error`). A `planned` row with no `deleted`
# or `failed` row of its retract is what a crash left: the delete may or may not have landed.
RETRACT_LOG_DDL = """
    retract_id STRING NOT NULL,
    event STRING NOT NULL,
    requested_by STRING NOT NULL,
    request STRING NOT NULL,
    root_id BIGINT NOT NULL,
    app STRING NOT NULL,
    origin_root_id BIGINT NOT NULL,
    attempt INT,
    output STRING NOT NULL,
    origin_column STRING NOT NULL,
    row_count BIGINT NOT NULL,
    sample STRING,
    table_version BIGINT,
    table_rows BIGINT,
    logged_at TIMESTAMP NOT NULL,
    error STRING
"""
