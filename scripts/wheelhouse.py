"""Wheels of Spark's Python packages, built once into a wheelhouse that every uv install
of this repository reads first (the Makefile exports UV_FIND_LINKS).

PyPI ships pyspark and pyspark-client as source only. uv reuses a source build only while
the index's HTTP caching headers say the download is fresh; behind a proxy that strips
them, every install downloads pyspark again and builds it: over a minute of a core and
1.4 GB of uv's cache each time (a full `make test` made 8 such builds and filled the
disk). uv prefers a wheel to a source archive of the same version, so a version built
here once is never built again.

The versions: the pins of requirements.txt (what `make install` needs); with `--tests`,
also the pins of the Airflow releases' resolved sets (tests/install/airflow/) and the
newest each range of pyproject.toml allows (what the install tier resolves).

Usage: python scripts/wheelhouse.py DIR [--tests] (the standard library and pip only).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("pyspark", "pyspark-client")


def specs(tests: bool) -> list[str]:
    """The version requirements of PACKAGES that `make install` installs; with `tests`,
    also those the test tiers install or resolve."""
    names = "|".join(re.escape(name) for name in PACKAGES)
    pinned = [ROOT / "requirements.txt"]
    if tests:
        pinned += sorted((ROOT / "tests/install/airflow").glob("*.txt"))
    found: list[str] = []
    for path in pinned:
        found += re.findall(rf"^(?:{names})==[^\s;#]+", path.read_text(), re.MULTILINE)
    if not tests:
        return sorted(set(found))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"].values()
    for requirement in [*project["dependencies"], *(r for extra in extras for r in extra)]:
        if re.match(rf"(?:{names})\s*[<>=!~]", requirement):
            found.append(requirement.replace(" ", ""))
    return sorted(set(found))


def build(spec: str, wheelhouse: Path) -> None:
    """The wheel of `spec` in `wheelhouse`: found there, or built in a scratch directory
    and moved in whole (two builds at once never leave half a wheel)."""
    name, pinned, version = spec.partition("==")
    if pinned and any(wheelhouse.glob(f"{name.replace('-', '_')}-{version}-*.whl")):
        return
    with tempfile.TemporaryDirectory(dir=wheelhouse) as scratch:
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--disable-pip-version-check",
             "--find-links", str(wheelhouse), "--wheel-dir", scratch, spec],
            check=True,
        )  # fmt: skip
        for wheel in Path(scratch).glob("*.whl"):
            if not (wheelhouse / wheel.name).exists():
                print(f"wheelhouse: built {wheel.name}", flush=True)
                wheel.replace(wheelhouse / wheel.name)


def main() -> None:
    wheelhouse = Path(sys.argv[1]).resolve()
    wheelhouse.mkdir(parents=True, exist_ok=True)
    for spec in specs(tests="--tests" in sys.argv[2:]):
        build(spec, wheelhouse)


if __name__ == "__main__":
    main()
