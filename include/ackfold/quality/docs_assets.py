"""The styles and scripts of Great Expectations' Data Docs, served without a CDN.

GX's pages load Bootstrap, jQuery, bootstrap-table, Font Awesome and Vega from seven
CDNs; a deployment without internet showed an unstyled stub. Each of those files comes
here from its npm package, pinned by version and by the sha256 of its tarball, fetched
once by `make setup` (`python -m ackfold.quality.docs_assets DIR`) into
`quality.assets_dir`, never at run time.

Publishing a site (`ackfold.quality.validator.make_offline`) copies the files its pages
use into the site's `_static/` folder, once, and points each page at them with a link
relative to the page (`linked_html`): the site reads the same opened from disk or served
by the Reliability UI, and a browser loads each file once for every page. (Written into
each page, the 2.7 MB of them made three kept sites of a 3 MB warehouse weigh 164 MB.)
The UI serves the pages sandboxed, in an origin of their own that carries no login
cookie: it signs the links to `_static/` of each page it serves
(`ackfold.ui.quality_pages`).

Example:
    >>> html = '<link rel="stylesheet" href="https://maxcdn.bootstrapcdn.com/bootstrap/4.3.1/css/bootstrap.min.css"/>'
    >>> page, used = linked_html(html, {CDN_BOOTSTRAP_CSS}, depth=2)
    >>> page
    '<link rel="stylesheet" href="../../_static/bootstrap@4.3.1/dist/css/bootstrap.min.css">'
    >>> sorted(used)
    ['bootstrap@4.3.1/dist/css/bootstrap.min.css']
"""
# ruff: noqa: E501 - the tables below: one URL, package or hash a line

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ackfold.errors import AckfoldError

MANIFEST: Final = "manifest.json"
# The folder of a published site that holds the files its pages link (`linked_html`).
STATIC: Final = "_static"
GX_IMAGES: Final = "great_expectations/images"
# Said to a wheel's user as well as to a checkout's, where `make setup` runs the same.
FIX: Final = (
    "run `python -m ackfold.quality.docs_assets` on this host (it needs npm; in a "
    "checkout, `make setup` does it), or point quality.assets_dir at assets fetched "
    "elsewhere"
)


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    sha256: str  # of the tarball npm serves


PACKAGES: Final = {
    p.name: p
    for p in (
        Package("bootstrap", "4.3.1", "b109c069bbb7cee57c3ddffb65d8481db5fe7e428b6d9b1ca502119a0429bd16"),
        Package("jquery", "3.7.1", "68a9f787516da47c680e09c187bcbac4536b6f85d90eb882844e12919e583f53"),
        Package("popper.js", "1.12.9", "4233fad2da34a2a6bc982e7e02c85c14180af075853d97d7e3bfa7124c853cbf"),
        Package("bootstrap-table", "1.19.1", "80f84cbf2f8f92e0d5444a82fb99495ab8a286b5cdb0594102e568eb9d9fa69a"),
        Package("bootstrap-datepicker", "1.9.0", "342bd95b65db796e0ac35ad9296edbe6733daefc9869b2e5b27286d423e38146"),
        Package("@forevolve/bootstrap-dark", "1.1.0", "20b089d52bc2ae80424fc43e5263023e96bd8479e7c5d346b8766c1b792a1cfd"),
        Package("@fortawesome/fontawesome-free", "6.6.0", "cf0b890ab2b68d3c4ea0f93ceb81cc24b956cccf9db36c63be044a672bd3b4dd"),
        Package("vega", "5.33.1", "1b8504b6731c5311be3269c4d84ca996a5cc293bc772283293ede20c490e16c3"),
        Package("vega-lite", "5.23.0", "e4cbfdd8f6f1abe381c59cd558fd6a559c12b1496bfdf2e0c3295263a40fe4da"),
        Package("vega-embed", "6.29.0", "ecf1ee709c2bac9e0a4ead6908114b05b62c71493e10a8a4308109bb070f8eb1"),
    )
}  # fmt: skip

CDN_BOOTSTRAP_CSS: Final = "https://maxcdn.bootstrapcdn.com/bootstrap/4.3.1/css/bootstrap.min.css"
_TABLE_CONTROL = "dist/extensions/filter-control/bootstrap-table-filter-control"
# Each URL GX's templates name (great_expectations/render/view/templates), and the file of
# which package stands in for it. GX names Vega by major version only: pinned here.
ASSETS: Final = {
    CDN_BOOTSTRAP_CSS: ("bootstrap", "dist/css/bootstrap.min.css"),
    "https://stackpath.bootstrapcdn.com/bootstrap/4.3.1/js/bootstrap.min.js": ("bootstrap", "dist/js/bootstrap.min.js"),
    "https://code.jquery.com/jquery-3.7.1.min.js": ("jquery", "dist/jquery.min.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/popper.js/1.12.9/umd/popper.min.js": ("popper.js", "dist/umd/popper.min.js"),
    "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.css": ("bootstrap-table", "dist/bootstrap-table.min.css"),
    "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.js": ("bootstrap-table", "dist/bootstrap-table.min.js"),
    f"https://unpkg.com/bootstrap-table@1.19.0/{_TABLE_CONTROL}.css": ("bootstrap-table", f"{_TABLE_CONTROL}.min.css"),
    f"https://unpkg.com/bootstrap-table@1.19.0/{_TABLE_CONTROL}.min.css": ("bootstrap-table", f"{_TABLE_CONTROL}.min.css"),
    f"https://unpkg.com/bootstrap-table@1.19.1/{_TABLE_CONTROL}.min.js": ("bootstrap-table", f"{_TABLE_CONTROL}.min.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/css/bootstrap-datepicker.min.css": ("bootstrap-datepicker", "dist/css/bootstrap-datepicker.min.css"),
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/js/bootstrap-datepicker.min.js": ("bootstrap-datepicker", "dist/js/bootstrap-datepicker.min.js"),
    "https://cdn.jsdelivr.net/npm/@forevolve/bootstrap-dark@1.1.0/dist/css/bootstrap-prefers-dark.css": ("@forevolve/bootstrap-dark", "dist/css/bootstrap-prefers-dark.css"),
    "https://cdnjs.cloudflare.com/ajax/libs/font-awesome/6.6.0/css/all.min.css": ("@fortawesome/fontawesome-free", "css/all.min.css"),
    "https://cdn.jsdelivr.net/npm/vega@5": ("vega", "build/vega.min.js"),
    "https://cdn.jsdelivr.net/npm/vega-lite@5": ("vega-lite", "build/vega-lite.min.js"),
    "https://cdn.jsdelivr.net/npm/vega-embed@6": ("vega-embed", "build/vega-embed.min.js"),
}  # fmt: skip
# Font Awesome's stylesheet names its fonts relative to itself: inlined, as data URLs.
FONTS: Final = ("fa-solid-900", "fa-regular-400", "fa-brands-400", "fa-v4compatibility")

_LINK = re.compile(r"<link\b[^>]*?\bhref=\"(?P<url>https://[^\"]+)\"[^>]*>", re.I)
_SCRIPT = re.compile(r"<script\b[^>]*?\bsrc=\"(?P<url>https://[^\"]+)\"[^>]*>\s*</script>", re.I)
_IMAGE = re.compile(
    r"(?P<attr>src|href)=\"(?:https://great-expectations-web-assets\.[\w.-]+/|(?:\.\.?/)*static/images/)"
    r"(?P<name>logo-long\.png|favicon\.ico)(?:\?[^\"]*)?\""
)
_FONT = re.compile(r"url\(\.\./webfonts/(?P<name>[\w-]+)\.woff2\)")
_TTF = re.compile(r",\s*url\(\.\./webfonts/[\w-]+\.ttf\)\s*format\(\"truetype\"\)")


class AssetsError(AckfoldError, RuntimeError):
    """The assets are missing, stale or altered, or npm could not fetch them."""


def linked_html(html: str, urls: Collection[str], depth: int) -> tuple[str, set[str]]:
    """`html`, a page `depth` folders below its site's root, with each stylesheet and
    script of `urls` (pinned CDN URLs) and GX's logo and favicon linked from the site's
    `_static/` folder instead, by a path relative to the page; and the files it links
    (paths under `_static/`). A URL not in `urls` is left as it is.

    A tag keeps no `integrity` or `crossorigin`: the copy is npm's, checked by its own
    hash, and a sandboxed page's request for it has no origin to share."""
    up = "../" * depth + f"{STATIC}/"
    charts = "vegaEmbed(" in html
    used: set[str] = set()

    def linked(match: re.Match[str], tag: str) -> str:
        url = match.group("url")
        if url not in urls:
            return match.group(0)
        name, member = ASSETS[url]
        package = PACKAGES[name]
        if name.startswith("vega") and not charts:
            # 2 MB of chart library for every page otherwise; only chart pages call it.
            return f"<!-- {package.name}@{package.version}: no chart on this page -->"
        path = str(_local(name, member))
        used.add(path)
        if tag == "script":
            return f'<script src="{up}{path}"></script>'
        return f'<link rel="stylesheet" href="{up}{path}">'

    def image(match: re.Match[str]) -> str:
        path = f"{GX_IMAGES}/{match.group('name')}"
        used.add(path)
        return f'{match.group("attr")}="{up}{path}"'

    html = _SCRIPT.sub(lambda m: linked(m, "script"), html)
    html = _LINK.sub(
        lambda m: linked(m, "link") if "stylesheet" in m.group(0).lower() else m.group(0),
        html,
    )
    # GX's logo (from its web assets' bucket) and favicon (beside the page): GX ships both.
    return _IMAGE.sub(image, html), used


def static_file(assets_dir: Path, path: str) -> bytes:
    """The bytes of `path`, a file `linked_html` links under `_static/`: an asset from
    `assets_dir`, or one of GX's images from its package."""
    if path.startswith(f"{GX_IMAGES}/"):
        from importlib.resources import files

        name = path.removeprefix(f"{GX_IMAGES}/")
        images = files("great_expectations").joinpath("render", "view", "static", "images")
        return images.joinpath(name).read_bytes()
    return (assets_dir / path).read_bytes()


def load(assets_dir: Path) -> dict[str, bytes]:
    """Every CDN URL's stand-in from `assets_dir`, verified against the manifest the fetch
    wrote; `AssetsError` saying how to fix a missing or stale copy."""
    manifest_path = assets_dir / MANIFEST
    if not manifest_path.is_file():
        raise AssetsError(f"no Data Docs assets in {assets_dir}: {FIX}")
    try:
        manifest = json.loads(manifest_path.read_text())
        pinned = {name: manifest["packages"][name] for name in PACKAGES}
    except (ValueError, KeyError, TypeError):
        raise AssetsError(f"{manifest_path} is corrupt or stale: {FIX}") from None
    if any(pinned[name] != PACKAGES[name].version for name in PACKAGES):
        raise AssetsError(f"the Data Docs assets in {assets_dir} are not the pinned ones: {FIX}")
    out: dict[str, bytes] = {}
    for url, (name, member) in ASSETS.items():
        path = assets_dir / _local(name, member)
        try:
            data = path.read_bytes()
        except OSError:
            raise AssetsError(f"{path} is missing: {FIX}") from None
        if hashlib.sha256(data).hexdigest() != manifest["files"].get(str(_local(name, member))):
            raise AssetsError(f"{path} does not match the manifest: {FIX}")
        out[url] = data
    return out


def _local(name: str, member: str) -> Path:
    return Path(f"{name.replace('/', '+')}@{PACKAGES[name].version}") / member


def _with_fonts(css: bytes, fonts: Mapping[str, bytes]) -> bytes:
    """Font Awesome's stylesheet with its woff2 fonts as data URLs (no TrueType copies)."""
    text = _TTF.sub("", css.decode("utf-8"))

    def data_url(match: re.Match[str]) -> str:
        font = base64.b64encode(fonts[match.group("name")]).decode("ascii")
        return f"url(data:font/woff2;base64,{font})"

    return _FONT.sub(data_url, text).encode("utf-8")


def _npm_pack(package: Package, work: Path) -> Path:
    npm = shutil.which("npm")
    if npm is None:
        raise AssetsError("npm is not on PATH: install it (apt-get install npm)")
    spec = f"{package.name}@{package.version}"
    result = subprocess.run(
        [npm, "pack", spec, "--pack-destination", str(work), "--ignore-scripts", "--json"],
        capture_output=True, text=True, check=False, cwd=work,
    )  # fmt: skip
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-10:])
        raise AssetsError(f"npm could not fetch {spec}:\n{tail}")
    try:
        tarball = work / Path(str(json.loads(result.stdout)[0]["filename"])).name
    except (ValueError, LookupError, TypeError):
        raise AssetsError(f"npm pack printed no file name: {result.stdout[-500:]}") from None
    actual = hashlib.sha256(tarball.read_bytes()).hexdigest()
    if actual != package.sha256:
        raise AssetsError(f"{tarball.name} has sha256 {actual}, not the pinned {package.sha256}")
    return tarball


def _members(tarball: Path, names: Sequence[str]) -> dict[str, bytes]:
    # Read the members' bytes: nothing from the archive is written under its own name.
    out = {}
    with tarfile.open(tarball, "r:gz") as archive:
        for name in names:
            try:
                member = archive.extractfile(f"package/{name}")
            except KeyError:
                member = None
            if member is None:
                raise AssetsError(f"{tarball.name} has no {name}")
            out[name] = member.read()
    return out


def fetch(assets_dir: Path, log: Callable[[str], None] = print) -> Path:
    """Fetch the pinned packages with npm, verify them, and keep the files Data Docs
    name in `assets_dir`. Idempotent: a copy that verifies is left alone."""
    try:
        load(assets_dir)
        return assets_dir
    except AssetsError:
        pass
    files: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as work:
        for package in PACKAGES.values():
            log(f"fetching a Data Docs asset: {package.name}@{package.version} from npm")
            members = sorted({m for n, m in ASSETS.values() if n == package.name})
            fonts = [f"webfonts/{f}.woff2" for f in FONTS] if "fontawesome" in package.name else []
            found = _members(_npm_pack(package, Path(work)), members + fonts)
            for member in members:
                data = found[member]
                if fonts:
                    data = _with_fonts(data, {Path(f).stem: found[f] for f in fonts})
                path = assets_dir / _local(package.name, member)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
                files[str(_local(package.name, member))] = hashlib.sha256(data).hexdigest()
    manifest = {"packages": {p.name: p.version for p in PACKAGES.values()}, "files": files}
    # The manifest last: a copy without it is incomplete and is fetched again.
    (assets_dir / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    log(f"  {assets_dir}")
    return assets_dir


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ackfold.quality.docs_assets",
        description="fetch the styles and scripts of Data Docs from npm (pinned, verified)",
    )
    parser.add_argument(
        "assets_dir", nargs="?", type=Path, default=None,
        help="where to keep them (default: the setting quality.assets_dir)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    assets_dir = args.assets_dir
    if assets_dir is None:
        from ackfold.config import load_settings

        assets_dir = load_settings().quality.assets_dir
    try:
        fetch(assets_dir)
    except AssetsError as exc:
        print(f"ackfold: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
