import json
from pathlib import Path

import pytest

from ackfold.spark.jars import BUNDLES, MANIFEST, JarsError, _artifact_id, bundle_jars


def _fake_cache(root: Path, content: bytes = b"jar bytes") -> Path:
    """A delta bundle cache with one jar whose recorded checksum matches `content`."""
    import hashlib

    dest = root / "delta"
    dest.mkdir(parents=True)
    (dest / "delta-spark_4.1_2.13-4.4.0.jar").write_bytes(content)
    manifest = {
        "artifacts": list(BUNDLES["delta"].artifacts),
        "jars": {"delta-spark_4.1_2.13-4.4.0.jar": hashlib.sha256(content).hexdigest()},
    }
    (dest / MANIFEST).write_text(json.dumps(manifest))
    return dest


def test_a_verified_cache_lists_its_jars(tmp_path: Path) -> None:
    _fake_cache(tmp_path)
    assert [p.name for p in bundle_jars("delta", tmp_path)] == ["delta-spark_4.1_2.13-4.4.0.jar"]


def test_missing_cache_says_which_command_fixes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(JarsError, match=r"not in .*delta: run `ackfold setup`.*ACKFOLD_JARS_DIR"):
        bundle_jars("delta", tmp_path / "cache")


def test_a_checkouts_cache_is_named_when_run_from_the_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `make setup` filled ./var/jars; the command ran without make's ACKFOLD_VAR_DIR.
    _fake_cache(tmp_path / "var" / "jars")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(JarsError) as caught:
        bundle_jars("delta", tmp_path / "state" / "jars")
    assert f"set ACKFOLD_VAR_DIR={tmp_path / 'var'}" in str(caught.value)


def test_corrupt_jar_is_detected(tmp_path: Path) -> None:
    dest = _fake_cache(tmp_path)
    (dest / "delta-spark_4.1_2.13-4.4.0.jar").write_bytes(b"truncated")
    with pytest.raises(
        JarsError, match=r"delta-spark_4.1_2.13-4.4.0.jar is missing or corrupt: run"
    ):
        bundle_jars("delta", tmp_path)


def test_corrupt_manifest_is_detected(tmp_path: Path) -> None:
    dest = _fake_cache(tmp_path)
    (dest / MANIFEST).write_text("{not json")
    with pytest.raises(JarsError, match="is corrupt: run `make setup`"):
        bundle_jars("delta", tmp_path)


def test_a_cache_of_other_versions_is_stale(tmp_path: Path) -> None:
    dest = _fake_cache(tmp_path)
    manifest = json.loads((dest / MANIFEST).read_text())
    manifest["artifacts"] = ["io.delta:delta-spark_4.1_2.13:4.3.0"]
    (dest / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(JarsError, match="4.3.0, but this ackfold pins .*4.4.0"):
        bundle_jars("delta", tmp_path)


@pytest.mark.parametrize(
    ("jar", "artifact"),
    [
        ("jackson-core-2.13.5.jar", "jackson-core"),
        ("delta-spark_4.1_2.13-4.4.0.jar", "delta-spark_4.1_2.13"),
        ("scala-library-2.13.17.jar", "scala-library"),
        ("hadoop-client-api-3.4.2.jar", "hadoop-client-api"),
        ("RoaringBitmap-0.9.25.jar", "RoaringBitmap"),
    ],
)
def test_artifact_ids_ignore_versions(jar: str, artifact: str) -> None:
    assert _artifact_id(jar) == artifact


def test_spark_conf_refuses_to_start_without_the_delta_jars(tmp_path: Path) -> None:
    from ackfold.config import load_settings
    from ackfold.spark import spark_conf

    settings = load_settings(var_dir=tmp_path, jars_dir=tmp_path / "empty")
    with pytest.raises(JarsError, match=r"The delta jars are not in .*empty/delta: "):
        spark_conf(settings)
