"""`ackfold spark-app`: where the packaged spark-submit entry points are, for a
spark-submit by hand; an unknown name is a usage error that lists the known ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from ackfold.cli import main as cli_module
from ackfold.jobs import APPS_DIR


def test_it_lists_the_entry_points_and_prints_one_s_file(
    clean_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_module.run(["spark-app"]) == 0
    listed = capsys.readouterr().out.split()
    assert {"reconcile.py", "replay.py", "quality.py", "maintenance.py", "smoke.py"} <= set(listed)
    for name in ("reconcile.py", "reconcile"):
        assert cli_module.run(["spark-app", name]) == 0
        printed = Path(capsys.readouterr().out.strip())
        assert printed == APPS_DIR / "reconcile.py"
        assert printed.is_file()


def test_an_unknown_entry_point_is_a_usage_error(
    clean_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_module.run(["spark-app", "../../etc/passwd"]) == 2
    err = capsys.readouterr().err
    assert "no entry point '../../etc/passwd': one of maintenance.py" in err
    assert "Traceback" not in err


def test_the_entry_points_answer_at_their_old_name_with_a_deprecation_warning() -> None:
    import doctest

    import ackfold.jobs
    from ackfold.spark import apps

    with pytest.warns(DeprecationWarning, match=r"moved to ackfold\.jobs\.app_path"):
        assert apps.app_path("reconcile.py") == APPS_DIR / "reconcile.py"
    with pytest.raises(AttributeError):
        _ = apps.run_reconcile
    # Nothing but the shim is left in the old folder: the files are the jobs' floor's.
    assert [p.name for p in Path(apps.__file__).parent.iterdir() if p.suffix == ".py"] == [
        "__init__.py"
    ]
    assert doctest.testmod(ackfold.jobs).failed == 0
