"""The local GCS API: fake-gcs-server behind `ackfold_dev.store_proxy`, for the tests and
for trying a `gs://` warehouse on one machine (`ackfold gcs`, `make gcs`).

fake-gcs-server serves GCS's JSON API (what Spark's GCS connector and Google's SDKs use)
and keeps objects in files, so what it answered survives a restart, a SIGKILL too. Its
create with `ifGenerationMatch=0` is atomic: it checks the generation and writes under
one mutex. delta-rs speaks GCS's XML API instead, whose object PUT (with
`x-goog-if-generation-match: 0` for a create-if-absent, every Delta commit)
fake-gcs-server answers 400: `xml_api` makes that PUT (and the XML copy) into the JSON
API's upload with the same precondition, and answers as the XML API does. It also cuts
an XML listing at its `start-after`, which fake-gcs-server ignores.

Its filesystem backend keeps no directory placeholder objects (`dir/`: a file and a
directory cannot share a path on disk), which GCS keeps and Spark's streaming checkpoints
rely on (an empty `offsets/` is listed before its first batch): `in_memory=True` keeps
them, at the cost of the data surviving no restart. The Spark tests use it.

Clients find it through the variables of Rust's `object_store` (delta-rs's):
`GOOGLE_SERVICE_ACCOUNT` names a service-account file whose `gcs_base_url` is this
server and whose `disable_oauth` skips the token exchange, as that library's own tests
against fake-gcs-server do. Spark reaches it through `spark_conf()`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Final
from urllib.parse import quote, unquote, urlencode

from ackfold_dev.emulated import EmulatedStore, LocalStoreError
from ackfold_dev.store_proxy import listed_after

if TYPE_CHECKING:
    from ackfold_dev.store_proxy import Answer, Request, StoreProxy

DEFAULT_PORT: Final = 9030
DEFAULT_BUCKET: Final = "ackfold"
PROJECT: Final = "ackfold-local"
# fake-gcs-server's own paths (the JSON API, uploads, its admin API): passed through.
_JSON_PREFIXES: Final = ("/storage/", "/upload/", "/download/", "/batch/", "/_internal/")


def emulator_command(
    program: str, root: Path, port: int, public: str, in_memory: bool = False
) -> list[str]:
    """fake-gcs-server on 127.0.0.1:`port`, its objects in files under `root` (or in
    memory), its links (upload sessions, media links) naming `public`, the proxy's address."""
    backend = ["-backend", "memory"] if in_memory else [
        "-backend", "filesystem", "-filesystem-root", str(root / "objects")]  # fmt: skip
    return [
        program, "-scheme", "http", "-host", "127.0.0.1", "-port", str(port), *backend,
        "-public-host", public, "-external-url", f"http://{public}", "-log-level", "warn",
    ]  # fmt: skip


def xml_api(proxy: StoreProxy, request: Request) -> Answer | None:
    """An XML API object PUT (or copy) made into a JSON API upload with the same
    precondition, and an XML listing cut at its `start-after`; None for every other
    request (passed through)."""
    bucket, _, name = unquote(request.path).lstrip("/").partition("/")
    if request.method == "GET" and not name and "start-after=" in request.query:
        # fake-gcs-server ignores it (ListObjectsV2's start after this key)
        return listed_after(proxy, request, "start-after", "Contents", "Key")
    if (
        request.method != "PUT"
        or not name
        or request.path.startswith(_JSON_PREFIXES)
        or "uploadId" in request.query
        or "partNumber" in request.query
    ):
        return None
    body = request.body
    host = {"host": request.headers.get("host", "")}  # fake-gcs-server routes by it
    source = request.headers.get("x-goog-copy-source")
    if source:  # a copy: the source's bytes, uploaded under the same precondition
        status, _, body = proxy.forward("GET", quote(f"/{source.lstrip('/')}"), host, b"")
        if not status.startswith("200"):
            return status, [("Content-Type", "application/xml")], _xml_error("NoSuchKey", status)
    params = {"uploadType": "media", "name": name}
    match = request.headers.get("x-goog-if-generation-match")
    if match is not None:
        params["ifGenerationMatch"] = match
    headers = host | {
        "content-type": request.headers.get("content-type") or "application/octet-stream"
    }
    target = f"/upload/storage/v1/b/{quote(bucket, safe='')}/o?{urlencode(params)}"
    status, _, answer = proxy.forward("POST", target, headers, body)
    if not status.startswith("200"):
        code = "PreconditionFailed" if status.startswith("412") else "InvalidRequest"
        return status, [("Content-Type", "application/xml")], _xml_error(code, status)
    created = json.loads(answer)
    return "200 OK", [
        ("ETag", f'"{created.get("etag", "")}"'),
        ("x-goog-generation", str(created.get("generation", ""))),
        ("x-goog-metageneration", str(created.get("metageneration", "1"))),
    ], b""  # fmt: skip


def _xml_error(code: str, status: str) -> bytes:
    return (
        f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code>"
        f"<Message>{status}</Message></Error>"
    ).encode()


class LocalGCS(EmulatedStore):
    """One local GCS API on 127.0.0.1 (`port`, else a free one), objects kept in
    `directory`, with `bucket` created once it answers.

    Example:
        >>> import tempfile
        >>> with LocalGCS(Path(tempfile.mkdtemp()), bucket="ledger") as gcs:  # doctest: +SKIP
        ...     gcs.warehouse()
        'gs://ledger/warehouse'
    """

    kind = "gcs"
    title = "the local GCS API"

    def __init__(
        self,
        directory: Path,
        *,
        port: int | None = None,
        bucket: str | None = DEFAULT_BUCKET,
        in_memory: bool = False,
    ) -> None:
        super().__init__(directory, port=port, container=bucket, in_memory=in_memory)

    def program(self) -> Path:
        from ackfold_dev.emulators import fake_gcs_server

        return fake_gcs_server()

    @property
    def service_account(self) -> Path:
        """The service-account file that points object_store at this server."""
        path = self.directory / "service-account.json"
        account = {
            "gcs_base_url": self.endpoint_url, "disable_oauth": True,
            "client_email": "", "private_key": "", "private_key_id": "",
        }  # fmt: skip
        if not path.exists() or json.loads(path.read_text()) != account:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(account))
        return path

    def env(self) -> dict[str, str]:
        return {"GOOGLE_SERVICE_ACCOUNT": str(self.service_account)}

    def spark_conf(self) -> dict[str, str]:
        return {
            "spark.hadoop.fs.gs.storage.root.url": self.endpoint_url,
            "spark.hadoop.fs.gs.auth.type": "UNAUTHENTICATED",
            "spark.hadoop.fs.gs.project.id": PROJECT,
            # The connector renames with the `moveTo` API, which fake-gcs-server lacks:
            # copy and delete, as the connector does on buckets without it.
            "spark.hadoop.fs.gs.operation.move.enable": "false",
        }

    def warehouse(self, path: str = "warehouse", container: str | None = None) -> str:
        return f"gs://{container or self.container}/{path}"

    def create_container(self, name: str) -> None:
        import http.client

        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            connection.request(
                "POST", f"/storage/v1/b?project={PROJECT}", body=json.dumps({"name": name}),
                headers={"Content-Type": "application/json"},
            )  # fmt: skip
            response = connection.getresponse()
            answer = response.read()
        finally:
            connection.close()
        if response.status not in (200, 409):  # 409: it exists
            raise LocalStoreError(f"cannot create the bucket {name!r}: {answer[:300]!r}")
