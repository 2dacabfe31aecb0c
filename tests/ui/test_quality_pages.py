"""The Quality page and the Data Docs it links, over a real `quality_results` table
(delta-rs) and a Data Docs directory: the latest run's verdict and checks, the runs
before, and Data Docs served only from inside their directory, their shared files by
signed links."""

from __future__ import annotations

import re
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from fastapi.testclient import TestClient

from ackfold.ledger.schema.operational import QUALITY_RESULTS_DDL
from ackfold.ledger.schema.tables import QUALITY_RESULTS, column_names
from ackfold.quality import CheckResult, QualityReport
from ackfold.ui.security import LinkSigner
from tests.ledger_fixtures import write_rows
from tests.ui.conftest import SECRET, FakeAirflow, make_client, ui_settings

OK = CheckResult(
    suite="ledger.ack_events", app=None, check="event_id_unique",
    expectation="expect_column_values_to_be_unique", description="event_id is unique",
    success=True, observed="0 of 12 rows", element_count=12, unexpected_count=0,
)  # fmt: skip
LOST = CheckResult(
    suite="delivery.orders.overdue_roots", app="orders", check="no_lost_roots",
    expectation="expect_column_values_to_be_in_set",
    description="orders: no lost roots <b>bold</b>", success=False, observed="1 of 9 rows",
    element_count=9, unexpected_count=1, sample=("root_id=0x00000000000004d2, outcome=failed",),
)  # fmt: skip


def _write(warehouse: Path, report: QualityReport) -> None:
    columns = column_names(QUALITY_RESULTS_DDL)
    write_rows(
        warehouse, QUALITY_RESULTS, [dict(zip(columns, row, strict=True)) for row in report.rows()]
    )


def _setup(tmp_path: Path, *, docs: bool = True) -> Path:
    warehouse = tmp_path / "warehouse"
    older = QualityReport("run-1", datetime(2026, 11, 23, 9), datetime(2026, 11, 21, 9), (OK,))
    latest = replace(
        older, run_id="run-2", run_at=datetime(2026, 11, 23, 10), results=(OK, LOST),
        scope="app orders",
    )  # fmt: skip
    _write(warehouse, older)
    _write(warehouse, latest)
    if docs:
        site = tmp_path / "var" / "quality" / "data_docs"
        (site / "expectations" / "ledger").mkdir(parents=True)
        (site / "index.html").write_text("<h1>Expectation Suites</h1>")
        (site / "expectations" / "ledger" / "roots.html").write_text("roots suite")
        (tmp_path / "var" / "secret.txt").write_text("not Data Docs")
        (site / "escape").symlink_to(tmp_path / "var" / "secret.txt")
    return warehouse


def test_the_latest_run_its_violations_and_the_runs_before(
    tmp_path: Path, airflow: FakeAirflow
) -> None:
    with make_client(ui_settings(_setup(tmp_path)), airflow) as client:
        page = client.get("/quality")
        assert page.status_code == 200
        assert 'id="quality-verdict" data-passed="false"' in page.text
        assert "1 of 2 checks failed" in page.text
        assert '<span id="quality-scope">app orders</span>' in page.text
        assert (
            'data-check="no_lost_roots" data-suite="delivery.orders.overdue_roots" '
            'data-success="false"' in page.text
        )
        assert "root_id=0x00000000000004d2, outcome=failed" in page.text
        assert "&lt;b&gt;bold&lt;/b&gt;" in page.text, "descriptions are escaped"
        history = page.text[page.text.index('id="quality-history"') :]
        assert history.index("run-2") < history.index("run-1"), "newest run first"
        assert 'href="/quality/docs/index.html"' in page.text

        data = client.get("/api/quality").json()
        assert data["latest"]["run_id"] == "run-2"
        assert not data["latest"]["passed"]
        assert [v["check"] for v in data["latest"]["violations"]] == ["no_lost_roots"]
        assert [(h["run_id"], h["checks"], h["failed"]) for h in data["history"]] == [
            ("run-2", 2, 1),
            ("run-1", 1, 0),
        ]


def test_data_docs_are_served_from_their_directory_only(
    tmp_path: Path, airflow: FakeAirflow
) -> None:
    with make_client(ui_settings(_setup(tmp_path)), airflow) as client:
        index = client.get("/quality/docs/index.html")
        assert index.text == "<h1>Expectation Suites</h1>"
        # GX's CDN scripts run sandboxed, in an origin that is not Airflow's.
        assert index.headers["content-security-policy"].startswith("sandbox allow-scripts")
        assert "allow-same-origin" not in index.headers["content-security-policy"]
        # They open in a tab of their own: nobody may frame them.
        assert index.headers["content-security-policy"].endswith("; frame-ancestors 'none'")
        assert index.headers["x-frame-options"] == "DENY"
        assert client.get("/quality/docs/expectations/ledger/roots.html").text == "roots suite"
        for outside in ("../secret.txt", "%2e%2e/secret.txt", "escape", "nope.html"):
            response = client.get(f"/quality/docs/{outside}")
            assert response.status_code == 404, outside
            assert "not Data Docs" not in response.text
        # A NUL byte cannot name a file: not found, not a server error.
        nul = client.get("/quality/docs/a%00b")
        assert nul.status_code == 404
        assert "no Data Docs page" in nul.text


def test_the_files_data_docs_share_are_served_by_the_pages_signed_links(
    tmp_path: Path, airflow: FakeAirflow
) -> None:
    """A sandboxed page sends no login with the requests for its styles and scripts
    (`_static/`, linked by `make_offline`): the page, served to a logged-in user, signs
    those links, and the files are served only to a valid signature, for a day or two,
    cacheable by this browser alone."""
    warehouse = _setup(tmp_path)
    site = tmp_path / "var" / "quality" / "data_docs"
    (site / "_static" / "jquery@3.7.1").mkdir(parents=True)
    (site / "_static" / "jquery@3.7.1" / "jquery.min.js").write_text("/* jquery */")
    (site / "expectations" / "ledger" / "page.html").write_text(
        '<script src="../../_static/jquery@3.7.1/jquery.min.js"></script><p>_static/ in text</p>'
    )
    with make_client(ui_settings(warehouse), airflow) as client:
        page = client.get("/quality/docs/expectations/ledger/page.html")
        assert page.headers["content-security-policy"].startswith("sandbox allow-scripts")
        (link,) = re.findall(r'src="([^"]+)"', page.text)
        path, _, signature = link.partition("?t=")
        assert path == "../../_static/jquery@3.7.1/jquery.min.js"
        assert "<p>_static/ in text</p>" in page.text, "only links are signed"
        url = f"/quality/docs/_static/jquery@3.7.1/jquery.min.js?t={signature}"
        anonymous = TestClient(client.app)  # as the sandboxed page asks: no cookie
        served = anonymous.get(url)
        assert served.status_code == 200, served.text
        assert served.text == "/* jquery */"
        assert served.headers["cache-control"].startswith("private, max-age=")
        assert served.headers["content-type"].startswith("text/javascript")
        day, _, mac = signature.partition(".")
        for bad in ("", f"{int(day) + 1}.{mac}", f"{day}.{mac[:-1]}0", "x.y"):
            refused = anonymous.get(f"/quality/docs/_static/jquery@3.7.1/jquery.min.js?t={bad}")
            assert refused.status_code == 403, bad
        # A signature holds through the next day, not after it.
        signer = LinkSigner(SECRET)
        made = time.time()
        assert signer.valid(signer.sign(made), made + 86400)
        assert not signer.valid(signer.sign(made), made + 2 * 86400)
        # Only the site's own files: nothing outside it, whatever the signature.
        outside = anonymous.get(f"/quality/docs/_static/../../secret.txt?t={signature}")
        assert outside.status_code == 404


def test_before_any_quality_run(tmp_path: Path, airflow: FakeAirflow) -> None:
    settings = ui_settings(tmp_path / "warehouse")
    with make_client(settings, airflow) as client:
        page = client.get("/quality")
        assert page.status_code == 200
        assert 'id="quality-empty"' in page.text
        assert client.get("/api/quality").json() == {"latest": None, "history": []}
        missing = client.get("/quality/docs/index.html")
        assert missing.status_code == 404
        assert "run `ackfold quality`" in missing.text


def test_no_data_docs_link_until_they_are_built(tmp_path: Path, airflow: FakeAirflow) -> None:
    with make_client(ui_settings(_setup(tmp_path, docs=False)), airflow) as client:
        page = client.get("/quality")
        assert 'id="quality-verdict"' in page.text
        assert "data-docs-link" not in page.text
