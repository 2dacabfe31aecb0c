"""The root page says why a root is pending, and names the sink mistake."""

from __future__ import annotations

import html
from pathlib import Path

from ackfold.ledger.schema.ids import format_id
from tests.sink_mistake import sink_mistake_ledger
from tests.ui.conftest import FakeAirflow, make_client, ui_settings


def test_the_root_page_explains_a_stuck_root_and_points_at_to(
    tmp_path: Path, airflow: FakeAirflow
) -> None:
    mistake = sink_mistake_ledger(tmp_path / "warehouse")
    with make_client(ui_settings(mistake.warehouse), airflow) as client:
        page = client.get(f"/roots/{format_id(mistake.stuck)}")
        api = client.get(f"/api/roots/{format_id(mistake.stuck)}").json()
        settled = client.get(f"/roots/{format_id(mistake.empty)}")
    assert page.status_code == 200
    text = html.unescape(page.text)
    assert 'id="root-pending"' in text
    stages = [
        line.split('data-stage="')[1].split('"')[0]
        for line in text.splitlines()
        if 'data-testid="pending-stage"' in line
    ]
    assert stages == ["count", "split", "spout"]
    assert "(stopped here)" in text.split('data-stage="count"')[1].split("</li>")[0]
    never = text.split('id="pending-never-acked"')[1].split("</p>")[0]
    assert "stage 'count' is where this root stopped" in never
    assert "never been acked by any stage in any root of app 'wc'" in never
    assert "emit that output with to=[]" in never
    assert api["pending"]["stopped_at"] == "count"
    assert 'id="root-pending"' not in settled.text, "a completed root waits for nothing"
