"""Id schemes: how a root's tuple and edge ids are derived. A root keeps one for life.

The scheme of a root is chosen when it is registered and recorded in
``roots.id_scheme``; its ``init`` event is computed in it, and so is every id of its tree
(``docs/decisions/ids-and-edges.md``):

- ``TEXT`` (1; a null ``id_scheme``: every root registered before the column existed)
  hashes text, ``ids.hash64``: xxhash64 of the parts joined by ``\\x1f``.
- ``NUMERIC`` (2, the default for new roots) hashes the numbers themselves, as Spark's
  ``xxhash64(a, b, ...)`` does: each part in turn (a 64-bit int as its 8 bytes, a string
  as its UTF-8 bytes), seeded with the hash of the parts before it, the first with 42.
  A first part, the *tag*, tells the kinds of ids apart. And the one edge of a *short*
  tuple (one root, one anchor or a spout's pseudo-anchor, any one consumer) is the tuple
  id itself: such a tuple has exactly one edge, so nothing can cancel it.

Root ids and event ids are the same in both schemes: a root's id is derived before its
scheme is known to anyone but its spout, and events are named by what they say.

Example:
    >>> root = 7532661458759473215
    >>> spout_tuple_id(root, NUMERIC) == hash_numbers(1, root)
    True
    >>> spout_tuple_id(root, TEXT) == ids.spout_tuple_id(root)
    True
    >>> t = tuple_id("split", 3, [11], NUMERIC)
    >>> one_edge(t, root, NUMERIC) == t, one_edge(t, root, TEXT) == ids.edge_id(t, root, 0, "")
    (True, True)
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final

import xxhash

from ackfold.ledger.schema import ids
from ackfold.ledger.schema.contract import ID_SCHEMES

TEXT: Final = 1
NUMERIC: Final = 2
SCHEMES: Final = ID_SCHEMES
# The scheme of the roots a spout registers unless told otherwise.
DEFAULT: Final = NUMERIC

# The first part of each numeric id: no two kinds of id hash the same parts.
SPOUT_TAG: Final = 1
TUPLE_TAG: Final = 2
EDGE_TAG: Final = 3
STAGE_TAG: Final = 4

_U64 = 1 << 64
_I64_MAX = (1 << 63) - 1


def check_scheme(value: object, what: str = "id_scheme") -> int:
    """``value`` if it names an id scheme, else a ``ValueError`` naming ``what`` and the
    choices."""
    if isinstance(value, bool) or value not in SCHEMES:
        raise ValueError(
            f"{what} must be {TEXT} (ids hashed from text, as every root before the "
            f"id_scheme column) or "
            f"{NUMERIC} (ids hashed from numbers, the default), got {value!r}"
        )
    return int(value)


def scheme_of(recorded: int | None) -> int:
    """The scheme of a root whose ``roots.id_scheme`` is ``recorded``: null is ``TEXT``.

    Example:
        >>> scheme_of(None), scheme_of(2)
        (1, 2)
    """
    return TEXT if recorded is None else check_scheme(recorded)


def hash_numbers(*parts: int | str) -> int:
    """Spark's ``xxhash64(parts...)`` over bigint and string columns, 0 mapped to 1 (an
    id of 0 would vanish from an XOR), as a signed 64-bit int.

    Example:
        >>> hash_numbers(2, -5) == hash_numbers(2, -5) != hash_numbers(-5, 2)
        True
    """
    seed = ids.SEED
    for part in parts:
        if isinstance(part, bool) or not isinstance(part, int | str):
            raise TypeError(f"id parts must be int or str, got {type(part).__name__}: {part!r}")
        data = part.encode("utf-8") if isinstance(part, str) else struct.pack("<q", part)
        seed = xxhash.xxh64_intdigest(data, seed=seed)
    signed = seed - _U64 if seed > _I64_MAX else seed
    return signed or 1


def stage_key(stage: str) -> int:
    """A stage's name as the number its numeric tuple ids hash: computed once per stage,
    so no row hashes the name's text."""
    return hash_numbers(STAGE_TAG, stage)


def spout_tuple_id(root_id: int, scheme: int) -> int:
    """The id of a root's first tuple, in ``scheme``."""
    if scheme == NUMERIC:
        return hash_numbers(SPOUT_TAG, root_id)
    return ids.spout_tuple_id(root_id)


def tuple_id(stage: str, position: int, anchor_ids: Sequence[int], scheme: int) -> int:
    """The id of the ``position``-th tuple ``stage`` emits from ``anchor_ids``, in ``scheme``."""
    if scheme == NUMERIC:
        return hash_numbers(TUPLE_TAG, stage_key(stage), position, *anchor_ids)
    return ids.tuple_id(stage, position, anchor_ids)


def edge_id(tuple_id: int, root_id: int, anchor_index: int, consumer: str, scheme: int) -> int:
    """One edge of a tuple in the general form, in ``scheme`` (``one_edge`` for the short
    form)."""
    if scheme == NUMERIC:
        return hash_numbers(EDGE_TAG, tuple_id, root_id, anchor_index, consumer)
    return ids.edge_id(tuple_id, root_id, anchor_index, consumer)


def one_edge(tuple_id: int, root_id: int, scheme: int) -> int:
    """The one edge of a short tuple (one root, through anchor 0, to any one consumer):
    the tuple id itself in ``NUMERIC``, a hashed edge in ``TEXT``."""
    if scheme == NUMERIC:
        return tuple_id
    return ids.edge_id(tuple_id, root_id, 0, "")


def child_scheme(anchor_schemes: Sequence[int]) -> int:
    """The scheme of a tuple emitted from anchors of these schemes: the lowest, so a child
    of any old root's tuple is derived as that root's tuples are.

    Example:
        >>> child_scheme([NUMERIC]), child_scheme([NUMERIC, TEXT])
        (2, 1)
    """
    return min(anchor_schemes)
