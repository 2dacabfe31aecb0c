"""One release number everywhere it is written, and at least the release the lease names:
a host of this package writes lease format 2, which keeps out every release before
`MIN_RELEASE` ("ackfold 0.2.0 or later"), so it must itself be one of those."""

from __future__ import annotations

import re
import tomllib

from ackfold import __version__
from ackfold.ledger.commits.lease_record import MIN_RELEASE
from tests.conftest import PROJECT_DIR


def _release(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def test_the_package_is_at_least_the_release_its_lease_names() -> None:
    assert _release(__version__) >= _release(MIN_RELEASE)


def test_every_place_says_the_same_release() -> None:
    for project in ("pyproject.toml", "dev/pyproject.toml"):
        data = tomllib.loads((PROJECT_DIR / project).read_text())
        assert data["project"]["version"] == __version__, project
    images = re.findall(
        r"image: ackfold/\w+:(\S+)", (PROJECT_DIR / "docker-compose.yml").read_text()
    )
    assert images
    assert set(images) == {__version__}


def test_the_changelog_leads_with_this_release() -> None:
    changelog = (PROJECT_DIR / "CHANGELOG.md").read_text()
    releases = re.findall(r"^## (\d+\.\d+\.\d+)$", changelog, flags=re.MULTILINE)
    assert releases[0] == __version__
