"""What tests/deploy checks in docker-compose.yml, as functions that list the problems they
find (an empty list: none). The tests run each on the real file and on a broken copy.

Compose interpolates `${VAR}` references before it validates a file; `interpolate` does the
same with the values of `.env.example`, the forms Compose knows: `${VAR}`, `${VAR:-default}`,
`${VAR-default}`, `${VAR:?error}`, `${VAR?error}`, `${VAR:+other}`, `$VAR` and `$$`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from ackfold.airflow.defaults import LEDGER_POOL

PROJECT_DIR = Path(__file__).resolve().parents[2]
COMPOSE_FILE = PROJECT_DIR / "docker-compose.yml"
ENV_EXAMPLE = PROJECT_DIR / ".env.example"
DOCKERFILE = PROJECT_DIR / "docker" / "Dockerfile"
AIRFLOW_INIT = PROJECT_DIR / "docker" / "airflow-init.sh"
REQUIREMENTS = PROJECT_DIR / "requirements.txt"
# An auth manager with roles: a Viewer reads, a User may also replay (docs/security.md).
FAB_AUTH_MANAGER = "airflow.providers.fab.auth_manager.fab_auth_manager.FabAuthManager"
# The docs page that describes the stack: its services table and the pins it quotes.
DEPLOY_PAGE = PROJECT_DIR / "docs" / "operations" / "deploy.md"

_REFERENCE = re.compile(
    r"\$(?:(?P<escaped>\$)"
    r"|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}"
    r"|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))"
)
# Environment names that hold a secret; `*_FILE` names a file that holds one.
_SECRET_NAME = re.compile(r"PASSWORD|SECRET|TOKEN|FERNET|CREDENTIAL|(?:^|_)(?:ACCESS_)?KEY(?:$|_)")
_URL_PASSWORD = re.compile(r"://[^/\s:@]+:(?P<password>[^/\s@]+)@")
_ONLY_A_REFERENCE = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*(?::?[?-][^}]*)?\}$")
# Well-known default credentials that must never ship in the file.
_DEFAULT_SECRETS = ("minioadmin", "change-me", "changeme")


def load(path: Path = COMPOSE_FILE) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(path.read_text())
    return document


def env_example(path: Path = ENV_EXAMPLE) -> dict[str, str]:
    """`KEY=VALUE` lines of an env file (comments and blank lines skipped)."""
    values = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, sep, value = line.partition("=")
            assert sep, f"{path.name}: not KEY=VALUE: {line!r}"
            values[key.strip()] = value.strip()
    return values


def strings(node: Any) -> Iterator[str]:
    """Every string value in a parsed YAML document (mapping keys excluded)."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, Mapping):
        for value in node.values():
            yield from strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from strings(value)


def variables(document: Any) -> set[str]:
    """The names of the variables that a document's `${...}` references use."""
    return {
        match["braced"] or match["bare"]
        for text in strings(document)
        for match in _REFERENCE.finditer(text)
        if not match["escaped"]
    }


def interpolate(node: Any, env: Mapping[str, str]) -> Any:
    """`node` with every reference replaced as Compose would; KeyError for an unset one."""
    if isinstance(node, str):
        return _REFERENCE.sub(lambda match: _substitute(match, env), node)
    if isinstance(node, Mapping):
        return {key: interpolate(value, env) for key, value in node.items()}
    if isinstance(node, list):
        return [interpolate(value, env) for value in node]
    return node


def _substitute(match: re.Match[str], env: Mapping[str, str]) -> str:
    if match["escaped"]:
        return "$"
    name, op, arg = match["braced"] or match["bare"], match["op"], match["arg"] or ""
    present = name in env and (bool(env[name]) or not (op or "").startswith(":"))
    if op in (":-", "-"):
        return env[name] if present else arg
    if op in (":+", "+"):
        return arg if present else ""
    if not present:
        raise KeyError(f"{name} is not set ({arg})" if arg else f"{name} is not set")
    return env[name]


def schema_errors(document: Any, schema: dict[str, Any]) -> list[str]:
    """Where `document` breaks the Compose Specification (draft-07 JSON schema)."""
    assert "draft-07" in schema.get("$schema", ""), "the pinned Compose schema changed draft"
    validator = jsonschema.Draft7Validator(schema)
    return [
        f"{'/'.join(str(part) for part in error.absolute_path) or '(top)'}: {error.message}"
        for error in sorted(validator.iter_errors(document), key=lambda e: list(e.path))
    ]


def one_shot(service: Mapping[str, Any]) -> bool:
    """A service that runs once and exits (an init job), rather than a server."""
    return service.get("restart") == "no"


def image_problems(document: Mapping[str, Any], version: str) -> list[str]:
    """Every service names an image with a pinned tag; images built here carry `version`."""
    problems = []
    for name, service in document["services"].items():
        image = service.get("image")
        if not image:
            problems.append(f"{name}: no image")
            continue
        repository, _, tag = image.rpartition(":")
        if not repository or "/" in tag or tag in ("", "latest") or not re.search(r"\d", tag):
            problems.append(f"{name}: image {image} has no pinned version tag")
        if "build" in service and tag != version:
            problems.append(f"{name}: built image {image} is not tagged {version}")
    return problems


def health_problems(document: Mapping[str, Any]) -> list[str]:
    """Servers have a health check; what waits for a service waits for it to be ready."""
    services = document["services"]
    problems = []
    for name, service in services.items():
        check = service.get("healthcheck") or {}
        if not one_shot(service) and (not check.get("test") or check.get("disable")):
            problems.append(f"{name}: a long-running service without a health check")
        depends = service.get("depends_on") or {}
        if isinstance(depends, list):
            problems.append(f"{name}: depends_on without conditions")
            continue
        for target, how in depends.items():
            wanted = (
                "service_completed_successfully"
                if one_shot(services.get(target, {}))
                else "service_healthy"
            )
            if (how or {}).get("condition") != wanted:
                problems.append(f"{name}: depends on {target} without condition {wanted}")
    return problems


def _environment(service: Mapping[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.partition("=")[::2] for item in env)
    return {str(key): "" if value is None else str(value) for key, value in env.items()}


def secret_problems(document: Mapping[str, Any]) -> list[str]:
    """No secret value is written in the file: secrets come from `.env` references only."""
    problems = []
    for name, service in document["services"].items():
        for key, value in _environment(service).items():
            secret = _SECRET_NAME.search(key) and not key.endswith("_FILE")
            if secret and not _ONLY_A_REFERENCE.match(value):
                problems.append(f"{name}: {key} is not a ${{VAR:?...}} reference")
    for text in strings(document):
        for match in _URL_PASSWORD.finditer(text):
            if not _ONLY_A_REFERENCE.match(match["password"]):
                problems.append(f"a URL carries a literal password: {text}")
        bare = _REFERENCE.sub("", text).lower()
        problems += [f"a default credential ({word}): {text}" for word in _DEFAULT_SECRETS
                     if word in bare]  # fmt: skip
    return problems


def published_ports(service: Mapping[str, Any]) -> set[int]:
    """The host ports of a service's (interpolated) `ports`."""
    ports = set()
    for entry in service.get("ports") or []:
        if isinstance(entry, Mapping):
            ports.add(int(entry["published"]))
        else:
            host = str(entry).split("/")[0].rsplit(":", 2)
            ports.add(int(host[-2] if len(host) > 1 else host[-1]))
    return ports


def volume_sources(service: Mapping[str, Any]) -> set[str]:
    sources = set()
    for entry in service.get("volumes") or []:
        if isinstance(entry, Mapping):
            sources.add(str(entry.get("source", "")))
        else:
            sources.add(str(entry).split(":")[0])
    return sources


def services_table(section: str) -> dict[str, dict[str, Any]]:
    """The services table of the deploy page: name -> image, ports and volumes."""
    rows: dict[str, dict[str, Any]] = {}
    lines = iter(section.splitlines())
    for line in lines:
        if line.startswith("| service |"):
            header = [cell.strip() for cell in line.strip("|").split("|")]
            next(lines)  # the |---| row
            for row in lines:
                if not row.startswith("|"):
                    break
                values = (cell.strip() for cell in row.strip("|").split("|"))
                cells = dict(zip(header, values, strict=True))
                names = re.findall(r"`([^`]+)`", cells["service"])
                for name in names:
                    rows[name] = {
                        "image": re.findall(r"`([^`]+)`", cells["image"]),
                        "ports": {int(p) for p in re.findall(r"\b\d{2,5}\b", cells["ports"])},
                        "volumes": set(re.findall(r"`([^`]+)`", cells["volumes"])),
                    }
            break
    return rows


def readme_problems(document: Mapping[str, Any], table: dict[str, dict[str, Any]]) -> list[str]:
    """The deploy page's services exist with their image, ports and volumes; none is missing."""
    services = document["services"]
    problems = [f"{name}: in docker-compose.yml, not in the deploy page's table"
                for name in services if name not in table]  # fmt: skip
    for name, row in table.items():
        service = services.get(name)
        if service is None:
            problems.append(f"{name}: in the deploy page's table, not in docker-compose.yml")
            continue
        if service.get("image") not in row["image"]:
            problems.append(f"{name}: the page says {row['image']}, the file {service['image']}")
        if missing := row["ports"] - published_ports(service):
            problems.append(f"{name}: ports {sorted(missing)} are not published")
        if missing := row["volumes"] - volume_sources(service):
            problems.append(f"{name}: volumes {sorted(missing)} are not mounted")
    return problems


def dockerfile_args(path: Path = DOCKERFILE) -> dict[str, str]:
    """The `ARG NAME=default` pins of the Dockerfile."""
    return dict(re.findall(r"^ARG ([A-Z0-9_]+)=(\S+)$", path.read_text(), re.M))


def auth_problems(document: Mapping[str, Any], init_script: str, requirements: str) -> list[str]:
    """Every Airflow service runs FAB's auth manager (roles in the metadata database), which
    `requirements.txt` pins; nothing is left of the simple auth manager; the init script
    creates the admin and lets Viewers and Users read the plugin's pages."""
    problems = []
    for name, service in document["services"].items():
        env = _environment(service)
        if not any(key.startswith("AIRFLOW__") for key in env):
            continue
        manager = env.get("AIRFLOW__CORE__AUTH_MANAGER")
        if manager != FAB_AUTH_MANAGER:
            problems.append(f"{name}: AIRFLOW__CORE__AUTH_MANAGER is {manager!r}, not FAB's")
        problems += [f"{name}: {key} is the simple auth manager's, which has no real roles"
                     for key in env if "SIMPLE_AUTH_MANAGER" in key]  # fmt: skip
    if not re.search(r"^apache-airflow-providers-fab==\S+$", requirements, re.M):
        problems.append("requirements.txt does not pin apache-airflow-providers-fab")
    for step in (
        "airflow db migrate",
        "airflow sync-perm",
        "airflow roles add-perms Viewer User --resource Plugins --action can_read",
        "airflow users create --role Admin",
        f"airflow pools set {LEDGER_POOL} 1",
    ):
        if step not in init_script:
            problems.append(f"docker/airflow-init.sh does not run `{step}`")
    return problems


# What a package install may mount beside it: the DAG file, the settings, scripts, data.
PACKAGED_MOUNTS = ("./dags", "./docker/", "./conf/")


def source_mounts(compose: Mapping[str, Any]) -> list[str]:
    """The repository paths mounted into the Airflow services other than the one DAG
    file's folder and configuration: the library itself must come from the wheel."""
    return sorted(
        f"{name}: {source}"
        for name, service in compose["services"].items()
        if name.startswith("airflow")
        for source in volume_sources(service)
        if source.startswith(".") and not source.startswith(PACKAGED_MOUNTS)
    )


def wheel_installs(dockerfile: str) -> list[str]:
    """Problems with how the airflow image installs ackfold: it must build the wheel and
    install it with extras, never an editable checkout."""
    problems = []
    if "pip wheel" not in dockerfile:
        problems.append("no stage builds ackfold's wheel")
    if not re.search(r"pip install[^\n]*(\\\n[^\n]*)*ackfold-\*\.whl\)\[airflow", dockerfile):
        problems.append("the airflow image does not install the wheel with its extras")
    if re.search(r"pip install[^\n]* -e ", dockerfile):
        problems.append("the airflow image installs an editable checkout")
    return problems
