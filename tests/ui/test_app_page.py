"""The app page: alive or stalled by the heartbeat, the last batch, the rates chart, the
lag, and the roots by status; "no heartbeat" for an app that writes none."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from ackfold.ledger.schema import status
from ackfold.track.heartbeat import TERMINATED
from tests.heartbeats import beat, write_beats
from tests.sink_mistake import sink_mistake_ledger
from tests.ui.conftest import FakeAirflow, make_client, ui_settings


def test_the_app_page_shows_alive_stalled_and_no_heartbeat(
    tmp_path: Path, airflow: FakeAirflow
) -> None:
    mistake = sink_mistake_ledger(tmp_path / "warehouse")  # the app "wc": roots by status
    now = datetime.now(UTC)
    write_beats(
        mistake.warehouse,
        [beat("wc", now - timedelta(seconds=s), 50 - s, rate=5.0 + s, lag=7) for s in (90, 60, 30)]
        + [beat("gone", now - timedelta(minutes=m), 9 - m) for m in (8, 7)]
        + [beat("ended", now - timedelta(seconds=5), 0, event=TERMINATED, exception="OOM")]
        + [beat("batch", now - timedelta(minutes=40), None, event=TERMINATED)],
    )
    with make_client(ui_settings(mistake.warehouse), airflow) as client:
        page = client.get("/apps/wc")
        api = client.get("/api/apps/wc").json()
        gone = client.get("/api/apps/gone").json()
        ended = client.get("/apps/ended")
        mute = client.get("/apps/mute")
        batch = client.get("/apps/batch")
        bad = client.get("/api/apps/no%20such%20app")
        overview = client.get("/overview").text
        overview_api = client.get("/api/overview").json()
    assert page.status_code == 200
    assert 'id="app-state" data-state="alive"' in page.text
    assert 'id="app-last-batch">#20 at' in page.text
    assert "wc.count" in page.text
    assert 'id="app-input-rate">35.0 rows/s' in page.text
    assert 'id="app-lag">7 offsets' in page.text
    assert page.text.count("<polyline") == 2
    assert 'data-series="input"' in page.text
    assert api["state"] == "alive"
    assert [b["batch_id"] for b in api["beats"]] == [-40, -10, 20]
    assert api["roots_by_status"][status.TIMED_OUT] == 3
    assert api["roots_by_status"][status.COMPLETED] == 1
    assert api["roots_by_status"][status.PENDING] == 1
    assert (gone["state"], gone["roots_by_status"][status.PENDING]) == ("stalled", 0)
    assert gone["why"].startswith("no heartbeat of query gone.count for 7m")
    assert 'data-state="stalled"' in ended.text
    assert "OOM" in ended.text
    assert 'data-state="no heartbeat"' in mute.text
    assert 'get_spark(settings, app="mute")' in mute.text
    # A run that went to the end of its input and ended without an error: not a stall.
    assert 'id="app-state" data-state="stopped" class="badge s-pending"' in batch.text
    assert "ended without an error" in batch.text
    assert bad.status_code == 400
    # The Overview lists the apps with their state, each linked to its page.
    assert overview_api["app_states"] == {"wc": "alive"}
    assert 'data-app="wc" data-state="alive" href="/apps/wc"' in overview
