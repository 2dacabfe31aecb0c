"""Great Expectations checks of the delivery guarantees, and of the ledger itself.

Storm's acker detects failures but never proves the guarantee held. A quality run checks,
over `quality.window`:

- **ledger soundness**: schema and types, no nulls where the contract forbids them, `kind`
  and `status` in their domains, unique `event_id` and `root_id`, valid origin chains,
  attempts within `max_attempts`, XOR 0 for every completed root, a reason for every
  failed one;
- **delivery guarantees, per app**: no lost roots, every message a producer reports sent
  registered, and the duplicate rate, dead-letter rate and complete latency p99 within
  the app's thresholds (`defaults.quality`, `apps.<app>.quality`).

Results go to the `quality_results` table and to Data Docs (`quality.docs_dir`). The checks
run on the engine `engine.kind` chooses: embedded (DuckDB in this process, no JVM) or
Spark (`checks`, which the engines call). The run, `run_quality`, and `check` stand above
the engines: `ackfold.runs`.

Example:
    >>> from ackfold.runs import check, run_quality
    >>> check(run_quality(settings)).passed      # doctest: +SKIP
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ackfold import lazy

if TYPE_CHECKING:
    from ackfold.quality.report import CheckResult, QualityReport

__all__ = ["CheckResult", "QualityReport"]

# Imported on first use (PEP 562): `python -m ackfold.quality.docs_assets` (`make setup`)
# then runs that module without this package having imported it first, and the
# publishing step pulls in no validator.
_LAZY = {
    "CheckResult": "ackfold.quality.report",
    "QualityReport": "ackfold.quality.report",
}


def __getattr__(name: str) -> Any:
    return lazy.attribute(__name__, _LAZY, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
