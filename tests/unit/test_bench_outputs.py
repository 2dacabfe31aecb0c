"""A benchmark run leaves the checkout clean: what a bench script writes by default goes
under var/ (ignored by git), never over a tracked file such as docs/images/."""

from __future__ import annotations

import ast
import subprocess

from tests.conftest import PROJECT_DIR


def test_the_reconcile_benchmark_draws_its_plot_under_var() -> None:
    tree = ast.parse((PROJECT_DIR / "bench" / "reconcile.py").read_text())
    [default] = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "DEFAULT_PLOT" for t in node.targets)
    ]
    constants = [
        n for n in ast.walk(default) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]
    parts = [n.value for n in sorted(constants, key=lambda n: n.col_offset)]
    assert parts[:1] == ["var"], ast.unparse(default)
    relative = "/".join(str(p) for p in parts)
    tracked = subprocess.run(
        ["git", "ls-files", "--error-unmatch", relative],
        cwd=PROJECT_DIR,
        capture_output=True,
        check=False,
    )
    assert tracked.returncode != 0, f"{relative} is a tracked file"
    ignored = subprocess.run(["git", "check-ignore", "-q", relative], cwd=PROJECT_DIR, check=False)
    assert ignored.returncode == 0, f"{relative} is not ignored by git"
