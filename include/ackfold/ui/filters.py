"""What a request asks of the Reliability UI's tables: query and form values, parsed field
by field into typed filters of `root_state` and `dead_letters`.

Every value is parsed here into a typed value (statuses and sort columns from whitelists,
times, integers) and quoted by the ledger's SQL helpers (`ackfold.ledger.reading.sql`): user text
never reaches the SQL raw. Every error is a `FieldError` naming its field (the UI answers
400).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import Any, Final

from ackfold.ledger.reading.parse import QueryError, parse_root_id, parse_statuses, parse_time
from ackfold.ledger.reading.sql import sql_date, sql_str, sql_ts
from ackfold.ledger.schema import status
from ackfold.ledger.schema.ids import format_id
from ackfold.ledger.schema.values import jsonable

# What the roots table shows unless asked otherwise: the roots that need someone. Not
# `replayed`: a replayed root is history, its new attempt is the root that counts (tick
# it in the filter to see them).
UNHEALTHY: Final = (status.FAILED, status.TIMED_OUT, status.DEAD_LETTERED)
SORTABLE: Final = (
    "last_event_at",
    "first_event_at",
    "status_changed_at",
    "root_id",
    "app",
    "status",
    "last_stage",
    "attempt",
    "event_count",
)
MAX_PAGE_SIZE: Final = 500
MAX_OFFSET: Final = 1_000_000
# Root ids one link may name (an alert links to its worst roots this way).
MAX_ROOT_IDS: Final = 100
_MAX_TEXT: Final = 200
# The longest a root id is written ("-9223372036854775808", or 0x and 16 hex digits),
# with room for spaces and leading zeros. Longer text is refused before `int()`, which
# raises on thousands of digits (Python's limit on converting strings to integers).
_MAX_ROOT_ID_CHARS: Final = 40
# C0 and C1 control characters and DEL: never a valid app, stage or filter value.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class FieldError(QueryError):
    """A bad value in one field of a request: the UI answers 400 and names the field."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.field = name


# --- input ----------------------------------------------------------------------------


def root_id_param(text: str, name: str = "root_id") -> int:
    """A root id as the UI is given it (a path, a query or form field, a JSON string):
    `parse_root_id`'s, after refusing text no root id is written as.

    Example:
        >>> root_id_param("0x000000000000002a")
        42
        >>> root_id_param("9" * 5000)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ackfold.ui.filters.FieldError: root_id: a root id has at most 40 characters, got 5000
    """
    if len(text) > _MAX_ROOT_ID_CHARS:
        raise FieldError(
            name, f"a root id has at most {_MAX_ROOT_ID_CHARS} characters, got {len(text)}"
        )
    if _CONTROL.search(text):
        raise FieldError(name, "a root id has no control characters")
    try:
        return parse_root_id(text)
    except QueryError as exc:
        raise FieldError(name, str(exc)) from None


class Params:
    """A request's query or form values (every value of each name), parsed field by field
    into typed values; every error names its field. Empty values mean "not given"."""

    def __init__(self, values: Mapping[str, Sequence[str]]) -> None:
        self._values = {k: [v.strip() for v in vs if v.strip()] for k, vs in values.items()}

    def all(self, name: str) -> list[str]:
        values = self._values.get(name, [])
        for value in values:
            # Refused, not stripped: such a value is never a typo, and never echoed.
            if _CONTROL.search(value):
                raise FieldError(name, "contains a control character")
        return values

    def given(self, name: str) -> bool:
        return name in self._values

    def text(self, name: str) -> str | None:
        values = self.all(name)
        if not values:
            return None
        if len(values[0]) > _MAX_TEXT:
            raise FieldError(name, f"longer than {_MAX_TEXT} characters")
        return values[0]

    def time(self, name: str) -> datetime | None:
        text = self.text(name)
        if text is None:
            return None
        try:
            return parse_time(text, name)
        except QueryError as exc:
            raise FieldError(name, str(exc)) from None

    def integer(self, name: str, default: int, low: int, high: int) -> int:
        text = self.text(name)
        if text is None:
            return default
        try:
            value = int(text)
        except ValueError:
            raise FieldError(name, f"'{text}' is not a whole number") from None
        if not low <= value <= high:
            raise FieldError(name, f"must be from {low} to {high}, got {value}")
        return value

    def choice(self, name: str, choices: Sequence[str], default: str) -> str:
        text = self.text(name)
        if text is None:
            return default
        if text not in choices:
            raise FieldError(name, f"'{text}' is not one of {', '.join(choices)}")
        return text

    def statuses(self, name: str, default: tuple[str, ...]) -> tuple[str, ...]:
        if not self.all(name):
            return default
        try:
            return parse_statuses(self.all(name))
        except QueryError as exc:
            raise FieldError(name, str(exc)) from None

    def root_ids(self, name: str) -> list[int]:
        return list(dict.fromkeys(root_id_param(v, name) for v in self.all(name)))


def _check_range(since: datetime | None, until: datetime | None) -> None:
    if since is not None and until is not None and since >= until:
        raise FieldError("until", "must be later than since")


@dataclass(frozen=True)
class RootFilter:
    """What the roots table shows: filters on `root_state`, a whitelisted sort, a page.
    `since` and `until` bound `last_event_at` (until exclusive); `stage` is `last_stage`;
    `root_ids` (`root_id=`, repeated) narrows it to those roots, in any status unless
    `status` says otherwise."""

    app: str | None = None
    statuses: tuple[str, ...] = UNHEALTHY
    since: datetime | None = None
    until: datetime | None = None
    stage: str | None = None
    sort: str = "last_event_at"
    order: str = "desc"
    limit: int = 50
    offset: int = 0
    root_ids: tuple[int, ...] = ()

    @classmethod
    def parse(cls, params: Params, *, page_size: int = 50) -> RootFilter:
        since, until = params.time("since"), params.time("until")
        _check_range(since, until)
        root_ids = tuple(params.root_ids("root_id"))
        if len(root_ids) > MAX_ROOT_IDS:
            raise FieldError("root_id", f"at most {MAX_ROOT_IDS} ids, got {len(root_ids)}")
        return cls(
            app=params.text("app"),
            statuses=params.statuses("status", status.ALL if root_ids else UNHEALTHY),
            since=since,
            until=until,
            stage=params.text("stage"),
            sort=params.choice("sort", SORTABLE, "last_event_at"),
            order=params.choice("order", ("asc", "desc"), "desc"),
            limit=params.integer("limit", page_size, 1, MAX_PAGE_SIZE),
            offset=params.integer("offset", 0, 0, MAX_OFFSET),
            root_ids=root_ids,
        )

    def query(self, **changes: Any) -> list[tuple[str, str]]:
        """This filter as query-string pairs (for links: pages, sort headers)."""
        f = replace(self, **changes)
        pairs = [("status", s) for s in f.statuses]
        pairs += [("root_id", format_id(root_id)) for root_id in f.root_ids]
        for name, value in (
            ("app", f.app),
            ("since", f.since),
            ("until", f.until),
            ("stage", f.stage),
        ):
            if value is not None:
                pairs.append((name, str(jsonable(value))))
        pairs += [("sort", f.sort), ("order", f.order), ("limit", str(f.limit))]
        if f.offset:
            pairs.append(("offset", str(f.offset)))
        return pairs

    def where(self) -> list[str]:
        where = [f"status IN ({', '.join(sql_str(s) for s in self.statuses)})"]
        if self.app is not None:
            where.append(f"app = {sql_str(self.app)}")
        if self.since is not None:
            where.append(f"last_event_at >= {sql_ts(self.since)}")
        if self.until is not None:
            where.append(f"last_event_at < {sql_ts(self.until)}")
            # A root's first event is no later than its last: prunes newer partitions.
            where.append(f"first_event_date <= {sql_date(self.until.date())}")
        if self.stage is not None:
            where.append(f"last_stage = {sql_str(self.stage)}")
        if self.root_ids:
            where.append(f"root_id IN ({', '.join(str(int(r)) for r in self.root_ids)})")
        return where

    def to_json(self) -> dict[str, Any]:
        out = {f.name: jsonable(getattr(self, f.name)) for f in fields(self)}
        out["root_ids"] = [format_id(r) for r in self.root_ids]
        return out


@dataclass(frozen=True)
class DeadLetterFilter:
    """What the dead letters view shows; `since`/`until` bound `dead_lettered_at`."""

    app: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    redriven: str = "any"  # any, yes, no
    limit: int = 50
    offset: int = 0

    @classmethod
    def parse(cls, params: Params, *, page_size: int = 50) -> DeadLetterFilter:
        since, until = params.time("since"), params.time("until")
        _check_range(since, until)
        return cls(
            app=params.text("app"),
            since=since,
            until=until,
            redriven=params.choice("redriven", ("any", "yes", "no"), "any"),
            limit=params.integer("limit", page_size, 1, MAX_PAGE_SIZE),
            offset=params.integer("offset", 0, 0, MAX_OFFSET),
        )

    def query(self, **changes: Any) -> list[tuple[str, str]]:
        f = replace(self, **changes)
        pairs = [
            (name, str(jsonable(value)))
            for name, value in (("app", f.app), ("since", f.since), ("until", f.until))
            if value is not None
        ]
        pairs += [("redriven", f.redriven), ("limit", str(f.limit))]
        if f.offset:
            pairs.append(("offset", str(f.offset)))
        return pairs

    def where(self) -> list[str]:
        where = []
        if self.app is not None:
            where.append(f"app = {sql_str(self.app)}")
        if self.since is not None:
            where.append(f"dead_lettered_at >= {sql_ts(self.since)}")
        if self.until is not None:
            where.append(f"dead_lettered_at < {sql_ts(self.until)}")
        if self.redriven != "any":
            where.append(f"redriven_at IS {'NOT ' if self.redriven == 'yes' else ''}NULL")
        return where

    def to_json(self) -> dict[str, Any]:
        return {f.name: jsonable(getattr(self, f.name)) for f in fields(self)}
