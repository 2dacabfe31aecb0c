"""A folder of JSON files as a replayable source: the sender of roots registered with
`source="files"` and `source_queue=<the inbox folder>` (the README's example and
`spark_apps/starter.py` read such a folder with `spark.readStream.json`).

It is an example of a sender (`ackfold.replay.senders`), and is not registered by
default: it replays only for an app that keeps what it needs, as the README's example and
`spark_apps/starter.py` do. Such an app

- stores each message as its root's payload, one JSON object (`payload=F.to_json(...)`);
- reads the two fields a replay adds, `ackfold_origin_root_id` and `ackfold_attempt`,
  and passes them to its spout (`origin_root_id=`, `attempt=`), so that the replayed
  file registers the new attempt, not the first one again.

Register it in your own distribution's `pyproject.toml`:

    [project.entry-points."ackfold.senders"]
    files = "ackfold.sources.files:FilesInbox"

A replay writes the payload, with those two fields, to `<inbox>/replay-<new root id>.json`
(written aside, then renamed in: Spark's file source never reads half a file, and ignores
names that start with `_` or `.`). A resend writes the same file again, so the app reads
it at most once. A dead letter goes to `<inbox>-dlq/dead-<root id>.json` (or the app's
`dead_letter_queue` folder), with `ackfold_root_id`, `ackfold_reason` and
`ackfold_last_stage`. The inbox is a local folder (or `file://`): a folder in an object
store needs a sender of its own.

Example:
    >>> import json, pathlib, tempfile
    >>> from ackfold.sources.base import Outbound
    >>> inbox = pathlib.Path(tempfile.mkdtemp())
    >>> [sent] = FilesInbox(None, str(inbox), "orders").republish(
    ...     [Outbound(5, 5, 2, '{"id": "o-2"}', new_root_id=-1)])
    >>> sent.message_id
    'replay-0xffffffffffffffff.json'
    >>> json.loads((inbox / sent.message_id).read_text())
    {'id': 'o-2', 'ackfold_origin_root_id': 5, 'ackfold_attempt': 2}
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Final

from ackfold.config import Settings
from ackfold.ledger.schema import ids
from ackfold.sources.base import Outbound, Sent, SourceQueue

# The fields a replayed file carries for the app's spout.
ORIGIN_FIELD: Final = "ackfold_origin_root_id"
ATTEMPT_FIELD: Final = "ackfold_attempt"
_FILE_SCHEME: Final = "file://"


class FilesInbox(SourceQueue):
    """The inbox folder `queue` of `app`'s JSON files, as a replay's target: made by
    `(settings, queue, app)`, the sender's signature. `settings` may be None (no app
    overrides)."""

    source = "files"
    batch_size: ClassVar[int] = 100

    def __init__(self, settings: Settings | None, queue: str, app: str) -> None:
        super().__init__(queue)
        overrides = settings.apps.get(app) if settings is not None else None
        self._dead_letter_queue = (
            overrides.dead_letter_queue if overrides else None
        ) or f"{queue.rstrip('/')}-dlq"

    @property
    def dead_letter_queue(self) -> str:
        return self._dead_letter_queue

    def republish(self, messages: Sequence[Outbound]) -> list[Sent]:
        return [
            self._drop(self.queue, m, "replay", m.new_root_id, _replay_fields(m)) for m in messages
        ]

    def dead_letter(self, messages: Sequence[Outbound]) -> list[Sent]:
        return [
            self._drop(self.dead_letter_queue, m, "dead", m.root_id, m.attributes) for m in messages
        ]

    def _drop(
        self,
        folder: str,
        message: Outbound,
        prefix: str,
        named_by: int | None,
        extra: Mapping[str, Any],
    ) -> Sent:
        """Write `message`'s payload with `extra` fields to `folder`, as one file named by
        `named_by`; the error, for this message alone, if it cannot."""
        if folder.startswith(_FILE_SCHEME):
            folder = folder[len(_FILE_SCHEME) :]
        if "://" in folder:
            return Sent(
                message.root_id, error=f"the files sender writes local folders only, not {folder}"
            )
        if named_by is None:
            return Sent(message.root_id, error="no new root id to name the file by")
        try:
            record = json.loads(message.body) if message.body is not None else {}
        except ValueError:
            record = None
        if not isinstance(record, dict):
            return Sent(
                message.root_id,
                error="the files sender needs the root's payload as one JSON object",
            )
        record.update(extra)
        name = f"{prefix}-{ids.format_id(named_by)}.json"
        target = Path(folder)
        try:
            target.mkdir(parents=True, exist_ok=True)
            aside = target / f"_{name}.{uuid.uuid4().hex}"
            aside.write_text(json.dumps(record) + "\n", encoding="utf-8")
            os.replace(aside, target / name)
        except OSError as exc:
            return Sent(message.root_id, error=f"cannot write {target / name}: {exc}")
        return Sent(message.root_id, message_id=name)


def _replay_fields(message: Outbound) -> dict[str, Any]:
    return {ORIGIN_FIELD: message.origin_root_id, ATTEMPT_FIELD: message.attempt}
