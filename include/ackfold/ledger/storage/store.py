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
`GOOGLE_SERVICE_ACCOUNT`, `GOOGLE_APPLICATION_CREDENTIALS`; `AZURE_STORAGE_ACCOUNT_NAME`,
`AZURE_STORAGE_ENDPOINT`, ...), which delta-rs would also read by itself, passed
explicitly so that what it uses can be shown (`ackfold doctor`, secrets masked). What
ackfold puts beside the tables itself on GCS and ADLS (the probe, the reconcile's mark)
goes through `object_store_of`: Rust's object_store, delta-rs's own, with the same options.

Example:
    >>> store_kind("s3a://bucket/warehouse"), store_kind("/srv/warehouse")
    ('s3', 'local')
    >>> delta_uri("s3a://bucket/warehouse/roots")
    's3://bucket/warehouse/roots'
    >>> storage_options("s3://b/w", {"AWS_ENDPOINT_URL": "http://127.0.0.1:9020", "HOME": "/"})
    {'AWS_ENDPOINT_URL': 'http://127.0.0.1:9020'}
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from typing import Any, Final, Literal
from urllib.parse import urlparse

StoreKind = Literal["local", "s3", "gcs", "azure", "other"]

# URI schemes, Spark's (Hadoop's) and delta-rs's, of each store.
SCHEMES: Final[dict[str, StoreKind]] = {
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
ENV_PREFIXES: Final[dict[StoreKind, tuple[str, ...]]] = {
    "s3": ("AWS_",),
    "gcs": ("GOOGLE_",),
    "azure": ("AZURE_",),
}
# Where delta-rs (and so ackfold) finds an S3-compatible endpoint, in this order.
S3_ENDPOINTS: Final = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT")
# Where the Azure SDKs (and delta-rs) find a store that is not Azure's own endpoint.
AZURE_ENDPOINTS: Final = ("AZURE_STORAGE_ENDPOINT", "AZURE_ENDPOINT")
_SECRET_WORDS: Final = ("SECRET", "TOKEN", "KEY", "PASSWORD", "CREDENTIAL", "SAS")
OBJECT_STORES: Final = frozenset({"s3", "gcs", "azure"})


def store_kind(location: str) -> StoreKind:
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
    conditional-writes probe (`ackfold.ledger.storage.protocol`), the reconcile's mark."""
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


def split_location(location: str) -> tuple[str, str]:
    """The container (bucket) URI of an object-store `location`, as delta-rs spells it, and
    the path under it.

    Example:
        >>> split_location("s3a://bucket/warehouse/roots")
        ('s3://bucket', 'warehouse/roots')
        >>> split_location("abfss://ledger@acct.dfs.core.windows.net/w")
        ('abfss://ledger@acct.dfs.core.windows.net', 'w')
    """
    parsed = urlparse(delta_uri(location))
    return f"{parsed.scheme}://{parsed.netloc}", parsed.path.strip("/")


def object_store_of(location: str, options: Mapping[str, str] | None) -> Any:
    """An `obstore` store of the container (bucket) of `location` (GCS or ADLS; S3 too),
    configured as delta-rs is: with the storage `options`, and the environment for the
    rest. Options that object_store does not know are left to the environment."""
    from obstore import store as obstores

    from_url: Any = obstores.from_url  # its overloads type each store's own keys
    base, _ = split_location(location)
    # An endpoint named with http:// (an emulator's) is meant: object_store refuses it else.
    client: dict[str, Any] = {"allow_http": endpoint_of(location, options)[1].startswith("http:")}
    for key, value in (options or {}).items():
        if key.upper().endswith("_ALLOW_HTTP"):  # a client option in object_store
            client["allow_http"] = value.strip().lower() in ("1", "true", "yes")
    config = dict(_known_options(base, tuple((options or {}).items())))
    return from_url(base, config=config, client_options=client)


@functools.lru_cache(maxsize=16)
def _known_options(base: str, options: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """The `options` object_store knows for a store at `base`, asked once per options:
    each ask builds a store and its HTTP client, milliseconds a run paid for each option
    (issue 55)."""
    from obstore import store as obstores
    from obstore.exceptions import UnknownConfigurationKeyError

    from_url: Any = obstores.from_url
    config: dict[str, str] = {}
    for key, value in options:
        if key.upper().endswith("_ALLOW_HTTP"):
            continue
        try:
            from_url(base, config={**config, key: value})  # no request: parses the keys
        except UnknownConfigurationKeyError:
            continue
        config[key] = value
    return tuple(config.items())


def file_system(location: str, options: Mapping[str, str] | None) -> Any:
    """delta-rs's file system (`deltalake.fs.DeltaStorageHandler`) rooted at `location`,
    with the storage `options`. On an object store, one per location and options in a
    process: each new one builds an HTTP client, its TLS roots read again, milliseconds
    that every read of a table's files paid (issue 55). A local one costs nothing to
    make, and is made anew."""
    key = tuple(sorted((options or {}).items()))
    if is_object_store(location):
        return _kept_file_system(location, key, os.getpid())
    return _new_file_system(location, key)


@functools.lru_cache(maxsize=64)
def _kept_file_system(location: str, options: tuple[tuple[str, str], ...], pid: int) -> Any:
    """`file_system`'s on an object store, by process too: no client crosses a fork."""
    return _new_file_system(location, options)


def _new_file_system(location: str, options: tuple[tuple[str, str], ...]) -> Any:
    from deltalake.fs import DeltaStorageHandler

    return DeltaStorageHandler(location, dict(options) or None)


def endpoint_of(location: str, options: Mapping[str, str] | None) -> tuple[str, str]:
    """(the variable that names the endpoint of `location`'s store, the endpoint) as
    `ackfold doctor` and the refusals say it; the store's own service when none is set.

    Example:
        >>> endpoint_of("gs://b/w", {})
        ('GOOGLE_SERVICE_ACCOUNT', 'Google Cloud Storage')
        >>> endpoint_of("abfss://c@acct.dfs.core.windows.net/w", {"AZURE_STORAGE_ENDPOINT": "http://h:1/a"})
        ('AZURE_STORAGE_ENDPOINT', 'http://h:1/a')
    """
    options = options or {}
    kind = store_kind(location)
    if kind == "s3":
        variable = next((k for k in S3_ENDPOINTS if options.get(k)), S3_ENDPOINTS[0])
        return variable, options.get(variable) or "AWS S3"
    if kind == "azure":
        variable = next((k for k in AZURE_ENDPOINTS if options.get(k)), AZURE_ENDPOINTS[0])
        return variable, options.get(variable) or "Azure Storage"
    return "GOOGLE_SERVICE_ACCOUNT", _gcs_base_url(options) or "Google Cloud Storage"


def _gcs_base_url(options: Mapping[str, str]) -> str | None:
    """The `gcs_base_url` of the service-account file (an emulator's), if any."""
    import json
    from pathlib import Path

    path = options.get("GOOGLE_SERVICE_ACCOUNT") or options.get("GOOGLE_SERVICE_ACCOUNT_PATH")
    try:
        text = Path(path).read_text() if path else options.get("GOOGLE_SERVICE_ACCOUNT_KEY", "")
        found = json.loads(text).get("gcs_base_url") if text else None
    except (OSError, ValueError, AttributeError):
        return None
    return str(found) if found else None
