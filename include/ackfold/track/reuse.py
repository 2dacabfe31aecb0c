"""Tracking expressions built once per Spark JVM, not once per micro-batch.

A tracked stage's columns (root and tuple ids, edges, ack vals) are deep expression trees,
and in a classic session PySpark builds each node with a call into the JVM: about 6,000
calls a micro-batch for a Kafka query's registration and acks, against some 250 for the
same query untracked, nearly a CPU-second a batch on both sides of the gateway
(docs/benchmarks.md, issue 56). The trees depend only on what the stage names (its app,
stage, consumers, id scheme and the columns it reads), so ``reused`` keeps each one built
and hands the same ``Column`` to every later batch: a Column is an unresolved expression,
which each DataFrame resolves against its own plan.

The key is the builder, the arguments (a Column by its expression's text) and the JVM
that made the Columns (a session stopped and started again builds anew). Spark Connect
builds its Columns in Python alone; they are kept the same way.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Hashable
from typing import Any, Final, TypeVar

from pyspark.sql import Column

F_ = TypeVar("F_", bound=Callable[..., Any])

# Builders whose arguments change every batch (a lambda's variable has a fresh name each
# time it is made) would fill the table: past this many entries it starts over.
_MOST: Final = 4096
_BUILT: dict[Hashable, Any] = {}
_MARK: Final = "_ackfold_columns_mark"  # the attribute that holds a context's token


def reused(build: F_) -> F_:
    """``build`` (a function of strings, numbers, sequences of them and Columns that
    returns Columns) made to return what it built before for the same arguments."""

    @functools.wraps(build)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        key = (
            build.__module__,
            build.__qualname__,
            _jvm(),
            tuple(_key(arg) for arg in args),
            tuple(sorted((name, _key(value)) for name, value in kwargs.items())),
        )
        found = _BUILT.get(key)
        if found is None:
            if len(_BUILT) >= _MOST:
                _BUILT.clear()
            found = _BUILT[key] = build(*args, **kwargs)
        return found

    return wrapper  # type: ignore[return-value]


def _key(value: Any) -> Hashable:
    """What ``value`` contributes to a key: a Column its kind and expression text (a
    literal's text does not say its type: the kind of Column and the builder's own
    arguments do), a sequence its items."""
    if isinstance(value, Column):
        return ("column", type(value).__module__, str(value))
    if isinstance(value, list | tuple):
        return tuple(_key(item) for item in value)
    hashable: Hashable = value
    return hashable


def _jvm() -> str | None:
    """A token of the classic SparkContext that builds this process's Columns (given to it
    on first use: an ``id`` could be a stopped context's again); None where PySpark builds
    Spark Connect's (in Python), or before any context."""
    from pyspark import SparkContext
    from pyspark.sql.utils import is_remote

    context = SparkContext._active_spark_context
    if is_remote() or context is None:
        return None
    token: str | None = getattr(context, _MARK, None)
    if token is None:
        token = uuid.uuid4().hex
        setattr(context, _MARK, token)
    return token
