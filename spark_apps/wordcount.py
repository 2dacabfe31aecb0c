"""The demo's tracked word count, as a team deploys a tracked app: one `availableNow` run
that takes what its source holds (SQS, or Kafka with `apps.wordcount.source: kafka`),
splits and counts it to the end, and stops; `--continuous` runs it until it fails.

    spark-submit spark_apps/wordcount.py [--continuous]

Its DAG is `ackfold_app_wordcount` (`apps.wordcount.dag.application`). The app's code is
in the package (`ackfold.demo`); this file is the entry point a deployment copies.
"""

import runpy

from ackfold.jobs import app_path

if __name__ == "__main__":
    runpy.run_path(str(app_path("wordcount_app.py")), run_name="__main__")
