from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def table_path(tmp_path: Path) -> str:
    return str(tmp_path / "table")
