"""The project's local S3 APIs honour what ackfold relies on from S3, each as S3 does:
moto (`ackfold_dev.s3`, the s3 tier's and `ackfold s3`'s) and versitygw
(`ackfold_dev.versitygw`, the soak's). Of two creates of one key with `If-None-Match: *`,
exactly one gets 200 and the other 412, however they race; a listing starts after its
key; ackfold's own probe passes; racing LedgerWriters lose no commit; and what the
server answered survives a restart, a SIGKILL too. Plain Python: no JVM."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from ackfold_dev.s3 import LocalS3
from ackfold_dev.versitygw import LocalVersityS3
from tests.racing_writers import race_writers, table_rows

SERVERS = {"moto": LocalS3, "versitygw": LocalVersityS3}


def kind_of(s3: LocalS3) -> str:
    return next(kind for kind, cls in SERVERS.items() if type(s3) is cls)


@pytest.fixture(scope="session")
def versity(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalVersityS3]:
    with LocalVersityS3(tmp_path_factory.mktemp("versitygw"), bucket=None) as server:
        yield server


@pytest.fixture(params=SERVERS)
def s3(request: pytest.FixtureRequest, s3: LocalS3) -> LocalS3:
    """Here, each of the worker's running servers: moto (the tier's `s3`) and versitygw;
    the tier's `bucket` and `s3_env` are then on each."""
    return s3 if request.param == "moto" else request.getfixturevalue("versity")


def _create(client: Any, bucket: str, key: str, body: bytes) -> int:
    try:
        client.put_object(Bucket=bucket, Key=key, Body=body, IfNoneMatch="*")
    except ClientError as exc:
        return int(exc.response["ResponseMetadata"]["HTTPStatusCode"])
    return 200


def test_a_second_conditional_create_gets_412(s3: LocalS3, bucket: str) -> None:
    client = s3.client()
    key = "t/_delta_log/00000000000000000001.json"
    assert _create(client, bucket, key, b"first") == 200
    assert _create(client, bucket, key, b"second") == 412
    assert client.get_object(Bucket=bucket, Key=key)["Body"].read() == b"first"


def test_racing_conditional_creates_have_exactly_one_winner(s3: LocalS3, bucket: str) -> None:
    """Eight threads create each of 30 new keys at once: one 200 per key, 412 for the rest,
    and the object holds the winner's body."""
    writers, keys = 8, 30
    results: dict[tuple[int, int], int] = {}
    barrier = threading.Barrier(writers)

    def writer(n: int) -> None:
        client = s3.client()
        barrier.wait()
        for k in range(keys):
            body = f"writer {n}".encode()
            results[(n, k)] = _create(client, bucket, f"race/{k:03d}", body)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    client = s3.client()
    for k in range(keys):
        codes = [results[(n, k)] for n in range(writers)]
        assert sorted(codes) == [200] + [412] * (writers - 1), (k, codes)
        body = client.get_object(Bucket=bucket, Key=f"race/{k:03d}")["Body"].read()
        assert body == f"writer {codes.index(200)}".encode()


def test_a_listing_starts_after_its_key(s3: LocalS3, bucket: str) -> None:
    """delta-rs lists a log from the version it has (`start-after`); a server that ignores
    it makes old versions look new (the GCS and Azure emulators needed a proxy for it)."""
    client = s3.client()
    for v in range(5):
        client.put_object(Bucket=bucket, Key=f"t/_delta_log/{v:020d}.json", Body=b"{}")
    listed = client.list_objects_v2(
        Bucket=bucket, Prefix="t/_delta_log/", StartAfter=f"t/_delta_log/{2:020d}.json"
    )
    assert [o["Key"] for o in listed["Contents"]] == [f"t/_delta_log/{v:020d}.json" for v in (3, 4)]


def test_ackfolds_probe_passes(bucket: str, s3_env: dict[str, str]) -> None:
    """`require_conditional_writes` (what every run on S3 checks once) accepts it, and
    leaves no probe object behind."""
    from ackfold.ledger.storage.protocol import require_conditional_writes
    from ackfold.ledger.storage.store import s3_client, storage_options

    warehouse = f"s3://{bucket}/warehouse"
    require_conditional_writes(warehouse, storage_options(warehouse))
    listed = s3_client(storage_options(warehouse) or {}).list_objects_v2(Bucket=bucket)
    assert listed.get("KeyCount", 0) == 0, listed.get("Contents")


def test_racing_ledger_writers_lose_no_commit(
    s3: LocalS3, bucket: str, s3_env: dict[str, str]
) -> None:
    """Four LedgerWriters append to one ledger at once through delta-rs: some commits meet
    another's (412) and are retried on the next version; every row is there, and each
    version was committed once."""
    from deltalake import DeltaTable

    from ackfold import LedgerWriter
    from ackfold.ledger.schema.tables import ACK_EVENTS, ROOTS
    from ackfold.ledger.storage.store import storage_options

    warehouse = f"s3://{bucket}/warehouse"
    LedgerWriter(warehouse).create([ROOTS, ACK_EVENTS])
    writers, batches, size = 4, 6, 3
    race_writers(warehouse, writers=writers, batches=batches, size=size)
    assert table_rows(f"{warehouse}/{ROOTS}") == writers * batches * size
    assert table_rows(f"{warehouse}/{ACK_EVENTS}") == 2 * writers * batches * size
    uri = f"{warehouse}/{ROOTS}"
    history = DeltaTable(uri, storage_options=storage_options(uri)).history()
    assert sorted(h["version"] for h in history) == list(range(1 + writers * batches))
    if kind_of(s3) == "moto":  # versitygw logs no request (`--quiet`); moto logs each
        raced = [
            line for line in s3.log_file.read_text().splitlines()
            if f"PUT /{bucket}/" in line and "/_delta_log/" in line and '" 412 ' in line
        ]  # fmt: skip
        assert raced, "no commit met another's: the test did not race"


@pytest.mark.parametrize("crash", [False, True], ids=["stopped", "killed"])
@pytest.mark.parametrize("kind", SERVERS)
def test_what_it_answered_survives_a_restart(
    tmp_path: Path, kind: str, crash: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Objects, a delete, a multipart upload and a Delta table's commits, all still there
    (and the delete still done) once the server is started again on its directory: moto
    replays its journal, versitygw keeps files."""
    from deltalake import write_deltalake
    from pyarrow import table

    from ackfold.ledger.storage.store import storage_options

    server = SERVERS[kind](tmp_path, bucket="kept")
    with server:
        for key, value in server.env().items():
            monkeypatch.setenv(key, value)
        client = server.client()
        client.put_object(Bucket="kept", Key="a", Body=b"1")
        client.put_object(Bucket="kept", Key="b", Body=b"2")
        client.delete_object(Bucket="kept", Key="a")
        upload = client.create_multipart_upload(Bucket="kept", Key="big")["UploadId"]
        part = client.upload_part(
            Bucket="kept", Key="big", UploadId=upload, PartNumber=1, Body=b"x" * 100
        )
        client.complete_multipart_upload(
            Bucket="kept", Key="big", UploadId=upload,
            MultipartUpload={"Parts": [{"ETag": part["ETag"], "PartNumber": 1}]},
        )  # fmt: skip
        uri = "s3://kept/t"
        for n in range(3):
            write_deltalake(uri, table({"n": [n]}), mode="append",
                            storage_options=storage_options(uri))  # fmt: skip
        if crash:
            server.kill()
    with SERVERS[kind](tmp_path, port=server.port, bucket="kept") as again:
        client = again.client()
        keys = sorted(o["Key"] for o in client.list_objects_v2(Bucket="kept")["Contents"])
        assert [k for k in keys if not k.startswith("t/")] == ["b", "big"]
        assert client.get_object(Bucket="kept", Key="big")["Body"].read() == b"x" * 100
        assert table_rows(uri) == 3
        assert _create(client, "kept", "t/_delta_log/00000000000000000002.json", b"{}") == 412


def test_doctests() -> None:
    import doctest

    from ackfold.ledger.storage import store
    from ackfold_dev import s3, s3_app, versitygw

    for module in (s3, s3_app, store, versitygw):
        assert doctest.testmod(module).failed == 0, module.__name__
