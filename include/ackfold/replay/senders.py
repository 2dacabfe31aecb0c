"""Senders: what sends a replay of a root back to its source, found by the root's `source`.

A root's `source` column (`sqs`, `kafka`, or whatever a spout registered) names its
sender. A sender is a factory that makes the queue a replay sends to, one per source
queue and app in a run:

    def make(settings: Settings, queue: str, app: str) -> SourceQueue

- `settings`: the loaded configuration (`settings.apps[app]` holds the app's overrides:
  `dead_letter_queue`, `retry_queue`, ...);
- `queue`: the root's `source_queue`, as its spout registered it;
- `app`: the root's app.

The `SourceQueue` it returns (`ackfold.sources.base`) gets the roots in batches of at
most its `batch_size` (set it to 1 to take them one by one), as `Outbound`s: the stored
`payload` (`body`), the `source_position` (`position`, for a source that re-reads:
`rereads = True`), the root replayed (`root_id`), and the new attempt's `attempt`,
`origin_root_id` and `new_root_id`. `republish` sends each as that new attempt,
`dead_letter` parks a root out of attempts (its `attributes` say why); both return one
`Sent` per message, in order (the new message id, or the error: never raise for one
message). The app must register a replayed message under the `origin_root_id` and
`attempt` it was sent with (docs/ledger.md), or the replay is the same root again.

A sender is registered under the entry point group `ackfold.senders`, named by the
`source` value, in the `pyproject.toml` of any installed distribution:

    [project.entry-points."ackfold.senders"]
    files = "ackfold.sources.files:FilesInbox"

ackfold's own (`sqs`, `kafka`) are registered there too, and also found without their
entry points (a checkout whose install predates them); no other distribution can take
their names. A root whose source has no sender is dead-lettered at once, with
`no_sender_reason` (`ackfold.replay.planner`): it cannot be replayed, so it must not stay
`failed`.

Example:
    >>> from ackfold.replay.senders import find_sender, no_sender_reason
    >>> find_sender("sqs").__name__, find_sender("no-such-source") is None
    ('sqs_sender', True)
    >>> no_sender_reason("x")
    "no sender for source 'x': register one under the entry point group ackfold.senders"
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Final, Protocol

from ackfold.errors import AckfoldError
from ackfold.sources.base import NO_SENDER

if TYPE_CHECKING:
    from ackfold.config import Settings
    from ackfold.sources.base import SourceQueue

GROUP: Final = "ackfold.senders"
# ackfold's own senders, by source: what their entry points name.
BUILTIN: Final = {
    "sqs": "ackfold.replay.queues:sqs_sender",
    "kafka": "ackfold.replay.queues:kafka_sender",
}


class SenderFactory(Protocol):
    """Makes the queue a replay of `app`'s roots read from `queue` sends to."""

    def __call__(self, settings: Settings, queue: str, app: str) -> SourceQueue: ...


class SenderError(AckfoldError, TypeError):
    """A registered sender cannot be loaded; the message names its entry point."""


def no_sender_reason(source: str) -> str:
    """The dead-letter reason of a root whose `source` has no sender."""
    return f"{NO_SENDER}{source!r}: register one under the entry point group {GROUP}"


def find_sender(source: str) -> SenderFactory | None:
    """The sender registered for `source`, or None if there is none.

    Raises `SenderError` if its entry point names something that cannot be imported or
    is not callable: a broken registration is an error to fix, not a source to
    dead-letter."""
    target = BUILTIN.get(source)
    if target is not None:
        return _load(EntryPoint(source, target, GROUP))
    found = entry_points(group=GROUP, name=source)
    if not found:
        return None
    # Two distributions registering one source: the first, in the order Python finds them.
    return _load(next(iter(found)))


def registered() -> dict[str, str]:
    """Every source with a sender, and the `module:attribute` that makes it."""
    named = {ep.name: ep.value for ep in entry_points(group=GROUP)}
    return dict(sorted({**named, **BUILTIN}.items()))


def _load(entry: EntryPoint) -> SenderFactory:
    try:
        factory: Callable[..., SourceQueue] = entry.load()
    except (ImportError, AttributeError) as exc:
        raise SenderError(
            f"the sender for source {entry.name!r} ({GROUP} entry point {entry.value!r}) "
            f"cannot be loaded: {exc}; fix or uninstall the distribution that registers it"
        ) from exc
    if not callable(factory):
        raise SenderError(
            f"the sender for source {entry.name!r} ({GROUP} entry point {entry.value!r}) "
            "is not callable: it must take (settings, queue, app) and return a SourceQueue"
        )
    return factory
