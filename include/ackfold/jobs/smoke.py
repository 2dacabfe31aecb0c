"""spark-submit entry point of the `ackfold_smoke` DAG: a Delta round trip in the warehouse."""

import json
import sys

from ackfold.config import load_settings
from ackfold.jobs import one_line_errors
from ackfold.spark import get_spark
from ackfold.spark.smoke import check, run_smoke

if __name__ == "__main__":
    with one_line_errors():
        settings = load_settings()
        spark = get_spark(settings, app_name="ackfold-smoke")
        report = run_smoke(spark, f"{settings.table_root}/smoke")
        print("ackfold smoke:", json.dumps(report, sort_keys=True), flush=True)
        spark.stop()
        sys.exit(0 if check(report) else 1)
