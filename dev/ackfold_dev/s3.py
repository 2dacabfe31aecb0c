"""The local S3 API: moto's S3 server on loopback, with atomic conditional creates and a
journal (`ackfold_dev.s3_app`), for the tests and for trying the production layout on
one machine (`ackfold s3`, `make s3`).

It runs as its own Python process, in a process group of its own; stopping the server
stops the group. With a journal (`var/s3/journal.jsonl` for `ackfold s3`) its buckets
survive a restart. Clients find it through the standard AWS variables, which `env()`
gives: `AWS_ENDPOINT`, keys, region, and `AWS_ALLOW_HTTP` for delta-rs over http.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> with LocalS3(Path(tempfile.mkdtemp()), bucket="ledger") as s3:
    ...     s3.client().list_buckets()["Buckets"][0]["Name"]
    'ledger'
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any, Final

from ackfold.errors import AckfoldError
from ackfold_dev.ports import LOOPBACK, free_port, port_free
from ackfold_dev.server import JvmProcess, LocalServer

DEFAULT_PORT: Final = 9020
DEFAULT_BUCKET: Final = "ackfold"
# moto accepts any keys; these say so.
ACCESS_KEY: Final = "ackfold-local"
SECRET_KEY: Final = "ackfold-local-secret"  # noqa: S105 - a loopback test server's, not a secret
REGION: Final = "us-east-1"


class LocalS3Error(AckfoldError, RuntimeError):
    """The local S3 server cannot start, or died."""


class LocalS3(LocalServer):
    """One local S3 server on 127.0.0.1 (`port`, else a free one), keeping its writes in
    `directory`/journal.jsonl, with `bucket` created once it answers."""

    name = "the local S3 server"
    kind = "S3 (moto, atomic conditional writes)"
    log_name = "s3.log"

    def __init__(
        self,
        directory: Path,
        *,
        port: int | None = None,
        bucket: str | None = DEFAULT_BUCKET,
        journal: bool = True,
    ) -> None:
        self.directory = directory
        self.port = port or free_port()
        self.bucket = bucket
        self.journal = directory / "journal.jsonl" if journal else None
        self._process = JvmProcess(self.name, directory / self.log_name)

    @property
    def endpoint_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def env(self) -> dict[str, str]:
        """The environment that points delta-rs (and ackfold's checks) at this server.
        `AWS_ENDPOINT`, not `AWS_ENDPOINT_URL`: boto3 ignores it, so an SQS client in the
        same process keeps its own endpoint (the compose stack does the same)."""
        return {
            "AWS_ENDPOINT": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ALLOW_HTTP": "true",
        }

    def warehouse(self, path: str = "warehouse", container: str | None = None) -> str:
        """A warehouse URI in this server's bucket (or `container`), as Spark spells it."""
        return f"s3a://{container or self.bucket}/{path}"

    def spark_conf(self) -> dict[str, str]:
        """Spark's S3A settings for this server; the keys come from the environment
        (`env()`), which S3A's default credentials chain reads."""
        return {
            "spark.hadoop.fs.s3a.endpoint": self.endpoint_url,
            "spark.hadoop.fs.s3a.endpoint.region": REGION,
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        }

    def client(self) -> Any:
        """A boto3 S3 client for this server."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
            config=Config(retries={"max_attempts": 1}, s3={"addressing_style": "path"}),
        )

    @property
    def log_file(self) -> Path:
        """Where the server logs each request with its answer's status."""
        return self._process.log_file

    @property
    def pid(self) -> int | None:
        return self._process.pid

    def start(self, timeout: float = 60) -> None:
        """Start the server; return once it answers and the bucket exists."""
        if self._process.running:
            raise LocalS3Error(f"{self.name} already runs on {self.endpoint_url}")
        command = self.command()
        if not port_free(self.port):
            raise LocalS3Error(
                f"port {self.port} on 127.0.0.1 is already taken (another S3 server?): stop "
                "that process, or choose another port (ackfold s3 --port)"
            )
        self.directory.mkdir(parents=True, exist_ok=True)
        self._process.start(command[1:], command=command[0])
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise

    def command(self) -> list[str]:
        """moto's server behind `ackfold_dev.s3_app`, which journals what it answered."""
        try:
            import moto  # noqa: F401
        except ImportError:
            raise LocalS3Error(
                "the local S3 server needs moto: pip install 'moto[s3]==5.2.5' flask-cors "
                "(make setup installs it)"
            ) from None
        command = [sys.executable, "-m", "ackfold_dev.s3_app", "--port", str(self.port)]
        if self.journal is not None:
            command += ["--journal", str(self.journal)]
        return command

    def listening(self) -> bool:
        """Whether the process says it listens: moto's app prints `READY` once built (a
        request before that would wait on the import, not fail)."""
        from ackfold_dev.s3_app import READY

        return READY.encode() in self._process.logged()

    def _wait_ready(self, timeout: float) -> None:
        import time

        from botocore.exceptions import BotoCoreError, ClientError

        client = self.client()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code = self._process.exit_code()
            if code is not None:
                raise LocalS3Error(self._process.failure(f"exited with {code}"))
            if self.listening():
                with contextlib.suppress(BotoCoreError, ClientError):
                    client.list_buckets()
                    break
            time.sleep(0.05)
        else:
            raise LocalS3Error(
                self._process.failure(f"did not answer on {self.endpoint_url} within {timeout:g} s")
            )
        if self.bucket is not None:
            try:
                client.create_bucket(Bucket=self.bucket)
            except ClientError as exc:
                code = exc.response.get("Error", {}).get("Code")
                if code not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                    raise LocalS3Error(f"cannot create the bucket {self.bucket!r}: {exc}") from None

    def stop(self, grace: float = 10) -> None:
        """Stop the server's process group. Idempotent."""
        self._process.stop(grace)

    def kill(self) -> None:
        """SIGKILL the server at once, as a crash would (the journal keeps what it answered)."""
        self._process.kill()

    def wait_for_exit(self) -> str:
        code = self._process.wait()
        return f"{self.name} exited with {code}; see {self._process.log_file}"

    def banner(self) -> str:
        where = f"s3://{self.bucket}/" if self.bucket else "no bucket"
        env = " ".join(f"{k}={v}" for k, v in self.env().items() if k != "AWS_DEFAULT_REGION")
        return (
            f"{self.kind} on {self.endpoint_url}, bucket {where} — "
            f"point ackfold at it with:\n  {env} ACKFOLD_WAREHOUSE=s3://{self.bucket}/warehouse"
            "\nCtrl-C stops it"
        )
