"""The local Azure store: Azurite's Blob API behind `ackfold_dev.store_proxy`, for the
tests and for trying an `abfs://` warehouse on one machine (`ackfold azure`, `make azure`).

What reaches it:
- **delta-rs** (Rust `object_store`) speaks the Blob API whatever the URI says
  (`abfs://`, `abfss://`, `az://`): `AZURE_STORAGE_ENDPOINT` points it here, with
  Azurite's well-known development account (`devstoreaccount1`) and key.
- **Spark** through Hadoop's ABFS driver (`hadoop-azure` 3.4.2), which reaches a
  flat-namespace account over the Blob endpoint (`fs.azure.fns.account.service.type=BLOB`):
  Azurite has no Data Lake (`dfs`) endpoint, so the hierarchical namespace and the DFS
  API are not what runs here (`docs/decisions/object-stores.md`).

Azurite ignores a listing's `startFrom`, which delta-rs sends to list a table's log from
its last version on: `blob_api` cuts the listing there.

Azurite keeps its metadata in memory and saves it every 5 s and on its first SIGTERM
(`stop`, through the proxy, once no write is in flight): a SIGKILL of it, or a second
SIGTERM while it saves, loses what it answered since its last save, which Azure never
does. Tests that restart the store stop it; they kill the S3 and GCS servers instead.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ackfold_dev.emulated import EmulatedStore, LocalStoreError
from ackfold_dev.store_proxy import listed_after

if TYPE_CHECKING:
    from ackfold_dev.store_proxy import Answer, Request, StoreProxy

DEFAULT_PORT: Final = 9040
DEFAULT_CONTAINER: Final = "ackfold"
# Azurite's development account and key: published, the same in every Azurite.
ACCOUNT: Final = "devstoreaccount1"
ACCOUNT_KEY: Final = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
API_VERSION: Final = "2021-08-06"


def emulator_command(
    program: str, root: Path, port: int, public: str, in_memory: bool = False
) -> list[str]:
    """Azurite's Blob API on 127.0.0.1:`port`, its data in `root` (or in memory), no
    telemetry."""
    import shutil

    node = shutil.which("node") or "node"
    return [
        node, program, "--blobHost", "127.0.0.1", "--blobPort", str(port),
        "--location", str(root), "--disableTelemetry", "--skipApiVersionCheck", "--loose",
        *(["--inMemoryPersistence"] if in_memory else []),
    ]  # fmt: skip


def blob_api(proxy: StoreProxy, request: Request) -> Answer | None:
    """A blob listing cut at its `startFrom` (Azurite ignores it); None for every other
    request (passed through)."""
    if request.method == "GET" and "comp=list" in request.query and "startFrom=" in request.query:
        return listed_after(proxy, request, "startFrom", "Blob", "Name")
    return None


def shared_key(method: str, path: str, query: dict[str, str], headers: dict[str, str]) -> str:
    """The `Authorization` header of a Blob API request signed with the development
    account's key (Shared Key; `path` starts with the account, as Azurite's URLs do)."""
    lower = {k.lower(): v for k, v in headers.items()}
    standard = (
        "content-encoding", "content-language", "content-length", "content-md5",
        "content-type", "date", "if-modified-since", "if-match", "if-none-match",
        "if-unmodified-since", "range",
    )  # fmt: skip
    values = [lower.get(name, "") for name in standard]
    if values[2] == "0":
        values[2] = ""
    canonical_headers = "".join(
        f"{k}:{v}\n" for k, v in sorted(lower.items()) if k.startswith("x-ms-")
    )
    resource = f"/{ACCOUNT}{path}" + "".join(f"\n{k}:{v}" for k, v in sorted(query.items()))
    text = "\n".join([method, *values]) + "\n" + canonical_headers + resource
    key = base64.b64decode(ACCOUNT_KEY)
    signature = base64.b64encode(hmac.new(key, text.encode(), hashlib.sha256).digest())
    return f"SharedKey {ACCOUNT}:{signature.decode()}"


class LocalAzure(EmulatedStore):
    """One local Azure Blob API on 127.0.0.1 (`port`, else a free one), data kept in
    `directory`, with `container` created once it answers."""

    kind = "azure"
    title = "the local Azure Blob API (Azurite)"

    def __init__(
        self,
        directory: Path,
        *,
        port: int | None = None,
        container: str | None = DEFAULT_CONTAINER,
    ) -> None:
        super().__init__(directory, port=port, container=container)

    def program(self) -> Path:
        from ackfold_dev.emulators import azurite

        return azurite()

    def env(self) -> dict[str, str]:
        return {
            "AZURE_STORAGE_ACCOUNT_NAME": ACCOUNT,
            "AZURE_STORAGE_ACCOUNT_KEY": ACCOUNT_KEY,
            "AZURE_STORAGE_ENDPOINT": f"{self.endpoint_url}/{ACCOUNT}",
            "AZURE_ALLOW_HTTP": "true",
        }

    def spark_conf(self) -> dict[str, str]:
        host = f"{ACCOUNT}.dfs.core.windows.net"
        return {
            f"spark.hadoop.fs.azure.account.key.{host}": ACCOUNT_KEY,
            "spark.hadoop.fs.azure.account.hns.enabled": "false",
            "spark.hadoop.fs.azure.fns.account.service.type": "BLOB",
            "spark.hadoop.fs.azure.abfs.endpoint": f"127.0.0.1:{self.port}",
            "spark.hadoop.fs.azure.always.use.https": "false",
        }

    def warehouse(self, path: str = "warehouse", container: str | None = None) -> str:
        return f"abfs://{container or self.container}@{ACCOUNT}.dfs.core.windows.net/{path}"

    def put(
        self,
        path: str,
        body: bytes = b"",
        query: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes]:
        """One PUT to this Blob API, signed with the development key: `path` starts with
        the account; its status and body."""
        import http.client
        from urllib.parse import urlencode

        query = query or {}
        sent = {
            "x-ms-date": datetime.now(UTC).strftime("%a, %d %b %Y %H:%M:%S GMT"),
            "x-ms-version": API_VERSION,
            "Content-Length": str(len(body)),
            **(headers or {}),
        }
        sent["Authorization"] = shared_key("PUT", path, query, sent)
        target = f"{path}?{urlencode(query)}" if query else path
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            connection.request("PUT", target, body=body or None, headers=sent)
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    def create_container(self, name: str) -> None:
        status, answer = self.put(f"/{ACCOUNT}/{name}", query={"restype": "container"})
        if status not in (201, 409):  # 409: it exists
            raise LocalStoreError(f"cannot create the container {name!r}: {answer[:300]!r}")
