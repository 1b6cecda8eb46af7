"""The Helm chart in deploy/helm/relayd, rendered and linted with the Helm SDK (``helm-python-sdk``).

Every rendered object of every topology passes ``kubernetes-validate``; the values schema turns
bad values away with Helm's own error; the sidecar (through a throw-away engine chart that
includes the named templates) and the CronJob match the kustomize manifests of deploy/kubernetes
where they overlap; the PrometheusRule carries deploy/prometheus/relayd-rules.yml unchanged and
passes promtool; and the standalone Deployment's container, command and environment taken from
the render, runs as a process against a real redis-server and relays a seeded backlog. No
Kubernetes API server is involved.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python as helm
import httpx
import kubernetes_validate
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from support.binaries import require_binaries
from support.cli_help import relayd_env_vars
from support.ports import free_port
from support.processes import end_process
from support.redis_server import start_redis_server
from support.seeding import Entries
from support.waiting import wait_until

from relayd.config.prefixes import expand_prefixes

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "relayd"
KUBERNETES = ROOT / "deploy" / "kubernetes"
PROMETHEUS_RULES = ROOT / "deploy" / "prometheus" / "relayd-rules.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "relayd-dashboard.json"
DOCKERFILE = ROOT / "Dockerfile"

TOPOLOGIES = ("standalone", "cronjob", "sidecar")
KUBERNETES_VERSIONS = ("1.29.0", kubernetes_validate.latest_version())
#: Custom resources: kubernetes-validate ships only the built-in kinds' schemas.
CUSTOM_KINDS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
    ("keda.sh/v1alpha1", "ScaledObject"),
}
#: Every optional object on (KEDA; the HPA is the alternative, rendered separately).
EVERYTHING_ON: dict[str, Any] = {
    "secrets": {
        "redis": {"existingSecret": "relayd-redis", "files": {"RELAYD_REDIS_PASSWORD_FILE": "password"}},
        "webhook": {"data": {"secret": "PLACEHOLDER"}, "files": {"RELAYD_WEBHOOK_SECRET_FILE": "secret"}},
    },
    "serviceAccount": {"create": True},
    "probes": {"readiness": {"enabled": True}},
    "metrics": {
        "serviceMonitor": {"enabled": True},
        "prometheusRule": {"enabled": True},
        "grafanaDashboard": {"enabled": True},
    },
    "networkPolicy": {
        "enabled": True,
        "egress": [{"to": [{"namespaceSelector": {"matchLabels": {"name": "redis"}}}]}],
    },
    "autoscaling": {"keda": {"enabled": True}},
}


# --- rendering ----------------------------------------------------------------------------------


def merged(*layers: dict[str, Any]) -> dict[str, Any]:
    """Values layered the way repeated ``-f`` files are: maps merge, anything else is replaced."""
    out: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            if isinstance(value, dict) and isinstance(out.get(key), dict):
                out[key] = merged(out[key], value)
            else:
                out[key] = copy.deepcopy(value)
    return out


def render_chart(path: Path, values: dict[str, Any], name: str = "rel") -> list[dict[str, Any]]:
    """Every object a chart renders (``helm template``), parsed."""
    with helm.Chart.load(path) as chart:
        manifests = chart.render(values, name=name, namespace="relayd")
    return [
        doc
        for template, text in sorted(manifests.items())
        if template.endswith((".yaml", ".yml"))
        for doc in yaml.safe_load_all(text)
        if doc
    ]


def render(values: dict[str, Any]) -> list[dict[str, Any]]:
    return render_chart(CHART, values)


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [doc for doc in docs if doc["kind"] == kind]
    return found


def container(pod: dict[str, Any], name: str = "relayd") -> dict[str, Any]:
    (found,) = [c for c in pod["containers"] if c["name"] == name]
    return found


def environment(container: dict[str, Any], docs: list[dict[str, Any]]) -> dict[str, str]:
    """The container's environment as the kubelet builds it: envFrom ConfigMaps, then env."""
    config_maps = {doc["metadata"]["name"]: doc["data"] for doc in docs if doc["kind"] == "ConfigMap"}
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        env |= config_maps[source["configMapRef"]["name"]]
    for entry in container.get("env", []):
        env[entry["name"]] = entry["value"]
    return env


def mounts(pod: dict[str, Any], container: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    """mountPath -> (readOnly, the volume's source as the pod spec gives it, volume name aside)."""
    volumes = {v["name"]: {k: val for k, val in v.items() if k != "name"} for v in pod["volumes"]}
    return {
        m["mountPath"]: (m.get("readOnly", False), json.dumps(volumes[m["name"]], sort_keys=True))
        for m in container["volumeMounts"]
    }


# --- the kustomize manifests as values ----------------------------------------------------------


def kustomize(kind: str) -> dict[str, Any]:
    for path in KUBERNETES.glob("*.yaml"):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == kind:
                return dict(doc)
    raise AssertionError(f"no {kind} in {KUBERNETES}")


def kustomize_docs() -> list[dict[str, Any]]:
    return [kustomize("ConfigMap")]


def kustomize_values() -> dict[str, Any]:
    """The chart values that say what deploy/kubernetes/configmap.yaml and the Secrets say."""
    data = dict(kustomize("ConfigMap")["data"])
    secrets: dict[str, Any] = {}
    for name, secret_name in (("redis", "relayd-redis"), ("webhook", "relayd-webhook")):
        files = {k: v for k, v in data.items() if k.endswith("_FILE") and f"/relayd/{name}/" in v}
        (directory,) = {path.rsplit("/", 1)[0] for path in files.values()}
        secrets[name] = {
            "existingSecret": secret_name,
            "mountPath": directory,
            "files": {option: path.rsplit("/", 1)[1] for option, path in files.items()},
        }
        for option in files:
            del data[option]
    return {
        "redisUrl": data.pop("RELAYD_REDIS_URL"),
        "prefixes": data.pop("RELAYD_PREFIX").split(","),
        "sink": data.pop("RELAYD_SINK"),
        "options": data,
        "secrets": secrets,
    }


# --- lint and validation ------------------------------------------------------------------------


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_the_chart_lints_without_a_warning(topology: str) -> None:
    """``helm lint --strict`` with everything switched on: no warning, no error (info only)."""
    report = helm.lint(CHART, merged(EVERYTHING_ON, {"topology": topology}), strict=True)

    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.parametrize(
    ("topology", "autoscaler"),
    [("standalone", "keda"), ("standalone", "hpa"), ("cronjob", "keda"), ("sidecar", "keda")],
)
def test_every_rendered_object_passes_the_kubernetes_schemas(topology: str, autoscaler: str) -> None:
    """Built-in kinds validate strictly (no unknown field) against two Kubernetes releases."""
    values = merged(EVERYTHING_ON, {"topology": topology})
    if autoscaler == "hpa":
        values["autoscaling"] = {"hpa": {"enabled": True}}
    docs = render(values)
    failures = []
    for doc in docs:
        if (doc["apiVersion"], doc["kind"]) in CUSTOM_KINDS:
            continue
        for version in KUBERNETES_VERSIONS:
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                failures.append(f"{doc['kind']} {doc['metadata']['name']} ({version}): {exc.message}")

    assert failures == []
    assert all(doc["metadata"]["labels"]["app.kubernetes.io/part-of"] == "relayd" for doc in docs)


def test_each_topology_renders_its_own_objects() -> None:
    kinds = {
        t: sorted(doc["kind"] for doc in render(merged(EVERYTHING_ON, {"topology": t}))) for t in TOPOLOGIES
    }
    hpa = sorted(
        doc["kind"]
        for doc in render(
            merged(EVERYTHING_ON, {"autoscaling": {"keda": {"enabled": False}, "hpa": {"enabled": True}}})
        )
    )
    shared = ["ConfigMap", "ConfigMap", "PrometheusRule", "Secret"]  # options, dashboard; webhook Secret

    assert kinds["standalone"] == sorted(
        [
            *shared,
            *("Deployment", "Service", "PodDisruptionBudget", "ServiceMonitor", "ScaledObject"),
            *("NetworkPolicy", "ServiceAccount"),
        ]
    )
    assert kinds["cronjob"] == sorted([*shared, "CronJob", "NetworkPolicy", "ServiceAccount"])
    assert kinds["sidecar"] == sorted(shared)
    assert "HorizontalPodAutoscaler" in hpa
    assert "ScaledObject" not in hpa


def test_the_standalone_objects_point_at_each_other() -> None:
    """What a cluster would wire by labels and names: the Service, PodDisruptionBudget, NetworkPolicy
    and ServiceMonitor select the Deployment's pods (or its Service); the autoscalers target it."""
    docs = render(EVERYTHING_ON)
    hpa_docs = render(
        merged(EVERYTHING_ON, {"autoscaling": {"keda": {"enabled": False}, "hpa": {"enabled": True}}})
    )
    deployment = one(docs, "Deployment")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    service = one(docs, "Service")
    container_ports = {p["name"] for p in container(deployment["spec"]["template"]["spec"])["ports"]}

    def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
        return bool(selector) and selector.items() <= labels.items()

    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert selects(service["spec"]["selector"], pod_labels)
    assert selects(one(docs, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"], pod_labels)
    assert selects(one(docs, "NetworkPolicy")["spec"]["podSelector"]["matchLabels"], pod_labels)
    assert selects(
        one(docs, "ServiceMonitor")["spec"]["selector"]["matchLabels"], service["metadata"]["labels"]
    )
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= container_ports
    assert [e["port"] for e in one(docs, "ServiceMonitor")["spec"]["endpoints"]] == [
        p["name"] for p in service["spec"]["ports"]
    ]
    assert one(docs, "ScaledObject")["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    assert one(hpa_docs, "HorizontalPodAutoscaler")["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": deployment["metadata"]["name"],
    }


def test_the_network_policy_admits_only_scrapes_and_lets_out_dns_and_the_given_rules() -> None:
    standalone = one(render(EVERYTHING_ON), "NetworkPolicy")["spec"]
    cronjob = one(render(merged(EVERYTHING_ON, {"topology": "cronjob"})), "NetworkPolicy")["spec"]
    dns = {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]}

    assert standalone["ingress"] == [
        {"ports": [{"port": "metrics", "protocol": "TCP"}], "from": [{"podSelector": {}}]}
    ]
    assert cronjob["ingress"] == []  # its metrics endpoint is on loopback
    assert standalone["policyTypes"] == cronjob["policyTypes"] == ["Ingress", "Egress"]
    assert standalone["egress"] == [dns, *EVERYTHING_ON["networkPolicy"]["egress"]]
    assert (
        "Egress"
        not in one(render({"networkPolicy": {"enabled": True}}), "NetworkPolicy")["spec"]["policyTypes"]
    )


@pytest.mark.parametrize(
    ("values", "error"),
    [
        ({"replicaCount": -1}, r"at '/replicaCount': minimum: got -1, want 0"),
        ({"topology": "daemonset"}, r"at '/topology': value must be one of"),
        ({"options": {"BATCH": "500"}}, r"'BATCH' does not match pattern"),
        ({"autoscaling": {"keda": {"minReplicas": 0}}}, r"at '/autoscaling/keda/minReplicas'"),
        ({"prefixes": []}, r"at '/prefixes'"),
    ],
)
def test_the_values_schema_refuses_bad_values_with_helms_error(values: dict[str, Any], error: str) -> None:
    """Rendering stops with Helm's schema error naming the value; lint reports it as an error."""
    with helm.Chart.load(CHART) as chart, pytest.raises(helm.HelmValuesError) as caught:
        chart.render(values, name="rel")
    report = helm.lint(CHART, values)

    assert "values don't meet the specifications of the schema" in str(caught.value)
    assert re.search(error, str(caught.value)), str(caught.value)
    assert any(re.search(error, e) for e in report["errors"]), report


def test_keda_and_hpa_together_are_refused() -> None:
    with (
        helm.Chart.load(CHART) as chart,
        pytest.raises(helm.HelmRenderError, match="enable keda or hpa, not both"),
    ):
        chart.render({"autoscaling": {"keda": {"enabled": True}, "hpa": {"enabled": True}}}, name="rel")


# --- options and secrets ------------------------------------------------------------------------


def test_every_relayd_variable_the_chart_sets_is_a_real_option() -> None:
    used: set[str] = set()
    for topology in ("standalone", "cronjob"):
        docs = render(merged(EVERYTHING_ON, kustomize_values(), {"topology": topology}))
        pod = next(d for d in docs if d["kind"] in ("Deployment", "CronJob"))["spec"]
        pod = pod["template"]["spec"] if "template" in pod else pod["jobTemplate"]["spec"]["template"]["spec"]
        used |= set(environment(container(pod), docs))

    assert {"RELAYD_REDIS_URL", "RELAYD_PREFIX", "RELAYD_SINK", "RELAYD_METRICS_ADDR"} <= used
    assert sorted(used - relayd_env_vars()) == []


def test_secrets_are_files_in_read_only_mounts_never_env_values() -> None:
    """A created Secret holds the given data; an existing one is only referenced; each *_FILE
    option names mountPath/key of a mounted Secret; no secret value is in the env or ConfigMap."""
    docs = render(EVERYTHING_ON)
    deployment = one(docs, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    relayd = container(pod)
    env = environment(relayd, docs)
    volumes = {v["name"]: v for v in pod["volumes"]}
    by_path = {m["mountPath"]: volumes[m["name"]] for m in relayd["volumeMounts"] if m.get("readOnly")}
    (created,) = [d for d in docs if d["kind"] == "Secret"]

    assert created["metadata"]["name"] == "rel-relayd-webhook"
    assert created["stringData"] == {"secret": "PLACEHOLDER"}
    assert env["RELAYD_REDIS_PASSWORD_FILE"] == "/var/run/secrets/relayd/redis/password"
    assert env["RELAYD_WEBHOOK_SECRET_FILE"] == "/var/run/secrets/relayd/webhook/secret"
    assert by_path["/var/run/secrets/relayd/redis"]["secret"]["secretName"] == "relayd-redis"
    assert by_path["/var/run/secrets/relayd/webhook"]["secret"]["secretName"] == "rel-relayd-webhook"
    assert "PLACEHOLDER" not in json.dumps([d for d in docs if d["kind"] != "Secret"])


def test_the_pods_run_locked_down() -> None:
    """Non-root 10001, read-only root, no capabilities, no privilege escalation, no token."""
    for topology in ("standalone", "cronjob"):
        docs = render({"topology": topology})
        workload = next(d for d in docs if d["kind"] in ("Deployment", "CronJob"))["spec"]
        pod = workload.get("template", workload.get("jobTemplate", {}).get("spec", {}).get("template"))[
            "spec"
        ]
        security = container(pod)["securityContext"]

        assert pod["automountServiceAccountToken"] is False
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] == 10001
        assert security["readOnlyRootFilesystem"] is True
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"] == {"drop": ["ALL"]}


# --- equal to the kustomize manifests where they overlap ----------------------------------------


ENGINE_DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: engine
spec:
  selector:
    matchLabels: {app: engine}
  template:
    {{- $relayd := dict "Values" .Values.relayd "Release" .Release }}
    metadata:
      labels: {app: engine}
      annotations:
        checksum/relayd-config: {{ include "relayd.configData" $relayd | sha256sum }}
    spec:
      containers:
        - name: engine
          image: registry.example.com/your-engine:1.0.0
        {{- include "relayd.sidecar.container" $relayd | nindent 8 }}
      volumes:
        {{- include "relayd.sidecar.volumes" $relayd | nindent 8 }}
"""


@pytest.fixture
def engine_chart(tmp_path: Path) -> Path:
    """An engine's chart that depends on relayd (charts/relayd) and includes the sidecar."""
    engine = tmp_path / "engine"
    (engine / "templates").mkdir(parents=True)
    shutil.copytree(CHART, engine / "charts" / "relayd")
    (engine / "Chart.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v2",
                "name": "engine",
                "version": "1.0.0",
                "dependencies": [
                    {"name": "relayd", "version": "0.1.0", "repository": "file://charts/relayd"}
                ],
            }
        )
    )
    (engine / "values.yaml").write_text(yaml.safe_dump({"relayd": {"topology": "sidecar"}}))
    (engine / "templates" / "deployment.yaml").write_text(ENGINE_DEPLOYMENT)
    return engine


OVERLAP = ("args", "startupProbe", "livenessProbe", "readinessProbe", "securityContext", "resources")


def test_the_sidecar_an_engine_chart_includes_is_the_kustomize_sidecar(engine_chart: Path) -> None:
    """Probes (liveness on /healthz, no readiness gate), security context, resources, ports,
    mounts and the environment relayd sees equal deploy/kubernetes/deployment.yaml's sidecar."""
    values = {"relayd": merged(kustomize_values(), {"image": {"tag": "0.1.0"}})}
    docs = render_chart(engine_chart, values)
    engine = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "engine")
    pod = engine["spec"]["template"]["spec"]
    rendered = container(pod)
    expected_pod = kustomize("Deployment")["spec"]["template"]["spec"]
    expected = container(expected_pod)

    assert {k: rendered.get(k) for k in OVERLAP} == {k: expected.get(k) for k in OVERLAP}
    assert rendered["ports"] == expected["ports"]
    assert "readinessProbe" not in rendered
    assert mounts(pod, rendered) == mounts(expected_pod, expected)
    assert environment(rendered, docs) == environment(expected, kustomize_docs())
    assert not [d for d in docs if d["kind"] in ("Deployment", "CronJob") and d is not engine]
    kubernetes_validate.validate(engine, kubernetes_validate.latest_version(), strict=True)
    # A change of relayd's options changes the engine pods' checksum, so they roll.
    changed = render_chart(engine_chart, merged(values, {"relayd": {"options": {"RELAYD_BATCH": "500"}}}))
    annotations = [
        d["spec"]["template"]["metadata"]["annotations"] for d in (engine, one(changed, "Deployment"))
    ]
    assert annotations[0]["checksum/relayd-config"] != annotations[1]["checksum/relayd-config"]
    # The engine's chart is not relayd's: its appVersion is no relayd version to default to.
    with helm.Chart.load(engine_chart) as chart, pytest.raises(helm.HelmRenderError, match=r"image\.tag"):
        chart.render({"relayd": kustomize_values()}, name="rel")


def test_the_cronjob_is_the_kustomize_cronjob() -> None:
    """Schedule and job bounds, pod and container security, resources, mounts, environment."""
    docs = render(merged(kustomize_values(), {"topology": "cronjob"}))
    rendered = one(docs, "CronJob")
    expected = kustomize("CronJob")
    spec_keys = ("schedule", "concurrencyPolicy", "startingDeadlineSeconds", "successfulJobsHistoryLimit")
    job_keys = ("backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished")
    pod_keys = ("restartPolicy", "automountServiceAccountToken", "securityContext")
    pod, expected_pod = (c["spec"]["jobTemplate"]["spec"]["template"]["spec"] for c in (rendered, expected))
    relayd, expected_relayd = container(pod), container(expected_pod)

    for keys, path in ((spec_keys, ()), (job_keys, ("jobTemplate", "spec"))):
        got, want = rendered["spec"], expected["spec"]
        for step in path:
            got, want = got[step], want[step]
        assert {k: got[k] for k in keys} == {k: want[k] for k in keys}
    assert {k: pod[k] for k in pod_keys} == {k: expected_pod[k] for k in pod_keys}
    assert {k: relayd.get(k) for k in OVERLAP} == {k: expected_relayd.get(k) for k in OVERLAP}
    assert mounts(pod, relayd) == mounts(expected_pod, expected_relayd)
    assert environment(relayd, docs) == environment(expected_relayd, kustomize_docs())


def test_the_standalone_pod_is_secured_and_probed_like_the_sidecar() -> None:
    docs = render(kustomize_values())
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    expected_pod = kustomize("Deployment")["spec"]["template"]["spec"]
    keys = ("args", "startupProbe", "livenessProbe", "securityContext", "resources", "ports")

    assert pod["securityContext"] == expected_pod["securityContext"]
    assert {k: container(pod)[k] for k in keys} == {k: container(expected_pod)[k] for k in keys}
    assert mounts(pod, container(pod)) == mounts(expected_pod, container(expected_pod))


# --- monitoring ---------------------------------------------------------------------------------


def test_the_chart_files_are_the_rules_and_dashboard() -> None:
    """Helm reads only files inside the chart: files/ links to deploy/'s originals, and a copy put
    there instead must not drift from them."""
    assert (CHART / "files" / "relayd-rules.yml").read_bytes() == PROMETHEUS_RULES.read_bytes()
    assert (CHART / "files" / "relayd-dashboard.json").read_bytes() == DASHBOARD.read_bytes()


def test_the_prometheus_rule_is_the_rules_file_and_passes_promtool(tmp_path: Path) -> None:
    promtool = require_binaries("promtool")["promtool"]  # Debian package 'prometheus'
    docs = render(EVERYTHING_ON)
    rule = one(docs, "PrometheusRule")
    rules_file = tmp_path / "rules.yml"
    rules_file.write_text(yaml.safe_dump(rule["spec"]))
    dashboards = [
        d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-dashboard")
    ]

    result = subprocess.run(
        [promtool, "check", "rules", str(rules_file)], capture_output=True, text=True, check=False, timeout=60
    )

    assert rule["spec"] == yaml.safe_load(PROMETHEUS_RULES.read_text())
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(dashboards[0]["data"]["relayd-dashboard.json"]) == json.loads(DASHBOARD.read_text())
    assert dashboards[0]["metadata"]["labels"]["grafana_dashboard"] == "1"


# --- autoscaling --------------------------------------------------------------------------------


@pytest.mark.parametrize("prefixes", [["stm"], ["a", "{shard-0..31}", "b,c"], ["{t-3..5}x"]])
def test_the_replica_cap_defaults_to_the_number_of_prefixes(prefixes: list[str]) -> None:
    """KEDA's and the HPA's caps count prefixes as relayd expands them; maxReplicas overrides."""
    count = len(expand_prefixes(prefixes))
    keda = one(render({"prefixes": prefixes, "autoscaling": {"keda": {"enabled": True}}}), "ScaledObject")
    hpa = one(
        render({"prefixes": prefixes, "autoscaling": {"hpa": {"enabled": True}}}), "HorizontalPodAutoscaler"
    )
    capped = one(
        render({"prefixes": prefixes, "autoscaling": {"keda": {"enabled": True, "maxReplicas": 7}}}),
        "ScaledObject",
    )
    deployment = one(render({"prefixes": prefixes, "autoscaling": {"hpa": {"enabled": True}}}), "Deployment")

    assert keda["spec"]["maxReplicaCount"] == count
    assert hpa["spec"]["maxReplicas"] == count
    assert capped["spec"]["maxReplicaCount"] == 7
    assert "replicas" not in deployment["spec"]  # the autoscaler owns it


def test_keda_scales_on_the_backlog_metric_of_this_release() -> None:
    (trigger,) = one(render({"autoscaling": {"keda": {"enabled": True}}}), "ScaledObject")["spec"]["triggers"]

    assert trigger["type"] == "prometheus"
    assert trigger["metadata"]["query"] == (
        'sum(max by (prefix, kind) (relayd_backlog_entries{namespace="relayd", service="rel-relayd"}))'
    )


# --- the rendered Deployment, run ---------------------------------------------------------------


def entrypoint() -> list[str]:
    """The image's ENTRYPOINT (the container sets only args, as in the kustomize manifests)."""
    (line,) = [ln for ln in DOCKERFILE.read_text().splitlines() if ln.startswith("ENTRYPOINT")]
    return list(json.loads(line.removeprefix("ENTRYPOINT")))


def deployment_process(docs: list[dict[str, Any]]) -> tuple[list[str], dict[str, str], int]:
    """The rendered Deployment's relayd container as a local process: argv, env, metrics port.

    A process shares the host's network, so the metrics address the pod would own (0.0.0.0 and
    the container port, checked here) becomes a free loopback port; nothing else is changed.
    """
    relayd = container(one(docs, "Deployment")["spec"]["template"]["spec"])
    env = environment(relayd, docs)
    host, port = env["RELAYD_METRICS_ADDR"].rsplit(":", 1)
    assert (host, int(port)) == ("0.0.0.0", relayd["ports"][0]["containerPort"])
    assert entrypoint() == ["relayd"]
    metrics_port = free_port()
    env["RELAYD_METRICS_ADDR"] = f"127.0.0.1:{metrics_port}"
    base = {k: v for k, v in os.environ.items() if not k.startswith("RELAYD_")}
    return [sys.executable, "-m", "relayd", *relayd["args"]], base | env, metrics_port


def active_prefixes(port: int) -> set[str] | None:
    """The prefixes whose lease the relayd on ``port`` holds (relayd_active 1); None if it is down."""
    try:
        response = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2.0)
    except httpx.TransportError:
        return None
    return {
        sample.labels["prefix"]
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
        if sample.name == "relayd_active" and sample.value == 1
    }


@pytest.fixture
def password_redis() -> Iterator[Any]:
    server = start_redis_server("--requirepass", "helm-" + uuid.uuid4().hex)
    yield server
    server.cleanup()


def test_the_rendered_standalone_deployment_relays_a_backlog(password_redis: Any, tmp_path: Path) -> None:
    """The container's command and environment from the render start relayd against Redis; the
    Redis password comes from the chart-created Secret, written where the pod would mount it; the
    seeded outbox, spawns and due timers reach the sink and leave Redis; /healthz answers on the
    probed port; SIGTERM ends it cleanly within the pod's grace period."""
    password = password_redis.args[1]
    prefix = "helm" + uuid.uuid4().hex[:8]
    sink = tmp_path / "delivered.jsonl"
    secret_dir = tmp_path / "secrets" / "redis"
    values = {
        "redisUrl": password_redis.url,
        "prefixes": [prefix],
        "sink": f"jsonl:{sink}",
        "options": {"RELAYD_POLL_INTERVAL": "0.2"},
        "secrets": {
            "redis": {
                "data": {"password": password},
                "mountPath": str(secret_dir),
                "files": {"RELAYD_REDIS_PASSWORD_FILE": "password"},
            }
        },
    }
    docs = render(values)
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    relayd = container(pod)
    argv, env, metrics_port = deployment_process(docs)
    # What the kubelet does with the Secret volume: one file per key under the mount path.
    secret_dir.mkdir(parents=True)
    for key, value in one(docs, "Secret")["stringData"].items():
        (secret_dir / key).write_text(value)

    client = password_redis.client(password=password)
    entries = Entries(client.pipeline(transaction=False), prefix)
    for seq in range(1, 51):
        entries.outbox(seq, f"exe-{seq % 3}", f"ev-{seq}")
    entries.counters(outbox=50)
    entries.spawn(1, "exe-1", "exe-1.child", "root").counters(spawns=1)
    entries.timer("exe-2", "root.waiting", time.time() - 1.0)
    entries.pipe.execute()

    log_path = tmp_path / "relayd.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:

        def drained() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"relayd exited {proc.returncode}:\n{log_path.read_text()[-3000:]}")
            keys = (f"{prefix}:outbox", f"{prefix}:spawns", f"{prefix}:timers")
            delivered = len(sink.read_text().splitlines()) if sink.exists() else 0
            return sum(client.exists(k) for k in keys) == 0 and delivered == 52

        wait_until(drained, 60.0, "relayd to deliver the seeded backlog")
        health = httpx.get(f"http://127.0.0.1:{metrics_port}/healthz", timeout=5.0)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(pod["terminationGracePeriodSeconds"])
    finally:
        end_process(proc)
        client.close()

    assert relayd["args"] == ["sweep"]
    assert relayd["startupProbe"]["httpGet"]["path"] == "/healthz"
    assert health.status_code == 200
    assert code == 0, log_path.read_text()[-3000:]
    assert password not in log_path.read_text()


def test_the_rendered_replicas_share_the_prefixes(redis_server: Any, tmp_path: Path) -> None:
    """replicaCount processes of the rendered container over as many prefixes: each ends up
    relaying exactly one (fair shares), never both the same one."""
    prefixes = ["helm" + uuid.uuid4().hex[:8] + f"-{n}" for n in range(2)]
    values = {
        "redisUrl": redis_server.url,
        "prefixes": prefixes,
        "replicaCount": 2,
        "options": {"RELAYD_LEASE_TTL": "2", "RELAYD_POLL_INTERVAL": "0.2"},
    }
    docs = render(values)
    replicas = one(docs, "Deployment")["spec"]["replicas"]
    procs: list[tuple[subprocess.Popen[bytes], int]] = []
    try:
        for n in range(replicas):
            argv, env, port = deployment_process(docs)
            with (tmp_path / f"relayd-{n}.log").open("wb") as log:
                procs.append((subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT), port))

        def shared() -> list[set[str] | None] | None:
            held = [active_prefixes(port) for _, port in procs]
            return held if all(h is not None and len(h) == 1 for h in held) else None

        held = wait_until(shared, 60.0, "each replica to hold one prefix")
    finally:
        for proc, _ in procs:
            end_process(proc, wait_s=15)

    assert replicas == 2
    assert sorted(p for h in held for p in h or ()) == sorted(prefixes)
