"""The README is a front door that works on GitHub: about 200 lines, and every link in it
resolves there, relative to the repository (a file, and a heading of it where the link
names one); none points at a docs site that nothing publishes."""

from __future__ import annotations

import re
from pathlib import Path

from markdown.extensions.toc import slugify

from tests.conftest import PROJECT_DIR

README = PROJECT_DIR / "README.md"
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*$")
# The site `mkdocs.yml` names: `make docs` builds it locally; nothing publishes it.
UNPUBLISHED = "ackfold.github.io"


def links(text: str) -> list[str]:
    return _LINK.findall(text)


def anchors(page: Path) -> set[str]:
    """The ids the docs site (and GitHub, for these headings) gives `page`'s headings."""
    found, fenced = set(), False
    for line in page.read_text().splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced and (heading := _HEADING.match(line)):
            found.add(slugify(heading.group(1).replace("`", ""), "-"))
    return found


def broken(readme: Path) -> list[str]:
    wrong = []
    for target in links(readme.read_text()):
        if UNPUBLISHED in target:
            wrong.append(f"{target}: a site nothing publishes; link docs/... instead")
            continue
        if re.match(r"^[a-z]+:", target):
            continue  # a page elsewhere on the web
        path, _, anchor = target.partition("#")
        file = (readme.parent / path) if path else readme
        if not file.exists():
            wrong.append(f"{target}: no {file.relative_to(readme.parent)}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            wrong.append(f"{target}: no heading #{anchor} in {path or readme.name}")
    return wrong


def test_every_link_of_the_readme_resolves_in_the_repository() -> None:
    assert links(README.read_text()), "the README links no page"
    assert broken(README) == []


def test_a_link_to_the_unpublished_site_or_a_missing_page_is_found(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\n## Where tracked apps run\n")
    readme = tmp_path / "README.md"
    readme.write_text(
        "[ok](docs/a.md#where-tracked-apps-run) [site](https://ackfold.github.io/ackfold/a/)"
        " [gone](docs/b.md) [anchor](docs/a.md#nowhere) [web](https://delta.io)\n"
    )
    assert [line.split(":")[0] for line in broken(readme)] == [
        "https",
        "docs/b.md",
        "docs/a.md#nowhere",
    ]


def test_the_readme_is_a_front_door_not_the_manual() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= 220, f"the README has {lines} lines: move detail to docs/ (about 200)"
