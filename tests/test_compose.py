"""The docker-compose stack (``docker-compose.yml``, ``.env.example``, ``infra/docker/``).

No Docker engine runs on these machines, so the stack is never started here: these tests check
the files themselves (pyyaml), after resolving the compose file's ``${VAR}`` references the way
``docker compose`` does, with ``.env.example`` as the ``.env``. They check that

- the file parses and has the services (Kafka in KRaft mode, InfluxDB 2, Grafana OSS, the
  topic creation, workers, producer), each with a healthcheck or only conditioned
  dependencies, and the workers scalable (no container name, no published port);
- every variable the compose file references is in ``.env.example`` and vice versa, and a
  missing secret stops ``docker compose`` with a message;
- every environment variable the code reads (collected from ``streams``: the keys of
  ``streams.core.config.ENVIRONMENT`` and of its secrets, and every literal ``PERFCAST_*`` name in
  the modules outside ``streams/grafana``) reaches the workers, none the code does not read,
  and ``streams.core.config.load_config`` turns the workers' environment into the right settings;
- listeners, ports, topic prefix and partitions, org, bucket and token agree between the
  services, ``.env.example`` and the code's defaults;
- Grafana gets the provisioning of ``infra/grafana`` and every variable it interpolates;
- the Dockerfile installs the package; the image's configuration is the demo shop's;
- no secret is written in the compose file, ``.env`` is git-ignored.

What only a Docker engine could show (images pull, Kafka and InfluxDB start with this
configuration, the healthchecks pass, the workers consume and write) is listed in
``docs/deploy.md``.
"""

from __future__ import annotations

import ast
import inspect
import re
import tomllib
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlsplit

import pytest
import yaml

import streams
import streams.core.config as config_module
from streams.cli.commands import worker as worker_command
from streams.core.config import InfluxSettings, KafkaSettings, load_config
from streams.cli.demo import demo_config
from streams.kafka.topics import TOPICS, ensure_topics

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"
ENV_EXAMPLE = ROOT / ".env.example"
DOCKERFILE = ROOT / "infra" / "docker" / "Dockerfile"
DOCKERIGNORE = ROOT / "infra" / "docker" / "Dockerfile.dockerignore"
IMAGE_CONFIG = ROOT / "infra" / "docker" / "perfcast.toml"
GRAFANA = ROOT / "infra" / "grafana"

SERVICES = {"kafka", "influxdb", "grafana", "topics", "worker", "producer"}
PERFCAST_SERVICES = ("topics", "worker", "producer")
SECRET_WORDS = re.compile(r"TOKEN|PASSWORD|SECRET|_KEY\b|CREDENTIAL")


# -- compose's variable interpolation ------------------------------------------------------------

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BRACED = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>.*))?$", re.S)


class MissingVariable(Exception):
    """A ``${VAR:?message}`` whose variable is unset or empty."""


def _tokens(text: str) -> list[tuple[str, str]]:
    """``text`` as ("text", literal), ("plain", NAME) and ("braced", inside of ${...}) pieces;
    braces nest (``${A:-${B}}``)."""
    out, i, literal = [], 0, []
    while i < len(text):
        if text.startswith("$$", i):
            literal.append("$")
            i += 2
        elif text.startswith("${", i):
            depth, j = 1, i + 2
            while depth:
                assert j < len(text), f"unclosed reference in {text!r}"
                depth += {"{": 1, "}": -1}.get(text[j], 0)
                j += 1
            out += [("text", "".join(literal)), ("braced", text[i + 2:j - 1])]
            literal, i = [], j
        elif text[i] == "$" and _NAME.match(text, i + 1):
            name = _NAME.match(text, i + 1).group(0)
            out += [("text", "".join(literal)), ("plain", name)]
            literal, i = [], i + 1 + len(name)
        else:
            literal.append(text[i])
            i += 1
    return out + [("text", "".join(literal))]


def interpolate(text: str, env: Mapping[str, str]) -> str:
    """``text`` with ``$$``, ``$VAR``, ``${VAR}``, ``${VAR:-default}``, ``${VAR-default}``,
    ``${VAR:?error}``, ``${VAR?error}``, ``${VAR:+alt}`` resolved as compose resolves them."""
    out = []
    for kind, value in _tokens(text):
        if kind == "text":
            out.append(value)
        elif kind == "plain":
            out.append(env.get(value, ""))
        else:
            out.append(_braced(value, env))
    return "".join(out)


def _braced(inside: str, env: Mapping[str, str]) -> str:
    parsed = _BRACED.match(inside)
    assert parsed, f"malformed reference ${{{inside}}}"
    name, op, arg = parsed.group("name", "op", "arg")
    value = env.get(name)
    empty = value is None or (value == "" and bool(op) and op.startswith(":"))
    if op in (":-", "-"):
        return interpolate(arg, env) if empty else value
    if op in (":?", "?"):
        if empty:
            raise MissingVariable(f"{name}: {arg}")
        return value
    if op in (":+", "+"):
        return "" if empty else interpolate(arg, env)
    return value or ""


def references(text: str) -> set[str]:
    """Names of the variables ``text`` refers to."""
    names = set()
    for kind, value in _tokens(text):
        if kind == "plain":
            names.add(value)
        elif kind == "braced":
            parsed = _BRACED.match(value)
            names.add(parsed.group("name"))
            names |= references(parsed.group("arg") or "")
    return names


def _resolve(node: Any, env: Mapping[str, str]) -> Any:
    if isinstance(node, str):
        return interpolate(node, env)
    if isinstance(node, list):
        return [_resolve(x, env) for x in node]
    if isinstance(node, dict):
        return {k: _resolve(v, env) for k, v in node.items()}
    return node


def read_env_file(path: Path) -> dict[str, str]:
    """``KEY=VALUE`` lines (comments and blank lines skipped), as compose reads ``.env``."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        assert sep, f"{path.name}: not KEY=VALUE: {line!r}"
        out[key.strip()] = value.strip()
    return out


def environment(service: Mapping[str, Any]) -> dict[str, str]:
    """A service's environment as a dict (map or ``KEY=VALUE`` list form)."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


# -- fixtures ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    """The compose file as written (anchors and merge keys expanded by pyyaml)."""
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def dotenv() -> dict[str, str]:
    return read_env_file(ENV_EXAMPLE)


@pytest.fixture(scope="module")
def compose(raw: dict[str, Any], dotenv: dict[str, str]) -> dict[str, Any]:
    """The compose file resolved with ``.env.example`` as ``.env``."""
    return _resolve(raw, dotenv)


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    return compose["services"]


def _variables_the_code_reads() -> tuple[set[str], set[str]]:
    """(plain variables, secrets) the perfcast processes read from the environment: the
    configuration's tables, and every literal ``PERFCAST_*`` string in ``streams`` outside
    ``streams/grafana``, the Prometheus source and ``streams/kafka/app.py`` (``perfcast
    grafana``, ``perfcast ingest prometheus`` and Faust's own command line, which run beside
    the stack: its worker runs ``perfcast worker``)."""
    secrets = set(getattr(config_module, "_SECRETS"))
    plain = set(config_module.ENVIRONMENT)
    package = Path(streams.__file__).parent
    for path in package.rglob("*.py"):
        if "grafana" in path.relative_to(package).parts or path.name.startswith("prometheus") \
                or path.relative_to(package).as_posix() == "kafka/app.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and re.fullmatch(r"PERFCAST_[A-Z0-9_]+", node.value):
                plain.add(node.value)
    return plain - secrets, secrets


# -- structure -----------------------------------------------------------------------------------

def test_the_file_parses_and_has_the_services(raw: dict[str, Any],
                                              services: dict[str, Any]) -> None:
    assert set(services) == SERVICES
    assert services["kafka"]["image"].startswith("apache/kafka:")
    assert services["influxdb"]["image"].startswith("influxdb:2.")
    assert services["grafana"]["image"].startswith("grafana/grafana-oss:")
    kafka = environment(services["kafka"])
    assert set(kafka["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}  # KRaft
    assert "KAFKA_ZOOKEEPER_CONNECT" not in kafka
    influx = environment(services["influxdb"])
    assert influx["DOCKER_INFLUXDB_INIT_MODE"] == "setup"
    for name in PERFCAST_SERVICES:
        build = services[name]["build"]
        assert (ROOT / build["context"] / build["dockerfile"]).resolve() == DOCKERFILE
        assert services[name]["image"] == services["worker"]["image"]
    assert services["worker"]["command"][0] == "worker"
    assert services["producer"]["command"][:3] == ["produce", "--source", "demo"]
    assert set(raw["volumes"]) >= {v.split(":")[0] for s in services.values()
                                   for v in s.get("volumes", []) if not v.startswith(".")}


def test_every_service_is_health_checked_or_waits_on_conditions(services: dict) -> None:
    """Each service has a healthcheck, or depends only on conditions; a dependency on a
    service's health needs that service's healthcheck."""
    conditions = {"service_healthy", "service_started", "service_completed_successfully"}
    for name, service in services.items():
        depends = service.get("depends_on", {})
        assert isinstance(depends, dict), f"{name}: depends_on without conditions"
        assert service.get("healthcheck") or depends, name
        for other, how in depends.items():
            assert other in services, (name, other)
            assert how.get("condition") in conditions, (name, other)
            if how["condition"] == "service_healthy":
                assert services[other].get("healthcheck", {}).get("test"), other
        if service.get("healthcheck"):
            assert service["healthcheck"]["test"][0] in ("CMD", "CMD-SHELL"), name
    for name in ("worker", "producer", "topics"):
        assert services[name]["depends_on"]["kafka"]["condition"] == "service_healthy"
    assert services["worker"]["depends_on"]["influxdb"]["condition"] == "service_healthy"
    assert services["grafana"]["depends_on"]["influxdb"]["condition"] == "service_healthy"
    for name in ("worker", "producer"):
        assert services[name]["depends_on"]["topics"]["condition"] == \
            "service_completed_successfully"


def test_workers_scale(services: dict) -> None:
    """``--scale worker=N``: nothing on the worker may be unique to one container."""
    for name in ("worker", "producer"):
        assert "container_name" not in services[name], name
        assert not services[name].get("ports"), name
    assert "hostname" not in services["worker"]


# -- variables -----------------------------------------------------------------------------------

def test_variables_of_the_compose_file_and_env_example_match(raw: dict, dotenv: dict) -> None:
    text = COMPOSE.read_text()
    body = "\n".join(line.split(" #")[0] for line in text.splitlines()
                     if not line.lstrip().startswith("#"))
    used = references(body)
    assert used, "the compose file takes nothing from .env"
    assert used - set(dotenv) == set(), "referenced in docker-compose.yml, not in .env.example"
    assert set(dotenv) - used == set(), "in .env.example, not used by docker-compose.yml"


def test_a_missing_secret_stops_compose_with_a_message(raw: dict, dotenv: dict) -> None:
    required = {m.group(1) for m in re.finditer(r"\$\{([A-Z0-9_]+):\?",
                                                COMPOSE.read_text())}
    assert {"PERFCAST_INFLUX_TOKEN", "INFLUXDB_ADMIN_PASSWORD",
            "GRAFANA_ADMIN_PASSWORD"} <= required
    for name in required:
        env = {k: v for k, v in dotenv.items() if k != name}
        with pytest.raises(MissingVariable, match=f"{name}: set {name} in .env"):
            _resolve(raw, env)


def test_the_workers_get_every_variable_the_code_reads(services: dict) -> None:
    plain, secrets = _variables_the_code_reads()
    assert {"PERFCAST_KAFKA_BOOTSTRAP", "PERFCAST_INFLUX_URL", "PERFCAST_DEBUG_BATCHES"} <= plain
    assert {"PERFCAST_INFLUX_TOKEN", "PERFCAST_KAFKA_SASL_PASSWORD"} <= secrets
    worker = environment(services["worker"])
    assert plain - set(worker) == set()
    for name in secrets:
        assert name in worker or f"{name}_FILE" in worker, name
    known = plain | secrets | {f"{s}_FILE" for s in secrets}
    assert {k for k in worker if k.startswith("PERFCAST_")} - known == set(), \
        "the worker gets a PERFCAST_ variable the code does not read"
    # the producer and the topic creation: every Kafka variable
    kafka = {v for v, (section, _) in config_module.ENVIRONMENT.items() if section == "kafka"}
    kafka |= {v for v, (section, _) in getattr(config_module, "_SECRETS").items()
              if section == "kafka"}
    for name in ("producer", "topics"):
        assert kafka - set(environment(services[name])) == set(), name


def test_the_code_reads_the_workers_environment_as_intended(services: dict,
                                                            dotenv: dict) -> None:
    """``load_config`` over the worker's environment (from .env.example): the bundled Kafka
    and InfluxDB, the code's default org, bucket and topic prefix, the token from .env."""
    cfg = load_config(IMAGE_CONFIG, env=environment(services["worker"]))
    assert cfg.kafka.bootstrap == "kafka:9092"
    assert cfg.kafka.security_protocol == KafkaSettings().security_protocol
    assert cfg.kafka.sasl_mechanism is None and cfg.kafka.sasl_password is None
    assert cfg.kafka.topic_prefix == KafkaSettings().topic_prefix
    assert cfg.influxdb.url == "http://influxdb:8086"
    assert (cfg.influxdb.org, cfg.influxdb.bucket) == (InfluxSettings().org,
                                                       InfluxSettings().bucket)
    assert cfg.influxdb.token == dotenv["PERFCAST_INFLUX_TOKEN"]


# -- ports, names --------------------------------------------------------------------------------

def _listeners(value: str) -> dict[str, tuple[str, int]]:
    out = {}
    for item in value.split(","):
        name, _, address = item.partition("://")
        host, _, port = address.rpartition(":")
        out[name] = (host, int(port))
    return out


def _published(service: Mapping[str, Any]) -> dict[int, int]:
    """Container port -> host port of a service's ``ports``."""
    out = {}
    for item in service.get("ports", []):
        parts = str(item).split(":")
        out[int(parts[-1])] = int(parts[-2])
    return out


def test_kafka_listeners_and_ports_agree(services: dict) -> None:
    kafka = environment(services["kafka"])
    listen = _listeners(kafka["KAFKA_LISTENERS"])
    advertised = _listeners(kafka["KAFKA_ADVERTISED_LISTENERS"])
    protocols = dict(p.split(":") for p in kafka["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"]
                     .split(","))
    assert set(listen) == set(protocols)
    assert set(advertised) <= set(listen) and kafka["KAFKA_CONTROLLER_LISTENER_NAMES"] in listen
    assert kafka["KAFKA_CONTROLLER_LISTENER_NAMES"] not in advertised
    node, _, voter = kafka["KAFKA_CONTROLLER_QUORUM_VOTERS"].partition("@")
    assert node == str(kafka["KAFKA_NODE_ID"])
    assert voter == f"kafka:{listen[kafka['KAFKA_CONTROLLER_LISTENER_NAMES']][1]}"
    # in the compose network: the workers' bootstrap is the broker's advertised listener
    host, _, port = environment(services["worker"])["PERFCAST_KAFKA_BOOTSTRAP"].partition(":")
    inside = [n for n, (h, p) in advertised.items() if (h, p) == (host, int(port))]
    assert host == "kafka" and len(inside) == 1 and listen[inside[0]][1] == int(port)
    assert kafka["KAFKA_INTER_BROKER_LISTENER_NAME"] == inside[0]
    # on the host: perfcast's default bootstrap (localhost:9092) reaches the HOST listener
    default_host, _, default_port = KafkaSettings().bootstrap.partition(":")
    outside = [n for n, (h, p) in advertised.items() if (h, p) == (default_host,
                                                                    int(default_port))]
    assert len(outside) == 1
    assert _published(services["kafka"]) == {listen[outside[0]][1]: int(default_port)}
    assert any(p.startswith("127.0.0.1:") for p in services["kafka"]["ports"])
    assert f"localhost:{port}" in " ".join(services["kafka"]["healthcheck"]["test"])


def test_influxdb_and_grafana_ports_agree(services: dict) -> None:
    url = urlsplit(environment(services["worker"])["PERFCAST_INFLUX_URL"])
    assert url.hostname == "influxdb" and url.port == 8086
    assert _published(services["influxdb"]) == {8086: 8086}
    assert "http://localhost:8086" in services["influxdb"]["healthcheck"]["test"]
    assert _published(services["grafana"]) == {3000: 3000}
    assert "localhost:3000/api/health" in " ".join(services["grafana"]["healthcheck"]["test"])


def test_topics_and_partitions_agree_with_the_code(services: dict, dotenv: dict) -> None:
    """The ``topics`` service runs ``streams.kafka.topics.ensure_topics`` with the partitions the
    workers are started with and the broker's default; the prefix is the code's."""
    command = services["topics"]["command"][0]
    assert services["topics"]["entrypoint"] == ["python", "-c"]
    compile(command, "<topics>", "exec")
    assert "from streams.kafka.topics import ensure_topics" in command
    assert "ensure_topics(load_config().kafka" in command
    assert list(inspect.signature(ensure_topics).parameters)[:2] == ["settings", "partitions"]
    partitions = int(environment(services["topics"])["PERFCAST_PARTITIONS"])
    worker = services["worker"]["command"]
    assert int(worker[worker.index("--partitions") + 1]) == partitions
    assert int(environment(services["kafka"])["KAFKA_NUM_PARTITIONS"]) == partitions
    cli_default = inspect.signature(worker_command).parameters["partitions"].default.default
    assert partitions == cli_default
    prefix = environment(services["worker"])["PERFCAST_KAFKA_TOPIC_PREFIX"]
    assert prefix == dotenv["PERFCAST_KAFKA_TOPIC_PREFIX"] == KafkaSettings().topic_prefix
    comment = next(line for line in ENV_EXAMPLE.read_text().splitlines()
                   if line.startswith("# topics "))
    assert re.findall(r"\.([a-z]+)", comment.split("(")[0]) == list(TOPICS)


def test_org_bucket_and_token_agree(services: dict, dotenv: dict) -> None:
    influx = environment(services["influxdb"])
    for service in ("worker", "grafana"):
        env = environment(services[service])
        assert env["PERFCAST_INFLUX_ORG"] == influx["DOCKER_INFLUXDB_INIT_ORG"], service
        assert env["PERFCAST_INFLUX_BUCKET"] == influx["DOCKER_INFLUXDB_INIT_BUCKET"], service
        assert env["PERFCAST_INFLUX_TOKEN"] == influx["DOCKER_INFLUXDB_INIT_ADMIN_TOKEN"], \
            service
        assert env["PERFCAST_INFLUX_URL"] == environment(services["worker"])[
            "PERFCAST_INFLUX_URL"], service
    assert influx["DOCKER_INFLUXDB_INIT_ORG"] == dotenv["PERFCAST_INFLUX_ORG"] == \
        InfluxSettings().org
    assert influx["DOCKER_INFLUXDB_INIT_BUCKET"] == dotenv["PERFCAST_INFLUX_BUCKET"] == \
        InfluxSettings().bucket


# -- Grafana -------------------------------------------------------------------------------------

def test_grafana_gets_the_provisioning_and_its_variables(services: dict) -> None:
    mounts = {}
    for volume in services["grafana"]["volumes"]:
        source, target = volume.split(":")[:2]
        mounts[target] = source
    assert (ROOT / mounts["/etc/grafana/provisioning"]).resolve() == GRAFANA / "provisioning"
    provider = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "perfcast.yaml")
                              .read_text())
    dashboards_path = provider["providers"][0]["options"]["path"]
    assert (ROOT / mounts[dashboards_path]).resolve() == GRAFANA / "dashboards"
    assert sorted((GRAFANA / "dashboards").glob("*.json"))
    wanted = set()
    for path in (GRAFANA / "provisioning").rglob("*.yaml"):
        wanted |= set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", path.read_text()))
    assert {"PERFCAST_INFLUX_URL", "PERFCAST_INFLUX_TOKEN"} <= wanted
    env = environment(services["grafana"])
    assert {n for n in wanted if not env.get(n)} == set()
    datasource = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "perfcast.yaml")
                                .read_text())["datasources"][0]
    assert urlsplit(interpolate(datasource["url"], env)).hostname == "influxdb"


# -- image ---------------------------------------------------------------------------------------

def _instructions(path: Path) -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", path.read_text())
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1].strip())
            for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_the_dockerfile_installs_the_package() -> None:
    assert DOCKERFILE.is_file()
    steps = _instructions(DOCKERFILE)
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    base = next(arg for op, arg in steps if op == "FROM")
    m = re.fullmatch(r"python:(\d+)\.(\d+)(-[a-z-]+)?", base)
    wanted = re.fullmatch(r">=\s*(\d+)\.(\d+)", pyproject["project"]["requires-python"])
    assert m and wanted and (int(m[1]), int(m[2])) >= (int(wanted[1]), int(wanted[2]))
    copied = " ".join(arg for op, arg in steps if op == "COPY")
    packages = [p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]
                ["include"]]
    for needed in packages + ["pyproject.toml", pyproject["project"]["readme"]]:
        assert re.search(rf"(^|\s){re.escape(needed)}(\s|$)", copied), needed
    runs = " ".join(arg for op, arg in steps if op == "RUN")
    assert re.search(r"pip install (--[a-z-]+ )*\.(\s|$)", runs)
    script = next(iter(pyproject["project"]["scripts"]))
    entry = next(arg for op, arg in steps if op == "ENTRYPOINT")
    assert entry == f'["{script}"]'
    assert ("USER", "perfcast") in steps
    # the build context: what the image copies is not ignored, the rest is
    rules = [r for r in DOCKERIGNORE.read_text().splitlines() if r and not r.startswith("#")]
    assert rules[0] == "*"
    for needed in packages + ["pyproject.toml", "README.md", "infra/docker/perfcast.toml"]:
        assert any(r.rstrip("/") == f"!{needed}" for r in rules), needed


def test_the_image_configuration_is_the_demo_shops(services: dict) -> None:
    """The workers run the configuration of ``perfcast demo``, which the producer publishes."""
    command = services["worker"]["command"]
    path = command[command.index("--config") + 1]
    mounted = {v.split(":")[1]: v.split(":")[0] for v in services["worker"]["volumes"]}
    assert (ROOT / mounted[path]).resolve() == IMAGE_CONFIG
    assert ("COPY", f"infra/docker/perfcast.toml {path}") in _instructions(DOCKERFILE)
    cfg = load_config(IMAGE_CONFIG, env={})
    assert dict(cfg.systems) == dict(demo_config().systems)


# -- secrets -------------------------------------------------------------------------------------

def test_no_secret_is_written_down(raw: dict, dotenv: dict) -> None:
    for name, service in raw["services"].items():
        for key, value in environment(service).items():
            if not SECRET_WORDS.search(key):
                continue
            ref = re.fullmatch(r"\$\{([A-Z0-9_]+)(:?[-?])?([^}]*)\}", value)
            assert ref or value == "", f"{name}.{key}: a literal value"
            if ref and ref.group(2) in (":-", "-"):
                assert ref.group(3) == "", f"{name}.{key}: a default secret"
    for key, value in dotenv.items():
        if SECRET_WORDS.search(key) and value:
            assert value.startswith("change-me"), f".env.example {key}: not a placeholder"
    ignored = [line.strip() for line in (ROOT / ".gitignore").read_text().splitlines()]
    assert ".env" in ignored
    assert not re.search(r"(?m)^!\.env$", (ROOT / ".gitignore").read_text())


def test_interpolation_follows_compose() -> None:
    """The resolver these tests rely on."""
    env = {"A": "1", "E": ""}
    assert interpolate("${A}-${B:-x}-${E:-y}-${E-z}-$$A-$A", env) == "1-x-y--$A-1"
    assert interpolate("${A:+set}${B:+no}", env) == "set"
    with pytest.raises(MissingVariable, match="E: needed"):
        interpolate("${E:?needed}", env)
    assert interpolate("${E?fine}", env) == ""
    assert references("${A:-${B}} $C $$D") == {"A", "B", "C"}
