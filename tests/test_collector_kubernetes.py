"""The Kubernetes manifests in ``collector/kubernetes/``, as kustomize renders them.

No cluster is available here, so the API server's admission is out of reach; ``kubectl kustomize`` (offline)
renders the kustomization exactly as ``kubectl apply -k`` would send it, and these tests check the rendered
objects: each is valid against the Kubernetes API's own OpenAPI schema (strictly: no unknown field), selectors
match pod labels, Service ports reach declared container ports, probes hit the health endpoints, the HPAs scale
the Deployments, PodDisruptionBudgets cover them, and every pod is locked down.
"""

from __future__ import annotations

import copy
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
KUBE = ROOT / "collector" / "kubernetes"


def render() -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: cannot render the kustomization")
    out = subprocess.run(
        [kubectl, "kustomize", str(KUBE)], check=True, capture_output=True, text=True, timeout=120
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return render()


def of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def by_name(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in of_kind(objects, kind)}


def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def containers(deployment: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield from deployment["spec"]["template"]["spec"]["containers"]


def test_renders_the_expected_objects(objects: list[dict[str, Any]]) -> None:
    kinds = sorted({o["kind"] for o in objects})
    assert kinds == [
        "ConfigMap",
        "Deployment",
        "HorizontalPodAutoscaler",
        "Namespace",
        "PodDisruptionBudget",
        "Service",
    ]
    for obj in objects:
        if obj["kind"] != "Namespace":
            assert obj["metadata"]["namespace"] == "observability", obj["metadata"]["name"]


# The oldest release the manifests claim (collector/README.md: the preStop sleep action needs 1.30) and the newest
# whose schemas kubernetes-validate ships.
@pytest.mark.parametrize("version", ["1.30.0", kubernetes_validate.latest_version()])
def test_every_object_is_valid_for_the_kubernetes_api(objects: list[dict[str, Any]], version: str) -> None:
    for obj in objects:
        # Strict: a misspelt or misplaced field (which the API server would drop or refuse) fails here.
        kubernetes_validate.validate(obj, version, strict=True)


def test_a_misplaced_field_is_refused(objects: list[dict[str, Any]]) -> None:
    # The check above would pass vacuously if the validator let unknown fields through.
    deployment = copy.deepcopy(of_kind(objects, "Deployment")[0])
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["ports"][0]["port"] = container["ports"][0].pop("containerPort")  # a Service's key, in a pod
    with pytest.raises(kubernetes_validate.ValidationError, match="port"):
        kubernetes_validate.validate(deployment, "1.30.0", strict=True)


def test_deployment_selectors_match_their_pod_labels(objects: list[dict[str, Any]]) -> None:
    deployments = of_kind(objects, "Deployment")
    assert len(deployments) == 2
    for d in deployments:
        assert matches(d["spec"]["selector"]["matchLabels"], d["spec"]["template"]["metadata"]["labels"])
    # Selectors must not overlap, or each Deployment would adopt the other's pods.
    a, b = deployments
    assert not matches(a["spec"]["selector"]["matchLabels"], b["spec"]["template"]["metadata"]["labels"])


def test_services_select_one_deployment_and_reach_declared_ports(objects: list[dict[str, Any]]) -> None:
    deployments = of_kind(objects, "Deployment")
    for svc in of_kind(objects, "Service"):
        selected = [
            d
            for d in deployments
            if matches(svc["spec"]["selector"], d["spec"]["template"]["metadata"]["labels"])
        ]
        assert len(selected) == 1, f"Service {svc['metadata']['name']} selects {len(selected)} Deployments"
        declared = {
            p["name"]: p["containerPort"] for c in containers(selected[0]) for p in c.get("ports", [])
        }
        for port in svc["spec"]["ports"]:
            target = port.get("targetPort", port["port"])
            if isinstance(target, str):
                assert target in declared, f"{svc['metadata']['name']}: no container port named {target}"
                target = declared[target]
            assert target in declared.values(), f"{svc['metadata']['name']}: nothing declares port {target}"
            assert target == port["port"], (
                "keep Service and container ports equal: the resolver dials the pod port"
            )


def test_resolver_service_is_headless_and_its_ports_are_the_exporter_ports(
    objects: list[dict[str, Any]],
) -> None:
    services = by_name(objects, "Service")
    tier1_config = next(
        yaml.safe_load(cm["data"]["config.yaml"])
        for cm in of_kind(objects, "ConfigMap")
        if cm["metadata"]["name"].startswith("rag-confidence-tier1-otelcol")
    )
    dns = tier1_config["exporters"]["loadbalancing"]["resolver"]["dns"]
    name, namespace, *domain = dns["hostname"].split(".")
    assert domain == ["svc", "cluster", "local"], "the Service's in-cluster DNS name"
    svc = services[name]
    assert svc["metadata"]["namespace"] == namespace
    # Headless: its DNS name lists the ready pods, where a ClusterIP would be one virtual address.
    assert svc["spec"]["clusterIP"] == "None"
    assert not svc["spec"].get("publishNotReadyAddresses"), "terminating pods must leave the DNS answer"
    assert int(dns["port"]) in {p["port"] for p in svc["spec"]["ports"]}
    # The drain below counts on tier 1 noticing a terminating pod within about ten seconds.
    assert dns["interval"] == "5s"


def test_tier2_outlives_the_resolver_and_groupbytrace_when_draining(objects: list[dict[str, Any]]) -> None:
    """A terminating tier-2 pod still receives until tier 1's resolver drops it (interval + DNS TTL), then
    holds traces for groupbytrace's wait: its containers must sleep through both, the gateway longest."""
    tier2 = by_name(objects, "Deployment")["rag-confidence-tier2"]
    pod = tier2["spec"]["template"]["spec"]
    config = next(
        yaml.safe_load(cm["data"]["config.yaml"])
        for cm in of_kind(objects, "ConfigMap")
        if cm["metadata"]["name"].startswith("rag-confidence-tier2-otelcol")
    )
    wait = int(config["processors"]["groupbytrace"]["wait_duration"].removesuffix("s"))
    resolver_and_ttl = 5 + 5
    sleeps = {c["name"]: c["lifecycle"]["preStop"]["sleep"]["seconds"] for c in pod["containers"]}
    assert sleeps["otelcol"] > resolver_and_ttl + wait
    assert sleeps["gateway"] > sleeps["otelcol"]
    assert pod["terminationGracePeriodSeconds"] > sleeps["gateway"]


def test_no_pod_gets_an_api_token(objects: list[dict[str, Any]]) -> None:
    """The dns resolver needs no RBAC; nothing in either tier talks to the API server."""
    for deployment in of_kind(objects, "Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        assert pod.get("automountServiceAccountToken") is False, deployment["metadata"]["name"]
        assert "serviceAccountName" not in pod


def test_configmaps_are_mounted_where_the_collector_reads_its_config(objects: list[dict[str, Any]]) -> None:
    configmaps = by_name(objects, "ConfigMap")
    for d in of_kind(objects, "Deployment"):
        volumes = {v["name"]: v for v in d["spec"]["template"]["spec"]["volumes"]}
        for c in containers(d):
            if "opentelemetry-collector" not in c["image"]:
                continue
            (arg,) = [a for a in c["args"] if a.startswith("--config=")]
            path = arg.split("=", 1)[1]
            mount = next(m for m in c["volumeMounts"] if path.startswith(m["mountPath"] + "/"))
            cm = configmaps[volumes[mount["name"]]["configMap"]["name"]]  # the hashed name kustomize wrote
            assert path[len(mount["mountPath"]) + 1 :] in cm["data"]


def _probe_port(container: dict[str, Any], probe: dict[str, Any]) -> int:
    port = probe["httpGet"]["port"]
    if isinstance(port, str):
        (port,) = [p["containerPort"] for p in container["ports"] if p["name"] == port]
    assert isinstance(port, int)
    return port


def test_gateway_probes_hit_healthz_and_readyz_on_its_http_listener(objects: list[dict[str, Any]]) -> None:
    gateways = [
        c
        for d in of_kind(objects, "Deployment")
        for c in containers(d)
        if "rag-confidence-gateway" in c["image"]
    ]
    assert gateways
    for c in gateways:
        assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
        assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
        (listen,) = [a.split("=", 1)[1] for a in c["args"] if a.startswith("--http-listen=")]
        host, port = listen.rsplit(":", 1)
        assert host == "0.0.0.0", "the kubelet probes the pod IP, not loopback"
        for probe in (c["livenessProbe"], c["readinessProbe"]):
            assert _probe_port(c, probe) == int(port)


def collector_configs(
    objects: list[dict[str, Any]],
) -> Iterator[tuple[dict[str, Any], dict[str, dict[str, Any]], dict[str, Any]]]:
    """Each collector container, its pod's volumes by name, and the config it reads: the ``config.yaml`` of the
    ConfigMap mounted at ``/etc/otelcol``."""
    configmaps = by_name(objects, "ConfigMap")
    for d in of_kind(objects, "Deployment"):
        volumes = {v["name"]: v for v in d["spec"]["template"]["spec"]["volumes"]}
        for c in containers(d):
            if "opentelemetry-collector" not in c["image"]:
                continue
            mount = next(m for m in c["volumeMounts"] if m["mountPath"] == "/etc/otelcol")
            cfg = yaml.safe_load(
                configmaps[volumes[mount["name"]]["configMap"]["name"]]["data"]["config.yaml"]
            )
            yield c, volumes, cfg


def test_collector_probes_hit_the_health_check_extension(objects: list[dict[str, Any]]) -> None:
    for c, _, cfg in collector_configs(objects):
        health_port = int(cfg["extensions"]["health_check"]["endpoint"].rsplit(":", 1)[1])
        for probe in (c["livenessProbe"], c["readinessProbe"]):
            assert _probe_port(c, probe) == health_port
            assert probe["httpGet"].get("path", "/") == cfg["extensions"]["health_check"].get("path", "/")


def test_every_container_has_requests_limits_and_a_locked_down_security_context(
    objects: list[dict[str, Any]],
) -> None:
    for d in of_kind(objects, "Deployment"):
        pod = d["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
        for c in pod["containers"]:
            # The HPA's utilization target needs a CPU request on every container of the pod.
            assert {"cpu", "memory"} <= set(c["resources"]["requests"]), c["name"]
            assert "memory" in c["resources"]["limits"], c["name"]
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
            assert sc["capabilities"]["drop"] == ["ALL"]
            assert ":" in c["image"] and not c["image"].endswith(":latest"), f"pin {c['image']}"


def test_queue_volume_is_mounted_where_file_storage_writes(objects: list[dict[str, Any]]) -> None:
    for c, volumes, cfg in collector_configs(objects):
        directory = cfg["extensions"]["file_storage"]["directory"]
        queue = next(m for m in c["volumeMounts"] if m["mountPath"] == directory)
        assert "readOnly" not in queue and "emptyDir" in volumes[queue["name"]]


def test_hpas_scale_the_deployments(objects: list[dict[str, Any]]) -> None:
    deployments = by_name(objects, "Deployment")
    hpas = of_kind(objects, "HorizontalPodAutoscaler")
    assert {h["spec"]["scaleTargetRef"]["name"] for h in hpas} == set(deployments)
    for h in hpas:
        ref = h["spec"]["scaleTargetRef"]
        assert (ref["apiVersion"], ref["kind"]) == ("apps/v1", "Deployment")
        assert 1 <= h["spec"]["minReplicas"] <= h["spec"]["maxReplicas"]
        # The HPA owns the count: replicas in the manifest would reset it on every apply.
        assert "replicas" not in deployments[ref["name"]]["spec"], ref["name"]


def test_tier2_scales_down_slowly(objects: list[dict[str, Any]]) -> None:
    """A tier-2 replica change re-hashes 1/N of the trace IDs: scale down damped, one pod at a time."""
    hpa = by_name(objects, "HorizontalPodAutoscaler")["rag-confidence-tier2"]
    down = hpa["spec"]["behavior"]["scaleDown"]
    assert down["stabilizationWindowSeconds"] >= 300
    assert down["policies"] == [
        {"type": "Pods", "value": 1, "periodSeconds": down["policies"][0]["periodSeconds"]}
    ]
    # Rollouts likewise: one new pod at a time, none gone before its successor is ready.
    deployment = by_name(objects, "Deployment")["rag-confidence-tier2"]
    assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}


def test_pod_disruption_budgets_cover_each_deployment(objects: list[dict[str, Any]]) -> None:
    pdbs = of_kind(objects, "PodDisruptionBudget")
    for d in of_kind(objects, "Deployment"):
        labels = d["spec"]["template"]["metadata"]["labels"]
        covering = [p for p in pdbs if matches(p["spec"]["selector"]["matchLabels"], labels)]
        assert len(covering) == 1, d["metadata"]["name"]


def test_tier2_drains_the_collector_before_the_gateway_goes(objects: list[dict[str, Any]]) -> None:
    tier2 = by_name(objects, "Deployment")["rag-confidence-tier2"]
    pod = tier2["spec"]["template"]["spec"]
    sleeps = {c["name"]: c["lifecycle"]["preStop"]["sleep"]["seconds"] for c in pod["containers"]}
    assert sleeps["gateway"] > sleeps["otelcol"]
    assert pod["terminationGracePeriodSeconds"] > sleeps["gateway"]
    configmaps = by_name(objects, "ConfigMap")
    volumes = {v["name"]: v for v in pod["volumes"]}
    cm = configmaps[volumes["config"]["configMap"]["name"]]
    wait = yaml.safe_load(cm["data"]["config.yaml"])["processors"]["groupbytrace"]["wait_duration"]
    assert int(wait.rstrip("s")) < sleeps["otelcol"], "groupbytrace must release before the Collector stops"
