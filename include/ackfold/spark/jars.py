"""The JVM artifacts ackfold needs, resolved once from Maven Central into a local cache.

`ackfold setup` (run by `make run` and `make test`) resolves each bundle with Maven into
`<jars_dir>/<bundle>/` and writes a manifest of checksums. After that, starting Spark or a
local server reads only the cache: no network. A missing, stale or corrupt cache raises
`JarsError`, which says the one command that fixes it.

The Hadoop connectors of the object stores (`STORE_BUNDLES`: S3A, the GCS connector, ABFS)
are resolved only for the store the warehouse names: by `ackfold setup` for the
configured warehouse, or on demand when a Spark session starts for it
(`ackfold.spark.conf.spark_jars`).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ackfold.errors import AckfoldError

FIX = "run `make setup` (or `ackfold setup`) to download them from Maven Central"


class JarsError(AckfoldError, RuntimeError):
    """The jar cache is missing, stale or corrupt."""


@dataclass(frozen=True)
class Bundle:
    """A set of pinned Maven coordinates resolved together, with their runtime dependencies.

    `for_spark` bundles go on Spark's classpath: jars that Spark already ships are left
    out, so Spark's own versions always win.
    """

    name: str
    artifacts: tuple[str, ...]  # group:artifact:version, or group:artifact:version:classifier
    for_spark: bool
    # Per artifact, what not to resolve with it: "group:artifact", or "*:*" for everything
    # it depends on (a shaded jar that carries its dependencies).
    excludes: tuple[tuple[str, ...], ...] = ()


BUNDLES: dict[str, Bundle] = {
    # delta-spark 4.4.1 is on PyPI but not on Maven Central; 4.4.0 is the newest jar.
    "delta": Bundle("delta", ("io.delta:delta-spark_4.1_2.13:4.4.0",), for_spark=True),
    # The local SQS server (`ackfold sqs`, the sqs test tier); runs on Java 17.
    "elasticmq": Bundle(
        "elasticmq", ("org.elasticmq:elasticmq-server_2.13:1.7.1",), for_spark=False
    ),
    # Spark's Kafka source and sink, for tracked apps that read Kafka.
    "spark-kafka": Bundle(
        "spark-kafka", ("org.apache.spark:spark-sql-kafka-0-10_2.13:4.1.1",), for_spark=True
    ),
    # The local Kafka broker in KRaft mode (`ackfold kafka`, the kafka test tier); Java 17.
    "kafka": Bundle(
        "kafka",
        ("org.apache.kafka:kafka_2.13:4.1.1", "org.apache.logging.log4j:log4j-slf4j-impl:2.24.3"),
        for_spark=False,
    ),
}

# The Hadoop connector of each object store, for Spark, matched to Spark 4.1.1's Hadoop
# (3.4.2). Each is resolved only for a warehouse on its store.
STORE_BUNDLES: dict[str, Bundle] = {
    # S3A with the AWS SDK modules it calls (s3, the transfer manager, sts: 12 MB), not
    # the SDK's 600 MB `bundle` that hadoop-aws names.
    "s3": Bundle(
        "s3a",
        (
            "org.apache.hadoop:hadoop-aws:3.4.2",
            "software.amazon.awssdk:s3:2.29.52",
            "software.amazon.awssdk:s3-transfer-manager:2.29.52",
            "software.amazon.awssdk:sts:2.29.52",
        ),
        for_spark=True,
        excludes=(("software.amazon.awssdk:bundle",), (), (), ()),
    ),
    # Google's GCS connector, shaded (its Google clients inside). 4.0.0: 3.1.x calls a
    # Hadoop 3.3 method that 3.4 changed (vectored reads fail with NoSuchMethodError).
    "gcs": Bundle(
        "gcs",
        ("com.google.cloud.bigdataoss:gcs-connector:4.0.0:shaded",),
        for_spark=True,
        excludes=(("*:*",),),
    ),
    # Hadoop's ABFS driver (abfs://, abfss://).
    "azure": Bundle("azure", ("org.apache.hadoop:hadoop-azure:3.4.2",), for_spark=True),
}
for _store_bundle in STORE_BUNDLES.values():
    BUNDLES[_store_bundle.name] = _store_bundle
# What `ackfold setup` resolves whatever the warehouse.
BASE_BUNDLES = tuple(
    name for name in BUNDLES if name not in {b.name for b in STORE_BUNDLES.values()}
)

MANIFEST = "manifest.json"
# Every repository a POM names (Spark's name a GCS mirror) is read from Maven Central:
# the one registry these machines, and most build farms, reach.
_MAVEN_SETTINGS = (
    '<settings xmlns="http://maven.apache.org/SETTINGS/1.0.0"><mirrors><mirror>'
    "<id>central-only</id><mirrorOf>*</mirrorOf><url>https://repo1.maven.org/maven2</url>"
    "</mirror></mirrors></settings>"
)


def spark_jars_dir() -> Path:
    """The jars that the installed pyspark ships."""
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _artifact_id(jar_name: str) -> str:
    # "jackson-core-2.13.5.jar" -> "jackson-core": strip the version and anything after it.
    stem = jar_name.removesuffix(".jar")
    parts = stem.split("-")
    for index, part in enumerate(parts):
        if index and part[:1].isdigit():
            return "-".join(parts[:index])
    return stem


def _pom(bundle: Bundle) -> str:
    deps = []
    for index, coordinate in enumerate(bundle.artifacts):
        group, artifact, version, *classifier = coordinate.split(":")
        excluded = bundle.excludes[index] if index < len(bundle.excludes) else ()
        exclusions = "".join(
            f"<exclusion><groupId>{g}</groupId><artifactId>{a}</artifactId></exclusion>"
            for g, a in (name.split(":") for name in excluded)
        )
        deps.append(
            f"<dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
            f"<version>{version}</version>"
            + (f"<classifier>{classifier[0]}</classifier>" if classifier else "")
            + (f"<exclusions>{exclusions}</exclusions>" if exclusions else "")
            + "</dependency>"
        )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        f"<groupId>dev.ackfold.jars</groupId><artifactId>{bundle.name}</artifactId>"
        "<version>1</version><packaging>pom</packaging>"
        f"<dependencies>{''.join(deps)}</dependencies></project>"
    )


def resolve(bundle: Bundle, jars_dir: Path, log: Callable[[str], None] = print) -> list[Path]:
    """Download `bundle` with Maven (strict checksums) into `jars_dir/<name>` and record it.

    Idempotent: a bundle whose cache verifies is left alone.
    """
    dest = jars_dir / bundle.name
    try:
        return bundle_jars(bundle.name, jars_dir)
    except JarsError:
        pass
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JarsError("Maven (`mvn`) is not on PATH: install it (apt-get install maven)")
    log(f"resolving {bundle.name}: {', '.join(bundle.artifacts)} from Maven Central")
    with tempfile.TemporaryDirectory() as work:
        pom = Path(work, "pom.xml")
        pom.write_text(_pom(bundle))
        maven_settings = Path(work, "settings.xml")
        maven_settings.write_text(_MAVEN_SETTINGS)
        staging = Path(work, "jars")
        result = subprocess.run(
            [mvn, "-B", "-q", "-C", "-s", str(maven_settings), "-f", str(pom),
             "dependency:copy-dependencies",
             f"-DoutputDirectory={staging}", "-DincludeScope=runtime"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if result.returncode != 0:
            tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
            raise JarsError(f"Maven could not resolve {bundle.name}:\n{tail}")
        shipped = (
            {_artifact_id(p.name) for p in spark_jars_dir().glob("*.jar")}
            if bundle.for_spark
            else set()
        )
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        checksums = {}
        for jar in sorted(staging.glob("*.jar")):
            if _artifact_id(jar.name) in shipped:
                continue
            shutil.copy2(jar, dest / jar.name)
            checksums[jar.name] = _sha256(dest / jar.name)
    manifest = {"artifacts": list(bundle.artifacts), "jars": checksums}
    (dest / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    log(f"  {len(checksums)} jars in {dest}")
    return [dest / name for name in sorted(checksums)]


def _missing_fix(name: str, jars_dir: Path) -> str:
    """How to fill a cache that is not there: a checkout's `make setup` fills its own
    `var/jars`, which a command run from the checkout without `ACKFOLD_VAR_DIR` (as `make`
    sets it) does not look in."""
    here = Path.cwd() / "var" / "jars"
    if here.resolve() != jars_dir.resolve() and (here / name / MANIFEST).is_file():
        return (
            f"this directory's var/jars has them (a checkout's `make setup`): set "
            f"ACKFOLD_VAR_DIR={here.parent} (or ACKFOLD_JARS_DIR={here}), as make does"
        )
    return (
        "run `ackfold setup` to download them there from Maven Central (the cache is "
        "`jars_dir`, ACKFOLD_JARS_DIR, else <var_dir>/jars; `make setup` fills a checkout's "
        "var/jars, which commands run through make use)"
    )


def bundle_jars(name: str, jars_dir: Path) -> list[Path]:
    """The verified jars of bundle `name`, or `JarsError` saying how to fix the cache."""
    bundle = BUNDLES[name]
    dest = jars_dir / name
    manifest_path = dest / MANIFEST
    if not manifest_path.is_file():
        raise JarsError(f"The {name} jars are not in {dest}: {_missing_fix(name, jars_dir)}.")
    try:
        manifest = json.loads(manifest_path.read_text())
        checksums: dict[str, str] = manifest["jars"]
        artifacts = tuple(manifest["artifacts"])
    except (ValueError, KeyError, TypeError):
        raise JarsError(f"{manifest_path} is corrupt: {FIX}.") from None
    if artifacts != bundle.artifacts:
        raise JarsError(
            f"The {name} jars in {dest} are {', '.join(artifacts)}, but this ackfold pins "
            f"{', '.join(bundle.artifacts)}: {FIX}."
        )
    paths = []
    for jar, expected in sorted(checksums.items()):
        path = dest / jar
        if not path.is_file() or _sha256(path) != expected:
            raise JarsError(f"{path} is missing or corrupt: {FIX}.")
        paths.append(path)
    return paths


def setup(
    jars_dir: Path, names: list[str] | None = None, log: Callable[[str], None] = print
) -> None:
    """Resolve the base bundles (or those named) into the cache."""
    for name in names or list(BASE_BUNDLES):
        resolve(BUNDLES[name], jars_dir, log)


def store_bundle(warehouse: str) -> Bundle | None:
    """The Hadoop connector bundle for `warehouse`'s object store; None for a local one.

    Example:
        >>> store_bundle("gs://bucket/warehouse").name, store_bundle("/srv/warehouse")
        ('gcs', None)
    """
    from ackfold.ledger.storage.store import store_kind

    return STORE_BUNDLES.get(store_kind(warehouse))
