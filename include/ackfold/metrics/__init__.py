"""OpenTelemetry metrics of every reconcile, replay and maintenance run, pushed over OTLP
to a collector (or to Prometheus' OTLP receiver); off unless an endpoint is set
(`metrics.*`, or the standard `OTEL_EXPORTER_OTLP_*` variables).

- `export`: the target, and a meter that pushes once when the run ends;
- `record`: the instruments: the runs' counters, and the ledger's gauges and time to detect.

Example:
    >>> from ackfold.metrics import export_run
    >>> export_run(settings, "reconcile", summary)  # doctest: +SKIP
    True
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ackfold.config import Settings
from ackfold.metrics.export import Target, meter, target
from ackfold.metrics.record import (
    LedgerGauges,
    record_ledger,
    record_maintenance,
    record_reconcile,
    record_replay,
)

__all__ = [
    "LedgerGauges",
    "Target",
    "export_ledger",
    "export_run",
    "meter",
    "record_ledger",
    "record_maintenance",
    "record_reconcile",
    "record_replay",
    "target",
]

log = logging.getLogger("ackfold.metrics")


def export_run(
    settings: Settings, run: str, summary: Mapping[str, Any], *, requested_by: str = "auto"
) -> bool:
    """Push the counters of one `reconcile`, `replay` or `maintenance` run's summary.
    False when metrics are off; never raises for the collector's sake."""
    with meter(settings, run=run) as m:
        if m is None:
            return False
        if run == "reconcile":
            record_reconcile(m, summary)
        elif run == "maintenance":
            record_maintenance(m, summary)
        else:
            record_replay(m, summary, requested_by=requested_by)
    return True


def export_ledger(
    settings: Settings, *, since: datetime | None, now: datetime | None = None
) -> dict[str, Any]:
    """Push what `root_state` says now (after a reconcile that started at `since`): roots
    by status per app, the oldest pending root's age, the time to detect of what the
    reconcile marked. Returns what it read; nothing when metrics are off."""
    from ackfold.ledger.errors import NoLedger
    from ackfold.ledger.reading.sql import SqlReader

    now = (now or datetime.now(UTC)).astimezone(UTC)
    with meter(settings, run="reconcile") as m:
        if m is None:
            log.info("metrics off: set metrics.endpoint or OTEL_EXPORTER_OTLP_ENDPOINT")
            return {"exported": False}
        try:
            reader = SqlReader(settings.table_root)
            gauges = LedgerGauges.read(reader, settings, now=now, since=since)
        except NoLedger:
            return {"exported": False, "no_ledger": True}
        record_ledger(m, gauges)
    return {
        "exported": True,
        "roots": sum(gauges.by_status.values()),
        "detected": sum(len(samples) for samples in gauges.detect.values()),
    }
