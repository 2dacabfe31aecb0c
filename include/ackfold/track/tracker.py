"""Tracker: Storm's OutputCollector for ackfold, writing ledger rows instead of acker messages.

A spout registers a root (a ``roots`` row and its ``init`` event); each stage emits children
anchored to the tuples it processes, then acks or fails each of them. Every event row is
ready for the ``ack_events`` table of ledger contract v1.

Ack vals XOR *edges*, not tuple ids: an edge is one tuple in one root's tree, through one of
its anchors, delivered to one consumer (``docs/decisions/ids-and-edges.md``). An emit writes
nothing (invariant 2): the child's edges wait in the anchor's delivery and go out in the same
row as that anchor's ack, so a tree never looks complete before it is.

Example:
    >>> from datetime import datetime, timezone
    >>> from ackfold.track.tracker import Tracker
    >>> tracker = Tracker("orders", clock=lambda: datetime(2024, 1, 1, tzinfo=timezone.utc))
    >>> order = tracker.spout("m-1", source="sqs", source_queue="orders-in", payload="{}")
    >>> line = tracker.emit([order], stage="split")
    >>> tracker.ack(order, stage="split")
    >>> tracker.ack(line, stage="sink")
    >>> events = tracker.drain()
    >>> [e["kind"] for e in events]
    ['init', 'ack', 'ack']
    >>> acc = 0
    >>> for e in events:
    ...     acc ^= e["ack_val"]
    >>> acc  # init seen and XOR 0: the root is complete
    0
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from ackfold.errors import AckfoldError
from ackfold.ledger.schema import ids, schemes
from ackfold.ledger.schema.contract import ACK, FAIL, INIT
from ackfold.ledger.schema.tables import ACK_EVENTS_COLUMNS, ROOTS_COLUMNS
from ackfold.ledger.schema.values import hex64
from ackfold.track.compact import PER_TUPLE, Ack, check_acks, compact_acks
from ackfold.track.tuples import Tuple, check_name, consumers_of, spout_consumers_of

if TYPE_CHECKING:
    from ackfold.ledger.commits.writer import LedgerWriter

# The v1 contract's columns, in the tables' order.
EVENT_COLUMNS: Final = ACK_EVENTS_COLUMNS
ROOT_COLUMNS: Final = ROOTS_COLUMNS

Event = dict[str, Any]


class TrackingError(AckfoldError, RuntimeError):
    """A delivery was used after it was acked or failed (double ack, emit after ack)."""


def _utcnow() -> datetime:
    return datetime.now(UTC)


class Tracker:
    """Collects the ledger rows of one app: Storm's OutputCollector over an append-only ledger.

    Use one tracker per unit of work (a micro-batch, a partition): it remembers every delivery
    it saw, to catch double acks and emits after an ack. Tuples may cross trackers; only the
    emit/ack bookkeeping of one delivery must happen in one tracker.

    ``acks="compact"`` folds the acks of each root and stage into one row per ``drain()``
    (``ackfold.track.compact``): drain once per unit of work, and only where processing a
    tuple again would emit the same children. The default, ``"per_tuple"``, writes one row
    per ack.

    ``id_scheme`` is the id scheme of the roots it registers (``ackfold.ledger.schema.schemes``).
    With ``ledger``, the writer its rows go to, it is the scheme that ledger can record:
    the text scheme where its ``roots`` table has no ``id_scheme`` column (contract v1,
    until ``ackfold upgrade``), else ``id_scheme``.

    Example:
        >>> tracker = Tracker("clicks")
        >>> click = tracker.spout(41, source="kafka", source_position="clicks:0:41")
        >>> session = tracker.emit([click], stage="sessionize", to=["store", "count"])
        >>> tracker.ack(click, stage="sessionize")
        >>> tracker.ack(session, stage="store")
        >>> tracker.ack(session, stage="count")
        >>> [(e["kind"], e["stage"]) for e in tracker.drain()]
        [('init', 'spout'), ('ack', 'sessionize'), ('ack', 'store'), ('ack', 'count')]
        >>> tracker.drain_roots()[0]["source_position"]
        'clicks:0:41'
    """

    def __init__(
        self,
        app: str,
        *,
        clock: Callable[[], datetime] | None = None,
        acks: str = PER_TUPLE,
        id_scheme: int = schemes.DEFAULT,
        ledger: LedgerWriter | None = None,
    ) -> None:
        self.app = check_name("app", app)
        self._clock = clock or _utcnow
        self.acks = check_acks(acks)
        self.id_scheme = schemes.check_scheme(id_scheme)
        if ledger is not None:
            self.id_scheme = ledger.roots_scheme(self.id_scheme)
        self._events: list[Event] = []
        # In compact mode, the acks since the last drain, folded by drain().
        self._acks: list[Ack] = []
        self._roots: list[Event] = []
        self._registered: dict[int, Tuple] = {}
        # Edges of the children emitted while processing a delivery (tuple id, consumer),
        # per root: written with that delivery's ack.
        self._pending: dict[tuple[int, str], dict[int, int]] = {}
        # Settled deliveries -> "acked by 'x'" / "failed by 'x'", for error messages.
        self._done: dict[tuple[int, str], str] = {}
        self._emitted: set[int] = set()
        self._next_position: dict[tuple[str, tuple[int, ...]], int] = {}

    def spout(
        self,
        message_id: str | int,
        *,
        stage: str = "spout",
        source: str = "test",
        source_queue: str = "",
        attempt: int = 1,
        origin_root_id: int | None = None,
        payload: str | None = None,
        source_position: str | None = None,
        to: Sequence[str] | None = None,
    ) -> Tuple:
        """Register a root read from a source queue and return its first tuple.

        Writes a ``roots`` row and the root's ``init`` event (the first tuple's edges).
        Registering the same root again is a no-op that returns an equal tuple, so a
        re-delivered message is tracked once. ``to`` names the stages the first tuple goes
        to (None: any one stage); it cannot be empty, or the root would complete unprocessed.

        Example:
            >>> tracker = Tracker("orders")
            >>> first = tracker.spout("m-1", source="sqs", source_queue="orders-in")
            >>> tracker.spout("m-1", source="sqs", source_queue="orders-in") == first
            True
            >>> len(tracker.drain()), len(tracker.drain_roots())
            (1, 1)
        """
        check_name("stage", stage)
        source_key = f"{source}:{source_queue}:{message_id}"
        root = ids.root_id(self.app, source_key, attempt, origin_root_id)
        consumers = spout_consumers_of(to)
        first = Tuple(
            id=schemes.spout_tuple_id(root, self.id_scheme),
            roots=(root,),
            anchor_roots=(frozenset({root}),),
            consumers=consumers,
            stage=stage,
            scheme=self.id_scheme,
        )
        known = self._registered.get(root)
        if known is not None:
            if known != first:
                raise ValueError(
                    f"root {hex64(root)} was registered with consumers {list(known.consumers)}, "
                    f"not {list(consumers)}"
                )
            return known
        self._registered[root] = first
        now = self._now()
        self._roots.append(
            {
                "root_id": root,
                "app": self.app,
                "attempt": attempt,
                "origin_root_id": root if attempt == 1 else origin_root_id,
                "source": source,
                "source_queue": source_queue,
                "source_message_id": str(message_id),
                "source_position": source_position,
                "payload": payload,
                "ingested_at": now,
                "id_scheme": self.id_scheme,
            }
        )
        init_val = 0
        for consumer in consumers:
            init_val ^= first.value(root, consumer)
        self._events.append(self._event(root, INIT, stage, first.id, init_val, now))
        return first

    def emit(
        self,
        anchors: Sequence[Tuple],
        *,
        stage: str,
        position: int | None = None,
        to: Sequence[str] | None = None,
    ) -> Tuple:
        """Emit a child of ``anchors`` from ``stage``, which is processing them.

        Writes no event: the child's edges are added to each anchor's delivery and written
        with its ack. ``position`` (default: 0, 1, ... per stage and anchors) tells siblings
        apart; ``to`` names the stages it is delivered to, each of which must ack it
        (None: any one stage). ``to=[]`` makes a sink's output, which no stage consumes: it
        has no edges, so it keeps no tree open, as a Storm tuple emitted to a stream
        without subscribers; no stage may ack, fail or anchor to it.

        Example:
            >>> tracker = Tracker("orders")
            >>> a, b = tracker.spout("m-1"), tracker.spout("m-2")
            >>> joined = tracker.emit([a, b], stage="join")
            >>> len(joined.roots), tracker.drain()[-1]["kind"]
            (2, 'init')
            >>> tracker.emit([], stage="join")
            Traceback (most recent call last):
            ...
            ValueError: emit needs at least one anchor: ackfold does not track unanchored tuples

        A sink's output adds nothing to the tree:

            >>> tracker = Tracker("orders")
            >>> order = tracker.spout("m-1")
            >>> total = tracker.emit([order], stage="store", to=[])
            >>> tracker.ack(order, stage="store")
            >>> acc = 0
            >>> for e in tracker.drain():
            ...     acc ^= e["ack_val"]
            >>> acc, total.consumers  # complete: nothing is owed for the stored total
            (0, ())
        """
        check_name("stage", stage)
        anchors = list(anchors)
        if not anchors:
            raise ValueError(
                "emit needs at least one anchor: ackfold does not track unanchored tuples"
            )
        deliveries = [self._open_delivery(anchor, stage, "emit anchored to") for anchor in anchors]
        consumers = consumers_of(to)
        anchor_ids = tuple(anchor.id for anchor in anchors)
        scheme = schemes.child_scheme([anchor.scheme for anchor in anchors])
        if position is None:
            position = self._take_position(stage, anchor_ids, scheme)
        elif isinstance(position, bool) or not isinstance(position, int) or position < 0:
            raise ValueError(f"position must be an int >= 0, got {position!r}")
        child_id = schemes.tuple_id(stage, position, anchor_ids, scheme)
        if child_id in self._emitted:
            # Same stage, position and anchors is the same tuple: its edges would cancel.
            raise ValueError(
                f"stage {stage!r} already emitted position {position} from these anchors "
                f"(tuple {hex64(child_id)}); positions must be unique per stage and anchors"
            )
        child = Tuple(
            id=child_id,
            roots=tuple(dict.fromkeys(root for anchor in anchors for root in anchor.roots)),
            anchor_roots=tuple(frozenset(anchor.roots) for anchor in anchors),
            consumers=consumers,
            stage=stage,
            scheme=scheme,
        )
        self._emitted.add(child_id)
        # Anchor index k is in the edge: anchoring one parent twice makes two edges, not zero.
        for k, (anchor, delivery) in enumerate(zip(anchors, deliveries, strict=True)):
            pending = self._pending.setdefault(delivery, {})
            for root in anchor.roots:
                for consumer in consumers:
                    pending[root] = pending.get(root, 0) ^ child.edge(root, k, consumer)
        return child

    def ack(self, t: Tuple, *, stage: str) -> None:
        """Ack ``stage``'s delivery of ``t``: one ``ack`` row per root of ``t``.

        Each row XORs ``t``'s own edges for this consumer with the edges of the children
        ``stage`` emitted from it (invariant 2).

        Example:
            >>> tracker = Tracker("orders")
            >>> t = tracker.spout("m-1")
            >>> tracker.ack(t, stage="parse")
            >>> tracker.ack(t, stage="parse")  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ...
            ackfold.track.tracker.TrackingError: stage 'parse' cannot ack ...: already acked by ...
        """
        check_name("stage", stage)
        delivery = self._open_delivery(t, stage, "ack")
        pending = self._pending.pop(delivery, {})
        self._done[delivery] = f"acked by {stage!r}"
        now = self._now()
        for root in t.roots:
            value = t.value(root, delivery[1]) ^ pending.get(root, 0)
            if self.acks == PER_TUPLE:
                self._events.append(self._event(root, ACK, stage, t.id, value, now))
            else:
                self._acks.append(Ack(root, stage, t.id, value, now))

    def fail(self, t: Tuple, *, stage: str, reason: str) -> None:
        """Fail ``stage``'s delivery of ``t``: every root of ``t`` fails, with ``reason``.

        The edges of children emitted from it are dropped: the tree is failed anyway.

        Example:
            >>> tracker = Tracker("orders")
            >>> t = tracker.spout("m-1")
            >>> tracker.fail(t, stage="parse", reason="bad json")
            >>> [(e["kind"], e["ack_val"], e["reason"]) for e in tracker.drain()][1:]
            [('fail', 0, 'bad json')]
        """
        check_name("stage", stage)
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError(f"fail needs a non-empty reason, got {reason!r}")
        delivery = self._open_delivery(t, stage, "fail")
        self._pending.pop(delivery, None)
        self._done[delivery] = f"failed by {stage!r}"
        now = self._now()
        for root in t.roots:
            self._events.append(self._event(root, FAIL, stage, t.id, 0, now, reason))

    def drain(self) -> list[Event]:
        """Return the ``ack_events`` rows written since the last drain, and forget them.

        In compact mode the acks since the last drain come last, one row per root and stage.

        Example:
            >>> tracker = Tracker("orders", acks="compact")
            >>> order = tracker.spout("m-1")
            >>> lines = [tracker.emit([order], stage="split") for _ in range(3)]
            >>> tracker.ack(order, stage="split")
            >>> for line in lines:
            ...     tracker.ack(line, stage="sink")
            >>> [(e["kind"], e["stage"]) for e in tracker.drain()]
            [('init', 'spout'), ('ack', 'split'), ('ack', 'sink')]
        """
        events, self._events = self._events, []
        acks, self._acks = self._acks, []
        return events + compact_acks(self.app, acks)

    def drain_roots(self) -> list[Event]:
        """Return the ``roots`` rows written since the last drain, and forget them."""
        roots, self._roots = self._roots, []
        return roots

    def _open_delivery(self, t: Tuple, stage: str, action: str) -> tuple[int, str]:
        if not isinstance(t, Tuple):
            raise TypeError(f"expected a Tuple, got {type(t).__name__}")
        delivery = (t.id, t.consumer_key(stage))
        done = self._done.get(delivery)
        if done is not None:
            raise TrackingError(f"stage {stage!r} cannot {action} {t!r}: already {done}")
        return delivery

    def _take_position(self, stage: str, anchor_ids: tuple[int, ...], scheme: int) -> int:
        key = (stage, anchor_ids)
        position = self._next_position.get(key, 0)
        # Skip positions taken by explicit `position=` emits.
        while schemes.tuple_id(stage, position, anchor_ids, scheme) in self._emitted:
            position += 1
        self._next_position[key] = position + 1
        return position

    def _now(self) -> datetime:
        now = self._clock()
        if now.tzinfo is None or now.utcoffset() is None:
            raise ValueError(f"the tracker's clock must return aware datetimes, got {now!r}")
        return now.astimezone(UTC)

    def _event(
        self,
        root: int,
        kind: str,
        stage: str,
        tuple_id: int,
        ack_val: int,
        event_time: datetime,
        reason: str | None = None,
    ) -> Event:
        return {
            "event_id": ids.event_id(self.app, root, kind, stage, tuple_id),
            "app": self.app,
            "root_id": root,
            "kind": kind,
            "ack_val": ack_val,
            "stage": stage,
            "event_time": event_time,
            "reason": reason,
        }
