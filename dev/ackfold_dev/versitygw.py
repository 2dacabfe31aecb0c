"""A fast local S3 API: versitygw (`github.com/versity/versitygw`, Apache-2.0, Go) with its
POSIX backend on a local directory, for the soak (`bench/soak.py --store s3`).

The moto server (`ackfold_dev.s3`) is a Python process: 10 to 66 ms a request, and its
CPU competes with the client's on a small machine. versitygw answers the same S3 calls
in well under a millisecond of its own. What ackfold relies on, it gives as S3 does
(tests/stores/test_versitygw.py):

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

import time
from pathlib import Path

from ackfold_dev.ports import LOOPBACK, port_free
from ackfold_dev.s3 import ACCESS_KEY, DEFAULT_BUCKET, REGION, SECRET_KEY, LocalS3, LocalS3Error
from ackfold_dev.server import JvmProcess


class LocalVersityS3(LocalS3):
    """One versitygw on 127.0.0.1 (`port`, else a free one), its objects in files under
    `directory`/objects, with `bucket` created once it answers. Everything but starting it
    is `LocalS3`'s: endpoint, keys, `env()`, `client()`, `kill()`, `stop()`."""

    def __init__(
        self, directory: Path, *, port: int | None = None, bucket: str | None = DEFAULT_BUCKET
    ) -> None:
        super().__init__(directory, port=port, bucket=bucket, journal=False)
        self._process = JvmProcess("versitygw (the local S3 API)", directory / "versitygw.log")

    @property
    def root(self) -> Path:
        """The POSIX backend's directory: a bucket is a directory, an object a file."""
        return self.directory / "objects"

    def command(self, program: Path) -> list[str]:
        """versitygw's command line: the root user's keys, loopback only, no request log
        (`--quiet`: a line a request would cost more than the soak's own logging)."""
        return [
            str(program), "--access", ACCESS_KEY, "--secret", SECRET_KEY, "--region", REGION,
            "--port", f"{LOOPBACK}:{self.port}", "--quiet", "posix", str(self.root),
        ]  # fmt: skip

    def start(self, timeout: float = 60) -> None:
        """Start versitygw; return once it answers and the bucket exists."""
        from ackfold_dev.emulators import versitygw

        if self._process.running:
            raise LocalS3Error(f"versitygw already runs on {self.endpoint_url}")
        program = versitygw()
        if not port_free(self.port):
            raise LocalS3Error(
                f"port {self.port} on 127.0.0.1 is already taken (another S3 server?): stop "
                "that process, or choose another port"
            )
        self.root.mkdir(parents=True, exist_ok=True)
        command = self.command(program)
        self._process.start(command[1:], command=command[0])
        try:
            self._wait_answers(timeout)
            if self.bucket is not None:
                self._create_bucket(self.bucket)
        except BaseException:
            self.stop()
            raise

    def _wait_answers(self, timeout: float) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        client = self.client()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code = self._process.exit_code()
            if code is not None:
                raise LocalS3Error(self._process.failure(f"exited with {code}"))
            try:
                client.list_buckets()
                return
            except (BotoCoreError, ClientError):
                time.sleep(0.05)
        raise LocalS3Error(
            self._process.failure(f"did not answer on {self.endpoint_url} within {timeout:g} s")
        )

    def _create_bucket(self, name: str) -> None:
        from botocore.exceptions import ClientError

        client = self.client()
        try:
            client.create_bucket(Bucket=name)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") not in (
                "BucketAlreadyOwnedByYou",
                "BucketAlreadyExists",
            ):
                raise LocalS3Error(f"cannot create the bucket {name!r}: {exc}") from None

    def banner(self) -> str:
        return super().banner().replace("S3 (moto, atomic conditional writes)", "S3 (versitygw)")
