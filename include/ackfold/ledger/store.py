"""Where the warehouse lives, and how delta-rs reaches it: the store of a location, its URI
for delta-rs, and the storage options (credentials, endpoint) from the environment.

Every ledger table on an object store is committed by delta-rs, whatever else reads it
(`docs/decisions/object-stores.md`): on S3 its commit is a conditional create of the next
log file (`If-None-Match: *`, 412 to the loser, who retries), which is what makes many
writers at once safe. Spark reaches the same tables through Hadoop's file systems
(`s3a://`), delta-rs through its own object store (`s3://`): `delta_uri` maps one to the
other, so one `warehouse` setting serves both.

Storage options come from the environment only, never from a file in the repo: the
standard variables of each cloud's SDK (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, ...;
`GOOGLE_APPLICATION_CREDENTIALS`; `AZURE_STORAGE_ACCOUNT_NAME`, ...), which delta-rs would
also read by itself, passed explicitly so that what it uses can be shown (`ackfold
doctor`, secrets masked).

Example:
    >>> store_kind("s3a://bucket/warehouse"), store_kind("/srv/warehouse")
    ('s3', 'local')
    >>> delta_uri("s3a://bucket/warehouse/roots")
    's3://bucket/warehouse/roots'
    >>> storage_options("s3://b/w", {"AWS_ENDPOINT_URL": "http://127.0.0.1:9020", "HOME": "/"})
    {'AWS_ENDPOINT_URL': 'http://127.0.0.1:9020'}
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Final, Literal
from urllib.parse import urlparse

Store = Literal["local", "s3", "gcs", "azure", "other"]

# URI schemes, Spark's (Hadoop's) and delta-rs's, of each store.
SCHEMES: Final[dict[str, Store]] = {
    "": "local",
    "file": "local",
    "s3": "s3",
    "s3a": "s3",
    "s3n": "s3",
    "gs": "gcs",
    "gcs": "gcs",
    "abfs": "azure",
    "abfss": "azure",
    "az": "azure",
    "adl": "azure",
    "azure": "azure",
}
# Hadoop's schemes that delta-rs spells otherwise.
_DELTA_RS_SCHEME: Final = {"s3a": "s3", "s3n": "s3"}
# The variables delta-rs's object stores read, per store (their SDKs' standard names).
ENV_PREFIXES: Final[dict[Store, tuple[str, ...]]] = {
    "s3": ("AWS_",),
    "gcs": ("GOOGLE_",),
    "azure": ("AZURE_",),
}
# Where delta-rs (and so ackfold) finds an S3-compatible endpoint, in this order.
S3_ENDPOINTS: Final = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT")
_SECRET_WORDS: Final = ("SECRET", "TOKEN", "KEY", "PASSWORD", "CREDENTIAL", "SAS")
OBJECT_STORES: Final = frozenset({"s3", "gcs", "azure"})


def store_kind(location: str) -> Store:
    """The store `location` (a path or a URI) is on: local, s3, gcs, azure, or other
    (HDFS and anything else)."""
    return SCHEMES.get(urlparse(location).scheme.lower(), "other")


def is_object_store(location: str) -> bool:
    """Whether `location` is on S3 (or S3-compatible), GCS or ADLS."""
    return store_kind(location) in OBJECT_STORES


def delta_uri(location: str) -> str:
    """`location` as delta-rs spells it (`s3a://` and `s3n://` are `s3://` there); other
    locations unchanged."""
    parsed = urlparse(location)
    scheme = _DELTA_RS_SCHEME.get(parsed.scheme.lower())
    return f"{scheme}{location[len(parsed.scheme) :]}" if scheme else location


def storage_options(
    location: str, environ: Mapping[str, str] | None = None
) -> dict[str, str] | None:
    """The delta-rs storage options of `location`, from `environ` (the process's
    environment by default): its store's standard variables; None for a local path."""
    prefixes = ENV_PREFIXES.get(store_kind(location))
    if prefixes is None:
        return None
    env = os.environ if environ is None else environ
    return {k: v for k, v in sorted(env.items()) if k.startswith(prefixes) and v}


def s3_client(options: Mapping[str, str]) -> Any:
    """A boto3 S3 client with the endpoint and credentials of storage `options` (an S3
    location's `storage_options`), for what ackfold puts beside the tables itself: the
    conditional-writes probe (`ackfold.ledger.protocol`), the reconcile's mark."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=next((options[k] for k in S3_ENDPOINTS if options.get(k)), None),
        aws_access_key_id=options.get("AWS_ACCESS_KEY_ID"),
        aws_secret_access_key=options.get("AWS_SECRET_ACCESS_KEY"),
        aws_session_token=options.get("AWS_SESSION_TOKEN"),
        region_name=options.get("AWS_REGION") or options.get("AWS_DEFAULT_REGION"),
        config=Config(retries={"max_attempts": 3}),
    )


def masked(options: Mapping[str, str] | None) -> dict[str, str]:
    """`options` with secrets replaced by `***`, to show which are set.

    Example:
        >>> masked({"AWS_REGION": "eu-west-1", "AWS_SECRET_ACCESS_KEY": "abc"})
        {'AWS_REGION': 'eu-west-1', 'AWS_SECRET_ACCESS_KEY': '***'}
    """
    return {
        k: "***" if any(word in k.upper() for word in _SECRET_WORDS) else v
        for k, v in (options or {}).items()
    }
