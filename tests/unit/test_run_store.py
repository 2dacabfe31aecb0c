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


def test_an_object_store_asks_which_options_it_knows_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from obstore import store as obstores

    from ackfold.ledger.storage import store as stores

    built: list[dict[str, str]] = []
    real = obstores.from_url

    def counting(url: str, **kwargs: object) -> object:
        built.append(dict(kwargs.get("config") or {}))  # type: ignore[call-overload]
        return real(url, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(obstores, "from_url", counting)
    options = {"AWS_ENDPOINT": "http://127.0.0.1:9", "AWS_REGION": "eu-west-1", "HOME": "/"}
    location = "s3://probe-once/warehouse"
    stores.object_store_of(location, options)
    first = len(built)
    assert first == len(options) + 1  # each option asked, then the store
    built.clear()
    stores.object_store_of(location, options)
    # The second store is built at once, with the options it knows and not HOME.
    assert built == [{"AWS_ENDPOINT": "http://127.0.0.1:9", "AWS_REGION": "eu-west-1"}]


def test_a_file_system_is_kept_per_object_store_location_and_options_and_local_ones_are_not(
    tmp_path: Path,
) -> None:
    from ackfold.ledger.storage.store import file_system

    bucket = "s3://kept-file-systems/warehouse"
    one = file_system(bucket, {"AWS_REGION": "a"})
    assert file_system(bucket, {"AWS_REGION": "a"}) is one
    assert file_system(bucket, {"AWS_REGION": "b"}) is not one
    assert file_system(bucket + "/other", {"AWS_REGION": "a"}) is not one
    local = file_system(str(tmp_path), None)
    assert file_system(str(tmp_path), None) is not local
    (tmp_path / "f.txt").write_text("read")
    with local.open_input_file("f.txt") as handle:
        assert handle.read() == b"read"
