"""A tracked-app process for the fault tests, killed (SIGKILL) at a chosen point.

    python -m tests.sqs.worker received|registered QUEUE   # the ingester dies there
    python -m tests.sqs.worker replay QUEUE                # dies after a chunk is sent,
                                                           # before the log marks it
Settings come from the environment (ACKFOLD_*), as for any ackfold process.
"""

from __future__ import annotations

import os
import signal
import sys
from datetime import UTC, datetime, timedelta

from ackfold.config import load_settings
from ackfold.replay.request import ReplayRequest
from ackfold.runs.replayer import Replayer
from ackfold.sources.ingest import Ingester
from ackfold.sources.sqs import SqsQueue
from ackfold.spark import get_spark
from tests.sqs.topology import APP, STAGE


def die(*_: object) -> None:
    print(f"worker: killed at {sys.argv[1]}", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    point, queue = sys.argv[1], sys.argv[2]
    settings = load_settings()
    spark = get_spark(settings, app_name=f"worker-{point}")
    if point == "replay":
        replayer = Replayer(spark, settings, now=datetime.now(UTC) + timedelta(hours=6))
        plan = replayer.plan(ReplayRequest(automatic=True, app=APP))
        replayer.execute(plan, after_send=die)
    else:
        ingester = Ingester(
            spark,
            settings,
            APP,
            SqsQueue(settings, queue),
            to=[STAGE],
            on_received=die if point == "received" else None,
            on_registered=die if point == "registered" else None,
        )
        ingester.run(until_idle=10)
    print("worker: not killed", flush=True)


if __name__ == "__main__":
    main()
