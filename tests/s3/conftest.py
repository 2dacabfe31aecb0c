"""The s3 tier: a local S3 API (moto's server behind `ackfold_dev.s3_app`) on a free
loopback port, one per worker, and a bucket per test. No JVM."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from ackfold_dev.s3 import LocalS3


@pytest.fixture(scope="session")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalS3]:
    """One server for the worker's s3 modules (the tier is one xdist group): each start is
    a Python process that imports moto, 2 to 3 CPU-seconds, and the tier ran 9 of them
    (27 with the install tier's two runs of it). What a test reads of the server is its
    own bucket's: its objects, its journal lines, its requests in the log."""
    with LocalS3(tmp_path_factory.mktemp("s3"), bucket=None) as server:
        yield server


@pytest.fixture
def bucket(s3: LocalS3) -> str:
    """A new bucket of its own, on the module's server."""
    name = f"t-{uuid.uuid4().hex[:12]}"
    s3.client().create_bucket(Bucket=name)
    return name


@pytest.fixture
def s3_env(s3: LocalS3, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The process's AWS variables pointed at the server, as a user would set them."""
    env = s3.env()
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


def warehouse_of(bucket: str, scheme: str = "s3") -> str:
    return f"{scheme}://{bucket}/warehouse"
