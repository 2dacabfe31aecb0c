"""The Compose Specification's JSON schema, fetched once from npm into a verified cache.

`docker-compose.yml` is validated, not run: the build machines have no Docker engine. The
schema is the upstream `compose_spec.json` (JSON Schema draft-07) as the npm package
`dclint` ships it (`schemas/compose.schema.json`; that Compose linter copies it from the
compose-spec repository). It is pinned by the package's version and by the sha256 of its
tarball and of the schema itself. `make schemas` (run by `make test` and `make test-unit`)
fetches it with `npm pack` into `var/schemas/compose-spec/` with a manifest; after that,
reading it needs no network, and a missing, stale or altered copy raises `SchemaError`,
which says the one command that fixes it.

Example:
    >>> from pathlib import Path
    >>> schema = load(Path("var/schemas"))  # doctest: +SKIP
    >>> schema["title"]  # doctest: +SKIP
    'Compose Specification'
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from ackfold.errors import AckfoldError

PACKAGE: Final = "dclint"
VERSION: Final = "3.1.0"
TARBALL_SHA256: Final = "73fc6079a0408c80c7ccea9e9e5c21c40551afaf15e8c1ee25a5ad6af1ec0414"
MEMBER: Final = "package/schemas/compose.schema.json"
SCHEMA_SHA256: Final = "46b7d35f19dd93a05f8fea530291bf84d881c1791ec167ecf0e6fb94e639d496"

SCHEMA_FILE: Final = "compose-spec.json"
MANIFEST: Final = "manifest.json"
FIX: Final = (
    "run `make schemas` (or `python -m ackfold_dev.compose_schema var/schemas`) to fetch "
    "it from npm"
)


class SchemaError(AckfoldError, RuntimeError):
    """The schema cache is missing, stale or altered, or the download failed."""


def cache_dir(schemas_dir: Path) -> Path:
    return schemas_dir / "compose-spec"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def schema_path(schemas_dir: Path) -> Path:
    """The cached schema, verified against the pins, or `SchemaError` saying how to fix it."""
    dest = cache_dir(schemas_dir)
    manifest_path, path = dest / MANIFEST, dest / SCHEMA_FILE
    if not manifest_path.is_file() or not path.is_file():
        raise SchemaError(f"The Compose schema is not in {dest}: {FIX}.")
    try:
        manifest = json.loads(manifest_path.read_text())
        pinned = (manifest["package"], manifest["version"])
    except (ValueError, KeyError, TypeError):
        raise SchemaError(f"{manifest_path} is corrupt: {FIX}.") from None
    if pinned != (PACKAGE, VERSION):
        raise SchemaError(
            f"The Compose schema in {dest} comes from {pinned[0]}@{pinned[1]}, but this "
            f"ackfold pins {PACKAGE}@{VERSION}: {FIX}."
        )
    if _sha256(path.read_bytes()) != SCHEMA_SHA256:
        raise SchemaError(f"{path} does not match its pinned sha256: {FIX}.")
    return path


def load(schemas_dir: Path) -> dict[str, Any]:
    """The verified schema, parsed."""
    schema: dict[str, Any] = json.loads(schema_path(schemas_dir).read_text())
    return schema


def _npm_pack(work: Path) -> Path:
    npm = shutil.which("npm")
    if npm is None:
        raise SchemaError("npm is not on PATH: install it (apt-get install npm)")
    result = subprocess.run(
        [npm, "pack", f"{PACKAGE}@{VERSION}", "--pack-destination", str(work),
         "--ignore-scripts", "--json"],
        capture_output=True, text=True, check=False, cwd=work,
    )  # fmt: skip
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-10:])
        raise SchemaError(f"npm could not fetch {PACKAGE}@{VERSION}:\n{tail}")
    try:
        filename = json.loads(result.stdout)[0]["filename"]
    except (ValueError, LookupError, TypeError):
        raise SchemaError(f"npm pack printed no file name: {result.stdout[-500:]}") from None
    return work / Path(str(filename)).name


def _extract(tarball: Path) -> bytes:
    # Read the one member's bytes: nothing from the archive is written under its own name.
    with tarfile.open(tarball, "r:gz") as archive:
        try:
            member = archive.extractfile(MEMBER)
        except KeyError:
            member = None
        if member is None:
            raise SchemaError(f"{tarball.name} has no {MEMBER}")
        return member.read()


def fetch(schemas_dir: Path, log: Callable[[str], None] = print) -> Path:
    """Download the pinned package with npm, verify it, and cache the schema.

    Idempotent: a cache that verifies is left alone.
    """
    try:
        return schema_path(schemas_dir)
    except SchemaError:
        pass
    log(f"fetching the Compose schema: {PACKAGE}@{VERSION} from npm")
    with tempfile.TemporaryDirectory() as work:
        tarball = _npm_pack(Path(work))
        actual = _sha256(tarball.read_bytes())
        if actual != TARBALL_SHA256:
            raise SchemaError(
                f"{tarball.name} has sha256 {actual}, not the pinned {TARBALL_SHA256}"
            )
        schema = _extract(tarball)
    if _sha256(schema) != SCHEMA_SHA256:
        raise SchemaError(f"{MEMBER} in {PACKAGE}@{VERSION} does not match its pinned sha256")
    dest = cache_dir(schemas_dir)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / SCHEMA_FILE).write_bytes(schema)
    manifest = {
        "package": PACKAGE,
        "version": VERSION,
        "member": MEMBER,
        "tarball_sha256": TARBALL_SHA256,
        "schema_sha256": SCHEMA_SHA256,
    }
    # The manifest last: a cache without it is incomplete and is fetched again.
    (dest / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    log(f"  {dest / SCHEMA_FILE}")
    return dest / SCHEMA_FILE


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ackfold_dev.compose_schema",
        description="fetch the Compose Specification's JSON schema into a verified cache",
    )
    parser.add_argument(
        "schemas_dir", nargs="?", type=Path, default=Path("var/schemas"),
        help="the cache's parent directory (default: var/schemas)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    try:
        fetch(args.schemas_dir)
    except SchemaError as exc:
        print(f"ackfold: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
