"""The local GCS and Azure APIs honour creates-if-absent as GCS and Azure do: of two
creates of one object, however they race, exactly one wins; so do a copy and a create
racing for one name (Hadoop's ABFS renames by Copy Blob with If-None-Match: *, Delta
Spark's AzureLogStore commits so); and what the store answered survives a restart,
however busy it was."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import obstore
import pytest
from obstore.exceptions import AlreadyExistsError

from ackfold.ledger.storage.store import object_store_of
from ackfold_dev.azurite import ACCOUNT, LocalAzure
from ackfold_dev.emulated import EmulatedStore, PortTaken
from tests.stores.conftest import new_store


def _create(store: object, key: str, body: bytes) -> bool:
    try:
        obstore.put(store, key, body, mode="create")  # type: ignore[arg-type]
    except AlreadyExistsError:
        return False
    return True


def test_racing_creates_have_exactly_one_winner(
    store: EmulatedStore, warehouse: str, store_env: dict[str, str]
) -> None:
    """Eight writers create each of 30 objects at once: one wins each, and the object
    holds the winner's bytes."""
    writers, keys = 8, 30
    won: dict[tuple[int, int], bool] = {}
    barrier = threading.Barrier(writers)

    def writer(n: int) -> None:
        mine = object_store_of(warehouse, store_env)
        barrier.wait()
        for k in range(keys):
            won[(n, k)] = _create(mine, f"race/{k:03d}", f"writer {n}".encode())

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    reader = object_store_of(warehouse, store_env)
    for k in range(keys):
        winners = [n for n in range(writers) if won[(n, k)]]
        assert len(winners) == 1, (k, winners)
        body = bytes(obstore.get(reader, f"race/{k:03d}").bytes())
        assert body == f"writer {winners[0]}".encode()


def test_a_copy_and_a_create_racing_for_one_name_have_one_winner(
    store: EmulatedStore, warehouse: str, store_env: dict[str, str]
) -> None:
    """A copy without overwrite (GCS: x-goog-copy-source with ifGenerationMatch=0; Azure:
    Copy Blob with If-None-Match: *) against creates of the same name: one winner."""
    client = object_store_of(warehouse, store_env)
    obstore.put(client, "source", b"copied")
    keys, results = 20, []

    def copy(k: int) -> None:
        mine = object_store_of(warehouse, store_env)
        try:
            obstore.copy(mine, "source", f"dest/{k}", overwrite=False)
            results.append((k, "copy", True))
        except AlreadyExistsError:
            results.append((k, "copy", False))

    def create(k: int) -> None:
        won = _create(object_store_of(warehouse, store_env), f"dest/{k}", b"put")
        results.append((k, "put", won))

    for k in range(keys):
        threads = [threading.Thread(target=f, args=(k,)) for f in (copy, create, create)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    for k in range(keys):
        wins = [what for key, what, won in results if key == k and won]
        assert len(wins) == 1, (k, wins)
        body = bytes(obstore.get(client, f"dest/{k}").bytes())
        assert body == (b"copied" if wins == ["copy"] else b"put")


@pytest.mark.parametrize("kind", ["gcs", "azure"])
def test_what_it_answered_survives_a_restart(kind: str, tmp_path: Path) -> None:
    """GCS's emulator keeps objects in files: it survives a SIGKILL. Azurite saves its
    metadata every 5 s and on SIGTERM: it is stopped (`ackfold_dev.azurite`)."""
    server = new_store(kind, tmp_path)
    with server:
        location = server.warehouse("kept")
        client = object_store_of(location, server.env())
        obstore.put(client, "kept/a", b"1", mode="create")
        obstore.put(client, "kept/b", b"2")
        obstore.delete(client, "kept/b")
        if kind == "gcs":
            server.kill()
    with new_store(kind, tmp_path) as again:
        client = object_store_of(again.warehouse("kept"), again.env())
        assert [o["path"] for o in obstore.list(client, "kept/").collect()] == ["kept/a"]
        assert not _create(client, "kept/a", b"again")


@pytest.mark.parametrize("kind", ["gcs", "azure"])
def test_a_port_taken_before_the_start_moves_a_chosen_port_and_refuses_a_given_one(
    kind: str, tmp_path: Path
) -> None:
    """A free port the store chose may be taken by another process before its proxy binds
    it (the suite failed so, once): the store takes another. A port the user gave stays
    theirs, and the error says it is taken."""
    server = new_store(kind, tmp_path / "chosen")
    chosen = server.port
    with socket.socket() as other:
        other.bind(("127.0.0.1", chosen))
        other.listen()
        with server:
            assert server.port != chosen
            client = object_store_of(server.warehouse("moved"), server.env())
            obstore.put(client, "moved/a", b"1", mode="create")
        given = type(server)(tmp_path / "given", port=chosen)
        with pytest.raises(PortTaken, match=rf"port {chosen} on 127.0.0.1 is already taken"):
            given.start()


def test_azure_keeps_every_write_it_answered_across_stops_while_busy(tmp_path: Path) -> None:
    """Writers never pause while the local Azure API is stopped and started, three times:
    every write it answered is there after. Azurite saves its metadata as it closes, and
    dies unsaved on a second SIGTERM; the proxy used to send one just after the group's
    own, and a busy Azurite lost every write since its last save (every 5 s)."""
    server = new_store("azure", tmp_path)
    assert isinstance(server, LocalAzure)
    answered: list[str] = []
    create = {"x-ms-blob-type": "BlockBlob", "If-None-Match": "*"}

    def writer(n: int, stop: int, stopping: threading.Event) -> None:
        k = 0
        while not stopping.is_set():
            name = f"busy/stop{stop}-w{n}-{k:05d}"
            try:
                path = f"/{ACCOUNT}/{server.container}/{name}"
                if server.put(path, b"x" * 20_000, headers=create)[0] == 201:
                    answered.append(name)
            except OSError:  # the store going away: unanswered, it may be anywhere
                pass
            k += 1

    for stop in range(3):
        server.start()
        stopping = threading.Event()
        threads = [threading.Thread(target=writer, args=(n, stop, stopping)) for n in range(6)]
        for thread in threads:
            thread.start()
        time.sleep(1.5)
        server.stop()
        stopping.set()
        for thread in threads:
            thread.join()
    with server:
        client = object_store_of(server.warehouse("busy"), server.env())
        kept = {o["path"] for o in obstore.list(client, "busy/").collect()}
    lost = set(answered) - kept
    assert answered
    assert not lost, f"{len(lost)} of {len(answered)} answered writes lost"
