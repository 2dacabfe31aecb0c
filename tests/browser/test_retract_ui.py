"""The retract button in a real browser: a dead letter's effects on the failed roots and on
its page; Retract shows a dry run (and Cancel leaves every row), its confirmation
triggers `ackfold_manual_retract` as the user, the run's page follows the run until it
says what was deleted, and the root's page then shows its origin's rows gone.

The UI is served by uvicorn over a real ledger and real Delta outputs
(`tests.ui.effects_ledger`). Airflow is a stand-in on loopback (`RetractAirflow`) that
answers the REST calls as Airflow does and runs the DAG's own two tasks on the run's conf
(`validate_retract_conf`, then `run_manual_retract` as `airflow:<user>`), in the test's
process: the real retract, its lease and its `retract_log`, without a scheduler. The DAG
under Airflow is tested in tests/airflow (`test_retract_dag.py`).
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ackfold.airflow.params import validate_retract_conf
from ackfold.airflow.tasks import run_manual_retract
from ackfold.config import Settings
from ackfold.effects import retract_history
from ackfold.ledger.schema.ids import format_id
from tests.browser.ui_server import serve_ui
from tests.ui.conftest import TOKENS, ui_settings
from tests.ui.effects_ledger import (
    DEAD_ROWS,
    SECRET,
    WORD_ROWS,
    EffectsLedger,
    effects_ledger,
    output_rows,
)

DAG = "ackfold_manual_retract"
# How long a run stays queued before it runs: long enough for the page to show it.
QUEUED_SECONDS = 2.0


class RetractAirflow:
    """Airflow's REST API for the retract DAG, on a free loopback port: a POST creates a
    queued run, which runs the DAG's tasks a moment later as `airflow:<user>` (the user of
    the Bearer token, as Airflow records the triggering user); GETs answer the DAG, the
    run and its `retract` task's return value."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.posts: list[dict[str, Any]] = []
        self.runs: dict[str, dict[str, Any]] = {}
        self.summaries: dict[str, dict[str, Any]] = {}
        api = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = self.path.split("/")
                if self.path == f"/api/v2/dags/{DAG}":
                    self.answer(200, {"dag_id": DAG, "is_paused": False})
                elif len(parts) == 7 and parts[6] in api.runs:
                    self.answer(200, api.runs[parts[6]])
                elif self.path.endswith("/taskInstances/retract/xcomEntries/return_value"):
                    summary = api.summaries.get(parts[6])
                    if summary is None:
                        self.answer(404, {"detail": "no XCom"})
                    else:
                        self.answer(200, {"value": json.dumps(summary)})
                else:
                    self.answer(404, {"detail": "not found"})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                token = self.headers.get("Authorization", "").removeprefix("Bearer ")
                api.posts.append({"path": self.path, "token": token, "body": body})
                if self.path != f"/api/v2/dags/{DAG}/dagRuns" or token not in TOKENS:
                    self.answer(403, {"detail": "Forbidden"})
                    return
                run_id = f"manual__retract{len(api.posts)}"
                api.runs[run_id] = {"dag_run_id": run_id, "state": "queued", "conf": body["conf"]}
                user = TOKENS[token][1]
                threading.Thread(target=api.run, args=(run_id, user), daemon=True).start()
                self.answer(200, {"dag_run_id": run_id, "state": "queued"})

            def answer(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def run(self, run_id: str, user: str) -> None:
        """What the DAG's run does: its `validate` task, then its `retract` task, whose
        return value is the XCom the UI reads, as the triggering user."""
        time.sleep(QUEUED_SECONDS)
        run = self.runs[run_id]
        run["state"] = "running"
        try:
            conf = validate_retract_conf(run["conf"], self.settings)
            self.summaries[run_id] = run_manual_retract(conf, f"airflow:{user}", self.settings)
            run["state"] = "success"
        except Exception:
            run["state"] = "failed"
            raise

    def __enter__(self) -> RetractAirflow:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def ledger(tmp_path: Path) -> EffectsLedger:
    return effects_ledger(tmp_path)


@pytest.fixture
def ui(ledger: EffectsLedger) -> Iterator[tuple[str, RetractAirflow]]:
    settings = ui_settings(ledger.warehouse, redact_patterns=[r"sk-live-\w+"])
    with RetractAirflow(settings) as airflow, serve_ui(settings, airflow_url=airflow.url) as url:
        yield url, airflow


def test_retract_a_dead_letters_effects_from_its_page(
    browser: Any, ui: tuple[str, RetractAirflow], ledger: EffectsLedger, shoot: Any
) -> None:
    url, airflow = ui
    dead = format_id(ledger.sample.dead)
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(60_000)
    context.add_cookies([{"name": "_token", "value": "jwt-ann", "url": url}])
    page = context.new_page()
    try:
        # The failed roots say which dead letter left effects; its page lists them.
        page.goto(f"{url}/roots?status=dead_lettered")
        row = page.locator(f"tr[data-root-id='{dead}']")
        assert row.locator("[data-testid=effects]").get_attribute("data-effects") == "yes"
        shoot(page, "1-failed-roots")
        row.locator("a[data-testid=root-link]").click()
        page.wait_for_selector("#effects-table")
        out = page.locator(f"tr[data-testid=effect-output][data-output='{ledger.out}']")
        assert out.get_attribute("data-rows") == str(DEAD_ROWS)
        assert page.locator("li[data-testid=effect-row]").count() == DEAD_ROWS + WORD_ROWS
        assert SECRET not in page.content()
        shoot(page, "2-root-effects")

        # Retract: a dry run first. Cancel leaves every row where it was.
        page.click("#retract-button")
        page.wait_for_selector("#retract-dialog")
        assert page.get_attribute("#retract-count", "data-count") == str(DEAD_ROWS)
        assert page.locator("tr[data-testid=retract-output][data-problem]").count() == 1
        shoot(page, "3-dry-run")
        page.click("#cancel-retract")
        page.wait_for_selector("#effects-table")
        assert airflow.posts == []
        assert output_rows(ledger.out, ledger.sample.dead) == DEAD_ROWS

        # Again, and confirm: the retract DAG is triggered as the user; the page follows it.
        page.click("#retract-button")
        page.wait_for_selector("#retract-dialog")
        page.click("#confirm-retract")
        page.wait_for_selector("#retract-triggered")
        assert page.get_attribute("#run-state", "data-state") in ("queued", "running")
        shoot(page, "4-queued")
        (post,) = airflow.posts
        assert post["token"] == "jwt-ann"
        assert post["body"]["conf"]["root_ids"] == [dead]
        assert post["body"]["conf"]["dry_run"] is False
        page.wait_for_selector("#run-state[data-state=success]")
        assert f"Deleted {DEAD_ROWS} rows" in page.inner_text("#run-state")
        assert "by airflow:ann" in page.inner_text("#run-state")
        shoot(page, "5-deleted")

        # The rows are gone, the other origin's stay, and the audit log says who.
        assert output_rows(ledger.out, ledger.sample.dead) == 0
        assert output_rows(ledger.out, ledger.sample.timed_out) == 1
        assert output_rows(ledger.words, ledger.sample.dead) == WORD_ROWS  # a stage reads it
        page.click("a[data-testid=run-root]")
        page.wait_for_selector("#effects-table")
        assert out.get_attribute("data-rows") == "0"
        assert page.locator("li[data-testid=effect-row]").count() == WORD_ROWS
        shoot(page, "6-root-clean")
        page.goto(f"{url}/roots?status=dead_lettered")
        cell = page.locator(f"tr[data-root-id='{dead}'] [data-testid=effects]")
        assert cell.get_attribute("data-effects") == "no"
        settings = ui_settings(ledger.warehouse)
        records = retract_history(settings, root_id=ledger.sample.dead)
        assert records
        assert {r.requested_by for r in records} == {"airflow:ann"}
        assert {r.event for r in records} >= {"planned", "deleted"}
    finally:
        context.close()
