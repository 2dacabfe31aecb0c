"""spark-submit entry point of the word-count demo: one bounded run of `ackfold demo`
(send the sentences, run reconcile-and-replay cycles until every message is settled),
on whatever master spark-submit names, against the SQS of `sqs.endpoint_url`.

    spark-submit "$(ackfold spark-app wordcount.py)" [--messages N] [--seed S] [--drop STAGE=F]
        [--fail STAGE=F] [--poison N] [--stuck N] [--slow STAGE=DURATION] [--kill STAGE]
        [--no-faults]

Prints the cycle lines and the report (on stderr, which spark-submit shows on its stdout),
then the delivery report as JSON on the last line of stdout. The faults start from
`demo.faults`, as `ackfold demo`'s do. Exits 1 if a message was lost or a count is wrong.
"""

import argparse
import json
import sys

from ackfold.config import load_settings
from ackfold.demo.flags import add_demo_flags, demo_options
from ackfold.demo.run import Demo, demo_lock
from ackfold.spark import get_spark


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="wordcount.py")
    add_demo_flags(parser)
    args = parser.parse_args()
    settings = load_settings()
    try:
        messages, faults = demo_options(settings.demo.faults, args)
    except ValueError as exc:
        parser.error(str(exc))
    with demo_lock(settings, "ackfold/jobs/wordcount.py", say=say):
        spark = get_spark(settings, app_name="ackfold-wordcount")
        report = Demo(spark, settings, messages=messages, faults=faults, say=say).run()
        print(json.dumps(report.as_dict(), sort_keys=True), flush=True)
        spark.stop()
    sys.exit(0 if report.ok else 1)
