"""Build step of docker/Dockerfile: the S3A jars, resolved like ackfold's own jar cache.

    python docker/s3a_jars.py GROUP:ARTIFACT:VERSION ...

Resolves the coordinates and their runtime dependencies with Maven into
`$ACKFOLD_JARS_DIR/s3a/` (checksums in its manifest, jars Spark already ships left out),
then links each jar into the installed pyspark's `jars/`, so that every Spark driver of the
image (spark-submit and in-task sessions) has `s3a://` on its classpath. The Spark image
copies the same jars into `/opt/spark/jars/` for the executors.

Not part of `ackfold setup`: the AWS SDK bundle is large, and only the images need it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ackfold.spark.jars import BUNDLES, Bundle, resolve, spark_jars_dir


def main(coordinates: list[str]) -> int:
    if not coordinates:
        print(__doc__, file=sys.stderr)
        return 2
    bundle = Bundle("s3a", tuple(coordinates), for_spark=True)
    BUNDLES[bundle.name] = bundle  # resolve() verifies a bundle by its registered name
    jars = resolve(bundle, Path(os.environ.get("ACKFOLD_JARS_DIR", "var/jars")))
    target = spark_jars_dir()
    for jar in jars:
        link = target / jar.name
        if not link.exists():
            link.symlink_to(jar)
    print(f"{len(jars)} S3A jars linked into {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
