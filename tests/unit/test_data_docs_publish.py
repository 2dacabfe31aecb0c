"""Data Docs publishing, run after run: a stable path, never a site inside the last one,
old sites pruned; and pages that need no CDN. Plain Python: the publishing step of
`ackfold.quality.validator`, without GX's validation or Spark."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ackfold.config import load_settings
from ackfold.quality import docs_assets, validator
from ackfold.quality.validator import make_offline, publish_site, site_dir

GX_PAGE = """<html><head>
<link rel="stylesheet" href="https://maxcdn.bootstrapcdn.com/bootstrap/4.3.1/css/bootstrap.min.css"/>
<link rel="stylesheet" href="https://example.org/not-pinned.css"/>
<script src="https://code.jquery.com/jquery-3.7.1.min.js"></script>
<script src="https://cdnjs.cloudflare.com/ajax/libs/popper.js/1.12.9/umd/popper.min.js" integrity="sha384-x" crossorigin="anonymous"></script>
</head><body><a href="https://greatexpectations.io">GX</a></body></html>
"""  # noqa: E501


def quality_run(var: Path, run: int) -> Path:
    """What one quality run does with Data Docs: settings loaded afresh (as each Airflow
    task loads them), a site built in `site_dir`, then published."""
    settings = load_settings(var_dir=var, apps={"orders": {}}, quality={"docs_keep": 3})
    docs = settings.quality.docs_dir
    assert docs is not None
    site = site_dir(docs, f"run{run:03d}")
    (site / "expectations").mkdir(parents=True)
    (site / "index.html").write_text(f"run {run}")
    (site / "expectations" / "ack_events.html").write_text(f"run {run}")
    return publish_site(docs, site, keep=settings.quality.docs_keep)


def test_fifty_runs_publish_to_one_stable_path_and_prune(tmp_path: Path) -> None:
    var = tmp_path / "var"
    stable = var / "quality" / "data_docs"
    for run in range(50):
        index = quality_run(var, run)
        assert index == stable / "index.html", run
        assert index.read_text() == f"run {run}"
        assert (stable / "expectations" / "ack_events.html").read_text() == f"run {run}"
        # One link, to a site beside it: never a site inside the last one.
        assert os.readlink(stable) == f"data_docs.sites/run{run:03d}"
        sites = sorted(p.name for p in (var / "quality" / "data_docs.sites").iterdir())
        assert sites == [f"run{r:03d}" for r in range(max(0, run - 2), run + 1)]
    every = [str(p) for p in var.rglob("*")]
    assert max(len(p) - len(str(var)) for p in every) < 80, max(every, key=len)
    assert all(p.count(".sites") <= 1 for p in every)
    assert all(p.count("/run") <= 1 for p in every)


def test_the_settings_do_not_follow_the_link(tmp_path: Path) -> None:
    var = tmp_path / "var"
    quality_run(var, 1)
    settings = load_settings(var_dir=var, apps={"orders": {}})
    assert settings.quality.docs_dir == var.resolve() / "quality" / "data_docs"
    assert settings.quality.docs_keep == 3
    assert settings.quality.assets_dir == var.resolve() / "quality" / "assets"
    with pytest.raises(ValueError, match="docs_keep"):
        load_settings(var_dir=var, apps={"orders": {}}, quality={"docs_keep": 0})


def test_a_site_elsewhere_is_refused(tmp_path: Path) -> None:
    docs = tmp_path / "data_docs"
    (tmp_path / "other").mkdir()
    with pytest.raises(ValueError, match="is not a site of"):
        publish_site(docs, tmp_path / "other")


def fake_assets(assets_dir: Path) -> None:
    """An assets directory as `docs_assets.fetch` leaves it, with stand-in contents."""
    import hashlib
    import json

    files = {}
    for url, (name, member) in docs_assets.ASSETS.items():
        local = Path(f"{name.replace('/', '+')}@{docs_assets.PACKAGES[name].version}") / member
        data = f"/* {url} */ a{{}} </script> </style>".encode()
        (assets_dir / local).parent.mkdir(parents=True, exist_ok=True)
        (assets_dir / local).write_bytes(data)
        files[str(local)] = hashlib.sha256(data).hexdigest()
    packages = {p.name: p.version for p in docs_assets.PACKAGES.values()}
    manifest = {"packages": packages, "files": files}
    (assets_dir / docs_assets.MANIFEST).write_text(json.dumps(manifest))


def test_pages_link_the_cdn_files_copied_once_into_their_site(tmp_path: Path) -> None:
    site, assets = tmp_path / "site", tmp_path / "assets"
    (site / "validations" / "run").mkdir(parents=True)
    (site / "index.html").write_text(GX_PAGE)
    (site / "validations" / "run" / "page.html").write_text(GX_PAGE)
    # Without the assets, the pages keep their links, and the log says how to fix it.
    assert make_offline(site, assets) == 0
    fake_assets(assets)
    assert make_offline(site, assets) == 2
    for page, up in ((site / "index.html", ""), (site / "validations/run/page.html", "../../")):
        html = page.read_text()
        assert "bootstrapcdn" not in html
        assert "code.jquery.com" not in html
        # Relative to the page, so the site reads the same from disk or from the UI.
        css = (
            f'<link rel="stylesheet" href="{up}_static/bootstrap@4.3.1/dist/css/bootstrap.min.css">'
        )
        assert css in html
        assert (
            f'<script src="{up}_static/popper.js@1.12.9/dist/umd/popper.min.js"></script>' in html
        )
        assert "integrity" not in html
        # What is not pinned is left as it is; so are links.
        assert 'href="https://example.org/not-pinned.css"' in html
        assert '<a href="https://greatexpectations.io">' in html
    # Each file once, in the site: the pages carry none of it.
    static = site / "_static"
    copied = sorted(str(p.relative_to(static)) for p in static.rglob("*") if p.is_file())
    assert copied == [
        "bootstrap@4.3.1/dist/css/bootstrap.min.css",
        "jquery@3.7.1/dist/jquery.min.js",
        "popper.js@1.12.9/dist/umd/popper.min.js",
    ]
    assert (static / copied[1]).read_bytes() == (assets / copied[1]).read_bytes()
    assert max(p.stat().st_size for p in site.rglob("*.html")) < 2 * len(GX_PAGE)


def test_a_tampered_asset_is_refused(tmp_path: Path) -> None:
    fake_assets(tmp_path)
    next(tmp_path.rglob("jquery.min.js")).write_text("alert(1)")
    with pytest.raises(docs_assets.AssetsError, match="does not match"):
        docs_assets.load(tmp_path)


def test_doctests() -> None:
    import doctest

    for module in (validator, docs_assets):
        result = doctest.testmod(module)
        assert result.failed == 0, module.__name__
        assert result.attempted > 0, module.__name__


def test_make_setup_fetches_the_assets_without_a_warning() -> None:
    """`make setup` runs `python -m ackfold.quality.docs_assets`: no RuntimeWarning that
    the module was imported by its package before it ran."""
    result = subprocess.run(
        [sys.executable, "-W", "error::RuntimeWarning", "-m", "ackfold.quality.docs_assets", "-h"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert "usage: python -m ackfold.quality.docs_assets" in result.stdout
