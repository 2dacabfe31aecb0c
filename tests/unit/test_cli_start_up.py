"""`ackfold --version` and `--help` answer without building the settings: pydantic and its
models were most of the CLI's start-up (351 ms for `--version`, against 185 ms before the
settings grew; docs/benchmarks.md)."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("pydantic", "ackfold.config.settings", "pyspark", "deltalake", "pyarrow", "duckdb")


def test_the_parser_and_version_import_no_settings() -> None:
    script = (
        "import sys\n"
        "from ackfold.cli.main import build_parser\n"
        "parser = build_parser()\n"
        "try:\n"
        "    parser.parse_args(['--version'])\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r} or m in {HEAVY!r}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.startswith("ackfold 0."), done.stdout
    assert done.stdout.splitlines()[-1] == "[]", done.stdout
