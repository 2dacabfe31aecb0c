"""The roots a replay request from the UI names: ticked root ids, or the current filter's
newest replayable roots, capped at `ui.replay_max_roots`; and a JSON request as the form's
fields."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from ackfold.config.sections import UiSettings
from ackfold.ledger.schema.ids import format_id
from ackfold.replay.request import REPLAYABLE
from ackfold.ui.filters import FieldError, Params, RootFilter
from ackfold.ui.queries import UiReader

# A JSON replay body names its roots here; the form, one `root_id` field per root.
IDS_FIELD: Final = "root_ids"


@dataclass(frozen=True)
class Selection:
    """The roots a replay would send: `matched` by the request, `replayable` of them
    failed, timed out or dead-lettered, `root_ids` the first `ui.replay_max_roots` of
    those (of the `considered` the cap took), `skipped` the others by status."""

    root_ids: list[int]
    matched: int
    considered: int
    skipped: dict[str, int]
    replayable: int

    def to_json(self) -> dict[str, Any]:
        return {
            "root_ids": [format_id(r) for r in self.root_ids],
            "matched": self.matched,
            "replayable": self.replayable,
            "considered": self.considered,
            "skipped": self.skipped,
        }


def select_roots(r: UiReader, params: Params, ui: UiSettings) -> Selection:
    """The roots a replay request names: ticked ids, or the current filter's newest
    replayable ones (the cap counts only those: the filter's other statuses are
    counted as skipped, never fetched). An error about the ids names the field they came
    in: the form's `root_id`, or a JSON body's `root_ids` (`json_params`)."""
    cap = ui.replay_max_roots
    skipped: dict[str, int] = {}
    if params.choice("scope", ("selected", "filter"), "selected") == "filter":
        f = RootFilter.parse(params, page_size=ui.page_size)
        counts = r.count_by_status(f)
        matched = sum(counts.values())
        for name, n in counts.items():
            if name not in REPLAYABLE:
                skipped[name] = n
        wanted = tuple(s for s in f.statuses if s in REPLAYABLE)
        ids = r.matching_ids(replace(f, statuses=wanted), cap) if wanted else []
    else:
        field = IDS_FIELD if params.all(IDS_FIELD) else "root_id"
        ids = params.root_ids(field)
        if not ids:
            raise FieldError(field, "select at least one root")
        if len(ids) > cap:
            raise FieldError(field, f"{len(ids)} roots: at most {cap} at once")
        matched = len(ids)
    # Checked again by id: a root may have moved on since it was counted.
    statuses = r.statuses_of(ids)
    chosen = [i for i in ids if statuses.get(i) in REPLAYABLE]
    for i in ids:
        if i not in chosen:
            name = statuses.get(i, "unknown root")
            skipped[name] = skipped.get(name, 0) + 1
    replayable = matched - sum(skipped.values())
    return Selection(chosen, matched, len(ids), skipped, max(replayable, len(chosen)))


def json_params(body: Mapping[str, Any]) -> Params:
    """A JSON replay body as the form's fields: ids as `root_id`, or the filter's fields."""
    if "filter" in body:
        raw = body["filter"]
        if not isinstance(raw, dict):
            raise FieldError("filter", "must be an object of the roots table's query fields")
        values = {k: v if isinstance(v, list) else [v] for k, v in raw.items()}
        return Params(
            {"scope": ["filter"], **{k: [str(v) for v in vs] for k, vs in values.items()}}
        )
    ids = body.get(IDS_FIELD)
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise FieldError(IDS_FIELD, "must be a list of root ids as strings")
    return Params({"scope": ["selected"], IDS_FIELD: ids})
