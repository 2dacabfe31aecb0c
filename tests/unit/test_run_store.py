"""The run's store (`ackfold.ledger.storage.run_store.Store`, issue 59): resolved once,
its clients made once, current for a run's deep reads, and handed to the writer, the
lease and the fence."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from ackfold import LedgerWriter
from ackfold.ledger.commits.fence import Fence
from ackfold.ledger.commits.lease import LedgerLease
from ackfold.ledger.storage import run_store
from ackfold.ledger.storage.run_store import Store, options_for, store_for, using


def test_a_store_is_resolved_from_the_environment_once() -> None:
    env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_REGION": "eu-west-1", "HOME": "/"}
    store = Store.at("s3a://lake/warehouse/", environ=env)
    assert (store.location, store.kind, store.uri) == (
        "s3a://lake/warehouse", "s3", "s3://lake/warehouse",
    )  # fmt: skip
    assert store.storage_options == {k: v for k, v in env.items() if k.startswith("AWS_")}
    assert store.endpoint == ("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    assert store.is_object_store
    assert not Store.at("/srv/w").is_object_store
    # A copy: a caller cannot change the run's options.
    store.storage_options["AWS_REGION"] = "us-east-1"  # type: ignore[index]
    assert store.storage_options["AWS_REGION"] == "eu-west-1"  # type: ignore[index]


def test_a_store_makes_each_client_once_and_pickles_without_them() -> None:
    store = Store.at("s3://lake/w", options={"AWS_ENDPOINT_URL": "http://127.0.0.1:9"})
    client = store.s3_client()
    assert store.s3_client() is client
    again = pickle.loads(pickle.dumps(store))
    assert again == store
    assert again.s3_client() is not client  # made anew where it was unpickled


def test_the_protocol_is_checked_once_per_store(monkeypatch: pytest.MonkeyPatch) -> None:
    from ackfold.ledger.storage import protocol

    checks: list[str] = []
    monkeypatch.setattr(
        protocol, "require_conditional_writes", lambda location, *_, **__: checks.append(location)
    )
    store = Store.at("s3://lake/w", options={})
    for _ in range(3):
        store.require_conditional_writes()
    assert checks == ["s3://lake/w"]


def test_the_run_store_is_current_for_paths_under_it(tmp_path: Path) -> None:
    store = Store.at(str(tmp_path), options={"AWS_REGION": "x"})  # options a local path lacks
    assert store_for(f"{tmp_path}/roots") is not store
    with using(store):
        assert store_for(f"{tmp_path}/roots") is store
        assert options_for(f"{tmp_path}/roots") == {"AWS_REGION": "x"}
        assert store_for(str(tmp_path.parent)) is not store  # not under it
        writer = LedgerWriter(tmp_path)
        lease = LedgerLease(str(tmp_path))
        fence = Fence(str(tmp_path), epoch=1)
        assert writer.store is lease.store is fence.store is store
    assert run_store._current.__dict__["stores"] == []
    # Given options resolve a store of their own, as before.
    assert LedgerWriter(tmp_path, storage_options={}).store is not store
