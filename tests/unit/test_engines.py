"""The engine protocol (`ackfold.engines`): no verb asks which engine it has, the registry
knows both of ackfold's engines, and a third one registered here is the engine of every
verb's run function, chosen by name or by `engine.kind`; the reference page names every
operation of the protocol."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest

from ackfold.config import Settings, load_settings
from ackfold.engines import (
    EMBEDDED,
    SPARK,
    Engine,
    build,
    choose,
    engine_for,
    register,
    registered,
    unregister,
)
from ackfold.engines.embedded import EmbeddedEngine
from ackfold.engines.spark import SparkEngine
from ackfold.ledger.commits.writer import LedgerWriter
from ackfold.track.tracker import Tracker
from tests.conftest import JARS_DIR

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "include" / "ackfold"
PAGE = ROOT / "docs" / "reference" / "engines.md"
NOW = datetime.fromisoformat("2026-12-01T12:00:00+00:00")
KINDS = {"spark", "embedded"}
KIND_NAMES = {"SPARK", "EMBEDDED"}


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _is_kind(node: ast.AST) -> bool:
    return _name(node) in KIND_NAMES or (isinstance(node, ast.Constant) and node.value in KINDS)


def engine_branches(library: Path) -> list[str]:
    """Where code outside `engines/` asks which engine it has: a comparison with an
    engine's kind, a choice between two kinds, a call of `engine_for`, a read of
    `engine.kind`, an `isinstance` with an engine's class. Docstrings and comments are
    not code: they may name the setting."""
    found = []
    for path in sorted(library.rglob("*.py")):
        where = path.relative_to(library)
        if where.parts[0] == "engines":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Compare):
                hit = any(_is_kind(side) for side in [node.left, *node.comparators])
            elif isinstance(node, ast.IfExp):
                hit = _is_kind(node.body) or _is_kind(node.orelse)
            elif isinstance(node, ast.Call) and _name(node.func) == "engine_for":
                hit = True
            elif isinstance(node, ast.Call) and _name(node.func) == "isinstance":
                cls = _name(node.args[1]) if len(node.args) == 2 else None
                hit = (cls or "").startswith(("Embedded", "Spark"))
            elif isinstance(node, ast.Attribute):
                hit = node.attr == "kind" and _name(node.value) == "engine"
            else:
                hit = False
            if hit:
                found.append(f"{where}:{getattr(node, 'lineno', '?')}: {ast.unparse(node)}")
    return found


def test_no_verb_asks_which_engine_it_has() -> None:
    assert engine_branches(LIBRARY) == []


def test_the_scan_finds_a_branch_on_the_engine_kind(tmp_path: Path) -> None:
    # What the library held before the protocol, one of each shape.
    (tmp_path / "verb").mkdir()
    (tmp_path / "verb" / "run.py").write_text(
        "def run(settings, spark, engine, planner):\n"
        "    if engine_for(settings) == SPARK:\n"
        "        pass\n"
        "    kind = settings.engine.kind\n"
        "    chosen = SPARK if spark is not None else EMBEDDED\n"
        "    source = 'spark' if engine == 'spark' else 'pandas'\n"
        "    return isinstance(planner, EmbeddedPlanner)\n"
    )
    (tmp_path / "engines").mkdir()
    (tmp_path / "engines" / "choose.py").write_text("x = kind == SPARK\n")
    found = engine_branches(tmp_path)
    assert sorted(int(line.split(":")[1]) for line in found) == [2, 2, 4, 5, 6, 6, 7]
    assert all(line.startswith("verb/run.py:") for line in found)


def test_the_registry_knows_both_engines_named_alike(tmp_path: Path) -> None:
    settings = load_settings(var_dir=tmp_path, jars_dir=JARS_DIR)
    assert {EMBEDDED, SPARK} <= set(registered())
    embedded, spark = build(EMBEDDED, settings), build(SPARK, settings)
    # mypy holds both classes to the protocol here, method by method.
    both: list[Engine] = [EmbeddedEngine(settings), SparkEngine(settings)]
    assert [type(e) for e in both] == [type(embedded), type(spark)]
    assert isinstance(embedded, Engine)
    assert isinstance(spark, Engine)
    assert (embedded.name, spark.name) == (EMBEDDED, SPARK)
    assert (embedded.runs_in_task, spark.runs_in_task) == (True, False)
    assert type(embedded).__module__ == "ackfold.engines.embedded"
    assert type(spark).__module__ == "ackfold.engines.spark"
    assert choose(settings).name == EMBEDDED  # a local warehouse: `auto` is embedded


def test_an_unknown_engine_is_an_error_naming_the_setting(tmp_path: Path) -> None:
    from ackfold.config import ConfigError

    settings = load_settings(var_dir=tmp_path, jars_dir=JARS_DIR, engine={"kind": "warp"})
    with pytest.raises(ConfigError, match=r"'warp' is not registered \(engine\.kind\).*auto"):
        engine_for(settings)
    with pytest.raises(ConfigError, match=r"'warp' is not registered"):
        build("warp", settings)
    with pytest.raises(ConfigError, match=r"engine\.kind"):
        load_settings(var_dir=tmp_path, jars_dir=JARS_DIR, engine={"kind": "Warp Drive"})


class Recorder(EmbeddedEngine):
    """A third engine, for the dispatch only: it records each operation a verb calls, and
    does the work as the embedded engine would."""

    name = "recorder"
    calls: ClassVar[list[str]] = []

    def check_commits(self) -> None:
        self.calls.append("check_commits")

    def fold(self, *, now: datetime, app: str | None) -> dict[str, Any]:
        self.calls.append("fold")
        return super().fold(now=now, app=app)

    def replay_planner(self, queues: Any, *, now: datetime) -> Any:
        self.calls.append("replay_planner")
        return super().replay_planner(queues, now=now)

    def replay_books(self, ledger: Any) -> Any:
        self.calls.append("replay_books")
        return super().replay_books(ledger)

    def quality_checks(self, **kwargs: Any) -> Any:
        self.calls.append("quality_checks")
        return super().quality_checks(**kwargs)

    def keep_quality(self, report: Any) -> None:
        self.calls.append("keep_quality")
        super().keep_quality(report)

    def maintain(self, *, now: datetime, step: Any) -> dict[str, Any]:
        self.calls.append("maintain")
        return super().maintain(now=now, step=step)

    def close(self) -> None:
        self.calls.append("close")


@pytest.fixture
def recorder() -> Iterator[list[str]]:
    Recorder.calls = []
    register("recorder", Recorder)
    try:
        yield Recorder.calls
    finally:
        unregister("recorder")


def _ledger(settings: Settings) -> None:
    """Two roots of one app, one completed and one failed, no reconcile yet."""
    writer = LedgerWriter(settings.table_root)
    writer.create()
    tracker = Tracker("orders", clock=lambda: NOW - timedelta(minutes=5))
    done = tracker.spout("m-1", source="sqs", source_queue="q", payload="p")
    tracker.ack(done, stage="store")
    bad = tracker.spout("m-2", source="sqs", source_queue="q", payload="p")
    tracker.fail(bad, stage="split", reason="poison")
    writer.append(tracker.drain_roots(), tracker.drain())


def test_a_third_engine_registered_is_the_engine_of_every_verb(
    recorder: list[str], tmp_path: Path
) -> None:
    from ackfold.maintenance import run_maintenance
    from ackfold.replay.request import ReplayRequest
    from ackfold.runs import run_quality
    from ackfold.runs.reconcile import run_reconcile
    from ackfold.runs.replay import run_replay

    # Chosen by the setting, as a user would: no run function names it.
    settings = load_settings(var_dir=tmp_path, jars_dir=JARS_DIR, engine={"kind": "recorder"})
    assert engine_for(settings) == "recorder"
    _ledger(settings)

    summary = run_reconcile(settings, now=NOW)
    assert summary["engine"] == "recorder"
    assert summary["by_status"] == {"completed": 1, "failed": 1}
    assert recorder.count("fold") == 1

    # Given by name: a dry run plans on the engine and books its plan there.
    replayed = run_replay(
        settings, ReplayRequest(app="orders", dry_run=True), now=NOW, engine="recorder"
    )
    assert replayed.planned == 1
    assert {"replay_planner", "replay_books"} <= set(recorder)

    report = run_quality(settings, now=NOW)
    assert report.results
    assert recorder.index("quality_checks") < recorder.index("keep_quality")

    maintained = run_maintenance(settings, now=NOW)
    assert maintained["engine"] == "recorder"
    assert "maintain" in recorder
    # Each run closed the engine it made, and only that: four runs, four closes.
    assert recorder.count("close") == 4


def test_a_run_leaves_an_engine_it_was_given_to_the_giver(
    recorder: list[str], tmp_path: Path
) -> None:
    from ackfold.runs.reconcile import run_reconcile

    settings = load_settings(var_dir=tmp_path, jars_dir=JARS_DIR)
    _ledger(settings)
    given = Recorder(settings)
    assert run_reconcile(settings, now=NOW, engine=given)["engine"] == "recorder"
    assert "fold" in recorder
    assert "close" not in recorder


def test_the_reference_page_names_every_operation_of_the_protocol() -> None:
    page = PAGE.read_text()
    members = [
        name
        for name in (*Engine.__annotations__, *vars(Engine))
        if not name.startswith("_") and name not in {"mro"}
    ]
    assert {"fold", "maintain", "quality_checks", "replay_planner"} <= set(members)
    for name in members:
        assert re.search(rf"^#+ `{name}", page, re.MULTILINE), f"{name} is not on {PAGE.name}"
    mkdocs = (ROOT / "mkdocs.yml").read_text()
    assert "reference/engines.md" in mkdocs
