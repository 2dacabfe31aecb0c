"""Shared fixtures. Tests in tests/spark, tests/airflow, tests/sqs, tests/kafka, tests/e2e,
tests/browser and tests/cluster get that tier's marker."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ackfold.config import Settings, load_settings

PROJECT_DIR = Path(__file__).resolve().parents[1]
JARS_DIR = PROJECT_DIR / "var" / "jars"
TIERS = ("spark", "airflow", "sqs", "kafka", "e2e", "browser", "cluster")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        tier = Path(str(item.fspath)).relative_to(PROJECT_DIR / "tests").parts[0]
        if tier in TIERS:
            item.add_marker(getattr(pytest.mark, tier))
    # The tests on the shared `make run` stack run one after the other, the one that
    # Ctrl-C's it last: the stack must not keep two cores busy under the other tiers.
    on_stack = [item for item in items if "stack" in getattr(item, "fixturenames", ())]
    if on_stack:
        first = items.index(on_stack[0])
        on_stack.sort(key=lambda item: item.get_closest_marker("stops_stack") is not None)
        rest = [item for item in items if item not in on_stack]
        items[:] = rest[:first] + on_stack + rest[first:]


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """`make run` as a user starts it, shared by the Airflow and browser tiers."""
    from tests.embedded_stack import embedded_stack

    with embedded_stack(tmp_path_factory.mktemp("stack-var")) as running:
        yield running


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No ACKFOLD_* variable and no ackfold.yaml leaks into a test from the caller."""
    import os

    for name in list(os.environ):
        if name.startswith("ACKFOLD_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def make_settings(tmp_path: Path) -> Callable[..., Settings]:
    """Settings in a fresh var dir that share the project's jar cache (no re-download)."""

    def make(**overrides: Any) -> Settings:
        overrides.setdefault("var_dir", tmp_path / "var")
        overrides.setdefault("jars_dir", JARS_DIR)
        return load_settings(**overrides)

    return make


_exit_status: list[int] = []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _exit_status.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Leave without interpreter teardown once delta-rs is loaded: it can abort there
    (exit 134, delta-rs#2184), which CI would read as a failed run after green tests."""
    import os
    import sys

    if "deltalake" in sys.modules and _exit_status:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_exit_status[-1])
