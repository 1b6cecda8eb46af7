"""The Dockerfile passes hadolint, the Kubernetes manifests pass kubernetes-validate, and the
Compose example is wired together (services, env, ports, mounts). No Docker daemon is used."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from support.binaries import require_binaries
from support.cli_help import relayd_env_vars
from support.ports import free_port

import relayd

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
KUBERNETES = ROOT / "deploy" / "kubernetes"
COMPOSE_DIR = ROOT / "deploy" / "compose"
COMPOSE = COMPOSE_DIR / "docker-compose.yml"
PROMETHEUS_RULES = ROOT / "deploy" / "prometheus" / "relayd-rules.yml"

#: Kubernetes release the manifests must validate against (the oldest still supported by
#: the upstream project when this was written; CronJob batch/v1 and seccompProfile need >= 1.25).
KUBERNETES_VERSIONS = ("1.29.0", kubernetes_validate.latest_version())
#: The UID the image runs as and the manifests require.
RELAYD_UID = 10001
METRICS_PORT = 9464


def pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


# --- Dockerfile ---------------------------------------------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    pairs = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            keyword, _, rest = stripped.partition(" ")
            pairs.append((keyword.upper(), rest.strip()))
    return pairs


def test_dockerfile_passes_hadolint_without_a_single_finding() -> None:
    """hadolint (every severity, style included) reports nothing; ignores must give a reason."""
    result = subprocess.run(
        ["hadolint", "--no-color", "--failure-threshold", "style", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    unexplained_ignores = [
        line
        for line in DOCKERFILE.read_text().splitlines()
        if "hadolint ignore=" in line and not re.search(r"ignore=[\w,]+\s+\S", line)
    ]

    assert (result.returncode, result.stdout + result.stderr) == (0, "")
    assert unexplained_ignores == []


def test_dockerfile_is_multi_stage_non_root_with_the_relayd_entrypoint() -> None:
    """Wheel in stage one, venv in /opt/relayd in stage two, UID 10001,
    ENTRYPOINT relayd, CMD sweep, port 9464, OCI labels, version label = pyproject version."""
    instructions = dockerfile_instructions()
    froms = [args for keyword, args in instructions if keyword == "FROM"]
    final_stage = instructions[max(i for i, (k, _) in enumerate(instructions) if k == "FROM") :]
    final = dict(final_stage)
    runs = " ".join(args for keyword, args in instructions if keyword == "RUN")
    args = dict(a.split("=", 1) for keyword, a in instructions if keyword == "ARG" and "=" in a)
    labels = " ".join(a for keyword, a in final_stage if keyword == "LABEL")

    assert len(froms) == 2
    assert args["PYTHON_IMAGE"].startswith("python:3.11-slim")
    assert "pip wheel --wheel-dir /wheels" in runs
    assert "python -m venv --without-pip /opt/relayd" in runs
    assert "--no-cache-dir" in runs
    assert "--no-index" in runs
    assert "from=build,source=/wheels" in runs
    assert final["USER"] == f"{RELAYD_UID}:{RELAYD_UID}"
    assert final["ENTRYPOINT"] == '["relayd"]'
    assert final["CMD"] == '["sweep"]'
    assert final["EXPOSE"] == str(METRICS_PORT)
    assert f"RELAYD_METRICS_ADDR=0.0.0.0:{METRICS_PORT}" in final["ENV"]
    assert "PATH=/opt/relayd/bin:" in final["ENV"]
    assert args["VERSION"] == relayd.__version__  # the one version, which the image pins
    for label in ("title", "description", "version", "revision", "licenses", "source"):
        assert f"org.opencontainers.image.{label}=" in labels
    # Only the base image's own pip runs in the final stage; no compiler is ever installed.
    assert not re.search(r"apt-get install|build-essential|gcc", runs)


def healthcheck_argv(port: int) -> tuple[list[str], dict[str, str]]:
    """The image's HEALTHCHECK command, run with this interpreter against ``port``."""
    (args,) = (a for keyword, a in dockerfile_instructions() if keyword == "HEALTHCHECK")
    argv = json.loads(args.split(" CMD ", 1)[1])
    assert argv[0] == "python"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RELAYD_")}
    return [sys.executable, *argv[1:]], env | {"RELAYD_METRICS_ADDR": f"0.0.0.0:{port}"}


def test_the_image_healthcheck_passes_against_a_live_relayd(relayd_metrics_port: int) -> None:
    """The HEALTHCHECK's one-liner asks /healthz on the port RELAYD_METRICS_ADDR names."""
    argv, env = healthcheck_argv(relayd_metrics_port)

    result = subprocess.run(argv, env=env, capture_output=True, text=True, check=False, timeout=30)

    assert result.returncode == 0, result.stderr


def test_the_image_healthcheck_fails_when_nothing_answers() -> None:
    closed_port = free_port()
    argv, env = healthcheck_argv(closed_port)

    result = subprocess.run(argv, env=env, capture_output=True, text=True, check=False, timeout=30)

    assert result.returncode != 0


def test_dockerignore_allows_exactly_what_the_wheel_is_built_from() -> None:
    """An allow-list: everything excluded, then pyproject, README and the packages back in."""
    lines = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    packages = pyproject()["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
    copied = [args.split()[0] for keyword, args in dockerfile_instructions() if keyword == "COPY"]

    assert lines[0] == "*"
    for needed in ["pyproject.toml", pyproject()["project"]["readme"], *(f"{p}/" for p in packages)]:
        assert f"!{needed}" in lines
    assert sorted(copied) == sorted(["pyproject.toml", *packages])
    assert "**/__pycache__" in lines


# --- Kubernetes ---------------------------------------------------------------------------------


def kubernetes_documents() -> Iterator[tuple[str, dict[str, Any]]]:
    for path in sorted(KUBERNETES.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is not None:
                yield path.name, doc


def kustomization() -> dict[str, Any]:
    return dict(yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text()))


def resource(kind: str) -> dict[str, Any]:
    (doc,) = (doc for _, doc in kubernetes_documents() if doc["kind"] == kind)
    return doc


def pod_spec(kind: str) -> dict[str, Any]:
    doc = resource(kind)
    if kind == "CronJob":
        return dict(doc["spec"]["jobTemplate"]["spec"]["template"]["spec"])
    return dict(doc["spec"]["template"]["spec"])


def relayd_container(kind: str) -> dict[str, Any]:
    (container,) = (c for c in pod_spec(kind)["containers"] if c["name"] == "relayd")
    return dict(container)


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_kubernetes_manifest_passes_kubernetes_validate_strictly(version: str) -> None:
    """Each document of each manifest validates, strict (no unknown fields), for old and new releases."""
    documents = list(kubernetes_documents())
    failures = []
    for name, doc in documents:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            failures.append(f"{name} {doc['kind']}: {exc.message}")

    assert {doc["kind"] for _, doc in documents} >= {"Deployment", "CronJob", "ConfigMap", "Secret"}
    assert failures == []


def test_kustomization_ties_the_manifests_and_leaves_the_placeholder_secret_out() -> None:
    """Every listed resource exists; every manifest but the example Secret is listed; the image
    override names the image the containers use."""
    kust = kustomization()
    manifests = {p.name for p in KUBERNETES.glob("*.yaml")} - {"kustomization.yaml"}
    images = {
        c["image"].split(":")[0] for kind in ("Deployment", "CronJob") for c in [relayd_container(kind)]
    }

    assert kust["kind"] == "Kustomization"
    assert set(kust["resources"]) == manifests - {"secret.example.yaml"}
    assert {image["name"] for image in kust["images"]} == images


@pytest.mark.parametrize("kind", ["Deployment", "CronJob"])
def test_relayd_pods_run_locked_down(kind: str) -> None:
    """Non-root UID 10001, read-only root, no privilege escalation, no capabilities, RuntimeDefault
    seccomp, no service-account token, resources set."""
    pod = pod_spec(kind)
    container = relayd_container(kind)
    security = container["securityContext"]

    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == RELAYD_UID
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    assert security["runAsNonRoot"] is True
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert set(container["resources"]) == {"requests", "limits"}
    assert container["resources"]["limits"]["memory"]


def test_the_sidecar_is_probed_and_scraped_on_its_metrics_port() -> None:
    """Start-up and liveness on /healthz, Prometheus annotations, all on port 9464."""
    deployment = resource("Deployment")
    container = relayd_container("Deployment")
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    env = {e["name"]: e.get("value") for e in container.get("env", [])}

    assert container["args"] == ["sweep"]
    for probe in ("startupProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["path"] == "/healthz"
        assert ports[container[probe]["httpGet"]["port"]] == METRICS_PORT
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == str(METRICS_PORT)
    assert annotations["prometheus.io/path"] == "/metrics"
    assert env["RELAYD_METRICS_ADDR"] == f"0.0.0.0:{METRICS_PORT}"
    assert len(deployment["spec"]["template"]["spec"]["containers"]) == 2
    # The kubelet must wait longer than relayd's own shutdown grace before it SIGKILLs.
    grace = float(resource("ConfigMap")["data"]["RELAYD_SHUTDOWN_GRACE"])
    assert deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > grace


def test_the_sidecar_never_gates_the_engine_pods_readiness() -> None:
    """A pod is ready only when every container is: a readinessProbe on relayd would take the
    engine out of its Service whenever a sink or Redis is down. So the sidecar has none, and the
    sink's health is alerted on instead (failing attempts, and passes that stop finishing)."""
    container = relayd_container("Deployment")
    alerts = {
        rule["alert"]: rule["expr"]
        for group in yaml.safe_load(PROMETHEUS_RULES.read_text())["groups"]
        for rule in group["rules"]
    }

    assert "readinessProbe" not in container
    assert "relayd_delivery_attempts_total" in alerts["RelaydSinkFailing"]
    assert "relayd_last_sweep_timestamp_seconds" in alerts["RelaydSweepStalled"]


def test_the_cronjob_runs_one_bounded_pass_never_two_at_once() -> None:
    cronjob = resource("CronJob")

    assert relayd_container("CronJob")["args"] == ["sweep", "--once"]
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"
    assert pod_spec("CronJob")["restartPolicy"] == "Never"


@pytest.mark.parametrize("kind", ["Deployment", "CronJob"])
def test_credential_files_point_into_secret_volumes_with_the_example_keys(kind: str) -> None:
    """Every RELAYD_*_FILE path is a key of a Secret mounted read-only, as secret.example.yaml
    shows it; no credential is passed as a plain env value."""
    config = resource("ConfigMap")["data"]
    container = relayd_container(kind)
    volumes = {v["name"]: v for v in pod_spec(kind)["volumes"]}
    secrets = {
        doc["metadata"]["name"]: doc for name, doc in kubernetes_documents() if doc["kind"] == "Secret"
    }
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    file_options = {k: v for k, v in config.items() if k.endswith("_FILE")}
    envs_from = [e["configMapRef"]["name"] for e in container["envFrom"]]

    assert envs_from == [resource("ConfigMap")["metadata"]["name"]]
    assert set(file_options) == {
        "RELAYD_REDIS_USERNAME_FILE",
        "RELAYD_REDIS_PASSWORD_FILE",
        "RELAYD_REDIS_CA_FILE",
        "RELAYD_WEBHOOK_SECRET_FILE",
    }
    for option, path in file_options.items():
        directory, key = path.rsplit("/", 1)
        mount = mounts[directory]
        secret_name = volumes[mount["name"]]["secret"]["secretName"]
        assert mount["readOnly"] is True, option
        assert key in secrets[secret_name]["stringData"], option
    assert not any(re.search(r"PASSWORD|SECRET|TOKEN", e["name"]) and "value" in e for e in container["env"])
    # TLS to Redis: credentials never cross the network in plaintext (README.md#security).
    assert config["RELAYD_REDIS_URL"].startswith("rediss://")


def test_example_secrets_hold_only_marked_placeholders() -> None:
    values = [
        value
        for name, doc in kubernetes_documents()
        if doc["kind"] == "Secret"
        for value in doc["stringData"].values()
    ]

    assert values
    assert all("PLACEHOLDER" in value for value in values)


def test_every_relayd_env_var_in_the_manifests_and_compose_is_a_real_option() -> None:
    """A renamed or misspelt option in deploy/ fails here rather than silently in a cluster."""
    used = set(resource("ConfigMap")["data"])
    for kind in ("Deployment", "CronJob"):
        used |= {e["name"] for e in relayd_container(kind).get("env", [])}
    used |= set(compose()["services"]["relayd"]["environment"])
    real = relayd_env_vars()

    unknown = sorted(name for name in used if name.startswith("RELAYD_") and name not in real)

    assert unknown == []


# --- Compose ------------------------------------------------------------------------------------


def compose() -> dict[str, Any]:
    return dict(yaml.safe_load(COMPOSE.read_text()))


def test_compose_runs_redis_an_engine_relayd_and_prometheus() -> None:
    services = compose()["services"]

    assert set(services) == {"redis", "engine", "relayd", "prometheus"}
    for name in ("engine", "relayd"):
        assert services[name]["depends_on"]["redis"]["condition"] == "service_healthy"
        assert services[name]["build"]["context"] == "../.."
        assert (
            COMPOSE_DIR / services[name]["build"]["context"] / services[name]["build"]["dockerfile"]
        ).is_file()
    assert services["redis"]["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]


def test_compose_engine_and_relayd_share_one_redis_and_prefix() -> None:
    services = compose()["services"]
    engine, relayd = services["engine"]["environment"], services["relayd"]["environment"]

    assert engine["WORKLOAD_REDIS_URL"] == relayd["RELAYD_REDIS_URL"] == "redis://redis:6379/0"
    assert engine["WORKLOAD_PREFIX"] == relayd["RELAYD_PREFIX"]
    # "redis" is not loopback: plaintext must be opted into, and no credentials ride on it.
    assert relayd["RELAYD_ALLOW_PLAINTEXT"] == "true"
    assert not any(k.endswith(("PASSWORD_FILE", "USERNAME_FILE")) for k in relayd)
    assert services["relayd"]["command"] == ["sweep"]


def test_compose_engine_runs_the_workload_script_it_mounts() -> None:
    engine = compose()["services"]["engine"]
    mounts = dict(volume.split(":", 1) for volume in engine["volumes"])
    host_path = next(host for host, target in mounts.items() if target.startswith(engine["entrypoint"][1]))

    assert engine["entrypoint"][0] == "python"
    assert (COMPOSE_DIR / host_path).resolve() == COMPOSE_DIR / "workload.py"


def test_compose_prometheus_scrapes_relayd_where_it_listens_and_loads_the_rules() -> None:
    """relayd's metrics address, its published port, Prometheus' target and rule file line up."""
    services = compose()["services"]
    relayd = services["relayd"]
    host, port = relayd["environment"]["RELAYD_METRICS_ADDR"].rsplit(":", 1)
    published = [p.split(":") for p in relayd["ports"]]
    prometheus_config = yaml.safe_load((COMPOSE_DIR / "prometheus.yml").read_text())
    targets = [
        t for job in prometheus_config["scrape_configs"] for s in job["static_configs"] for t in s["targets"]
    ]
    mounts = dict(v.rsplit(":", 1)[0].split(":", 1) for v in services["prometheus"]["volumes"])
    (rule_file,) = prometheus_config["rule_files"]
    rule_dir, rule_name = rule_file.rsplit("/", 1)
    host_rule_dir = next(h for h, target in mounts.items() if target == rule_dir)

    assert host == "0.0.0.0"
    assert published == [["127.0.0.1", port, port]]
    assert targets == [f"relayd:{port}"]
    assert prometheus_config["scrape_configs"][0]["job_name"] == "relayd"
    assert mounts["./prometheus.yml"] == "/etc/prometheus/prometheus.yml"
    assert (COMPOSE_DIR / host_rule_dir / rule_name).resolve() == PROMETHEUS_RULES


def test_compose_prometheus_config_passes_promtool(tmp_path: Path) -> None:
    """promtool accepts prometheus.yml (its rule path rewritten to the file on this disk)."""
    promtool = require_binaries("promtool")["promtool"]  # Debian package 'prometheus'
    config = yaml.safe_load((COMPOSE_DIR / "prometheus.yml").read_text())
    config["rule_files"] = [str(PROMETHEUS_RULES)]
    local = tmp_path / "prometheus.yml"
    local.write_text(yaml.safe_dump(config))

    result = subprocess.run(
        [promtool, "check", "config", str(local)], capture_output=True, text=True, check=False
    )

    assert result.returncode == 0, result.stdout + result.stderr
