"""`Store`: the warehouse's store, resolved once per run and handed to whoever reaches it.

A run (reconcile, replay, quality, maintenance) builds one `Store` from its warehouse
(`Store.at(settings.table_root)`) and hands that object to the lease, the fence, the
writer, the snapshots and the engine. It holds:

- where the warehouse is (`location`, and `uri`: as delta-rs spells it) and its `kind`
  (local, s3, gcs, azure, other);
- its delta-rs storage options (`storage_options`), read from the environment once
  (`ackfold.ledger.storage.store.storage_options`);
- its commit protocol, checked once: on an object store, the conditional-writes probe
  (`require_conditional_writes`, `ackfold.ledger.storage.protocol`) runs on the first
  commit and never again for this store;
- its clients, each made on first use and then kept: the S3 client (`s3_client`) and the
  object store of its container (`object_store`).

On S3 each resolution and probe can cost requests, so nothing below the run resolves the
store again. What reads deep in a run without a store in hand (the mark, the layout
checks) asks `store_for(path)`: the store the run made current (`using`) when `path` is
under it, else one resolved for `path`.

Example:
    >>> store = Store.at("s3a://bucket/warehouse", environ={"AWS_REGION": "eu-west-1"})
    >>> store.kind, store.uri, store.storage_options
    ('s3', 's3://bucket/warehouse', {'AWS_REGION': 'eu-west-1'})
    >>> store.covers("s3a://bucket/warehouse/roots"), store.covers("s3a://other/w")
    (True, False)
    >>> Store.at("/srv/warehouse").storage_options is None
    True
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ackfold.ledger.storage.store import (
    OBJECT_STORES,
    StoreKind,
    delta_uri,
    endpoint_of,
    object_store_of,
    s3_client,
    storage_options,
    store_kind,
)

_current = threading.local()


@dataclass(frozen=True)
class Store:
    """The store of one warehouse, resolved once: build it with `Store.at`."""

    #: The warehouse as configured (`Settings.table_root`): a path, or a URI as Spark spells it.
    location: str
    #: local, s3, gcs, azure or other (HDFS, ...).
    kind: StoreKind
    #: The delta-rs storage options, as sorted (key, value) pairs (`storage_options`).
    options: tuple[tuple[str, str], ...] | None
    # What is made on first use and kept: the clients, whether the protocol was checked.
    _made: dict[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)
    # Re-entrant: the protocol's check makes the client it probes with.
    _lock: threading.RLock = field(
        default_factory=threading.RLock, compare=False, hash=False, repr=False
    )

    @classmethod
    def at(
        cls,
        location: str,
        *,
        options: Mapping[str, str] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Store:
        """The store of `location`, resolved now: its storage `options` as given, else
        read from `environ` (the process's environment by default)."""
        location = str(location).rstrip("/") or "/"
        if options is None:
            options = storage_options(location, environ)
        pairs = tuple(sorted(options.items())) if options else None
        return cls(location, store_kind(location), pairs)

    @property
    def uri(self) -> str:
        """The warehouse as delta-rs spells it (`s3a://` is `s3://` there)."""
        return delta_uri(self.location)

    @property
    def storage_options(self) -> dict[str, str] | None:
        """The delta-rs storage options (a copy of its own); None for a local path."""
        return dict(self.options) if self.options else None

    @property
    def is_object_store(self) -> bool:
        """Whether the warehouse is on S3 (or S3-compatible), GCS or ADLS."""
        return self.kind in OBJECT_STORES

    @property
    def endpoint(self) -> tuple[str, str]:
        """(the variable that names the store's endpoint, the endpoint): `endpoint_of`."""
        return endpoint_of(self.location, self.storage_options)

    def covers(self, path: str) -> bool:
        """Whether `path` (any spelling) is the warehouse or under it."""
        uri, mine = delta_uri(str(path)).rstrip("/"), self.uri.rstrip("/")
        return uri == mine or uri.startswith(f"{mine}/")

    def s3_client(self) -> Any:
        """The boto3 S3 client of an S3 warehouse, made on first use, then kept."""
        return self._once("s3_client", lambda: s3_client(self.storage_options or {}))

    def object_store(self) -> Any:
        """The `obstore` store of the warehouse's container, made on first use, then kept."""
        return self._once("object_store", lambda: object_store_of(self.uri, self.storage_options))

    def require_conditional_writes(self) -> None:
        """Check the store's commit protocol once (an object store must refuse a second
        create of one object: `ackfold.ledger.storage.protocol.require_conditional_writes`,
        with this store's client); `UnsafeStore` if it does not. Later calls do nothing."""
        from ackfold.ledger.storage.protocol import require_conditional_writes

        def check() -> bool:
            client = self.s3_client if self.kind == "s3" else self.object_store
            require_conditional_writes(self.location, self.storage_options, client=client)
            return True

        self._once("conditional_writes", check)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled (a writer in a Spark function) without its clients: made again there.
        return (Store, (self.location, self.kind, self.options))

    def _once(self, name: str, make: Any) -> Any:
        with self._lock:
            if name not in self._made:
                self._made[name] = make()
            return self._made[name]


@contextmanager
def using(store: Store) -> Iterator[Store]:
    """Make `store` this thread's current store for the block (a run's): `store_for` of a
    path under it answers with it instead of resolving the store again."""
    stack: list[Store] = _current.__dict__.setdefault("stores", [])
    stack.append(store)
    try:
        yield store
    finally:
        stack.remove(store)


def current_store(path: str) -> Store | None:
    """This thread's current store (`using`: a run's) if `path` is under it, else None."""
    stores: list[Store] = _current.__dict__.get("stores", [])
    for store in reversed(stores):
        if store.covers(path):
            return store
    return None


def store_for(path: str) -> Store:
    """The store of `path`: this thread's current store if `path` is under it (`using`),
    else one resolved now for `path`."""
    return current_store(path) or Store.at(path)


def options_for(path: str) -> dict[str, str] | None:
    """The delta-rs storage options of `path`: `store_for(path).storage_options`."""
    return store_for(path).storage_options
