"""Write the pins that matter to ackfold from one Airflow release's constraints into
`tests/install/airflow/<minor>.txt`, which `tests/install/test_airflow_matrix.py` installs
that Airflow and ackfold with. Only those pins: the versions of the packages ackfold can pull
(its dependency closure with every extra, and the providers its DAGs use) that a team
installing with the release's constraints gets; not the 700 lines of the whole file.

    python scripts/airflow_pins.py 3.1.8 --released 2026-03-11T19:27:55Z
    python scripts/airflow_pins.py 3.0.6 --released 2025-08-29T15:56:11Z \\
        --constraints constraints-3.11.txt --source "the v3-0-test branch's constraints-3.11.txt"

The pins come from the release's resolved set: uv resolves
`apache-airflow==<version>` with the standard and SMTP providers for Python 3.11 as of a
day after the release's upload (`--exclude-newer`; Airflow publishes a release's
providers and constraints that day), the nearest stand-in where the file is not
reachable. With `--constraints` (Airflow's own constraints file for Python 3.11,
`https://raw.githubusercontent.com/apache/airflow/constraints-<version>/constraints-3.11.txt`,
downloaded by hand), the pins of ackfold's own dependencies and of the providers come from
it. The header says which; the test installs the team's Airflow as of that day.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parents[1]
OUT_DIR = PROJECT_DIR / "tests" / "install" / "airflow"
# Beyond ackfold's dependency closure (below), the providers ackfold's DAGs use.
PROVIDERS = (
    "apache-airflow-providers-standard", "apache-airflow-providers-smtp",
    "apache-airflow-providers-apache-spark",
)  # fmt: skip
_PIN = re.compile(r"^([A-Za-z0-9_.-]+)==([^\s;#]+)")


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def uv() -> str:
    return str(Path(sys.executable).parent / "uv")


def closure() -> set[str]:
    """Every package ackfold can pull, with every extra: what a constraints file may pin
    that matters to ackfold's install (a pin of anything else never meets it)."""
    compiled = subprocess.run(
        [uv(), "pip", "compile", "-q", "--python-version", "3.11", "--no-header",
         "--all-extras", str(PROJECT_DIR / "pyproject.toml")],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    return {normalize(m.group(1)) for m in map(_PIN.match, compiled.splitlines()) if m}


def direct_dependencies() -> set[str]:
    """The names ackfold's pyproject.toml requires, with every extra."""
    import tomllib

    project = tomllib.loads((PROJECT_DIR / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        wanted.extend(extra)
    names = {normalize(re.split(r"[\s\[<>=!~;]", w, maxsplit=1)[0]) for w in wanted}
    return names - {"ackfold"}


def pins_of(text: str, matters: set[str]) -> dict[str, str]:
    """The `name==version` lines of a constraints or requirements text that matter."""
    found = {}
    for line in text.splitlines():
        match = _PIN.match(line.strip())
        if match and normalize(match.group(1)) in matters:
            found[normalize(match.group(1))] = match.group(2)
    return found


def as_of(released: str) -> str:
    """The day after the upload time `released` (ISO 8601, UTC)."""
    moment = datetime.fromisoformat(released.replace("Z", "+00:00")) + timedelta(days=1)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def resolved(version: str, cutoff: str) -> str:
    """The release's resolved set, as uv resolves it for Python 3.11 at `cutoff`."""
    with tempfile.TemporaryDirectory() as work:
        wanted = Path(work) / "in.txt"
        wanted.write_text(
            f"apache-airflow=={version}\napache-airflow-providers-standard\n"
            "apache-airflow-providers-smtp\n"
        )
        out = Path(work) / "out.txt"
        subprocess.run(
            [uv(), "pip", "compile", "-q", "--python-version", "3.11", "--no-header",
             "--exclude-newer", cutoff, str(wanted), "-o", str(out)],
            check=True,
        )  # fmt: skip
        return out.read_text()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("version", help="the Airflow release, e.g. 3.1.8")
    parser.add_argument("--released", required=True, help="its upload time on PyPI (UTC)")
    parser.add_argument("--constraints", type=Path, help="Airflow's constraints-3.11.txt")
    parser.add_argument("--source", help="where that constraints file came from")
    args = parser.parse_args()
    matters = (closure() | set(PROVIDERS)) - {"apache-airflow"}
    cutoff = as_of(args.released)
    pins = pins_of(resolved(args.version, cutoff), matters)
    source = (
        "the release's resolved set: uv, "
        f"apache-airflow=={args.version} with the standard and SMTP providers, Python "
        f"3.11, --exclude-newer {cutoff}"
    )
    if args.constraints:
        # Airflow's file pins ackfold's own dependencies that Airflow itself does not pull
        # (its file pins every provider's): those are the pins a team's install meets.
        # What the release itself pulls keeps the resolved set's pin.
        direct = direct_dependencies() | set(PROVIDERS)
        for name, pin in pins_of(args.constraints.read_text(), direct).items():
            pins.setdefault(name, pin)
        source += (
            f"; ackfold's own dependencies and the providers as Airflow's constraints pin "
            f"them ({args.source or args.constraints.name})"
        )
    else:
        source += " (its constraints file was not reachable)"
    minor = ".".join(args.version.split(".")[:2])
    lines = [
        f"# The pins of Airflow {args.version}'s constraints that matter to ackfold (Python 3.11).",
        f"# From {source}.",
        "# Written by scripts/airflow_pins.py; read by tests/install/test_airflow_matrix.py.",
        f"# released: {args.released}",
        f"# as of: {as_of(args.released)}",
        f"apache-airflow=={args.version}",
        *(f"{name}=={pins[name]}" for name in sorted(pins)),
    ]
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    (OUT_DIR / f"{minor}.txt").write_text("\n".join(lines) + "\n")
    print(OUT_DIR / f"{minor}.txt")


if __name__ == "__main__":
    main()
