"""An app whose heartbeat stops is stalled: `ledger.progress` says so, and the alerts open
one message when it stalls and one when it beats again, with a link to the app's page."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from ackfold.alerts import check_state, evaluate_state, rules
from ackfold.config import load_settings
from ackfold.ledger.reading import progress
from ackfold.ledger.reading.sql import SqlReader
from ackfold.track.heartbeat import IDLE, TERMINATED
from tests.alert_fixtures import NOW, Receiver, ago, state, write_state
from tests.heartbeats import beat, write_beats

pytestmark = pytest.mark.usefixtures("clean_env")
UI = "http://airflow.test/ackfold"


def test_liveness_reads_alive_stalled_failed_stopped_and_no_heartbeat(tmp_path: Path) -> None:
    w = tmp_path / "w"
    write_beats(
        w,
        [beat("live", ago(m), 100 - m) for m in (3, 2, 1)]
        + [beat("quiet", ago(m), 10 - m) for m in (9, 8)]
        + [
            beat("ended", ago(2), 5),
            beat("ended", ago(1), None, event=TERMINATED, exception="boom\nat x"),
        ]
        + [beat("behind", ago(6 - m), m, lag=100 * m) for m in range(1, 6)]
        # A run to the end of its input (an app DAG's `availableNow` run) an hour ago.
        + [beat("batch", ago(62), 3), beat("batch", ago(60), None, event=TERMINATED)]
        # Two queries: one ran to its end, the other still runs, and has gone quiet; its
        # last beat an idle one, which carries no name.
        + [beat("half", ago(9), None, event=TERMINATED), beat("half", ago(10), 2, query="b")]
        + [{**beat("half", ago(8), None, event=IDLE, query="b"), "query_name": None}],
    )
    reader = SqlReader(str(w))
    live = progress.liveness(reader, "live", NOW)
    assert (live.state, live.why) == (progress.ALIVE, "last heartbeat 1m 0s ago")
    assert live.last_batch is not None
    assert (live.last_batch.batch_id, live.last_batch.input_rate) == (99, 10.0)
    assert [b.batch_id for b in live.beats] == [97, 98, 99]
    quiet = progress.liveness(reader, "quiet", NOW)
    assert quiet.state == progress.STALLED
    assert quiet.why == "no heartbeat of query quiet.count for 8m 0s (more than 5m 0s)"
    assert progress.liveness(reader, "quiet", NOW, timedelta(minutes=10)).state == progress.ALIVE
    ended = progress.liveness(reader, "ended", NOW)
    assert ended.state == progress.STALLED
    assert ended.why.endswith(": boom")
    behind = progress.liveness(reader, "behind", NOW)
    assert (behind.state, behind.lag_growing) == (progress.STALLED, True)
    assert "source lag grew" in behind.why
    batch = progress.liveness(reader, "batch", NOW)
    assert batch.state == progress.STOPPED, "a run that ended without an error is no stall"
    assert batch.why.startswith("its queries ended without an error, the last at ")
    half = progress.liveness(reader, "half", NOW)
    assert half.state == progress.STALLED
    assert half.why.startswith("no heartbeat of query half.count for 8m 0s")
    none = progress.liveness(reader, "mute", NOW)
    assert (none.state, none.last) == (progress.NO_HEARTBEAT, None)
    assert progress.liveness(SqlReader(str(tmp_path / "empty")), "x", NOW).state == (
        progress.NO_HEARTBEAT
    )


def test_a_stall_opens_one_alert_and_a_new_beat_resolves_it(
    tmp_path: Path, webhook: Receiver, connections: dict[str, str]
) -> None:
    w = tmp_path / "w"
    write_state(w, [state(1, "wc", "completed", ago(30), ago(29))])
    write_beats(w, [beat("wc", ago(m), 20 - m) for m in (12, 11, 10)])
    settings = load_settings(
        var_dir=tmp_path / "var",
        warehouse=str(w),
        apps={"wc": {}},
        alerts={"ui_url": UI, "webhook_conn_id": "ackfold_alerts"},
    )
    (found,) = [
        f for f in evaluate_state(SqlReader(str(w)), settings, NOW) if f.rule == rules.STALLED
    ]
    assert found.breached
    assert found.link == "/apps/wc"
    assert found.headline.startswith("wc is stalled: no heartbeat of query wc.count for 10m")

    opened = check_state(settings, now=NOW)
    assert opened["breached"] == ["wc:stalled"]
    assert check_state(settings, now=NOW + timedelta(minutes=1))["sent"] == {"webhook": 0}
    # The app runs again: a beat a minute ago.
    write_beats(w, [beat("wc", NOW + timedelta(minutes=1), 21)])
    resolved = check_state(settings, now=NOW + timedelta(minutes=2))
    assert resolved["sent"] == {"webhook": 1}
    texts = webhook.texts()
    assert len(texts) == 2
    assert texts[0].splitlines()[1].startswith("OPENED stalled: wc is stalled: no heartbeat")
    assert f"{UI}/apps/wc" in texts[0]
    assert texts[1].splitlines()[1].startswith("RESOLVED stalled: wc is alive")


def test_an_app_without_a_heartbeat_is_not_judged_and_off_turns_the_rule_off(
    tmp_path: Path,
) -> None:
    w = tmp_path / "w"
    write_state(w, [state(1, "wc", "completed", ago(30), ago(29))])
    write_beats(w, [beat("other", ago(60), 1)])
    settings = load_settings(
        var_dir=tmp_path / "var",
        warehouse=str(w),
        apps={"wc": {}, "other": {"alerts": {"max_heartbeat_age": "off"}}},
    )
    found = {
        f.app: f
        for f in evaluate_state(SqlReader(str(w)), settings, NOW)
        if f.rule == rules.STALLED
    }
    assert (found["wc"].breached, found["wc"].value) == (False, progress.NO_HEARTBEAT)
    assert (found["other"].breached, found["other"].threshold) == (False, "off")
