"""The deployment files (``Dockerfile``, ``compose.yaml``, docs/deploy.md) checked without Docker:
the commands and options they use exist, the ``MEMSTRATA_*`` variables they name are settings,
the health check hits a real route.  Nothing here builds an image or starts a container."""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import click
import pytest

from memstrata.cli import cli
from memstrata.config import Settings
from memstrata.server.routes import ops

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = (ROOT / "Dockerfile").read_text(encoding="utf-8")
COMPOSE = (ROOT / "compose.yaml").read_text(encoding="utf-8")
DEPLOY = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
#: Variables that are not settings: the settings file, and those the test suite reads
#: (tests/services.py, .ci/services).
OTHER_VARIABLES = {
    "MEMSTRATA_CONFIG",
    "MEMSTRATA_TEST_POSTGRES",
    "MEMSTRATA_TEST_REDIS",
    "MEMSTRATA_TEST_REQUIRE_SERVICES",
}


def _check_args(args: list[str]) -> None:
    """Fail unless ``memstrata ARGS`` names real (sub)commands and only their own options."""
    command: click.Command = cli
    path = ["memstrata"]
    i = 0
    while i < len(args):
        arg = args[i]
        params = {opt: p for p in command.params for opt in (*p.opts, *p.secondary_opts)}
        if arg.startswith("-"):
            name = arg.split("=", 1)[0]
            assert name in params, f"{' '.join(path)} has no option {name}"
            takes_value = not getattr(params[name], "is_flag", False) and "=" not in arg
            i += 2 if takes_value else 1
        elif isinstance(command, click.Group):
            assert arg in command.commands, f"{' '.join(path)} has no command {arg}"
            command = command.commands[arg]
            path.append(arg)
            i += 1
        else:
            i += 1  # a positional argument
    assert path != ["memstrata"], f"no command in memstrata {args}"


def _dockerfile_json(instruction: str) -> list[str]:
    (line,) = re.findall(rf"^{instruction} (\[.*\])$", DOCKERFILE, re.M)
    value: list[str] = json.loads(line)
    return value


def _compose() -> dict[str, Any]:
    yaml = pytest.importorskip("yaml", reason="PyYAML is not installed: compose.yaml not parsed")
    data: dict[str, Any] = yaml.safe_load(COMPOSE)
    return data


def _memstrata_services() -> dict[str, dict[str, Any]]:
    return {name: s for name, s in _compose()["services"].items() if s.get("build") == "."}


def test_the_image_runs_a_real_command() -> None:
    assert _dockerfile_json("ENTRYPOINT") == ["memstrata"]
    _check_args(_dockerfile_json("CMD"))


def test_the_image_installs_real_extras() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    (wanted,) = re.findall(r'pip install "/src\[([a-z,]+)\]"', DOCKERFILE)
    assert set(wanted.split(",")) <= set(extras)
    assert "llm" not in wanted.split(",")


def test_the_health_check_hits_the_health_route_on_the_served_port() -> None:
    (url,) = re.findall(r"urlopen\('(http://[^']+)'", DOCKERFILE)
    command = _dockerfile_json("CMD")
    port = command[command.index("--port") + 1]
    assert url == f"http://127.0.0.1:{port}/health"
    assert "/health" in {route.path for route in ops.public.routes}  # type: ignore[attr-defined]


def test_compose_has_the_documented_services() -> None:
    services = _compose()["services"]
    assert set(services) == {"postgres", "redis", "api1", "api2", "worker1", "worker2"}
    assert services["postgres"]["image"].startswith("pgvector/pgvector:")
    assert "--appendonly" in services["redis"]["command"]
    for name in ("api1", "api2", "worker1", "worker2"):
        depends = services[name]["depends_on"]
        assert depends["postgres"]["condition"] == "service_healthy", name
        assert depends["redis"]["condition"] == "service_healthy", name


def test_compose_commands_exist() -> None:
    services = _memstrata_services()
    assert len(services) == 4
    for service in services.values():
        _check_args(service["command"])


def _documented_commands() -> list[list[str]]:
    """``memstrata …`` command lines of docs/deploy.md's ``sh`` blocks, as argument lists."""
    found = []
    for block in re.findall(r"```sh\n(.*?)```", DEPLOY, re.S):
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            starts = [i for i, w in enumerate(words) if w in ("memstrata", ".venv/bin/memstrata")]
            found += [words[i + 1 :] for i in starts]
    return found


def test_deploy_doc_commands_exist() -> None:
    commands = _documented_commands()
    assert len(commands) >= 5  # serve twice, worker twice, migrate
    for args in commands:
        _check_args(args)


def test_every_variable_is_a_setting() -> None:
    settings = {f"MEMSTRATA_{f.name.upper()}" for f in dataclasses.fields(Settings)}
    named = set(re.findall(r"MEMSTRATA_[A-Z0-9_]+", COMPOSE + DOCKERFILE + DEPLOY))
    assert {"MEMSTRATA_DB", "MEMSTRATA_REDIS_URL", "MEMSTRATA_ADMIN_KEY"} <= named
    assert sorted(named - settings - OTHER_VARIABLES) == []
    for service in _memstrata_services().values():
        assert set(service["environment"]) <= settings


def test_the_readme_links_the_deploy_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(docs/deploy.md)" in readme


def test_the_test_services_listen_below_the_ephemeral_range() -> None:
    """Finding 15 of the second hardening round: ``.ci/services`` defaulted to ports 55432 and
    56379, inside Linux's ephemeral range (32768-60999), where another program's outgoing
    connection may hold the port ("Address already in use")."""
    script = (ROOT / ".ci" / "services").read_text(encoding="utf-8")
    ports = [int(p) for p in re.findall(r"_PORT:-(\d+)\}", script)]
    assert len(ports) == 2
    assert all(1024 <= port < 32768 for port in ports), ports
