"""A setup that could lose a commit is refused before its first commit, with an error that
names the setting; `ackfold doctor` says per table which protocol commits it, and whether
the setup is safe."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ackfold import LedgerWriter
from ackfold.ledger.commits.lease import LedgerLease
from ackfold.ledger.errors import SparkCommitRefused, UnsafeStore
from ackfold.ledger.schema.tables import ROOTS, TABLES, Ledger
from ackfold.ledger.storage.protocol import refuse_spark_commit, require_conditional_writes
from ackfold_dev.ports import free_port
from ackfold_dev.s3 import ACCESS_KEY, REGION, SECRET_KEY, LocalS3
from tests.s3.conftest import warehouse_of

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from synth import Synthetic


@pytest.fixture
def careless_s3(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    """An S3-compatible server that ignores `If-None-Match` (as stores without conditional
    writes do): moto's real S3 app, the header dropped before it; the environment points
    at it. Yields its endpoint."""
    from werkzeug.serving import make_server

    from ackfold_dev.s3_app import make_app

    moto = make_app(None)

    def ignoring(environ: dict[str, Any], start_response: Any) -> Any:
        environ.pop("HTTP_IF_NONE_MATCH", None)
        return moto(environ, start_response)

    port = free_port()
    server = make_server("127.0.0.1", port, ignoring, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    endpoint = f"http://127.0.0.1:{port}"
    for key, value in {
        "AWS_ENDPOINT": endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": REGION, "AWS_ALLOW_HTTP": "true",
    }.items():  # fmt: skip
        monkeypatch.setenv(key, value)
    import boto3

    boto3.client("s3", endpoint_url=endpoint, region_name=REGION).create_bucket(Bucket="careless")
    try:
        yield endpoint
    finally:
        server.shutdown()
        thread.join()


def test_a_store_ignoring_conditional_writes_is_refused_before_any_commit(
    careless_s3: str,
) -> None:
    warehouse = "s3a://careless/warehouse"
    with pytest.raises(UnsafeStore, match=r"\(AWS_ENDPOINT\) did not refuse a second create"):
        LedgerWriter(warehouse).create()
    with pytest.raises(UnsafeStore, match="answered 200, not 412"):
        LedgerLease(warehouse).holder()
    import boto3

    client = boto3.client("s3", endpoint_url=careless_s3, region_name=REGION)
    listed = client.list_objects_v2(Bucket="careless", Prefix="warehouse/")
    keys = [o["Key"] for o in listed.get("Contents", [])]
    assert not [k for k in keys if "_delta_log" in k], keys  # nothing was committed


def test_doctor_says_unsafe_for_that_store(
    careless_s3: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from ackfold.cli.main import run

    assert run(["doctor", "--warehouse", "s3a://careless/warehouse"]) == 1
    out = capsys.readouterr().out
    assert "UNSAFE: the S3 store at " + careless_s3 + " (AWS_ENDPOINT)" in out


def test_init_refuses_that_store_naming_the_setting(
    careless_s3: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from ackfold.cli.main import run

    assert run(["init", "--warehouse", "s3a://careless/ledger"]) == 1
    assert "(AWS_ENDPOINT) did not refuse" in capsys.readouterr().err


def test_doctor_on_the_local_s3_server_says_each_protocol_and_safe(
    s3: LocalS3, bucket: str, s3_env: dict[str, str], capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    from ackfold.cli.main import run

    monkeypatch.setenv("AWS_S3_LOCKING_PROVIDER", "dynamodb")
    assert run(["doctor", "--warehouse", warehouse_of(bucket, "s3a")]) == 0
    out = capsys.readouterr().out
    assert f"delta-rs: s3://{bucket}/warehouse" in out
    assert "AWS_SECRET_ACCESS_KEY=***" in out
    assert s3_env["AWS_SECRET_ACCESS_KEY"] not in out
    assert "a second create with If-None-Match: * was refused" in out
    for table in TABLES:
        assert f"\n{table} " in out
    roots = next(line for line in out.splitlines() if line.startswith("roots "))
    assert roots.endswith("conditional create of the next log file (S3: If-None-Match: *)")
    assert "AWS_S3_LOCKING_PROVIDER is set and ignored" in out
    assert out.rstrip().endswith("safe: one commit protocol per table, every writer at once")


def test_doctor_on_a_local_warehouse(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ackfold.cli.main import run

    assert run(["doctor", "--warehouse", str(tmp_path)]) == 0
    assert "atomic create of the next log file" in capsys.readouterr().out


def test_doctor_refuses_a_store_it_does_not_support(capsys: pytest.CaptureFixture[str]) -> None:
    from ackfold.cli.main import run

    assert run(["doctor", "--warehouse", "hdfs://namenode/warehouse"]) == 1
    assert "UNSAFE: hdfs://namenode/warehouse: ackfold supports" in capsys.readouterr().out


def test_a_spark_commit_to_a_ledger_table_on_an_object_store_is_refused() -> None:
    with pytest.raises(SparkCommitRefused, match=r"roots under s3a://b/w.*set `warehouse`"):
        refuse_spark_commit("s3a://b/w", ROOTS)
    refuse_spark_commit("/srv/warehouse", ROOTS)  # a local file system: both are atomic
    # The synthetic ledger (benchmarks) is written by Spark: refused before Spark is asked.
    with pytest.raises(SparkCommitRefused):
        Synthetic(roots=1).write(None, Ledger("s3a://b/w"))  # type: ignore[arg-type]


def test_the_probe_runs_once_per_store(s3: LocalS3, bucket: str, s3_env: dict[str, str]) -> None:
    before = s3.log_file.read_text().count("_ackfold_probe")
    require_conditional_writes(warehouse_of(bucket), s3_env)
    require_conditional_writes(warehouse_of(bucket, "s3a"), s3_env)
    after = s3.log_file.read_text().count("_ackfold_probe")
    assert after - before == 3  # two creates and a delete, once
