"""A fast local S3 API: versitygw (`github.com/versity/versitygw`, Apache-2.0, Go) with its
POSIX backend on a local directory, for the soak (`bench/soak.py --store s3`).

The moto server (`ackfold_dev.s3`) is a Python process: 10 to 66 ms a request, and its
CPU competes with the client's on a small machine. versitygw answers the same S3 calls
in well under a millisecond of its own. What ackfold relies on, it gives as S3 does
(tests/s3/test_server.py, for both servers):

- a PUT with `If-None-Match: *` is refused with 412 when the key exists, and the check
  and the store are one step (a lock per key around the check and the final link of a
  fully written temporary file): of racing creates of one key, exactly one wins;
- each object is a file under `directory/objects/<bucket>/<key>` (its metadata in
  extended attributes, which the file system must support: ext4, xfs, btrfs, tmpfs do),
  so what it answered survives a restart, a SIGKILL too, with no journal.

It runs the binary that `make emulators` built (`ackfold_dev.emulators.versitygw`), in
a process group of its own. Keys, region and the client are the moto server's
(`LocalS3`): fixed, test-only values.

Example:
    >>> import tempfile
    >>> with LocalVersityS3(Path(tempfile.mkdtemp()), bucket="ledger") as s3:  # doctest: +SKIP
    ...     s3.client().list_buckets()["Buckets"][0]["Name"]
    'ledger'
"""

from __future__ import annotations

from pathlib import Path

from ackfold_dev.ports import LOOPBACK
from ackfold_dev.s3 import ACCESS_KEY, DEFAULT_BUCKET, REGION, SECRET_KEY, LocalS3


class LocalVersityS3(LocalS3):
    """One versitygw on 127.0.0.1 (`port`, else a free one), its objects in files under
    `directory`/objects, with `bucket` created once it answers. Everything but its command
    line is `LocalS3`'s: start and wait, endpoint, keys, `env()`, `client()`, `kill()`."""

    name = "versitygw (the local S3 API)"
    kind = "S3 (versitygw)"
    log_name = "versitygw.log"

    def __init__(
        self, directory: Path, *, port: int | None = None, bucket: str | None = DEFAULT_BUCKET
    ) -> None:
        super().__init__(directory, port=port, bucket=bucket, journal=False)

    @property
    def root(self) -> Path:
        """The POSIX backend's directory: a bucket is a directory, an object a file."""
        return self.directory / "objects"

    def start(self, timeout: float = 60) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        super().start(timeout)

    def command(self) -> list[str]:
        """The binary `make emulators` built, with the root user's keys, loopback only, no
        request log (`--quiet`: a line a request would cost more than the soak's logging)."""
        from ackfold_dev.emulators import versitygw

        return [
            str(versitygw()), "--access", ACCESS_KEY, "--secret", SECRET_KEY, "--region", REGION,
            "--port", f"{LOOPBACK}:{self.port}", "--quiet", "posix", str(self.root),
        ]  # fmt: skip

    def listening(self) -> bool:
        return True  # it prints nothing when it is ready: its first answer says so
