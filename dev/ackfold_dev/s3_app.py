"""The local S3 API's process: moto's S3 server, with its writes made atomic as S3's are
and kept in a journal so the server can be restarted without losing a bucket.

moto answers a create with `If-None-Match: *` by 412 when the key exists, but it checks
and stores in two steps on a threaded server: two racing creates of one key could both
get 200. S3 (and delta-rs's commit protocol, which relies on it) promises that exactly
one wins. So every mutating request (PUT, POST, DELETE) runs under one lock, from reading
its body to the last byte of its answer: the check and the store are one step.

moto keeps its objects in memory. Each mutating request that succeeded is appended to a
journal (one JSON line, its body in base64) before its answer leaves, and a new server
replays the journal before it listens: what a client was told is written survives a
restart, even a SIGKILL of the server. A multipart upload's id is new on replay, so the
journal maps each recorded id to the replayed one.

Run by `ackfold_dev.s3.LocalS3` as `python -m ackfold_dev.s3_app --port N --journal F`.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any, Final

MUTATING: Final = frozenset({"PUT", "POST", "DELETE"})
READY: Final = "ackfold-s3 listening"
_UPLOAD_ID = re.compile(rb"<UploadId>([^<]+)</UploadId>")

StartResponse = Callable[..., Any]


class AtomicWrites:
    """WSGI middleware: mutating requests one at a time, each journaled once it succeeded."""

    def __init__(self, app: Callable[..., Iterable[bytes]], journal: Path | None) -> None:
        self.app = app
        self.lock = threading.Lock()
        self.uploads: dict[str, str] = {}  # recorded multipart upload id -> this server's
        self._journal: IO[str] | None = None
        if journal is not None:
            journal.parent.mkdir(parents=True, exist_ok=True)
            self.replay(journal)
            self._journal = journal.open("a", encoding="utf-8")

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") not in MUTATING:
            return self.app(environ, start_response)
        from werkzeug.wsgi import get_input_stream

        with self.lock:
            body = get_input_stream(environ).read()
            record = {
                "method": environ["REQUEST_METHOD"],
                "path": environ.get("PATH_INFO", ""),
                "query": environ.get("QUERY_STRING", ""),
                "headers": {
                    k: v
                    for k, v in environ.items()
                    if k.startswith("HTTP_") and k != "HTTP_TRANSFER_ENCODING"
                }
                | {k: environ[k] for k in ("CONTENT_TYPE",) if k in environ},
            }
            status, answer = self._call(environ, body, start_response)
            if self._journal is not None and status.startswith("2"):
                found = _UPLOAD_ID.search(answer)
                record["body"] = base64.b64encode(body).decode()
                record["upload_id"] = found.group(1).decode() if found else None
                self._journal.write(json.dumps(record) + "\n")
                self._journal.flush()  # in the OS's hands before the client hears 200
            return [answer]

    def _call(
        self, environ: dict[str, Any], body: bytes, start_response: StartResponse
    ) -> tuple[str, bytes]:
        """Run the request to its end, under the lock: (status, whole answer)."""
        environ = dict(environ)
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        environ.pop("HTTP_TRANSFER_ENCODING", None)  # the body is whole now
        environ["wsgi.input_terminated"] = False
        got: list[str] = []

        def started(status: str, headers: Any, exc_info: Any = None) -> Any:
            got.append(status)
            return start_response(status, headers, exc_info)

        result = self.app(environ, started)
        try:
            answer = b"".join(result)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        return got[0] if got else "500", answer

    def replay(self, journal: Path) -> int:
        """Apply the journal's requests to a fresh moto, in order; the number applied."""
        from werkzeug.test import EnvironBuilder

        count = 0
        for record in _records(journal):
            query = record["query"]
            for old, new in self.uploads.items():
                query = query.replace(f"uploadId={old}", f"uploadId={new}")
            headers = {k[5:].replace("_", "-").title(): v for k, v in record["headers"].items()}
            headers.pop("Content-Type", None)
            builder = EnvironBuilder(
                path=record["path"],
                method=record["method"],
                query_string=query,
                headers=headers,
                data=base64.b64decode(record["body"]),
                content_type=record["headers"].get("CONTENT_TYPE"),
            )
            result = self.app(builder.get_environ(), _ignore_status)
            answer = b"".join(result)
            if record.get("upload_id"):
                found = _UPLOAD_ID.search(answer)
                if found:
                    self.uploads[record["upload_id"]] = found.group(1).decode()
            count += 1
        return count


def _ignore_status(status: str, headers: Any, exc_info: Any = None) -> None:
    """A replayed request's answer was given before the restart: only its body matters."""


def _records(journal: Path) -> Iterator[dict[str, Any]]:
    """The journal's records; a last line cut short by a crash is ignored (its client was
    never answered)."""
    if not journal.exists():
        return
    with journal.open(encoding="utf-8") as handle:
        for line in handle:
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                return


def make_app(journal: Path | None) -> AtomicWrites:
    """moto's S3 server app behind `AtomicWrites`."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    return AtomicWrites(DomainDispatcherApplication(create_backend_app), journal)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ackfold_dev.s3_app")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--journal", type=Path, help="keep the writes here (default: none)")
    args = parser.parse_args(argv)
    from moto.moto_server.werkzeug_app import MotoRequestHandler
    from werkzeug.serving import make_server

    app = make_app(args.journal)
    server = make_server(
        args.host, args.port, app, threaded=True, request_handler=MotoRequestHandler
    )

    def stop(signum: int, frame: Any) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"{READY} on http://{args.host}:{args.port}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
