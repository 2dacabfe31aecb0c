"""Writes the golden ledgers under tests/golden/<case>/ (run once; the folders are committed).

Each earlier release writes its own case, with its own code: the driver checks out the
release's commit as a temporary worktree (`/tmp/old-<sha>`, made if missing) and runs this
file's `era` command in a process whose `ackfold` is that release's
(`PYTHONPATH=/tmp/old-<sha>/include`, this checkout's venv).

- `ERAS` (plain Python): the era's Tracker and LedgerWriter write a first batch at fixed
  times, its embedded reconcile folds it (leaving its `root_state` and its mark where it
  kept them), then a second batch that no reconcile has folded.
- `SPARK_ERAS` (a JVM each, a minute or two): the era's Spark app (`StageTracker`) writes
  lines, an output table of words in its tuple layout and the acks of some words, its
  Spark reconcile folds the first batch, and a second batch follows. Spark stamps its
  events with the wall clock, so these cases record their own `now`: three hours after
  their first event.
- `contract-v1` and the deletion-vector cases need no old release: a plain delta-rs
  producer writes them, and Delta Spark (this venv's) enables the feature and DELETEs.

The expected statuses are the reference fold's (`ackfold.reconcile.fold`, of the checkout
running the driver) over every event at the case's `now`, cross-checked with the era's
own reconcile at that `now` on a copy; a disagreement stops the driver.

    cd <checkout>; export PYTHONPATH=include:dev ACKFOLD_VAR_DIR=$PWD/var
    .venv/bin/python tests/golden/make_cases.py make [case ...]   # all cases by default
    git -C <checkout> worktree remove /tmp/old-<sha>                   # each, afterwards

The harness is `tests/conformance/test_golden.py`; `LAYOUTS` there names the case of
every layout, and tests/golden/README.md lists them.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parents[1]
APP = "orders"
T0 = datetime(2024, 1, 1, tzinfo=UTC)
# The first batch's reconcile, the second batch, and the `now` every fold of a case takes:
# fixed, so no status depends on the wall clock.
FIRST_RECONCILE = T0 + timedelta(minutes=30)
SECOND_BATCH = T0 + timedelta(hours=2, minutes=50)
NOW = T0 + timedelta(hours=3)
TIMEOUT = timedelta(hours=1)

# case -> (release commits: the first batch's writer, the second batch's writer), what it keeps.
ERAS: dict[str, tuple[str, str, str]] = {
    "pre-i49": (
        "e0d421d", "e0d421d",
        "ackfold before issue 49 (the first parent of its merge, 5360a37): roots without "
        "id_scheme, root_state as before issue 47, the embedded reconcile's mark beside the "
        "ledger (_checkpoints/reconcile/all/ackfold-read-up-to.json)",
    ),
    "gained-id-scheme": (
        "e0d421d", "5360a37",
        "roots written without id_scheme by ackfold before issue 49, then given the column by "
        "the LedgerWriter of issue 49's merge (5360a37), whose rows carry it: some files have "
        "the column and some do not; root_state and the mark as before issue 47",
    ),
    "i47": (
        "babe60e", "babe60e",
        "ackfold at issue 47's merge (babe60e): id_scheme in every file, root_state in its "
        "current layout, the reconcile's mark a Delta transaction in root_state",
    ),
}  # fmt: skip


# -- the era's side: runs on the old release's ackfold ------------------------------------


def _settings(warehouse: Path) -> Any:
    from ackfold.config import load_settings

    return load_settings(
        var_dir=warehouse.parent / "var", warehouse=str(warehouse),
        jars_dir=PROJECT / "var" / "jars", defaults={"timeout": "1h"},
        engine={"kind": "embedded"},
    )  # fmt: skip


class _Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def era(warehouse: Path, batch: int, *, reconcile: bool, statuses_to: Path | None) -> None:
    """One batch of the scenario, by the release this process imports; then its reconcile
    (at FIRST_RECONCILE) if `reconcile`; `statuses_to`: only reconcile a copy at NOW and
    write its statuses there (the cross-check)."""
    try:
        from ackfold.ledger.commits.writer import LedgerWriter
    except ImportError:  # a release from before the ledger's rooms; in parts, out of reach
        # of the rewrite of this release's paths
        earlier = importlib.import_module(".".join(("ackfold", "ledger", "writer")))
        LedgerWriter = earlier.LedgerWriter
    try:
        from ackfold.runs.reconcile import run_reconcile
    except ImportError:  # a release from before ackfold.runs
        run_reconcile = importlib.import_module("ackfold.reconcile.run").run_reconcile
    from ackfold.track.tracker import Tracker

    if statuses_to is not None:
        from deltalake import DeltaTable

        copy = Path(tempfile.mkdtemp()) / "warehouse"
        shutil.copytree(warehouse, copy)
        run_reconcile(_settings(copy), now=NOW, engine="embedded")
        rows = (
            DeltaTable(str(copy / "root_state"))
            .to_pyarrow_table(columns=["root_id", "status"])
            .to_pylist()
        )
        statuses_to.write_text(json.dumps({str(r["root_id"]): r["status"] for r in rows}))
        return
    clock = _Clock(T0 if batch == 1 else SECOND_BATCH)
    tracker = Tracker(APP, clock=clock)
    if batch == 1:
        for name in ("c1", "c2", "c3", "c4"):  # each word counted: completed
            line = tracker.spout(
                name, source="sqs", source_queue="orders-in", payload=f"line {name}"
            )
            for _ in range(2):
                tracker.ack(tracker.emit([line], stage="split"), stage="sink")
            tracker.ack(line, stage="split")
        for name in ("f1", "f2"):  # a bad record at the sink: failed
            line = tracker.spout(
                name, source="sqs", source_queue="orders-in", payload=f"line {name}"
            )
            word = tracker.emit([line], stage="split")
            tracker.ack(line, stage="split")
            tracker.fail(word, stage="sink", reason="bad record")
        for name in ("t1", "t2"):  # a word never counted: timed out at NOW
            line = tracker.spout(
                name, source="sqs", source_queue="orders-in", payload=f"line {name}"
            )
            tracker.emit([line], stage="split")
            tracker.ack(line, stage="split")
    else:
        for name in ("n1", "n2"):  # completed after the last old reconcile
            line = tracker.spout(
                name, source="sqs", source_queue="orders-in", payload=f"line {name}"
            )
            tracker.ack(tracker.emit([line], stage="split"), stage="sink")
            tracker.ack(line, stage="split")
        for name in ("p1", "p2"):  # split, not counted yet: pending at NOW
            line = tracker.spout(
                name, source="sqs", source_queue="orders-in", payload=f"line {name}"
            )
            tracker.emit([line], stage="split")
            tracker.ack(line, stage="split")
    writer = LedgerWriter(str(warehouse))
    writer.create()
    writer.append(tracker.drain_roots(), tracker.drain())
    if reconcile:
        run_reconcile(_settings(warehouse), now=FIRST_RECONCILE, engine="embedded")


# The lines a Spark era's app reads, per batch: `words` of each go to the output table;
# `count`, the app's last stage, consumes some of them and leaves the rest to the harness
# (a stage of today reading the output table).
SPARK_LINES = {
    0: [("s1", "a b"), ("s2", "c d"), ("s3", "e f"), ("s4", "g"), ("sf", None)],
    1: [("s5", "i j"), ("s6", "k")],
}
COUNTED = {0: ("a", "b", "c", "d"), 1: ("i", "j")}
UNCONSUMED = ("e", "f", "g", "k")


def spark_era(warehouse: Path, engine: str) -> None:
    """The app of an era that tracked on Spark: `spout` registers lines, `split` writes
    their words to the output table `words` (`_ackfold` in the era's tuple layout) and fails
    the line without text, `count` acks the words of COUNTED. The era's Spark reconcile runs
    after the first batch; the second batch is left for the next reconcile."""
    from pyspark.sql import functions as F

    from ackfold.config import load_settings
    from ackfold.spark import get_spark
    from ackfold.track.stage import StageTracker

    settings = load_settings(
        var_dir=warehouse.parent / "var", warehouse=str(warehouse),
        jars_dir=PROJECT / "var" / "jars", defaults={"timeout": "1h"},
        spark={"master": "local[2]", "shuffle_partitions": 2},
    )  # fmt: skip
    spark = get_spark(settings)
    wh = str(warehouse)
    spout, split, count = (StageTracker(APP, s, ledger=wh) for s in ("spout", "split", "count"))
    for batch, lines_of in SPARK_LINES.items():
        frame = spark.createDataFrame(lines_of, "id string, text string")
        lines = spout.spout(
            frame, message_id="id", source="sqs", source_queue="orders-in",
            payload=F.coalesce(F.col("text"), F.lit("(no text)")),
        )  # fmt: skip
        good = lines.tuples.where(F.col("text").isNotNull())
        bad = lines.tuples.where(F.col("text").isNull())
        words = split.explode(good, F.split("text", " "), "word").select("word", "_ackfold")
        split.write_batch(
            batch, outputs={f"{wh}/words": words}, roots=lines.roots,
            events=[lines.events, split.ack(good, words), split.fail(bad, "no text")],
        )  # fmt: skip
        stored = spark.read.format("delta").load(f"{wh}/words")
        counted = stored.where(F.col("word").isin(*COUNTED[batch]))
        count.write_batch(batch, events=[count.ack(counted)])
        if batch == 0:
            now = datetime.now(UTC)
            if engine == "0.1":
                from ackfold.runs.reconcile import reconcile

                reconcile(spark, settings, now=now)
            else:
                from ackfold.runs.reconcile import run_reconcile

                run_reconcile(settings, now=now, engine="spark", spark=spark)
    # The case's `now`: three hours after its first event, when its open roots timed out.
    first = spark.read.format("delta").load(f"{wh}/ack_events").agg(F.min("event_time")).first()
    assert first is not None
    at = first[0].astimezone(UTC).replace(second=0, microsecond=0)
    case_now = at + timedelta(hours=3)
    shutil.copytree(warehouse, warehouse.parent / "case")
    # The cross-check: the era's own reconcile, at the case's now, on the original.
    if engine == "0.1":
        reconcile(spark, settings, now=case_now)
    else:
        run_reconcile(settings, now=case_now, engine="spark", spark=spark)
    rows = spark.read.format("delta").load(f"{wh}/root_state").select("root_id", "status")
    theirs = {str(r.root_id): r.status for r in rows.collect()}
    (warehouse.parent / "statuses.json").write_text(
        json.dumps({"now": case_now.isoformat(), "statuses": theirs})
    )
    spark.stop()


# -- the driver's side: runs on this checkout's ackfold -----------------------------------


def _old(sha: str) -> Path:
    path = Path(f"/tmp/old-{sha}")
    if not path.exists():
        subprocess.run(
            ["git", "-C", str(PROJECT), "worktree", "add", "--detach", str(path), sha], check=True
        )
    return path


def _run_era(sha: str, warehouse: Path, *args: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(_old(sha) / "include")}
    command = [sys.executable, __file__, "era", str(warehouse), *args]
    # delta-rs may abort at interpreter exit (exit 134) after the work is done: the era
    # leaves with os._exit, and says it finished on its last line.
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if "era done" not in done.stdout:
        raise RuntimeError(f"{sha} {args}: exit {done.returncode}\n{done.stdout}\n{done.stderr}")


def _read(path: Path, columns: list[str] | None = None) -> list[dict[str, Any]]:
    from deltalake import DeltaTable

    rows: list[dict[str, Any]] = DeltaTable(str(path)).to_pyarrow_table(columns=columns).to_pylist()
    return rows


def reference(warehouse: Path, now: datetime = NOW) -> dict[str, Any]:
    """What every fold of `warehouse` at `now` must give: each root's status by the
    reference fold; how many roots a replay (failed and timed out) selects; the quality
    checks that fail (`no_lost_roots` while a root registered before the timeout plus the
    default grace of 15 minutes is unsettled, as invariant 10 says)."""
    from ackfold.reconcile.fold import classify, fold

    roots = {r["root_id"]: r for r in _read(warehouse / "roots")}
    folds = fold(_read(warehouse / "ack_events"))
    statuses = {root: classify(folds[root], now=now, timeout=TIMEOUT) for root in sorted(roots)}
    due = now - TIMEOUT - timedelta(minutes=15)
    lost = [
        root for root, s in statuses.items()
        if s not in ("completed", "completed_late") and roots[root]["ingested_at"] < due
    ]  # fmt: skip
    return {
        "app": APP, "now": now.isoformat(), "timeout": "1h",
        "statuses": {str(root): s for root, s in statuses.items()},
        "messages": {str(root): roots[root]["source_message_id"] for root in sorted(roots)},
        "replay_selected": sum(s in ("failed", "timed_out") for s in statuses.values()),
        "quality_failing": ["no_lost_roots"] if lost else [],
    }  # fmt: skip


def _tidy(warehouse: Path) -> None:
    """No checksum files: a reader needs none."""
    for crc in warehouse.rglob("*.crc"):
        crc.unlink()


def _write_case(name: str, warehouse: Path, expected: dict[str, Any], case: dict[str, Any]) -> None:
    target = HERE / name
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir()
    _tidy(warehouse)
    shutil.copytree(warehouse, target / "ledger")
    (target / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    (target / "case.json").write_text(json.dumps(case, indent=1) + "\n")


def make_era_case(name: str) -> None:
    first, second, what = ERAS[name]
    warehouse = Path(tempfile.mkdtemp()) / "warehouse"
    _run_era(first, warehouse, "--batch", "1", "--reconcile")
    _run_era(second, warehouse, "--batch", "2")
    expected = reference(warehouse)
    checked = warehouse.parent / "statuses.json"
    _run_era(second, warehouse, "--batch", "2", "--statuses-to", str(checked))
    theirs = json.loads(checked.read_text())
    if theirs != expected["statuses"]:
        raise RuntimeError(f"{name}: {second}'s reconcile disagrees: {theirs} != {expected}")
    case = {
        "written_by": what,
        "commits": {"first batch and its reconcile": first, "second batch": second},
        "how": "tests/golden/make_cases.py make " + name,
        "cross_checked_with": f"the embedded reconcile of {second}, at now",
    }
    _write_case(name, warehouse, expected, case)


def make_this_release(name: str) -> None:
    """The scenario by this checkout's ackfold (in this process), then the tables issue 58
    added beside the contract's: `declared_outputs` and `retract_log`, as `ackfold init`
    makes them. A later release that changes them adds its own case."""
    from ackfold.ledger.commits.writer import LedgerWriter

    warehouse = Path(tempfile.mkdtemp()) / "warehouse"
    era(warehouse, 1, reconcile=True, statuses_to=None)
    era(warehouse, 2, reconcile=False, statuses_to=None)
    LedgerWriter(str(warehouse)).create()
    expected = reference(warehouse)
    checked = warehouse.parent / "statuses.json"
    era(warehouse, 2, reconcile=False, statuses_to=checked)
    if json.loads(checked.read_text()) != expected["statuses"]:
        raise RuntimeError(f"{name}: this release's reconcile disagrees with the reference")
    case = {
        "written_by": "ackfold 0.2.0 (issue 58): the i47 layout, and the declared_outputs and "
        "retract_log tables `ackfold init` adds",
        "commits": {"both batches, the reconcile and init": "this checkout at issue 58"},
        "how": "tests/golden/make_cases.py make " + name,
        "cross_checked_with": "the embedded reconcile of this checkout, at now",
    }
    _write_case(name, warehouse, expected, case)


# Contract v1's columns, as docs/ledger.md spells them (not imported: the producer is not ackfold).
def _v1_schemas() -> tuple[Any, Any]:
    import pyarrow as pa

    ts = pa.timestamp("us", tz="UTC")
    roots = pa.schema([
        pa.field("root_id", pa.int64(), False), pa.field("app", pa.string(), False),
        pa.field("attempt", pa.int32(), False), pa.field("origin_root_id", pa.int64(), False),
        pa.field("source", pa.string(), False), pa.field("source_queue", pa.string()),
        pa.field("source_message_id", pa.string()), pa.field("source_position", pa.string()),
        pa.field("payload", pa.string()), pa.field("ingested_at", ts, False),
    ])  # fmt: skip
    events = pa.schema([
        pa.field("event_id", pa.string(), False), pa.field("app", pa.string(), False),
        pa.field("root_id", pa.int64(), False), pa.field("kind", pa.string(), False),
        pa.field("ack_val", pa.int64(), False), pa.field("stage", pa.string(), False),
        pa.field("event_time", ts, False), pa.field("reason", pa.string()),
    ])  # fmt: skip
    return roots, events


def _id(*parts: object) -> int:
    """A 64-bit id derived from `parts`, as a producer in any language might derive it."""
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def producer_id(prefix: str, message: str) -> int:
    """The root id the contract-v1 producer gives `message`."""
    return _id(prefix, APP, message)


def producer_rows(
    messages: dict[str, str], at: datetime, prefix: str = "v1"
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A contract-v1 producer's rows: per message, a root, its init (the first tuple's id)
    and a split acking it with one word; a word acked at the sink completes it.
    `messages`: message id -> `completed`, `pending` or `failed` (what it is made to end as).
    """
    roots, events = [], []
    for message, end in messages.items():
        root = producer_id(prefix, message)
        line, word = _id(root, "line"), _id(root, "word")
        roots.append({
            "root_id": root, "app": APP, "attempt": 1, "origin_root_id": root, "source": "sqs",
            "source_queue": "orders-in", "source_message_id": message, "source_position": None,
            "payload": f"line {message}", "ingested_at": at,
        })  # fmt: skip
        steps: list[tuple[str, int, str, str | None]] = [
            ("init", line, "spout", None), ("ack", line ^ word, "split", None),
        ]  # fmt: skip
        if end == "completed":
            steps.append(("ack", word, "sink", None))
        elif end == "failed":
            steps.append(("fail", 0, "sink", "bad record"))
        for n, (kind, val, stage, reason) in enumerate(steps):
            events.append({
                "event_id": f"{prefix}-{message}-{n}", "app": APP, "root_id": root, "kind": kind,
                "ack_val": val, "stage": stage, "event_time": at, "reason": reason,
            })  # fmt: skip
    return roots, events


def write_v1(
    warehouse: Path,
    roots: list[dict[str, Any]],
    events: list[dict[str, Any]],
    *,
    merge: bool = False,
) -> None:
    """Append with plain delta-rs, creating the tables if they are missing. `merge`: with
    `schema_mode="merge"`, as a producer must append its v1 columns to a table that ackfold
    gave more (delta-rs refuses a plain append of fewer columns than the table's); a
    merge of fewer columns leaves the table's schema as it is."""
    import pyarrow as pa
    from deltalake import write_deltalake

    mode: dict[str, Any] = {"schema_mode": "merge"} if merge else {}
    for name, rows, schema in zip(
        ("roots", "ack_events"), (roots, events), _v1_schemas(), strict=True
    ):
        if rows:
            table = pa.Table.from_pylist(rows, schema)
            write_deltalake(str(warehouse / name), table, mode="append", **mode)


def beyond_v1(table: Path) -> bool:
    """Whether `table` (roots or ack_events) has columns contract v1 does not name."""
    from deltalake import DeltaTable

    names = {f.name for f in _v1_schemas()[0]} | {f.name for f in _v1_schemas()[1]}
    return any(f.name not in names for f in DeltaTable(str(table)).schema().fields)


V1_BATCH_1 = {"c1": "completed", "c2": "completed", "f1": "failed", "t1": "pending"}
V1_BATCH_2 = {"n1": "completed", "p1": "pending"}


def make_contract_v1(name: str = "contract-v1") -> Path:
    warehouse = Path(tempfile.mkdtemp()) / "warehouse"
    write_v1(warehouse, *producer_rows(V1_BATCH_1, T0))
    write_v1(warehouse, *producer_rows(V1_BATCH_2, SECOND_BATCH))
    case = {
        "written_by": "a contract-v1 producer: plain deltalake.write_deltalake (delta-rs "
        "1.6.6) of the columns docs/ledger.md lists for contract v1, no id_scheme, no "
        "ackfold code; no reconcile has run",
        "how": "tests/golden/make_cases.py make " + name,
        "cross_checked_with": "the reference fold alone (no ackfold wrote it)",
    }
    _write_case(name, warehouse, reference(warehouse), case)
    return warehouse


def _spark() -> Any:
    from ackfold.config import load_settings
    from ackfold.spark import get_spark

    var = Path(tempfile.mkdtemp())
    spark = {"master": "local[2]", "shuffle_partitions": 2}
    return get_spark(load_settings(var_dir=var, jars_dir=PROJECT / "var" / "jars", spark=spark))


def _deletion_vectors(table: Path) -> int:
    """The add actions of `table`'s log that carry a deletion vector."""
    count = 0
    for commit in sorted((table / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            count += bool(action.get("add", {}).get("deletionVector"))
    return count


# The roots a Spark DELETE removes from the dv-present case, with their events: one in
# each batch's file, beside rows that stay, so each file gets a deletion vector.
DELETED = {"x1": "completed", "x2": "pending"}


def make_deletion_vectors(name: str) -> None:
    """A contract-v1 ledger whose tables Delta Spark gave `delta.enableDeletionVectors`
    (`dv-enabled`), and then, in `dv-present`, deletion vectors by a DELETE of two roots."""
    present = name == "dv-present"
    warehouse = Path(tempfile.mkdtemp()) / "warehouse"
    first, second = dict(V1_BATCH_1), dict(V1_BATCH_2)
    if present:
        first["x1"], second["x2"] = DELETED["x1"], DELETED["x2"]
    write_v1(warehouse, *producer_rows(first, T0))
    write_v1(warehouse, *producer_rows(second, SECOND_BATCH))
    spark = _spark()
    gone = ", ".join(str(producer_id("v1", m)) for m in DELETED)
    for table in ("roots", "ack_events"):
        path = f"delta.`{warehouse / table}`"
        spark.sql(f"ALTER TABLE {path} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
        if present:
            spark.sql(f"DELETE FROM {path} WHERE root_id IN ({gone})")
    spark.stop()
    for table in ("roots", "ack_events"):
        vectors = _deletion_vectors(warehouse / table)
        assert vectors == (2 if present else 0), f"{name}: {table} has {vectors} vectors"
    # The reference fold of the rows that remain: what was written, less what was deleted
    # (read by construction, not through a reader of deletion vectors).
    plain = Path(tempfile.mkdtemp()) / "warehouse"
    write_v1(plain, *producer_rows(V1_BATCH_1, T0))
    write_v1(plain, *producer_rows(V1_BATCH_2, SECOND_BATCH))
    case = {
        "written_by": "a contract-v1 producer (plain delta-rs 1.6.6), then Delta Spark 4.4.0 "
        "(delta-spark_4.1_2.13, pyspark 4.1.1): ALTER TABLE SET TBLPROPERTIES "
        "('delta.enableDeletionVectors' = 'true') on roots and ack_events"
        + (f", then DELETE of the roots {sorted(DELETED)} and their events, which "
           "leaves a deletion vector on each batch's file" if present else
           "; no row deleted, so no deletion vector is present"),
        "how": "tests/golden/make_cases.py make " + name,
        "cross_checked_with": "the reference fold of the rows written less the rows deleted",
    }  # fmt: skip
    expected = reference(plain)
    if present:
        # The issue allows either: read right, or refused with the way out named.
        expected["or_refused"] = {"error": "UnreadableFiles", "naming": "REORG TABLE"}
    _write_case(name, warehouse, expected, case)


SPARK_ERAS = {
    "ackfold-0.1": (
        "0125a88", "0.1",
        "ackfold 0.1 as it tracked on Spark (0125a88, the commit before root_state was "
        "repartitioned, f718dee): its StageTracker wrote the output table `words` in _ackfold "
        "tuple layout 1 (before issue 40), its Spark reconcile left root_state partitioned by "
        "first_event_date alone and its mark in its stream's checkpoint "
        "(_checkpoints/reconcile/all)",
    ),
    "spark-pre-i49": (
        "e0d421d", "spark",
        "ackfold before issue 49 (e0d421d) tracking on Spark: `words` in _ackfold tuple "
        "layout 2 (issue 40), roots without id_scheme, its Spark engine's reconcile leaving "
        "root_state as before issue 47 and its mark in its stream's checkpoint",
    ),
}  # fmt: skip


def make_spark_era_case(name: str) -> None:
    sha, engine, what = SPARK_ERAS[name]
    warehouse = Path(tempfile.mkdtemp()) / "warehouse"
    _run_era(sha, warehouse, "--batch", "0", "--spark", engine)
    done = json.loads((warehouse.parent / "statuses.json").read_text())
    now = datetime.fromisoformat(done["now"])
    case_dir = warehouse.parent / "case"
    expected = reference(case_dir, now)
    if done["statuses"] != expected["statuses"]:
        raise RuntimeError(f"{name}: {sha}'s reconcile disagrees: {done} != {expected}")
    messages = {m: root for root, m in expected["messages"].items()}
    # A stage of today acks the words `count` left: their roots complete.
    left = {"s3", "s4", "s6"}
    expected["after_stage"] = {
        root: "completed" if m in left else expected["statuses"][root]
        for m, root in messages.items()
    }
    layout = 1 if engine == "0.1" else 2
    case = {
        "written_by": what,
        "commits": {"tracking and reconcile": sha},
        "how": "tests/golden/make_cases.py make " + name,
        "cross_checked_with": f"the Spark reconcile of {sha}, at now, on a copy",
        "outputs": {"words": {"layout": layout, "stage": "count", "unconsumed": list(UNCONSUMED)}},
    }
    _write_case(name, case_dir, expected, case)


CASES: dict[str, Callable[[str], object]] = {
    "contract-v1": make_contract_v1,
    **{name: make_spark_era_case for name in SPARK_ERAS},
    **{name: make_era_case for name in ERAS},
    "dv-enabled": make_deletion_vectors,
    "dv-present": make_deletion_vectors,
    "i58": make_this_release,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command")
    era_cmd = sub.add_parser("era", help="one batch, by the release this process imports")
    era_cmd.add_argument("warehouse", type=Path)
    era_cmd.add_argument("--batch", type=int, required=True)
    era_cmd.add_argument("--reconcile", action="store_true")
    era_cmd.add_argument("--statuses-to", type=Path)
    era_cmd.add_argument("--spark", choices=("0.1", "spark"), help="the era's Spark app")
    make = sub.add_parser("make", help="write the cases (all by default)")
    make.add_argument("cases", nargs="*", help=", ".join(CASES))
    args = parser.parse_args()
    if args.command == "era" and args.spark:
        spark_era(args.warehouse, args.spark)
        print("era done", flush=True)
        os._exit(0)
    if args.command == "era":
        era(args.warehouse, args.batch, reconcile=args.reconcile, statuses_to=args.statuses_to)
        print("era done", flush=True)
        os._exit(0)
    unknown = set(args.cases or ()) - set(CASES)
    if args.command != "make" or unknown:
        parser.error(f"usage: make [{' '.join(CASES)}] (unknown: {sorted(unknown)})")
    for name in args.cases or CASES:
        print(f"{name} ...", flush=True)
        CASES[name](name)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
