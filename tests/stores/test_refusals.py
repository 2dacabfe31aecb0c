"""A GCS or ADLS store that does not make a create atomic is refused before the first
commit, naming the variable that points at it; `ackfold doctor` says per table how each
store commits it, with the store's own variables (secrets masked); and Spark is refused a
Delta log store that would not meet delta-rs's commits atomically."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, unquote

import obstore
import pytest

from ackfold import LedgerWriter
from ackfold.config import load_settings
from ackfold.ledger.commits.lease import LedgerLease
from ackfold.ledger.errors import SparkCommitRefused, UnsafeStore
from ackfold.ledger.schema.tables import TABLES
from ackfold.ledger.storage.protocol import refuse_unsafe_log_store, require_conditional_writes
from ackfold.ledger.storage.store import object_store_of
from ackfold.spark.conf import spark_conf
from ackfold_dev.azurite import ACCOUNT, shared_key
from ackfold_dev.emulated import EmulatedStore
from ackfold_dev.ports import free_port
from ackfold_dev.store_proxy import Request, StoreProxy

PRECONDITIONS = ("if-none-match", "x-goog-if-generation-match")


@pytest.fixture
def careless(store: EmulatedStore, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The module's store behind a proxy that drops the create-if-absent headers, as a
    store without conditional writes behaves; the environment points at it. Yields the
    endpoint variable's value."""
    from http.server import ThreadingHTTPServer

    def careless_rewrite(proxy: StoreProxy, request: Request) -> Any:
        dropped = [request.headers.pop(header, None) for header in PRECONDITIONS]
        request.headers["host"] = f"127.0.0.1:{store.port}"  # the store proxy's own
        if store.kind == "azure" and any(dropped):  # signed with it: sign again without
            query = {k: v[0] for k, v in parse_qs(request.query).items()}
            signed = request.headers | {"content-length": str(len(request.body))}
            request.headers["authorization"] = shared_key(
                request.method, request.path, query, signed
            )
        return None

    port = free_port()
    proxy = StoreProxy(store.port, careless_rewrite)
    server = ThreadingHTTPServer(("127.0.0.1", port), proxy.handler())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    endpoint = f"http://127.0.0.1:{port}"
    env = store.env()
    if store.kind == "gcs":
        account = store.directory / "careless-account.json"
        account.write_text(store.service_account.read_text().replace(store.endpoint_url, endpoint))
        env["GOOGLE_SERVICE_ACCOUNT"] = str(account)
    else:
        env["AZURE_STORAGE_ENDPOINT"] = endpoint = f"{endpoint}/{ACCOUNT}"
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    try:
        yield endpoint
    finally:
        server.shutdown()
        thread.join()


def test_a_store_without_atomic_creates_is_refused_before_any_commit(
    store: EmulatedStore, careless: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from ackfold.cli.main import run

    warehouse = store.warehouse("careless")
    variable = "GOOGLE_SERVICE_ACCOUNT" if store.kind == "gcs" else "AZURE_STORAGE_ENDPOINT"
    with pytest.raises(UnsafeStore, match=rf"at {careless} \({variable}\) did not refuse"):
        LedgerWriter(warehouse).create()
    with pytest.raises(UnsafeStore, match="it stored the second one"):
        LedgerLease(warehouse).holder()
    assert run(["init", "--warehouse", warehouse]) == 1
    assert f"({variable}) did not refuse" in capsys.readouterr().err
    assert run(["doctor", "--warehouse", warehouse]) == 1
    assert "UNSAFE: the " in capsys.readouterr().out
    listed = obstore.list(object_store_of(warehouse, store.env()), "careless/").collect()
    assert not [o for o in listed if "_delta_log" in o["path"]], listed  # nothing committed


def test_doctor_on_each_store_says_each_protocol_and_safe(
    store: EmulatedStore, warehouse: str, store_env: dict[str, str],
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    from ackfold.cli.main import run

    assert run(["doctor", "--warehouse", warehouse]) == 0
    out = capsys.readouterr().out
    if store.kind == "gcs":
        assert f"endpoint: {store.endpoint_url} (GOOGLE_SERVICE_ACCOUNT)" in out
        assert "ifGenerationMatch=0 (x-goog-if-generation-match: 0) was refused" in out
        assert "gcs-connector:4.0.0:shaded" in out
        assert "GCSLogStore" in out
        protocol = "(GCS: ifGenerationMatch=0)"
    else:
        assert "AZURE_STORAGE_ACCOUNT_KEY=***" in out
        assert store_env["AZURE_STORAGE_ACCOUNT_KEY"] not in out
        assert "If-None-Match: * was refused" in out
        assert "hadoop-azure:3.4.2" in out
        assert "AzureLogStore" in out
        protocol = "(ADLS: If-None-Match: *)"
    for table in TABLES:
        assert f"\n{table} " in out
    roots = next(line for line in out.splitlines() if line.startswith("roots "))
    assert roots.endswith(protocol)
    assert out.rstrip().endswith("safe: one commit protocol per table, every writer at once")


def test_the_probe_runs_once_per_store(
    store: EmulatedStore, warehouse: str, store_env: dict[str, str]
) -> None:
    container = f"probe-{uuid.uuid4().hex[:8]}"
    store.create_container(container)

    def creates() -> int:
        lines = unquote(store.log_file.read_text()).splitlines()
        return sum('"PUT ' in line and "/_ackfold_probe/" in line for line in lines)

    before = creates()
    require_conditional_writes(store.warehouse("w", container), store_env)
    require_conditional_writes(store.warehouse("elsewhere", container), store_env)
    assert creates() - before == 2  # two creates, once per store and container


@pytest.mark.parametrize(
    ("warehouse", "setting", "chosen"),
    [
        ("gs://b/w", "spark.delta.logStore.gs.impl", "io.delta.storage.HDFSLogStore"),
        ("abfss://c@a.dfs.core.windows.net/w", "spark.delta.logStore.abfss.impl",
         "io.delta.storage.S3SingleDriverLogStore"),
        ("gs://b/w", "spark.delta.logStore.class", "org.example.MyLogStore"),
    ],
)  # fmt: skip
def test_spark_is_refused_a_log_store_that_would_not_meet_delta_rs(
    warehouse: str, setting: str, chosen: str
) -> None:
    settings = load_settings(warehouse=warehouse, spark={"conf": {setting: chosen}})
    with pytest.raises(SparkCommitRefused, match=rf"`{setting}` is {chosen}.*Remove `{setting}`"):
        spark_conf(settings, with_jars=False)
    refuse_unsafe_log_store(warehouse, {setting: "io.delta.storage." + (
        "GCSLogStore" if warehouse.startswith("gs") else "AzureLogStore")})  # fmt: skip
    # On S3 Spark commits only the derived tables, under the lease: not checked.
    refuse_unsafe_log_store("s3a://b/w", {"spark.delta.logStore.s3a.impl": chosen})
