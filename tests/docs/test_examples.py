"""Every code block of the README and the docs runs, or says why it cannot.

A block of code (python, bash, sh, yaml, sql) is announced by an HTML comment on the line
before its fence, which the rendered page hides:

- `<!-- example: run -->`: python runs as a script, bash with `set -euo pipefail`, in the
  project directory, with a fresh `ACKFOLD_VAR_DIR` (local Spark, the project's jar cache);
  it must exit 0.
- `<!-- example: stack -->`: the same, against the running `make run` stack (its var dir,
  queues and Airflow; `http://localhost:8080` is the stack's address and `admin`'s password
  is the stack's), as a user's second terminal would.
- `<!-- example: config -->`: a yaml `ackfold.yaml` that `load_settings` must accept.
- `<!-- example: skip: <why> -->`: shown, not run (starts a server until Ctrl-C, needs
  Docker or a cloud account, runs this very suite, ...); the reason is required.

A block without one fails here: no example can rot unseen. Blocks that are not code need
no annotation: `text` (output, shown as a command prints it) and `mermaid` (a diagram,
which the docs site and GitHub draw); a fence must name its language, so that no command
hides in a block of unknown kind. `tests/docs/test_site.py` builds the site itself.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import JARS_DIR, PROJECT_DIR

CODE = {"python", "bash", "sh", "shell", "yaml", "yml", "sql"}
KINDS = ("run", "stack", "config", "skip")
_FENCE = re.compile(r"^(\s*)(```|~~~)\s*([\w+-]*)")
_ANNOTATION = re.compile(r"^\s*<!--\s*example:\s*(\w+)\s*(?::\s*(.*?))?\s*-->\s*$")
# A block's run is bounded: a Spark example starts a JVM, a stack example may wait on Airflow.
TIMEOUT = 300


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    lang: str
    code: str
    kind: str | None
    note: str | None

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(PROJECT_DIR)}:{self.line}"


def documents() -> list[Path]:
    return [PROJECT_DIR / "README.md", *sorted((PROJECT_DIR / "docs").rglob("*.md"))]


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of `path`, with the annotation on the line before each."""
    lines = path.read_text().splitlines()
    found = []
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        indent, marker, lang = fence.groups()
        start, body = i, []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(marker):
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1
        before = next((line for line in reversed(lines[:start]) if line.strip()), "")
        kind, why = note.groups() if (note := _ANNOTATION.match(before)) else (None, None)
        found.append(Block(path, start + 1, lang.lower(), "\n".join(body) + "\n", kind, why))
    return found


FENCED = [block for path in documents() for block in blocks(path)]
ALL = [block for block in FENCED if block.lang in CODE]


def _ids(selected: list[Block]) -> list[str]:
    return [block.where for block in selected]


def test_every_fenced_block_names_its_language() -> None:
    # A fence without one could hide a command from the checks below: output is `text`.
    unnamed = [b.where for b in FENCED if not b.lang]
    assert not unnamed, f"fenced blocks without a language (output is `text`): {unnamed}"


def test_every_code_block_says_whether_and_how_it_runs() -> None:
    unannounced = [b.where for b in ALL if b.kind not in KINDS]
    assert not unannounced, (
        f"code blocks without a known `<!-- example: {'|'.join(KINDS)} -->` on the line "
        f"before: {unannounced}"
    )
    reasonless = [b.where for b in ALL if b.kind == "skip" and not b.note]
    assert not reasonless, f"`example: skip` needs a reason: {reasonless}"
    misplaced = [b.where for b in ALL if b.kind == "config" and b.lang not in ("yaml", "yml")]
    assert not misplaced, f"`example: config` is for yaml blocks: {misplaced}"


def _env(var: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACKFOLD_")}
    venv_bin = str(Path(sys.executable).parent)
    env.update(
        PATH=f"{venv_bin}{os.pathsep}{env.get('PATH', '')}",
        ACKFOLD_VAR_DIR=str(var),
        ACKFOLD_JARS_DIR=str(JARS_DIR),
        ACKFOLD_SPARK__MASTER="local[2]",
        SPARK_LOCAL_IP="127.0.0.1",
        GX_ANALYTICS_ENABLED="false",
        **extra,
    )
    return env


def run(block: Block, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    if block.lang == "python":
        argv = [sys.executable, "-c", block.code]
    else:
        argv = ["bash", "-euo", "pipefail", "-c", block.code]
    result = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    assert result.returncode == 0, (
        f"{block.where} exited {result.returncode}:\n{block.code}\n--- stdout\n"
        f"{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-3000:]}"
    )
    return result


@pytest.mark.parametrize(
    "block", [b for b in ALL if b.kind == "run"], ids=_ids([b for b in ALL if b.kind == "run"])
)
def test_example_runs(block: Block, tmp_path: Path) -> None:
    run(block, _env(tmp_path / "var"), PROJECT_DIR)


STACK = [b for b in ALL if b.kind == "stack"]


@pytest.mark.parametrize("block", STACK, ids=_ids(STACK))
def test_example_runs_against_make_run(block: Block, stack: Any) -> None:
    stack.wait_for_log("the app keeps running", 600)
    env = _env(stack.var, ACKFOLD_SQS__ENDPOINT_URL=stack.sqs)
    code = block.code.replace("http://localhost:8080", stack.url).replace(
        "var/airflow/passwords.json", str(stack.var / "airflow" / "passwords.json")
    )
    run(Block(block.path, block.line, block.lang, code, block.kind, None), env, PROJECT_DIR)


CONFIGS = [b for b in ALL if b.kind == "config"]


@pytest.mark.parametrize("block", CONFIGS, ids=_ids(CONFIGS))
def test_example_configuration_loads(block: Block, tmp_path: Path) -> None:
    (tmp_path / "ackfold.yaml").write_text(block.code)
    check = "from ackfold.config import load_settings; load_settings()"
    run(Block(block.path, block.line, "python", check, "run", None), _env(tmp_path), tmp_path)
