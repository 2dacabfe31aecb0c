"""The stores tier: GCS and ADLS on their emulators (fake-gcs-server, Azurite), each behind
`ackfold_dev.store_proxy` on a free loopback port, one server per store and module, a
fresh warehouse per test. Plain Python, but for the Spark tests (`test_spark.py`) and the
no-commit-lost test's Spark app."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ackfold_dev.azurite import LocalAzure
from ackfold_dev.emulated import EmulatedStore
from ackfold_dev.gcs import LocalGCS

KINDS = {"gcs": LocalGCS, "azure": LocalAzure}


def new_store(kind: str, directory: Path) -> EmulatedStore:
    """A local store of `kind`, not started."""
    return KINDS[kind](directory)


@pytest.fixture(scope="module", params=sorted(KINDS))
def store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EmulatedStore]:
    with new_store(request.param, tmp_path_factory.mktemp(request.param)) as server:
        yield server


@pytest.fixture
def store_env(store: EmulatedStore, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The process's variables pointed at the store, as a user would set them."""
    env = store.env()
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


@pytest.fixture
def warehouse(store: EmulatedStore, store_env: dict[str, str]) -> str:
    """A warehouse of its own on the module's store."""
    return store.warehouse(f"w-{uuid.uuid4().hex[:12]}")
