"""The repository's top level is the design's, an Astronomer-style Airflow project, and
what a deployment copies from it stays thin: the library is in the package."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

from tests.conftest import PROJECT_DIR

TOP_LEVEL = (
    "dags", "spark_apps", "plugins", "include", "tests", "docker-compose.yml",
    "requirements.txt",
)  # fmt: skip


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
    return found


def test_the_top_level_is_the_designs() -> None:
    missing = [name for name in TOP_LEVEL if not (PROJECT_DIR / name).exists()]
    assert not missing, f"the design's top level lacks {missing}"


def test_deployed_files_are_thin_and_call_the_package() -> None:
    files = [
        *(PROJECT_DIR / "dags").glob("*.py"),
        *(PROJECT_DIR / "spark_apps").glob("*.py"),
        *(PROJECT_DIR / "plugins").glob("*.py"),
    ]
    assert {p.parent.name for p in files} == {"dags", "spark_apps", "plugins"}
    for path in files:
        assert "ackfold" in _imports(path), f"{path} does not call the package"
        code = [line for line in path.read_text().splitlines() if line.strip()]
        assert len(code) < 80, f"{path} is not thin: {len(code)} lines"


def test_the_plugins_folder_holds_the_entry_points_plugin() -> None:
    # The same class, so that Airflow, which keeps one plugin per name, registers it once.
    entry = tomllib.loads((PROJECT_DIR / "pyproject.toml").read_text())["project"]["entry-points"][
        "airflow.plugins"
    ]["ackfold_ui"]
    module, name = entry.split(":")
    source = (PROJECT_DIR / "plugins" / "ackfold_ui.py").read_text()
    assert f"from {module} import {name}" in source
