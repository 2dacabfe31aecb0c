"""The no-lost-roots check gives roots the time their policy gives them: a root not yet
past its timeout and grace is not checked, one still receiving events within its idle
timeout is in progress, and one that failed is awaiting its replay for the backoff of
its attempt, unless it was its last attempt (those are dead-lettered at once). Past
that, each one is lost, and the check names it. (On the embedded engine; the Spark
engine gives the same outcomes: `tests/spark/test_quality_conformance.py`.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from ackfold.embedded import duck
from ackfold.ledger.schema.values import hex64
from ackfold.quality.batches import Window
from ackfold.quality.duck_batches import LedgerViews
from ackfold.quality.outcomes import AWAITING_REPLAY, IN_PROGRESS
from ackfold.runs import run_quality
from tests.quality_ledger import TIMING_APP, timing_ledger, timing_settings


def test_roots_get_their_timeout_idle_timeout_and_backoff_before_they_count_as_lost(
    tmp_path: Path,
) -> None:
    settings = timing_settings(tmp_path)
    now = datetime.now(UTC).replace(microsecond=0)
    roots = timing_ledger(settings.table_root, now)

    report = run_quality(settings, now=now, app=TIMING_APP)
    assert report.scope == f"app {TIMING_APP}"
    assert report.apps == (TIMING_APP,)
    (lost,) = [r for r in report.results if r.check == "no_lost_roots"]
    assert lost.element_count == 3, "the fresh root is not due yet"
    assert lost.unexpected_count == 1, lost.line()
    (named,) = lost.sample
    assert f"root_id={hex64(roots['last'])}" in named
    assert "outcome=failed, and not replayed" in named

    assert settings.quality.window is not None
    db = duck.connect(settings)
    views = LedgerViews(db, settings, Window.ending(now, settings.quality.window))
    overdue = views.overdue(TIMING_APP)
    outcomes = dict(zip(overdue["root_id"].tolist(), overdue["outcome"].tolist(), strict=True))
    assert outcomes == {
        roots["busy"]: IN_PROGRESS,
        roots["failed"]: AWAITING_REPLAY,
        roots["last"]: "failed, and not replayed",
    }

    # Three hours on, with no event and no replay since: all four are lost.
    later = run_quality(settings, now=now + timedelta(hours=3), app=TIMING_APP)
    (lost,) = [r for r in later.results if r.check == "no_lost_roots"]
    assert not lost.success
    assert lost.unexpected_count == 4
    sample = "; ".join(lost.sample)
    assert f"root_id={hex64(roots['failed'])}, outcome=failed, and not replayed" in sample
    for name in ("busy", "fresh"):
        assert f"root_id={hex64(roots[name])}, outcome=pending past its timeout" in sample


def test_the_embedded_engine_reads_dates_and_times_in_utc(tmp_path: Path) -> None:
    # The quality run relies on this: it sets no time zone of its own.
    db = duck.connect(timing_settings(tmp_path))
    assert db.execute("SELECT current_setting('TimeZone')").fetchall() == [("UTC",)]
