"""Spark on each store, in one classic session holding the three Hadoop connectors (S3A,
the GCS connector, ABFS: the jars that `ackfold.spark.jars` resolves for a warehouse on
each): a tracked app's micro-batch (its ledger rows committed by the driver through
delta-rs), Spark reading the ledger back through the connector, the Spark engine's
reconcile (Spark reads the ledger, streams from the store, and commits `root_state` with
Delta's log store of the scheme), then the embedded engine folding the next events after
it (invariant 15). The stores are the local S3, GCS and Azure APIs."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from ackfold import LedgerWriter, Tracker
from ackfold.config import Settings, load_settings
from ackfold.ledger.errors import UnsafeSparkCommits
from ackfold.ledger.schema.tables import ACK_EVENTS, ROOT_STATE, ROOTS, Ledger
from ackfold.runs.reconcile import run_reconcile
from ackfold.spark.jars import STORE_BUNDLES, resolve
from ackfold.track.stage import StageTracker
from ackfold_dev.azurite import LocalAzure
from ackfold_dev.gcs import LocalGCS
from ackfold_dev.s3 import LocalS3
from tests.conftest import JARS_DIR
from tests.spark_sessions import SparkSessions

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from arrow_ledger import ArrowLedger

STORES = ("s3", "gcs", "azure")


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("spark-stores")
    made = {
        "s3": LocalS3(base / "s3", bucket="ackfold"),
        "gcs": LocalGCS(base / "gcs", in_memory=True),  # directory placeholders kept
        "azure": LocalAzure(base / "azure"),
    }
    with pytest.MonkeyPatch.context() as env:
        try:
            for server in made.values():
                server.start()
                for key, value in server.env().items():
                    env.setenv(key, value)
            yield made
        finally:
            for server in made.values():
                server.stop()


@pytest.fixture(scope="module")
def session(
    servers: dict[str, Any], spark_sessions: SparkSessions, tmp_path_factory: pytest.TempPathFactory
) -> Any:
    """One JVM for the three stores: each connector's jars and each server's settings. The
    worker's shared session, started without them, is stopped first (`SparkSessions`)."""
    from ackfold.spark import spark_jars

    var = tmp_path_factory.mktemp("spark-stores-var")
    jars = spark_jars(load_settings(var_dir=var, jars_dir=JARS_DIR))
    for bundle in STORE_BUNDLES.values():
        jars += [str(path) for path in resolve(bundle, JARS_DIR)]
    by_name = {Path(jar).name: jar for jar in jars}  # the connectors share a few
    conf = {"spark.jars": ",".join(by_name.values())}
    for server in servers.values():
        conf |= server.spark_conf()
    settings = load_settings(
        var_dir=var, jars_dir=JARS_DIR, warehouse=servers["gcs"].warehouse("session"),
        spark={"master": "local[2]", "shuffle_partitions": 2, "conf": conf},
    )  # fmt: skip
    spark = spark_sessions.get(settings, app_name="ackfold-stores")
    jvm_jars = spark.sparkContext.getConf().get("spark.jars", "").split(",")
    assert set(by_name.values()) <= set(jvm_jars), "a JVM without the stores' connectors"
    return spark


@pytest.mark.parametrize("kind", STORES)
def test_a_tracked_app_and_the_spark_engine_on_each_store(
    kind: str, servers: dict[str, Any], session: Any, tmp_path: Path
) -> None:
    server = servers[kind]
    warehouse = server.warehouse(f"w-{uuid.uuid4().hex[:8]}")
    ledger = Ledger(warehouse)

    # A tracked app's micro-batch: rows to the driver, committed by delta-rs.
    spout = StageTracker("orders", "spout", ledger=ledger)
    messages = session.createDataFrame([("m-1", "a b"), ("m-2", "c")], "id string, text string")
    out = spout.spout(messages, message_id="id", source="sqs", source_queue="orders")
    sink = StageTracker("orders", "sink", ledger=ledger)
    spout.write_batch(0, roots=out.roots, events=[out.events, sink.ack(out.tuples)])
    # Spark reads the ledger through the store's connector.
    assert session.read.format("delta").load(ledger.path(ROOTS)).count() == 2
    assert session.read.format("delta").load(ledger.path(ACK_EVENTS)).count() == 4

    # The Spark engine folds it, and the synthetic ledger's roots, into root_state.
    synthetic = ArrowLedger(roots=200)
    writer = LedgerWriter(warehouse)
    synthetic.write(writer)
    now = synthetic.end + timedelta(hours=1)
    settings = load_settings(var_dir=tmp_path, warehouse=warehouse, jars_dir=JARS_DIR)
    expected = {status: n for status, n in synthetic.expected().items() if n}
    expected["completed"] = expected.get("completed", 0) + 2
    if kind == "s3":
        # Spark's S3SingleDriverLogStore is no put-if-absent: refused there (issue 55).
        with pytest.raises(UnsafeSparkCommits, match="S3SingleDriverLogStore"):
            run_reconcile(settings, now=now, engine="spark", spark=session)
        first = run_reconcile(settings, now=now, engine="embedded")
    else:
        first = run_reconcile(settings, now=now, engine="spark", spark=session)
    assert first["by_status"] == expected
    folded = session.read.format("delta").load(ledger.path(ROOT_STATE))
    assert folded.count() == sum(expected.values())

    # The embedded engine takes the next events after Spark's run, with the same statuses.
    # (What it reads after a Spark run on an object store, all or only the new events, is
    # the engine-switch work of issue 47.)
    tracker = Tracker("webhooks", clock=lambda: now)
    tracker.ack(tracker.spout("evt-1"), stage="store")
    writer.append(tracker.drain_roots(), tracker.drain())
    second = run_reconcile(settings, now=now, engine="embedded")
    assert second["by_status"] == expected | {"completed": expected["completed"] + 1}


def test_the_shared_session_starts_anew_after_the_stores(
    spark_sessions: SparkSessions, spark_settings: Settings, session: Any, tmp_path: Path
) -> None:
    """The modules after this one get a JVM with ackfold's jars again, not the stores'
    session, and it is reused from then on. The other way, a shared JVM running when the
    stores' session is asked for, is the same step of `SparkSessions.get` (a JVM whose
    jars do not fit is stopped, one with the jars asked for started): not run again
    here, since the suite runs this module first on its worker, where a test that asked
    for the shared session first started a JVM only to stop it (about 20 CPU-seconds).
    Which start-up settings fit a running JVM: `tests/unit/test_spark_sessions.py`."""
    shared = spark_sessions.get(spark_settings)
    assert session.sparkContext._jsc is None, "the stores' JVM still runs"
    jars = shared.sparkContext.getConf().get("spark.jars", "")
    assert "gcs-connector" not in jars
    assert "delta-spark" in jars
    shared.range(3).write.format("delta").save(str(tmp_path / "t"))
    assert shared.read.format("delta").load(str(tmp_path / "t")).count() == 3
    assert spark_sessions.get(spark_settings) is shared
