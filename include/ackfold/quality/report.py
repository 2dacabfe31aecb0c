"""The outcome of a quality run: one `CheckResult` per expectation, how each reads, and
the `quality_results` rows that keep them for trends.

Example:
    >>> result = CheckResult(
    ...     suite="ledger.ack_events", app=None, check="event_id_unique",
    ...     expectation="expect_column_values_to_be_unique", description="event_id is unique",
    ...     success=False, observed="2 of 1,204 rows", sample=("event_id=e-17",),
    ... )
    >>> result.line()
    'FAILED ledger.ack_events event_id_unique: event_id is unique; observed 2 of 1,204 rows, e.g. event_id=e-17'
"""  # noqa: E501

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class CheckResult:
    """One expectation's verdict on one batch."""

    suite: str
    app: str | None
    check: str
    expectation: str
    description: str
    success: bool
    observed: str
    element_count: int | None = None
    unexpected_count: int | None = None
    sample: tuple[str, ...] = ()
    threshold: str | None = None

    def line(self) -> str:
        verdict = "ok    " if self.success else "FAILED"
        text = f"{verdict} {self.suite} {self.check}: {self.description}; observed {self.observed}"
        if self.sample and not self.success:
            text += ", e.g. " + "; ".join(self.sample)
        return text


@dataclass(frozen=True)
class QualityReport:
    run_id: str
    run_at: datetime
    window_start: datetime
    results: tuple[CheckResult, ...]
    docs: Path | None = None
    apps: tuple[str, ...] = field(default=())
    scope: str = "all apps"

    @property
    def violations(self) -> list[CheckResult]:
        return [r for r in self.results if not r.success]

    @property
    def passed(self) -> bool:
        return not self.violations

    def headline(self) -> str:
        failed = len(self.violations)
        verdict = "every check passed" if not failed else f"{failed} check(s) FAILED"
        apps = ", ".join(self.apps) or "none in the window"
        return (
            f"ackfold quality: {verdict} of {len(self.results)} "
            f"(run {self.run_id} over {self.scope}, window from "
            f"{self.window_start:%Y-%m-%d %H:%M} UTC, apps: {apps})"
        )

    def format(self, *, verbose: bool = False) -> str:
        """The headline, then each violation (every check with `verbose`), then where
        Data Docs are."""
        lines = [self.headline()]
        lines += [f"  {r.line()}" for r in self.results if verbose or not r.success]
        if self.docs is not None:
            lines.append(f"Data Docs: {self.docs}")
        return "\n".join(lines)

    def violation_message(self) -> str:
        """What a failed task or command says: each violated expectation, observed."""
        listed = "\n".join(f"  {r.line()}" for r in self.violations)
        return f"quality checks failed ({len(self.violations)}):\n{listed}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "run_at": self.run_at.isoformat(),
            "window_start": self.window_start.isoformat(),
            "scope": self.scope,
            "passed": self.passed,
            "apps": list(self.apps),
            "checks": len(self.results),
            "violations": [asdict(r) for r in self.violations],
            "docs": str(self.docs) if self.docs else None,
        }

    @classmethod
    def from_rows(cls, rows: list[dict[str, Any]], docs: Path | None = None) -> QualityReport:
        """A report from one run's `quality_results` rows (`LedgerReader.quality_run`)."""
        if not rows:
            raise ValueError("no rows: not a quality run")
        first = rows[0]
        results = tuple(
            CheckResult(
                suite=r["suite"],
                app=r["app"],
                check=r["check_name"],
                expectation=r["expectation"],
                description=r["description"],
                success=r["success"],
                observed=r["observed"],
                element_count=r["element_count"],
                unexpected_count=r["unexpected_count"],
                sample=tuple(json.loads(r["unexpected_sample"] or "[]")),
                threshold=r["threshold"],
            )
            for r in rows
        )
        apps = tuple(sorted({r["app"] for r in rows if r["app"]}))
        return cls(
            first["run_id"], first["run_at"], first["window_start"], results, docs, apps,
            first["scope"],
        )  # fmt: skip

    def rows(self) -> list[tuple[Any, ...]]:
        """The `quality_results` rows of this run, in the table's column order."""
        return [
            (
                self.run_id,
                self.run_at,
                self.window_start,
                self.scope,
                r.suite,
                r.app,
                r.check,
                r.expectation,
                r.description,
                r.success,
                r.observed,
                r.element_count,
                r.unexpected_count,
                json.dumps(list(r.sample)) if r.sample else None,
                r.threshold,
            )
            for r in self.results
        ]
