"""The development wing stands apart from the product: the servers, the embedded stack and
the demo's command are the `ackfold-dev` distribution in `dev/`, which the `ackfold` wheel
does not package and no module of the package imports; its commands join the CLI through
the entry-point group `ackfold.commands`, and without it each says where it runs.
(tests/install/test_wheel.py checks the wheel itself, as built and installed.)"""

from __future__ import annotations

import ast
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from ackfold.cli import main as cli
from tests.conftest import PROJECT_DIR

PACKAGE = PROJECT_DIR / "include" / "ackfold"
WING = PROJECT_DIR / "dev" / "ackfold_dev"
# What only the wing may import: itself, and the development tools it runs.
DEVELOPMENT_ONLY = ("ackfold_dev", "moto", "flask_cors", "werkzeug")


def _imported(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
    return found


def test_the_package_holds_no_development_server() -> None:
    # setuptools finds the wheel's packages as the build does (the other Pythons' venvs,
    # tests/pythons, have no setuptools: the build's own check runs here).
    find_packages = pytest.importorskip("setuptools").find_packages
    config = tomllib.loads((PROJECT_DIR / "pyproject.toml").read_text())["tool"]["setuptools"]
    where = config["packages"]["find"]["where"]
    packaged = {p for root in where for p in find_packages(str(PROJECT_DIR / root))}
    # The wheel's packages: ackfold's, and nothing beside them.
    assert packaged == {p for p in packaged if p == "ackfold" or p.startswith("ackfold.")}
    assert "ackfold.local" not in packaged
    assert not [p for p in packaged if p.startswith("ackfold_dev")]
    assert set(config["package-data"]) == {"ackfold"}
    # No module of the package imports the wing, or what only the wing runs.
    reaching = sorted(
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in PACKAGE.rglob("*.py")
        for name in _imported(path) & set(DEVELOPMENT_ONLY)
    )
    assert reaching == []
    # The servers are the wing's.
    for server in ("elasticmq", "kafka_broker", "s3", "s3_app", "gcs", "azurite", "stack"):
        assert (WING / f"{server}.py").is_file()
        assert not list(PACKAGE.rglob(f"{server}.py")), server


def test_the_wing_is_a_distribution_whose_commands_join_the_cli() -> None:
    project = tomllib.loads((PROJECT_DIR / "dev" / "pyproject.toml").read_text())["project"]
    assert project["name"] == "ackfold-dev"
    declared = project["entry-points"][cli.COMMANDS_GROUP]
    installed = {e.value for e in entry_points(group=cli.COMMANDS_GROUP)}
    assert set(declared.values()) <= installed, "make install installs the wing editable"
    from ackfold_dev.commands import add_commands

    registered: list[str] = []

    def command(name: str, func: object, help: str) -> object:
        registered.append(name)
        import argparse

        return argparse.ArgumentParser(prog=name)

    add_commands(command)  # type: ignore[arg-type]
    # The product names exactly the wing's commands as development commands.
    assert sorted(registered) == sorted(cli.DEVELOPMENT_COMMANDS)


def test_without_the_wing_a_development_command_says_where_it_runs(
    clean_env: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "entry_points", lambda group: [])  # a production install
    for argv in (["sqs"], ["s3", "--port", "9020"], ["-v", "up", "--no-demo"], ["demo"]):
        assert cli.run(argv) == 2, argv
        err = capsys.readouterr().err
        assert (
            f"`ackfold {argv[1] if argv[0] == '-v' else argv[0]}` is a development command" in err
        )
        assert "make install" in err
    with pytest.raises(SystemExit):
        cli.run(["--help"])
    listed = capsys.readouterr().out
    assert "a development command: run it from a checkout of ackfold" in listed
    assert {"status", "reconcile", "sqs"} <= set(listed.split())


def test_ackfold_s_own_commands_never_read_the_entry_points(
    clean_env: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def scanned(group: str) -> list[object]:
        raise AssertionError("a scan of every installed distribution, for an own command")

    monkeypatch.setattr(cli, "entry_points", scanned)
    assert cli.run(["-v", "config"]) == 0
    assert '"engine"' in capsys.readouterr().out
    # A command that is not ackfold's own, or the list of commands, reads them.
    with pytest.raises(AssertionError, match="a scan"):
        cli.run(["sqs"])
    with pytest.raises(AssertionError, match="a scan"):
        cli.run(["-h"])
