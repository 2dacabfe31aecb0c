"""The process in front of a local object store's emulator (fake-gcs-server, Azurite): it
starts the emulator as its child, on a port of its own, and passes every request through,
with each mutating request (PUT, POST, DELETE, PATCH) run alone, from its body to the
last byte of its answer, as `ackfold_dev.s3_app` does for moto.

Why the lock. A Delta commit is a create-if-absent of the next log file, and a store
must let exactly one of two such creates win. Each emulator's create is atomic on its
own (fake-gcs-server checks the generation and writes under one mutex; Azurite checks
and inserts a blob with no `await` between). But Azurite's Copy Blob with
`If-None-Match: *`, which Hadoop's ABFS driver makes a rename of (and so Delta Spark's
`AzureLogStore` a commit of), checks the destination, then awaits, then inserts: another
create can land in between and be overwritten. Run one at a time, every conditional
request is atomic by construction, not by likelihood. Reads are not serialized.

A `Rewrite` may answer a request itself, where the emulator lacks what delta-rs uses
(fake-gcs-server: GCS's XML API object PUT, `ackfold_dev.gcs`; both: a listing that
starts after a key, `listed_after`), or change its headers (`tests/stores` drops the
precondition headers to play a store without conditional writes).

Run, with its emulator, by `ackfold_dev.proxy_process`.
"""

from __future__ import annotations

import http.client
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

READY: Final = "ackfold-store-proxy listening"
MUTATING: Final = frozenset({"PUT", "POST", "DELETE", "PATCH"})
FORWARD_TIMEOUT: Final = 120  # seconds for the emulator's answer to one request
# Hop-by-hop headers, and the length, which the passed-through request gets afresh (the
# proxy answered `Expect: 100-continue` itself). Host is kept: fake-gcs-server routes its
# XML API by it (its public host is this proxy's).
_DROP: Final = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "expect"}
)

Answer = tuple[str, list[tuple[str, str]], bytes]


class Request:
    """One request as the proxy sees it: method, raw path (still percent-encoded), query,
    headers (lower-case names, as sent: `x-ms-meta-hdi_isfolder` keeps its underscore,
    which a WSGI server would turn into a dash and so break Azure's signature), body."""

    def __init__(self, method: str, target: str, headers: dict[str, str], body: bytes) -> None:
        self.method = method
        self.path, _, self.query = target.partition("?")
        self.headers = headers
        self.body = body

    @property
    def target(self) -> str:
        return self.path + (f"?{self.query}" if self.query else "")


# A hook that may answer a request itself (return an Answer) or change it in place (None).
Rewrite = Callable[["StoreProxy", Request], Answer | None]


class StoreProxy:
    """Every request passed to the emulator on `upstream_port`, mutating ones one at a
    time; `rewrite` sees each request first. `handler()` serves it with `http.server`."""

    def __init__(self, upstream_port: int, rewrite: Rewrite | None = None) -> None:
        self.upstream_port = upstream_port
        self.rewrite = rewrite
        self.lock = threading.Lock()

    def answer(self, request: Request) -> Answer:
        if request.method in MUTATING:
            with self.lock:
                return self._answer(request)
        return self._answer(request)

    def handler(self) -> type[BaseHTTPRequestHandler]:
        """An `http.server` request handler that answers through this proxy."""
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                headers = {k.lower(): v for k, v in self.headers.items()}
                body = _read_body(self.rfile, headers)
                status, out, data = proxy.answer(Request(self.command, self.path, headers, body))
                code, _, reason = status.partition(" ")
                self.send_response(int(code), reason or None)
                for key, value in out:
                    if key.lower() != "content-length" or self.command == "HEAD":
                        self.send_header(key, value)
                if self.command != "HEAD":  # every answer's length: the connection is kept
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = do_PATCH = _serve

        return Handler

    def _answer(self, request: Request) -> Answer:
        answered = self.rewrite(self, request) if self.rewrite else None
        if answered is not None:
            return answered
        return self.forward(request.method, request.target, request.headers, request.body)

    def forward(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Answer:
        """One request to the emulator: (status line, headers, whole body)."""
        connection = http.client.HTTPConnection(
            "127.0.0.1", self.upstream_port, timeout=FORWARD_TIMEOUT
        )
        try:
            sent = {k: v for k, v in headers.items() if k not in _DROP}
            connection.request(method, target, body=body or None, headers=sent)
            response = connection.getresponse()
            answer = response.read()
        finally:
            connection.close()
        kept = [(k, v) for k, v in response.getheaders() if k.lower() not in _DROP]
        length = response.getheader("Content-Length")
        if method == "HEAD" and length:  # the object's length (the body is empty)
            kept.append(("Content-Length", length))
        return f"{response.status} {response.reason}", kept, answer


def listed_after(
    proxy: StoreProxy, request: Request, parameter: str, entry: str, key: str
) -> Answer:
    """The emulator's listing for `request`, with only the entries (`<entry>` elements,
    named by their `<key>`) after the query's `parameter`, which the emulator ignores.
    delta-rs lists a table's log from its last version on (GCS: `start-after`, Azure:
    `startFrom`), and takes old versions listed again for new ones ("Invalid table
    version") otherwise."""
    import html
    import re
    from urllib.parse import parse_qs

    after = parse_qs(request.query).get(parameter, [""])[0]
    status, headers, body = proxy.forward("GET", request.target, request.headers, b"")
    text = body.decode("utf-8")
    entries = re.compile(rf"<{entry}>.*?</{entry}>", re.DOTALL)
    found = entries.findall(text)
    if not status.startswith("200") or not found:
        return status, headers, body
    names = [re.search(rf"<{key}>(.*?)</{key}>", e, re.DOTALL) for e in found]
    kept = [e for e, n in zip(found, names, strict=True) if n and html.unescape(n.group(1)) > after]
    first, last = text.index(found[0]), text.rindex(found[-1]) + len(found[-1])
    head = re.sub(r"<KeyCount>\d+</KeyCount>", f"<KeyCount>{len(kept)}</KeyCount>", text[:first])
    return status, headers, (head + "".join(kept) + text[last:]).encode()


def _read_body(stream: Any, headers: dict[str, str]) -> bytes:
    """A request's whole body: by its length, or its chunks."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        chunks: list[bytes] = []
        while True:
            size = int(stream.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while stream.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(chunks)
            chunks.append(stream.read(size))
            stream.readline()
    return bytes(stream.read(int(headers.get("content-length") or 0)))


def wait_for_port(proc: subprocess.Popen[bytes], port: int, what: str, timeout: float) -> None:
    """Return once something accepts connections on 127.0.0.1:`port`; exit if `proc` dies."""
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{what} did not listen on port {port} within {timeout:g} s")


def serve(app: StoreProxy, host: str, port: int, upstream: subprocess.Popen[bytes]) -> int:
    """Serve `app` until SIGTERM or SIGINT, then stop the emulator `upstream`."""
    try:
        server = ThreadingHTTPServer((host, port), app.handler())
        server.daemon_threads = True

        def stop(signum: int, frame: Any) -> None:
            threading.Thread(target=server.shutdown, daemon=True).start()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        print(f"{READY} on http://{host}:{port}", flush=True)
        server.serve_forever()
    finally:
        # No write in flight, and none after: Azurite saves its metadata as it closes, and
        # does not wait for the requests it is handling. The lock is never given back.
        app.lock.acquire(timeout=FORWARD_TIMEOUT)
        upstream.terminate()
        try:
            upstream.wait(20)
        except subprocess.TimeoutExpired:
            upstream.kill()
    return 0
