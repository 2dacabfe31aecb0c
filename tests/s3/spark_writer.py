"""A tracked Spark app for tests/s3/test_no_commit_lost.py, in its own process: a classic
session reads a rate stream (source and checkpoint on this machine), and each micro-batch's
spout registers its rows as roots with their init events on the ledger LEDGER (on the S3
API), committed by the driver through delta-rs (`StageTracker.write_batch`). After a batch
is written it reports the batch's root ids, one JSON line. A batch whose commit fails (the
S3 server restarting) is written again, as a restarted query would re-run it. It stops
once the file STOP exists.

    python -m tests.s3.spark_writer LEDGER REPORT WORKDIR STOP
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from ackfold.config import load_settings
from ackfold.ledger.errors import LedgerError
from ackfold.ledger.schema.tables import Ledger
from ackfold.spark import get_spark
from ackfold.track.stage import StageTracker
from tests.conftest import JARS_DIR


def main(ledger_uri: str, report: Path, work: Path, stop: Path) -> int:
    from pyspark.sql import functions as F

    settings = load_settings(var_dir=work / "var", jars_dir=JARS_DIR)  # Spark's own: local
    spark = get_spark(settings, app_name="ackfold-s3-writer")
    spout = StageTracker("sparkapp", "spout", ledger=Ledger(ledger_uri))
    out_file = report.open("a")

    def batch(df: Any, batch_id: int) -> None:
        messages = df.select(F.concat(F.lit("spark-"), F.col("value").cast("string")).alias("id"))
        if messages.isEmpty():
            return
        out = spout.spout(messages, message_id="id", source="test", source_queue="rate")
        deadline = time.monotonic() + 120
        while True:
            try:
                spout.write_batch(batch_id, roots=out.roots, events=[out.events])
                break
            except LedgerError as exc:
                if time.monotonic() > deadline:
                    raise
                print(f"spark batch {batch_id}: {exc}; again", file=sys.stderr, flush=True)
                time.sleep(0.3)
        ids = [row["root_id"] for row in out.roots.select("root_id").collect()]
        out_file.write(json.dumps({"batch": batch_id, "roots": ids}) + "\n")
        out_file.flush()

    query = (
        spark.readStream.format("rate").option("rowsPerSecond", 20).load()
        .writeStream.foreachBatch(batch)
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )  # fmt: skip
    deadline = time.monotonic() + 600
    while not stop.exists() and time.monotonic() < deadline and query.isActive:
        time.sleep(0.2)
    failed = query.exception()
    query.stop()
    spark.stop()
    if failed is not None:
        print(f"the query failed: {failed}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # delta-rs may abort at exit (delta-rs#2184)
