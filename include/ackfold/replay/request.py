"""What a replay is asked: the roots (by id, or by app, status and time), how fast, and
whether to send at all (`dry_run`); or, `automatic`, whatever each app's policy says.

`ackfold replay`, the replay DAGs and the Reliability UI build one (the UI and the manual
replay DAG through `ackfold.replay.params`); `Replayer.plan` turns it into sends.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Final

from ackfold.ledger.reading.parse import parse_limit, parse_rate
from ackfold.ledger.schema import status
from ackfold.ledger.schema.values import whoami

# What a manual replay may select; an automatic one takes failed and timed-out roots.
REPLAYABLE: Final = (status.FAILED, status.TIMED_OUT, status.DEAD_LETTERED)
DEFAULT_STATUSES: Final = (status.FAILED, status.TIMED_OUT)


@dataclass(frozen=True)
class ReplayRequest:
    """What to replay. Filters combine with AND; `automatic` applies each app's policy
    (attempts, backoff) instead, and ignores the filters but `app`."""

    root_ids: tuple[int, ...] = ()
    app: str | None = None
    statuses: tuple[str, ...] = DEFAULT_STATUSES
    since: datetime | None = None
    until: datetime | None = None
    limit: int | None = None
    rate: float | None = None
    dry_run: bool = False
    automatic: bool = False
    requested_by: str = field(default_factory=whoami)

    def __post_init__(self) -> None:
        unknown = [s for s in self.statuses if s not in REPLAYABLE]
        if unknown or not self.statuses:
            raise ValueError(
                f"cannot replay status {', '.join(unknown) or '(none)'}: "
                f"choose from {', '.join(REPLAYABLE)}"
            )
        if self.since and self.until and self.since >= self.until:
            raise ValueError(f"--since ({self.since}) must be before --until ({self.until})")
        # The bounds every entry point takes (a QueryError is a ValueError).
        if self.limit is not None:
            parse_limit(self.limit)
        if self.rate is not None:
            parse_rate(self.rate)

    def describe(self) -> str:
        """The request as JSON, for the replay log's `request` column."""
        described = {k: v for k, v in asdict(self).items() if v not in (None, (), False)}
        described.pop("requested_by", None)
        return json.dumps(described, default=str, sort_keys=True)
