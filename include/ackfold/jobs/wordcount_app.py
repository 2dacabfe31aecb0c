"""spark-submit entry point of the word-count app as its Airflow DAG runs it
(`ackfold_app_wordcount`, which `make run` declares, continuous): one `availableNow` run
that takes what the source holds (the SQS queue's messages, or the Kafka topic's new
records), runs split and count to the end of their input, and stops.

    spark-submit "$(ackfold spark-app wordcount_app.py)" [--continuous]

With `--continuous` (`apps.wordcount.dag.mode: continuous`, as under `make run`) it runs
its queries on their triggers until it fails: the DAG restarts it with backoff. Either
way it records its heartbeat while it runs.

No seeded faults: those are `ackfold demo`'s. While the demo drives the app for its report,
a run waits for it (`ackfold.ledger.commits.lock.app_lock`). A failed query exits non-zero, so that
Airflow retries the run.
"""

import sys

from ackfold.config import load_settings
from ackfold.demo.run import run_available_now, run_continuously
from ackfold.spark import get_spark


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


if __name__ == "__main__":
    settings = load_settings()
    run = run_continuously if "--continuous" in sys.argv[1:] else run_available_now
    run(lambda: get_spark(settings, app_name="ackfold-wordcount-app"), settings, say=say)
