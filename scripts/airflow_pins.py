"""Write the pins that matter to ackfold from one Airflow release's constraints into
`tests/install/airflow/<minor>.txt`, which `tests/install/test_airflow_matrix.py` installs
that Airflow and ackfold with. Only those pins: the versions of ackfold's own dependencies
(and of Airflow's providers ackfold uses) that a team installing with the release's
constraints gets; not the 700 lines of the whole file.

    python scripts/airflow_pins.py 3.1.8 --released 2026-03-11T19:27:55Z
    python scripts/airflow_pins.py 3.0.6 --released 2025-08-29T15:56:11Z \\
        --constraints constraints-3.11.txt --source "the v3-0-test branch's constraints-3.11.txt"

With `--constraints`, the pins come from Airflow's own constraints file for Python 3.11
(`https://raw.githubusercontent.com/apache/airflow/constraints-<version>/constraints-3.11.txt`),
downloaded by hand. Without it, from the release's resolved set: uv resolves
`apache-airflow==<version>` with the standard and SMTP providers for Python 3.11 as of a
day after the release's upload (`--exclude-newer`; Airflow publishes a release's
providers and constraints that day), the nearest stand-in where the file is not
reachable. The header says which; the test installs the team's Airflow as of that day.
"""

from __future__ import annotations

import argparse
import re
from datetime import datetime, timedelta
import subprocess
import sys
import tempfile
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parents[1]
OUT_DIR = PROJECT_DIR / "tests" / "install" / "airflow"
# ackfold's dependencies (every extra), and what they pull that a constraints file pins.
MATTERS = (
    "apache-airflow-providers-standard", "apache-airflow-providers-smtp",
    "apache-airflow-providers-apache-spark", "deltalake", "duckdb", "pyarrow", "numpy",
    "pandas", "pydantic", "pydantic-core", "pydantic-settings", "pyyaml", "xxhash", "boto3",
    "botocore", "confluent-kafka", "great-expectations", "opentelemetry-api",
    "opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-http",
    "opentelemetry-exporter-otlp-proto-grpc", "pyspark", "pyspark-client", "delta-spark",
)  # fmt: skip
_PIN = re.compile(r"^([A-Za-z0-9_.-]+)==([^\s;#]+)")


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins_of(text: str) -> dict[str, str]:
    """The `name==version` lines of a constraints or requirements text that matter."""
    found = {}
    for line in text.splitlines():
        match = _PIN.match(line.strip())
        if match and normalize(match.group(1)) in MATTERS:
            found[normalize(match.group(1))] = match.group(2)
    return found


def as_of(released: str) -> str:
    """The day after the upload time `released` (ISO 8601, UTC)."""
    moment = datetime.fromisoformat(released.replace("Z", "+00:00")) + timedelta(days=1)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def resolved(version: str, cutoff: str) -> str:
    """The release's resolved set, as uv resolves it for Python 3.11 at `cutoff`."""
    uv = Path(sys.executable).parent / "uv"
    with tempfile.TemporaryDirectory() as work:
        wanted = Path(work) / "in.txt"
        wanted.write_text(
            f"apache-airflow=={version}\napache-airflow-providers-standard\n"
            "apache-airflow-providers-smtp\n"
        )
        out = Path(work) / "out.txt"
        subprocess.run(
            [str(uv), "pip", "compile", "-q", "--python-version", "3.11", "--no-header",
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
    if args.constraints:
        pins = pins_of(args.constraints.read_text())
        source = f"Airflow's constraints: {args.source or args.constraints.name}"
    else:
        pins = pins_of(resolved(args.version, as_of(args.released)))
        source = (
            "the release's resolved set (its constraints file was not reachable): uv, "
            f"apache-airflow=={args.version} with the standard and SMTP providers, Python "
            f"3.11, --exclude-newer {as_of(args.released)}"
        )
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
