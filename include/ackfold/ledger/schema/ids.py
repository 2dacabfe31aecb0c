"""Derived ids: roots, tuples, edges and events, computed the same way in Python and Spark SQL.

Every id is a hash of what it identifies, never a random draw (invariant 4), so re-running
a micro-batch writes the same ids again and the fold drops the duplicates.

The 64-bit ids are ``xxhash64`` with seed 42 over the parts joined by ``SEP``, as a signed
bigint: Spark's ``xxhash64(concat_ws('\\x1f', ...))``. The one difference is that a hash of 0
is mapped to 1, because an id of 0 would vanish from an XOR; the SQL side does the same with
``CASE WHEN h = 0 THEN 1 ELSE h END``. Event ids are ``md5(concat_ws('\\x1f', ...))``.

See ``docs/decisions/ids-and-edges.md`` for why tuples are tracked by edges.

People see an id in one form, ``format_id``: ``0x`` and 16 hex digits, the stored bigint's
two's complement. ``parse_id`` takes every form a person may paste: that one, hex without
``0x``, signed decimal (the Delta column's value) and unsigned decimal
(``docs/decisions/readable-ids.md``).

Example:
    >>> from ackfold.ledger.schema import ids
    >>> r = ids.root_id("orders", "sqs:orders-in:m-1")
    >>> r == ids.hash64("root", "orders", "sqs:orders-in:m-1")
    True
    >>> ids.root_id("orders", "ignored", attempt=2, origin_root_id=r) == ids.hash64("attempt", r, 2)
    True
    >>> len(ids.event_id("orders", r, "init", "spout", ids.spout_tuple_id(r)))
    32
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence

import xxhash

from ackfold.errors import AckfoldError
from ackfold.ledger.schema.contract import ACK

SEP = "\x1f"
SEED = 42
_U64 = 1 << 64
_I64_MAX = (1 << 63) - 1
_I64_MIN = -(1 << 63)
_MASK64 = _U64 - 1
_DECIMAL = re.compile(r"[+-]?[0-9]+")
_HEX_PREFIXED = re.compile(r"0[xX][0-9a-fA-F]+")
_HEX_BARE = re.compile(r"[0-9a-fA-F]+")
# The display form's digit count: a bare string this long of only 0-9 could be either base.
_HEX_DIGITS = 16
# Longer text is no 64-bit id in any form (and int() of it would be slow).
_MOST_CHARS = 40


def hash64(*parts: str | int) -> int:
    """Hash ``parts`` joined by ``SEP`` to a signed, non-zero 64-bit int.

    Equals Spark's ``xxhash64(concat_ws('\\x1f', parts...))`` except that 0 becomes 1.
    Parts are strings or ints; ``None`` is refused because ``concat_ws`` would skip it,
    and strings may not contain ``SEP`` because ``("a\\x1fb",)`` would collide with
    ``("a", "b")``.

    Example:
        >>> import xxhash
        >>> u = xxhash.xxh64_intdigest(b"root\\x1fapp\\x1f7", seed=42)
        >>> hash64("root", "app", 7) == (u - (1 << 64) if u >= 1 << 63 else u)
        True
    """
    texts = []
    for part in parts:
        # bool is an int, but str(True) is "True" where Spark writes "true": refuse it.
        if isinstance(part, bool) or not isinstance(part, str | int):
            raise TypeError(f"id parts must be str or int, got {type(part).__name__}: {part!r}")
        text = str(part)
        if SEP in text:
            raise ValueError(f"id part {text!r} contains the separator \\x1f")
        texts.append(text)
    unsigned = xxhash.xxh64_intdigest(SEP.join(texts).encode("utf-8"), seed=SEED)
    signed = unsigned - _U64 if unsigned > _I64_MAX else unsigned
    return signed or 1


def root_id(app: str, source_key: str, attempt: int = 1, origin_root_id: int | None = None) -> int:
    """The id of one root: from the source coordinates on attempt 1, else from its origin.

    A replay is a new root derived from the first attempt's id and the attempt number, so a
    late event of one attempt can never land in another (invariant 5).

    Example:
        >>> first = root_id("orders", "kafka:orders:0:42")
        >>> second = root_id("orders", "kafka:orders:0:42", attempt=2, origin_root_id=first)
        >>> first != second
        True
        >>> root_id("orders", "kafka:orders:0:42", attempt=2)
        Traceback (most recent call last):
        ...
        ValueError: attempt 2 needs the origin_root_id of attempt 1
    """
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
        raise ValueError(f"attempt must be an int >= 1, got {attempt!r}")
    if attempt == 1:
        derived = hash64("root", app, source_key)
        if origin_root_id is not None and origin_root_id != derived:
            raise ValueError(
                f"attempt 1 is its own origin: origin_root_id {origin_root_id} "
                f"differs from the derived root id {derived}"
            )
        return derived
    if origin_root_id is None:
        raise ValueError(f"attempt {attempt} needs the origin_root_id of attempt 1")
    return hash64("attempt", origin_root_id, attempt)


def spout_tuple_id(root_id: int) -> int:
    """The id of the first tuple of a root, the one the spout stage emits.

    Example:
        >>> spout_tuple_id(5) == hash64("spout", 5)
        True
    """
    return hash64("spout", root_id)


def tuple_id(stage: str, position: int, anchor_ids: Sequence[int]) -> int:
    """The id of a tuple emitted by ``stage``, the ``position``-th from these anchors.

    Example:
        >>> tuple_id("parse", 0, [11, 12]) == hash64("tuple", "parse", 0, 11, 12)
        True
        >>> tuple_id("parse", 0, [11, 12]) != tuple_id("parse", 0, [12, 11])
        True
    """
    return hash64("tuple", stage, position, *anchor_ids)


def edge_id(tuple_id: int, root_id: int, anchor_index: int, consumer: str) -> int:
    """The id of one edge: tuple ``tuple_id`` in root ``root_id``'s tree, through its
    ``anchor_index``-th anchor, delivered to ``consumer`` (``""``: the unnamed consumer).

    Edges, not tuple ids, are what the ack vals XOR: see ``docs/decisions/ids-and-edges.md``.

    Example:
        >>> edge_id(3, 5, 0, "") == hash64("edge", 3, 5, 0, "")
        True
        >>> edge_id(3, 5, 0, "") != edge_id(3, 5, 1, "")  # anchored twice: two edges
        True
    """
    return hash64("edge", tuple_id, root_id, anchor_index, consumer)


def event_id(app: str, root_id: int, kind: str, stage: str, tuple_id: int) -> str:
    """The id of one ledger event: what it says, so a re-run writes the same id again.

    Example:
        >>> import hashlib
        >>> event_id("orders", 5, "ack", "parse", 3) == hashlib.md5(
        ...     b"orders\\x1f5\\x1fack\\x1fparse\\x1f3").hexdigest()
        True
    """
    text = SEP.join([app, str(root_id), kind, stage, str(tuple_id)])
    # md5 names events (as Spark's md5() does); it protects nothing.
    return hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest()


def tuple_set_signature(tuple_ids: Iterable[int]) -> int:
    """The XOR of a set of tuple ids: what a compact ack event's id says about its tuples.

    Order-free, so Spark computes it with ``bit_xor`` over a group; the id of a set of one
    tuple is that tuple's id.

    Example:
        >>> tuple_set_signature([3, 5]) == tuple_set_signature([5, 3]) == 3 ^ 5
        True
    """
    signature = 0
    for tuple_id in tuple_ids:
        signature ^= tuple_id
    return signature


def compact_event_id(app: str, root_id: int, stage: str, count: int, signature: int) -> str:
    """The id of a compact ``ack`` event: ``stage``'s acks of ``count`` tuples of one root
    (their ids XOR to ``signature``, ``tuple_set_signature``), folded into one row.

    The id names exactly the set of tuples the row stands for, so processing the same
    tuples again, in a re-run or a redelivery, writes the same id, which the fold drops
    (``docs/decisions/compact-events.md``). A set of one tuple is that tuple's own ack:
    its id is ``event_id(app, root_id, "ack", stage, tuple_id)``, the per-tuple id.

    Example:
        >>> compact_event_id("wc", 5, "count", 1, 77) == event_id("wc", 5, "ack", "count", 77)
        True
        >>> import hashlib
        >>> compact_event_id("wc", 5, "count", 2, 3 ^ 4) == hashlib.md5(
        ...     b"wc\x1f5\x1fack\x1fcount\x1f2\x1f7").hexdigest()
        True
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"a compact event stands for at least one tuple, got count {count!r}")
    if count == 1:
        return event_id(app, root_id, ACK, stage, signature)
    text = SEP.join([app, str(root_id), ACK, stage, str(count), str(signature)])
    return hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest()


def event_hash(event_id: str) -> int:
    """The 64 bits of an event id that `root_state.seen_event_hashes` keeps.

    Equals Spark's `xxhash64(event_id)` (no zero mapping: it is never XORed).

    Example:
        >>> event_hash("e1") == event_hash("e1") != event_hash("e2")
        True
    """
    unsigned = xxhash.xxh64_intdigest(event_id.encode("utf-8"), seed=SEED)
    return unsigned - _U64 if unsigned > _I64_MAX else unsigned


class IdError(AckfoldError, ValueError):
    """Text that is not a 64-bit id in any accepted form; the message says which forms are."""


def format_id(value: int) -> str:
    """An id as people see it everywhere (UI, CLI, JSON, alerts, logs): ``0x`` and 16
    lowercase hex digits, the two's complement of the signed bigint stored.

    Example:
        >>> format_id(-7661393185244144625), format_id(42)
        ('0x95ad437d64ec9c0f', '0x000000000000002a')
        >>> format_id(1 << 63)
        Traceback (most recent call last):
        ...
        ackfold.ledger.schema.ids.IdError: 9223372036854775808 is not a signed 64-bit id
    """
    if isinstance(value, bool) or not isinstance(value, int) or not _I64_MIN <= value <= _I64_MAX:
        raise IdError(f"{value!r} is not a signed 64-bit id")
    return f"0x{value & _MASK64:016x}"


def parse_id(text: str, what: str = "root id") -> int:
    """The signed bigint of an id pasted in any form: ``0x`` hex (``format_id``), hex
    without ``0x``, signed decimal, or unsigned decimal. ``what`` names the input in errors.

    A bare string of exactly 16 digits 0-9 is both a hex id without its ``0x`` and a
    decimal number: it is refused, with the two ways to say which one it is.

    Example:
        >>> r = -7661393185244144625
        >>> {parse_id(t) for t in ("0x95ad437d64ec9c0f", "95AD437D64EC9C0F",
        ...                        "-7661393185244144625", "10785350888465406991")} == {r}
        True
        >>> parse_id("18446744073709551616")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ackfold.ledger.schema.ids.IdError: root id '18446744073709551616' is out of range: ...
    """
    if not isinstance(text, str):
        raise IdError(f"{what} must be text, got {type(text).__name__}")
    value = text.strip()
    shown = value if len(value) <= _MOST_CHARS else value[:_MOST_CHARS] + "..."
    forms = (
        "give it as ackfold shows it (0x and 16 hex digits), as hex without 0x, "
        "or in decimal (signed or unsigned)"
    )
    if not value or len(value) > _MOST_CHARS:
        raise IdError(f"{what} '{shown}' is not a 64-bit id: {forms}")
    if _HEX_PREFIXED.fullmatch(value):
        number = int(value, 16)
    elif _DECIMAL.fullmatch(value):
        if len(value) == _HEX_DIGITS and value[0] not in "+-":
            raise IdError(
                f"{what} '{shown}' is ambiguous: 16 digits may be hex or decimal; "
                f"write 0x{value} for hex, or +{value} for decimal"
            )
        number = int(value)
    elif _HEX_BARE.fullmatch(value):
        number = int(value, 16)
    else:
        raise IdError(f"{what} '{shown}' is not a 64-bit id: {forms}")
    if not _I64_MIN <= number <= _MASK64:
        raise IdError(
            f"{what} '{shown}' is out of range: ids are 64-bit (signed from {_I64_MIN}, "
            f"unsigned up to {_MASK64}, hex up to 0x{_MASK64:x})"
        )
    return number - _U64 if number > _I64_MAX else number


# The fields of JSON rows that hold one id, and the one that holds a list of them.
ID_FIELDS = frozenset({"root_id", "origin_root_id", "new_root_id", "redrive_root_id"})
ID_LIST_FIELDS = frozenset({"root_ids"})


def shown_ids(row: dict[str, object]) -> dict[str, object]:
    """``row`` (a JSON-ready dict) with its id fields in the form of ``format_id``.

    JSON numbers lose 64-bit precision in JavaScript and jq, and a person copies ids from
    JSON too: ids go out as text in the one form people see.

    Example:
        >>> shown_ids({"root_id": -1, "origin_root_id": None, "root_ids": [1], "n": 3})
        ... # doctest: +NORMALIZE_WHITESPACE
        {'root_id': '0xffffffffffffffff', 'origin_root_id': None,
         'root_ids': ['0x0000000000000001'], 'n': 3}
    """
    out = dict(row)
    for name, value in row.items():
        if name in ID_FIELDS and isinstance(value, int):
            out[name] = format_id(value)
        elif name in ID_LIST_FIELDS and isinstance(value, list | tuple):
            out[name] = [format_id(v) if isinstance(v, int) else v for v in value]
    return out
