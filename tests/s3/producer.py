"""A producer outside Spark for tests/s3/test_no_commit_lost.py, in its own process:
batch after batch of roots and their events, committed by `LedgerWriter.append` with its
app id and the batch's number as version. Once an append returns it "deletes the batch's
messages from the queue": it writes the batch's root and event ids to its report, one
JSON line. A failed append (the S3 server away) is tried again, as a queue would deliver
the messages again; a restarted producer goes on from its report's last batch.

    python -m tests.s3.producer WAREHOUSE NAME BATCHES SIZE REPORT
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from ackfold import LedgerWriter, Tracker
from ackfold.ledger.errors import LedgerError


def main(warehouse: str, name: str, batches: int, size: int, report: Path) -> int:
    done = len(report.read_text().splitlines()) if report.exists() else 0
    writer = LedgerWriter(warehouse)
    with report.open("a") as out:
        for batch in range(done, batches):
            tracker = Tracker(name)
            for i in range(size):
                root = tracker.spout(f"{name}-{batch}-{i}", source="sqs", source_queue=name)
                tracker.ack(root, stage="store")
            roots, events = tracker.drain_roots(), tracker.drain()
            deadline, started = time.monotonic() + 120, time.time()
            while True:
                try:
                    writer.append(roots, events, app_id=name, version=batch)
                    break
                except LedgerError as exc:  # the server restarting: the queue redelivers
                    if time.monotonic() > deadline:
                        raise
                    print(f"{name} batch {batch}: {exc}; again", file=sys.stderr, flush=True)
                    time.sleep(0.3)
            line = {
                "batch": batch,
                "roots": [r["root_id"] for r in roots],
                "events": [e["event_id"] for e in events],
                "started": started,  # the append's span, retries included
                "ended": time.time(),
            }
            out.write(json.dumps(line) + "\n")
            out.flush()
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), Path(sys.argv[5]))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # delta-rs may abort at exit (delta-rs#2184)
