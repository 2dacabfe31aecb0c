"""The docs site builds with `mkdocs build --strict`, as `make docs` does: a broken link or
anchor, an API reference (`::: ackfold...`) that does not resolve, or a page left out of
the nav fails it. And every list and table on it renders as one: Python-Markdown, unlike
GitHub, reads a list or a table that follows a line of text without a blank line as more
of that text, and a list item indented by 2 as a sibling. No JVM: the API reference is
read from the source, not imported."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PROJECT_DIR

MKDOCS = Path(sys.executable).parent / "mkdocs"
_ITEM = re.compile(r"^(?P<indent>\s*)(?:[-*+]|\d+\.)\s")
_FENCE = re.compile(r"^\s*(```|~~~)")


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MKDOCS), "build", "--strict", "--config-file", str(config), "--site-dir", str(site)],
        cwd=config.parent,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_site_builds_strict_with_every_page_and_the_api_reference(tmp_path: Path) -> None:
    done = build(PROJECT_DIR / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stderr[-4000:]
    assert "WARNING" not in done.stderr, done.stderr[-4000:]
    # The API reference was generated from the docstrings, their doctests highlighted as
    # code (a prompt span), not run together as text.
    tracker = (tmp_path / "site" / "reference" / "track" / "index.html").read_text()
    assert 'id="ackfold.track.tracker.Tracker.spout"' in tracker
    assert '<span class="gp">&gt;&gt;&gt; </span>' in tracker
    # The flow diagram is a Mermaid diagram for the theme to draw, not a code listing.
    home = (tmp_path / "site" / "index.html").read_text()
    assert '<pre class="mermaid"><code>flowchart TB' in home


@pytest.fixture
def project_copy(tmp_path: Path) -> Path:
    """The site's sources (mkdocs.yml, docs/, the extension it loads) in a scratch dir,
    with the library linked in: a copy to break."""
    copy = tmp_path / "project"
    copy.mkdir()
    shutil.copy(PROJECT_DIR / "mkdocs.yml", copy)
    shutil.copytree(PROJECT_DIR / "docs", copy / "docs")
    shutil.copytree(PROJECT_DIR / "scripts", copy / "scripts")
    (copy / "include").symlink_to(PROJECT_DIR / "include")
    return copy


def append(page: Path, text: str) -> None:
    page.write_text(f"{page.read_text() if page.exists() else ''}\n\n{text}\n")


def test_a_broken_link_or_anchor_or_a_page_left_out_fails_the_strict_build(
    project_copy: Path, tmp_path: Path
) -> None:
    docs = project_copy / "docs"
    append(docs / "concepts.md", "[the ledger](ledger.md#no-such-section)")
    append(docs / "ledger.md", "[the concepts](no-such-page.md)")
    append(docs / "orphan.md", "# A page in no nav")
    done = build(project_copy / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0
    for reported in (
        "'concepts.md' contains a link 'ledger.md#no-such-section', but the doc 'ledger.md' "
        "does not contain an anchor '#no-such-section'",
        "'ledger.md' contains a link 'no-such-page.md', but the target is not found",
        'not included in the "nav" configuration:\n  - orphan.md',
    ):
        assert reported in done.stderr, done.stderr[-4000:]


def test_an_api_reference_that_does_not_resolve_fails_the_strict_build(
    project_copy: Path, tmp_path: Path
) -> None:
    append(project_copy / "docs" / "reference" / "track.md", "::: ackfold.track.tracker.NoSuchName")
    done = build(project_copy / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0
    assert "Could not collect 'ackfold.track.tracker.NoSuchName'" in done.stderr, done.stderr


def rendering_problems(text: str) -> list[str]:
    """Lists and tables that Python-Markdown would not render as such, outside code."""
    problems = []
    previous, fence = "", None
    for number, line in enumerate(text.splitlines(), 1):
        if fence:
            fence = None if line.strip().startswith(fence) else fence
        elif opened := _FENCE.match(line):
            fence = opened.group(1)
        else:
            item = _ITEM.match(line)
            text_before = previous.strip() and not (
                _ITEM.match(previous) or previous.startswith((" ", "|", "#", "<!--"))
            )
            if (item or line.startswith("|")) and text_before:
                problems.append(f"{number}: a list or table right after a line of text")
            if item and len(item["indent"]) % 4:
                problems.append(f"{number}: a list item indented by {len(item['indent'])}")
        previous = line
    return problems


def test_every_list_and_table_on_the_site_renders_as_one() -> None:
    found = {
        str(page.relative_to(PROJECT_DIR)): problems
        for page in sorted((PROJECT_DIR / "docs").rglob("*.md"))
        if (problems := rendering_problems(page.read_text()))
    }
    assert not found, f"add a blank line before, or indent nested items by 4: {found}"


def test_rendering_problems_are_found() -> None:
    after_text = ["2: a list or table right after a line of text"]
    assert rendering_problems("Text:\n- a\n- b\n") == after_text
    assert rendering_problems("- a\n  - b\n") == ["2: a list item indented by 2"]
    assert rendering_problems("Text:\n\n| a |\n|---|\n\n```\nText\n- no\n```\n") == []
