"""docker-compose.yml, validated rather than run (there is no Docker engine here): the
Compose Specification's schema, pinned images, health checks, no secret in the file,
`.env.example` complete, the deploy page (docs/operations/deploy.md) true to the file, and
the jar pins in docker/Dockerfile matching the Spark that pyspark ships. Each check also
fails on a copy broken for it. The fast tier: no JVM, no network once `make schemas` cached
the schema."""

from __future__ import annotations

import copy
import importlib.metadata
import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest

from ackfold_dev.compose_schema import SchemaError, load
from tests.deploy import stack_checks as checks

SCHEMAS_DIR = checks.PROJECT_DIR / "var" / "schemas"


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    try:
        return load(SCHEMAS_DIR)
    except SchemaError as exc:  # a failure, not a skip: a missing schema must not pass
        pytest.fail(str(exc))


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    return checks.env_example()


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    return checks.load()


@pytest.fixture
def compose(raw: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    """The file as Compose sees it once `.env` is copied from `.env.example`."""
    document: dict[str, Any] = checks.interpolate(raw, env)
    return document


def project_version() -> str:
    text = (checks.PROJECT_DIR / "pyproject.toml").read_text()
    match = re.search(r'^version = "([^"]+)"', text, re.M)
    assert match
    return match.group(1)


def test_the_file_follows_the_compose_specification(
    compose: dict[str, Any], schema: dict[str, Any]
) -> None:
    assert checks.schema_errors(compose, schema) == []


def test_a_broken_copy_of_the_file_fails_validation(
    tmp_path: Path, env: dict[str, str], schema: dict[str, Any]
) -> None:
    text = checks.COMPOSE_FILE.read_text()
    broken = tmp_path / "docker-compose.yml"
    # A misspelt key, as a hand edit would make it.
    broken.write_text(text.replace("    healthcheck:\n", "    healthchek:\n", 1))
    errors = checks.schema_errors(checks.interpolate(checks.load(broken), env), schema)
    assert errors
    assert any("healthchek" in error for error in errors)


@pytest.mark.parametrize(
    ("where", "mutate"),
    [
        ("ports", lambda c: c["services"]["kafka"].update(ports="9094:9094")),
        ("condition", lambda c: c["services"]["airflow-init"]["depends_on"]["postgres"].update(
            condition="service_ready")),
        ("services", lambda c: c.update(service=c.pop("services"))),
        ("volumes", lambda c: c["services"]["minio"].update(volumes="minio-data:/data")),
    ],
)  # fmt: skip
def test_each_kind_of_schema_break_is_caught(
    compose: dict[str, Any], schema: dict[str, Any], where: str, mutate: Any
) -> None:
    broken = copy.deepcopy(compose)
    mutate(broken)
    errors = checks.schema_errors(broken, schema)
    assert errors, f"a broken {where} passed validation"


def test_env_example_defines_every_variable_the_file_uses(
    raw: dict[str, Any], env: dict[str, str]
) -> None:
    used = checks.variables(raw)
    assert used - env.keys() == set(), "used in docker-compose.yml, not in .env.example"
    assert env.keys() - used == set(), "in .env.example, used nowhere in docker-compose.yml"
    with pytest.raises(KeyError, match="POSTGRES_PASSWORD"):
        checks.interpolate(raw, {k: v for k, v in env.items() if k != "POSTGRES_PASSWORD"})


def test_env_example_holds_placeholders_not_secrets(env: dict[str, str]) -> None:
    secrets = [name for name in env if re.search(r"PASSWORD|SECRET|FERNET|ACCESS_KEY", name)]
    assert len(secrets) >= 7
    assert [n for n in secrets if not env[n].startswith("CHANGE-ME")] == []
    ignored = (checks.PROJECT_DIR / ".gitignore").read_text().splitlines()
    assert ".env" in ignored


def test_every_image_is_pinned(compose: dict[str, Any]) -> None:
    version = project_version()
    assert checks.image_problems(compose, version) == []
    broken = copy.deepcopy(compose)
    broken["services"]["postgres"]["image"] = "postgres:latest"
    broken["services"]["kafka"]["image"] = "apache/kafka"
    broken["services"]["spark-master"]["image"] = "ackfold/spark:0.0.1"
    assert len(checks.image_problems(broken, version)) == 3


def test_every_server_has_a_health_check_and_dependents_wait_for_it(
    compose: dict[str, Any],
) -> None:
    assert checks.health_problems(compose) == []
    servers = [n for n, s in compose["services"].items() if not checks.one_shot(s)]
    assert len(servers) >= 11
    broken = copy.deepcopy(compose)
    del broken["services"]["kafka"]["healthcheck"]
    broken["services"]["airflow-apiserver"]["depends_on"]["airflow-init"] = {
        "condition": "service_started"
    }
    assert len(checks.health_problems(broken)) == 2


def test_no_secret_is_written_in_the_file(raw: dict[str, Any]) -> None:
    assert checks.secret_problems(raw) == []


@pytest.mark.parametrize(
    "mutate",
    [
        lambda c: c["services"]["postgres"]["environment"].update(POSTGRES_PASSWORD="hunter2"),
        lambda c: c["services"]["minio"]["environment"].update(MINIO_ROOT_PASSWORD="minioadmin"),
        lambda c: c["services"]["airflow-apiserver"]["environment"].update(
            AIRFLOW__DATABASE__SQL_ALCHEMY_CONN="postgresql://airflow:s3cret@postgres/airflow"),
        lambda c: c["services"]["minio-init"].update(
            command=["mc alias set local http://minio:9000 minioadmin minioadmin"]),
    ],
)  # fmt: skip
def test_a_literal_secret_is_caught(raw: dict[str, Any], mutate: Any) -> None:
    broken = copy.deepcopy(raw)
    mutate(broken)
    assert checks.secret_problems(broken)


def test_the_deploy_page_names_every_service_with_its_ports_and_volumes(
    compose: dict[str, Any],
) -> None:
    section = checks.DEPLOY_PAGE.read_text()
    table = checks.services_table(section)
    assert len(table) == len(compose["services"])
    assert checks.readme_problems(compose, table) == []
    # The table is read for real: a port or a volume the file lacks is reported.
    table["airflow-apiserver"]["ports"].add(8443)
    table["postgres"]["volumes"].add("pg-wal")
    assert len(checks.readme_problems(compose, table)) == 2


def _installed_hadoop() -> str:
    spec = importlib.util.find_spec("pyspark")
    assert spec is not None
    assert spec.submodule_search_locations
    jars = Path(next(iter(spec.submodule_search_locations))) / "jars"
    (api,) = jars.glob("hadoop-client-api-*.jar")
    return api.name.removeprefix("hadoop-client-api-").removesuffix(".jar")


def test_the_image_and_jar_pins_match_the_project() -> None:
    args = checks.dockerfile_args()
    # hadoop-aws must be the Hadoop that Spark's own client jars are.
    assert args["HADOOP_AWS_VERSION"] == _installed_hadoop()
    pyspark = importlib.metadata.version("pyspark")
    airflow = importlib.metadata.version("apache-airflow")
    assert args["SPARK_IMAGE"].startswith(f"apache/spark:{pyspark}-scala2.13-")
    assert args["SPARK_IMAGE"].endswith("-python3-ubuntu")
    assert args["AIRFLOW_IMAGE"] == f"apache/airflow:{airflow}-python3.11"
    section = checks.DEPLOY_PAGE.read_text()
    for quoted in (
        f"hadoop-aws:{args['HADOOP_AWS_VERSION']}",
        f"bundle:{args['AWS_SDK_BUNDLE_VERSION']}",
        args["SPARK_IMAGE"],
        args["AIRFLOW_IMAGE"],
    ):
        assert quoted in section, f"{checks.DEPLOY_PAGE.name} does not quote {quoted}"


def test_airflow_runs_an_auth_manager_with_roles(compose: dict[str, Any]) -> None:
    init = checks.AIRFLOW_INIT.read_text()
    requirements = checks.REQUIREMENTS.read_text()
    assert checks.auth_problems(compose, init, requirements) == []
    # The class is the pinned provider's (found without importing Flask).
    module, _, name = checks.FAB_AUTH_MANAGER.rpartition(".")
    spec = importlib.util.find_spec(module)
    assert spec is not None, f"{module} is not installed"
    assert spec.origin is not None
    assert f"class {name}(" in Path(spec.origin).read_text()
    broken = copy.deepcopy(compose)
    scheduler = broken["services"]["airflow-scheduler"]["environment"]
    scheduler["AIRFLOW__CORE__AUTH_MANAGER"] = (
        "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
    )
    scheduler["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"] = "admin:admin"
    without_viewers = init.replace("--resource Plugins", "--resource Website")
    unpinned = requirements.replace(
        "apache-airflow-providers-fab==", "apache-airflow-providers-fab>="
    )
    assert len(checks.auth_problems(broken, without_viewers, unpinned)) == 4


def test_the_airflow_image_installs_ackfold_from_its_wheel_and_mounts_no_source(
    compose: dict[str, Any],
) -> None:
    assert checks.source_mounts(compose) == []
    assert checks.wheel_installs(checks.DOCKERFILE.read_text()) == []


def test_a_source_mount_or_an_editable_install_is_caught(compose: dict[str, Any]) -> None:
    mounted = copy.deepcopy(compose)
    mounted["services"]["airflow-scheduler"]["volumes"].append("./include:/opt/ackfold/include")
    assert checks.source_mounts(mounted) == ["airflow-scheduler: ./include"]
    editable = checks.DOCKERFILE.read_text().replace("pip wheel", "pip download")
    editable += "\nRUN pip install --no-deps -e /opt/ackfold\n"
    assert len(checks.wheel_installs(editable)) == 2
