"""The README is the wheel's long description, shown on an index page where a relative
link leads nowhere: every link is absolute, and each one into the docs site names a page
(and a heading) that the site has."""

from __future__ import annotations

import re

from tests.conftest import PROJECT_DIR

SITE = re.search(r"^site_url: (\S+)$", (PROJECT_DIR / "mkdocs.yml").read_text(), re.M)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    text = re.sub(r"[^\w\s-]", "", heading.strip().lower())
    return re.sub(r"[\s]+", "-", text)


def test_every_link_of_the_readme_is_absolute_and_lands_on_a_docs_page() -> None:
    assert SITE, "mkdocs.yml names no site_url"
    site = SITE.group(1)
    links = LINK.findall((PROJECT_DIR / "README.md").read_text())
    relative = [link for link in links if not link.startswith(("https://", "http://"))]
    assert not relative, f"relative links in the long description: {relative}"
    into_site = [link for link in links if link.startswith(site)]
    assert into_site, "the README links no page of the docs site"
    for link in into_site:
        page, _, anchor = link.removeprefix(site).partition("#")
        source = PROJECT_DIR / "docs" / (f"{page.rstrip('/')}.md" if page else "index.md")
        assert source.is_file(), f"{link}: no {source.relative_to(PROJECT_DIR)}"
        if anchor:
            headings = re.findall(r"^#+ (.+)$", source.read_text(), re.M)
            assert anchor in {_slug(h) for h in headings}, f"{link}: no such heading"
