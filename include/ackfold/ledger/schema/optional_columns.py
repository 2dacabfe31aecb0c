"""What a contract table that lacks an optional column can take: a `roots` table without
`id_scheme` (contract v1, or made by an ackfold before it) records roots of the text id
scheme only (a null `id_scheme`, `ledger.schemes`). A tracker registering into it derives
its ids so (`roots_scheme`), and a root of another scheme is refused before anything is
written (`require_roots_fit`). `ackfold.ledger.setup.upgrade` adds the column, on request only.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Final

from ackfold.ledger.errors import SchemaMismatch
from ackfold.ledger.schema import schemes

log = logging.getLogger(__name__)

SCHEME_COLUMN: Final = "id_scheme"
# What adds the optional columns: named in every warning and error about a table without.
UPGRADE_COMMAND: Final = "ackfold upgrade"
# The `roots` tables whose lack of `id_scheme` was logged (once per process and table).
_WARNED: set[str] = set()


def roots_scheme(path: str, columns: Sequence[str] | None, wanted: int) -> int:
    """The id scheme of the roots a tracker registers into the `roots` table at `path`,
    whose stored columns are `columns` (None: no table yet, made with every column):
    `wanted`, unless the table has no `id_scheme` column, where only text-scheme roots can
    be recorded; then `TEXT`, with one warning per process that names the upgrade.

    Example:
        >>> roots_scheme("/w/roots", ["root_id", "id_scheme"], schemes.NUMERIC)
        2
        >>> roots_scheme("/w/roots", ["root_id"], schemes.NUMERIC)
        1
    """
    if columns is None or SCHEME_COLUMN in columns or wanted == schemes.TEXT:
        return wanted
    if path not in _WARNED:
        _WARNED.add(path)
        log.warning(
            "%s has no id_scheme column (contract v1): roots are registered there in the "
            "text id scheme; `%s` adds the column (restart the streams that read roots after)",
            path,
            UPGRADE_COMMAND,
        )
    return schemes.TEXT


def require_roots_fit(path: str, columns: Sequence[str], recorded: Iterable[object]) -> None:
    """Raise `SchemaMismatch` when `roots` rows whose `id_scheme` values are `recorded`
    cannot be appended to the `roots` table at `path` of stored `columns`: a table without
    the column reads every root as text-scheme, so a root of another scheme would be read
    in the wrong one and its tree never complete. Rows of the text scheme (1 or null) fit
    any table, and are appended without the column.

    Example:
        >>> require_roots_fit("/w/roots", ["root_id"], [None, 1])
        >>> require_roots_fit("/w/roots", ["root_id"], [2])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ackfold.ledger.errors.SchemaMismatch: /w/roots has no id_scheme column (...)...
    """
    if SCHEME_COLUMN in columns:
        return
    others = sorted({str(v) for v in recorded if v is not None and v != schemes.TEXT})
    if others:
        raise SchemaMismatch(
            f"{path} has no id_scheme column (contract v1), so it records only roots of the "
            f"text id scheme ({schemes.TEXT}), and these rows have id_scheme "
            f"{', '.join(others)}: nothing was written. Register them with "
            f"id_scheme={schemes.TEXT} (Tracker(app, ledger=writer) picks it), or add the "
            f"column with `{UPGRADE_COMMAND}` (docs/ledger.md)"
        )
