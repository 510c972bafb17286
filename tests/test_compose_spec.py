"""``docker-compose.yml`` through compose-go, the loader Docker Compose v2 itself uses.

No Docker engine runs on these machines (docs/deploy.md). ``infra/compose/install.sh`` builds
``infra/compose/check`` -- a few lines around ``compose-go``'s ``ProjectOptions.LoadProject``,
the Compose Specification's reference implementation -- from the Go module proxy; it loads the
file as ``docker compose config`` would: YAML anchors and merge keys, ``${VAR}`` interpolation
from an env file, the Compose JSON schema, normalisation. These tests check that the file loads
with ``.env.example`` as ``.env``, that compose-go resolves it exactly as the resolver of
``tests/test_compose.py`` does (so those tests check what compose would run), and that a missing
secret stops it with a message.

Outside CI the tests skip when Go cannot build the loader; under ``CI=true`` that fails.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from ci_policy import unavailable

from tests.test_compose import (COMPOSE, ENV_EXAMPLE, PERFCAST_SERVICES, SERVICES, ROOT,
                                _resolve, environment, read_env_file)

INSTALL = ROOT / "infra" / "compose" / "install.sh"


@pytest.fixture(scope="module")
def composecheck() -> Path:
    done = subprocess.run(["bash", str(INSTALL)], capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        unavailable(f"infra/compose/install.sh failed: {done.stderr.strip()[-2000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def load(composecheck: Path, env_file: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(composecheck), str(COMPOSE), str(env_file)], capture_output=True,
                          text=True, timeout=60, env={"PATH": os.environ.get("PATH", "")})


@pytest.fixture(scope="module")
def project(composecheck: Path) -> dict[str, Any]:
    done = load(composecheck, ENV_EXAMPLE)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_compose_loads_the_file_with_the_env_example(project: dict[str, Any]) -> None:
    assert project["name"] == "perfcast"
    assert set(project["services"]) == SERVICES
    assert set(project["volumes"]) == {"kafka-data", "influxdb-data", "influxdb-config",
                                       "grafana-data"}


def test_compose_resolves_the_services_as_the_python_checks_assume(
        project: dict[str, Any]) -> None:
    """Environment, command and image of every service: compose-go's against the resolver of
    tests/test_compose.py on the same file and env file."""
    ours = _resolve(yaml.safe_load(COMPOSE.read_text()), read_env_file(ENV_EXAMPLE))["services"]
    for name, service in project["services"].items():
        assert environment(service) == environment(ours[name]), name
        if "command" in ours[name]:
            assert service["command"] == ours[name]["command"], name
        assert service["image"] == ours[name].get("image", service["image"]), name
    for name in PERFCAST_SERVICES:
        assert project["services"][name]["build"]["dockerfile"] == "infra/docker/Dockerfile"


def test_compose_health_gates_the_perfcast_services(project: dict[str, Any]) -> None:
    services = project["services"]
    for name in ("kafka", "influxdb", "grafana"):
        assert services[name]["healthcheck"]["test"][0] in ("CMD", "CMD-SHELL"), name
    for name in ("worker", "producer"):
        needs = services[name]["depends_on"]
        assert needs["kafka"]["condition"] == "service_healthy", name
        assert needs["topics"]["condition"] == "service_completed_successfully", name
    assert services["worker"]["depends_on"]["influxdb"]["condition"] == "service_healthy"


@pytest.mark.parametrize("secret", ["PERFCAST_INFLUX_TOKEN", "INFLUXDB_ADMIN_PASSWORD",
                                    "GRAFANA_ADMIN_PASSWORD"])
def test_compose_refuses_to_run_without_a_secret(composecheck: Path, tmp_path: Path,
                                                 secret: str) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("".join(line + "\n" for line in ENV_EXAMPLE.read_text().splitlines()
                                if not line.startswith(f"{secret}=")))
    done = load(composecheck, env_file)
    assert done.returncode != 0
    assert f"set {secret} in .env" in done.stderr


def test_the_loader_rejects_what_compose_rejects(composecheck: Path, tmp_path: Path) -> None:
    """A control: a service key outside the Compose schema fails to load."""
    bad = tmp_path / "docker-compose.yml"
    bad.write_text(COMPOSE.read_text().replace("    restart: unless-stopped\n",
                                               "    restart: unless-stopped\n    bogus: 1\n", 1))
    done = subprocess.run([str(composecheck), str(bad), str(ENV_EXAMPLE)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode != 0
    assert "bogus" in done.stderr
