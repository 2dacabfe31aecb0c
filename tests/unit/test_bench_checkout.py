"""The benchmark commands work as `docs/benchmarks.md` types them, from a checkout without
make: they find the jar cache that `make setup` filled in the checkout's var/."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PROJECT_DIR

BENCH = PROJECT_DIR / "bench"
# What a benchmark does before its first session: the settings, and Spark's jars.
JARS = """\
import sys
sys.path.insert(0, sys.argv[1])
import checkout
from ackfold.config import load_settings
from ackfold.spark import spark_jars
settings = load_settings()
print(settings.jars_dir)
print(len(spark_jars(settings)))
"""


def test_a_script_run_without_make_uses_the_checkouts_jar_cache(tmp_path: Path) -> None:
    # As a user runs `.venv/bin/python bench/wordcount.py`: no ACKFOLD_* variable, and a
    # user state directory with no jar cache in it.
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACKFOLD_")}
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    done = subprocess.run(
        [sys.executable, "-c", JARS, str(BENCH)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    jars_dir, count = done.stdout.split()
    assert Path(jars_dir) == (PROJECT_DIR / "var" / "jars").resolve()
    assert int(count) >= 1


def test_an_ackfold_var_dir_already_set_wins(tmp_path: Path) -> None:
    env = {**os.environ, "ACKFOLD_VAR_DIR": str(tmp_path / "mine")}
    code = f"import sys; sys.path.insert(0, {str(BENCH)!r}); import checkout, os; "
    code += "print(os.environ['ACKFOLD_VAR_DIR'])"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == str(tmp_path / "mine")


@pytest.mark.parametrize(
    "script",
    sorted(
        p.name
        for p in BENCH.glob("*.py")
        if re.search(r"load_settings\(|get_spark\(|Workdir\(", p.read_text())
        and '__name__ == "__main__"' in p.read_text()
    ),
)
def test_every_script_that_loads_settings_imports_checkout_first(script: str) -> None:
    text = (BENCH / script).read_text()
    assert re.search(r"^import checkout\b", text, flags=re.MULTILINE), (
        f"bench/{script} loads settings without `import checkout`"
    )


@pytest.mark.parametrize(
    ("modes", "said"),
    [("compact,bogus", "--modes: bogus; choose from compact, per_tuple"), ("", "none given")],
)
def test_the_word_count_benchmark_refuses_an_unknown_ack_mode_before_it_starts(
    modes: str, said: str
) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "wordcount.py"), "--modes", modes],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert said in done.stderr
    assert "ElasticMQ" not in done.stdout + done.stderr
