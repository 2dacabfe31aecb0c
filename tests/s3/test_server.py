"""The local S3 API honours conditional writes as S3 does: of two creates of one key with
`If-None-Match: *`, exactly one gets 200 and the other 412, however they race; and what it
answered survives a restart, a SIGKILL too."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from ackfold_dev.s3 import LocalS3


def _create(client: object, bucket: str, key: str, body: bytes) -> int:
    try:
        client.put_object(Bucket=bucket, Key=key, Body=body, IfNoneMatch="*")  # type: ignore[attr-defined]
    except ClientError as exc:
        return int(exc.response["ResponseMetadata"]["HTTPStatusCode"])
    return 200


def test_a_second_conditional_create_gets_412(s3: LocalS3, bucket: str) -> None:
    client = s3.client()
    assert _create(client, bucket, "_delta_log/00000000000000000001.json", b"first") == 200
    assert _create(client, bucket, "_delta_log/00000000000000000001.json", b"second") == 412
    body = client.get_object(Bucket=bucket, Key="_delta_log/00000000000000000001.json")["Body"]
    assert body.read() == b"first"


def test_racing_conditional_creates_have_exactly_one_winner(s3: LocalS3, bucket: str) -> None:
    """Eight threads create each of 30 keys at once: one 200 per key, 412 for the rest, and
    the object holds the winner's body."""
    writers, keys = 8, 40
    results: dict[tuple[int, int], int] = {}
    barrier = threading.Barrier(writers)

    def writer(n: int) -> None:
        client = s3.client()
        barrier.wait()
        for k in range(keys):
            results[(n, k)] = _create(client, bucket, f"race/{k:03d}", f"writer {n}".encode())

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    client = s3.client()
    for k in range(keys):
        codes = [results[(n, k)] for n in range(writers)]
        assert sorted(codes) == [200] + [412] * (writers - 1), (k, codes)
        winner = codes.index(200)
        body = client.get_object(Bucket=bucket, Key=f"race/{k:03d}")["Body"].read()
        assert body == f"writer {winner}".encode()


@pytest.mark.parametrize("crash", [False, True], ids=["stopped", "killed"])
def test_what_it_answered_survives_a_restart(tmp_path: Path, crash: bool) -> None:
    server = LocalS3(tmp_path, bucket="kept")
    with server:
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
        if crash:
            server.kill()
    with LocalS3(tmp_path, port=server.port, bucket="kept") as again:
        client = again.client()
        keys = [o["Key"] for o in client.list_objects_v2(Bucket="kept")["Contents"]]
        assert keys == ["b", "big"]
        assert client.get_object(Bucket="kept", Key="big")["Body"].read() == b"x" * 100
        assert _create(client, "kept", "b", b"again") == 412


def test_doctests() -> None:
    import doctest

    from ackfold.ledger.storage import store
    from ackfold_dev import s3, s3_app

    for module in (s3, s3_app, store):
        assert doctest.testmod(module).failed == 0, module.__name__
