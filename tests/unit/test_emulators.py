"""The emulators' cache refuses what is not installed as pinned, naming the one command
that installs it: versitygw (the soak's S3 API) as fake-gcs-server. No build here: a
binary stands in, and only the manifest's checks are shown."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from ackfold_dev.emulators import VERSITYGW_VERSION, EmulatorMissing, versitygw


def _installed(root: Path, version: str = VERSITYGW_VERSION, sha: str | None = None) -> Path:
    dest = root / "versitygw"
    dest.mkdir(parents=True)
    binary = dest / "versitygw"
    binary.write_bytes(b"a build")
    digest = sha or hashlib.sha256(b"a build").hexdigest()
    (dest / "manifest.json").write_text(json.dumps({"version": version, "sha256": digest}))
    return binary


def test_an_installed_versitygw_is_found(tmp_path: Path) -> None:
    binary = _installed(tmp_path)
    assert versitygw(tmp_path) == binary


def test_a_missing_versitygw_names_make_emulators(tmp_path: Path) -> None:
    with pytest.raises(EmulatorMissing, match=r"versitygw v\d.*not installed.*make emulators"):
        versitygw(tmp_path)


@pytest.mark.parametrize(
    ("version", "sha", "says"),
    [("v1.0.0", None, "not installed"), (VERSITYGW_VERSION, "0" * 64, "does not match")],
    ids=["another version", "another binary"],
)
def test_another_install_is_refused(
    tmp_path: Path, version: str, sha: str | None, says: str
) -> None:
    _installed(tmp_path, version, sha)
    with pytest.raises(EmulatorMissing, match=f"{says}.*make emulators"):
        versitygw(tmp_path)
