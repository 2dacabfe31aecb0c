"""The local object stores' emulators, installed once into a verified cache
(`make emulators`, run by `make test` and `make soak`; `python -m ackfold_dev.emulators
var/emulators`).

- **Azurite** (Microsoft's Azure Storage emulator: the Blob API) from npm, pinned with
  every package of its tree in `conf/azurite/package-lock.json`: `npm ci` checks each
  tarball against the lock's integrity hash and fails on any mismatch. Azurite 3.35.0,
  the newest that runs on Node 18 and 20 (3.36 and later want Node 21 or 22).
- **fake-gcs-server** (`github.com/fsouza/fake-gcs-server`, the GCS JSON API) built with
  `go install` from the Go module proxy at a pinned version: the go command checks every
  module it downloads against the Go checksum database. The first build takes minutes
  on 2 cores; the Go build cache makes later ones quick.
- **versitygw** (`github.com/versity/versitygw`, Apache-2.0: an S3 gateway in Go, its
  POSIX backend on a local directory) built the same way: the soak's fast S3 API
  (`ackfold_dev.versitygw`), where moto, a Python server, costs tens of ms a request.

Each install writes a manifest (what was pinned, and the sha256 of what was installed)
last; a cache whose manifest does not match the pins is installed again. Starting an
emulator reads only the cache: a missing one raises `EmulatorMissing`, naming the one
command that installs it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from ackfold.errors import AckfoldError
from ackfold_dev import PROJECT_DIR

AZURITE_VERSION: Final = "3.35.0"
AZURITE_LOCK: Final = PROJECT_DIR / "conf" / "azurite" / "package-lock.json"
FAKE_GCS_MODULE: Final = "github.com/fsouza/fake-gcs-server"
FAKE_GCS_VERSION: Final = "v1.56.1"
VERSITYGW_MODULE: Final = "github.com/versity/versitygw"
VERSITYGW_PACKAGE: Final = f"{VERSITYGW_MODULE}/cmd/versitygw"
VERSITYGW_VERSION: Final = "v1.8.0"  # needs Go 1.25 or newer
MANIFEST: Final = "manifest.json"
DEFAULT_DIR: Final = PROJECT_DIR / "var" / "emulators"
FIX: Final = "run `make emulators` (or `python -m ackfold_dev.emulators var/emulators`)"


class EmulatorMissing(AckfoldError, RuntimeError):
    """An emulator is not installed (or not as pinned), or its install failed."""


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _manifest(dest: Path) -> dict[str, str]:
    try:
        loaded: dict[str, str] = json.loads((dest / MANIFEST).read_text())
        return loaded
    except (OSError, ValueError):
        return {}


def azurite(emulators_dir: Path = DEFAULT_DIR) -> Path:
    """The installed `azurite-blob` launcher, or `EmulatorMissing`."""
    dest = emulators_dir / "azurite"
    launcher = dest / "node_modules" / "azurite" / "dist" / "src" / "blob" / "main.js"
    manifest = _manifest(dest)
    if manifest.get("version") != AZURITE_VERSION or not launcher.is_file():
        raise EmulatorMissing(f"Azurite {AZURITE_VERSION} is not installed in {dest}: {FIX}")
    if manifest.get("lock_sha256") != _sha256(AZURITE_LOCK):
        raise EmulatorMissing(f"Azurite in {dest} was installed from another lock: {FIX}")
    return launcher


def fake_gcs_server(emulators_dir: Path = DEFAULT_DIR) -> Path:
    """The installed fake-gcs-server binary, checked against its manifest, or
    `EmulatorMissing`."""
    return _go_binary(emulators_dir, "fake-gcs-server", FAKE_GCS_VERSION)


def versitygw(emulators_dir: Path = DEFAULT_DIR) -> Path:
    """The installed versitygw binary, checked against its manifest, or `EmulatorMissing`."""
    return _go_binary(emulators_dir, "versitygw", VERSITYGW_VERSION)


def _go_binary(emulators_dir: Path, name: str, version: str) -> Path:
    dest = emulators_dir / name
    binary = dest / name
    manifest = _manifest(dest)
    if manifest.get("version") != version or not binary.is_file():
        raise EmulatorMissing(f"{name} {version} is not installed in {dest}: {FIX}")
    if manifest.get("sha256") != _sha256(binary):
        raise EmulatorMissing(f"{binary} does not match its manifest: {FIX}")
    return binary


def _run(command: list[str], what: str, **kwargs: object) -> None:
    result = subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
        raise EmulatorMissing(f"{what} failed:\n{tail}")


def install_azurite(emulators_dir: Path, log: Callable[[str], None] = print) -> Path:
    """`npm ci` of the pinned lock into `emulators_dir/azurite`. Idempotent."""
    try:
        return azurite(emulators_dir)
    except EmulatorMissing:
        pass
    npm = shutil.which("npm")
    if npm is None:
        raise EmulatorMissing("npm is not on PATH: install it (apt-get install npm)")
    dest = emulators_dir / "azurite"
    log(f"installing Azurite {AZURITE_VERSION} from npm (lock: {AZURITE_LOCK.name})")
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copy2(AZURITE_LOCK.parent / name, dest / name)
    # --ignore-scripts: nothing of the tree runs at install; Azurite needs no build step.
    _run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"], "npm ci (Azurite)", cwd=dest)
    manifest = {"version": AZURITE_VERSION, "lock_sha256": _sha256(AZURITE_LOCK)}
    (dest / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return azurite(emulators_dir)


def install_fake_gcs_server(emulators_dir: Path, log: Callable[[str], None] = print) -> Path:
    """`go install` of the pinned fake-gcs-server into `emulators_dir/fake-gcs-server`.
    Idempotent."""
    try:
        return fake_gcs_server(emulators_dir)
    except EmulatorMissing:
        pass
    _go_install(emulators_dir, "fake-gcs-server", FAKE_GCS_MODULE, FAKE_GCS_VERSION, log)
    return fake_gcs_server(emulators_dir)


def install_versitygw(emulators_dir: Path, log: Callable[[str], None] = print) -> Path:
    """`go install` of the pinned versitygw into `emulators_dir/versitygw`. Idempotent."""
    try:
        return versitygw(emulators_dir)
    except EmulatorMissing:
        pass
    _go_install(emulators_dir, "versitygw", VERSITYGW_PACKAGE, VERSITYGW_VERSION, log)
    return versitygw(emulators_dir)


def _go_install(
    emulators_dir: Path, name: str, package: str, version: str, log: Callable[[str], None]
) -> None:
    """`go install package@version` into `emulators_dir/name`, then its manifest (last)."""
    go = shutil.which("go")
    if go is None:
        raise EmulatorMissing(
            "go is not on PATH: install Go 1.25 or newer (https://go.dev/doc/install; "
            f"Debian 12's golang-go is too old to build {name})"
        )
    dest = emulators_dir / name
    dest.mkdir(parents=True, exist_ok=True)
    (dest / MANIFEST).unlink(missing_ok=True)  # a cut-short build leaves no manifest
    log(f"building {name} {version} from the Go module proxy (minutes, once)")
    env = {**os.environ, "GOBIN": str(dest.resolve()), "GOFLAGS": "-mod=mod", "CGO_ENABLED": "0"}
    env.pop("GONOSUMDB", None)
    env.pop("GONOSUMCHECK", None)
    env.pop("GOFLAGS_INSECURE", None)
    _run([go, "install", f"{package}@{version}"], f"go install ({name})", env=env)
    binary = dest / name
    manifest = {"module": package, "version": version, "sha256": _sha256(binary)}
    (dest / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ackfold_dev.emulators",
        description="install the local object stores' emulators (Azurite, fake-gcs-server, "
        "versitygw)",
    )
    parser.add_argument("emulators_dir", nargs="?", type=Path, default=DEFAULT_DIR)
    args = parser.parse_args(argv)
    try:
        install_azurite(args.emulators_dir)
        install_fake_gcs_server(args.emulators_dir)
        install_versitygw(args.emulators_dir)
    except EmulatorMissing as exc:
        print(f"ackfold: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
