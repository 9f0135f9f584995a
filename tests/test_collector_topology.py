"""The data path through the shipped Collector stacks, followed hop by hop from the files themselves.

Each deployment (``collector/compose.yaml`` with ``collector/single-node.yaml``, and the kustomization in
``collector/kubernetes/`` with its two Collector configs) is turned into a graph: Collector pipelines, the
gateway, Tempo, Prometheus and the debug exporter are nodes; an edge is an exporter endpoint (or the gateway's
``OTEL_EXPORTER_OTLP_*`` downstream) that resolves, through compose service names or Kubernetes Services,
selectors and named ports, to a listener declared in another file. Nothing is matched by component name: a
port typo, a pipeline that loops back into the gateway, or a second exporter to Tempo changes the graph.

The OpenTelemetry Collector itself cannot run here (no binary download, no Docker engine), so this is as close
to the running stack as the tests get; the gateway half is exercised for real in the gateway's own tests.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
COLLECTOR = ROOT / "collector"
KUBE = COLLECTOR / "kubernetes"

# Defaults of `rag-confidence gateway` when a flag is absent (issue 4).
GATEWAY_DEFAULT_GRPC = "0.0.0.0:4317"
GATEWAY_DEFAULT_HTTP = "0.0.0.0:4318"
# The one Tempo outside the Kubernetes manifests (tier-2 exports to it through TEMPO_OTLP_ENDPOINT).
KUBE_EXTERNAL_TRACE_STORES = {"tempo-distributor.tempo.svc.cluster.local:4317"}

Node = tuple[str, ...]
TRACE_STORE = ("store", "tempo")
PROMETHEUS = ("prometheus",)


def load_yaml(path: Path) -> Any:
    with path.open(encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def load_yaml_all(path: Path) -> list[Any]:
    with path.open(encoding="utf-8") as fh:
        return [doc for doc in yaml.safe_load_all(fh) if doc is not None]


def split_hostport(endpoint: str) -> tuple[str, int]:
    """``http://host:port/path`` or ``host:port`` -> (host, port)."""
    without_scheme = re.sub(r"^[a-z]+://", "", endpoint)
    hostport = without_scheme.split("/", 1)[0]
    host, _, port = hostport.rpartition(":")
    assert host and port.isdigit(), f"endpoint {endpoint!r} has no host:port"
    return host, int(port)


def expand_env(value: str, env: Mapping[str, str]) -> str:
    """The Collector's ``${env:NAME}`` expansion, failing on a variable the container does not set."""

    def repl(match: re.Match[str]) -> str:
        name = match.group(1)
        assert name in env, f"${{env:{name}}} is used but the container does not set {name}"
        return env[name]

    return re.sub(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}", repl, value)


def flag_value(args: list[str], flag: str) -> str | None:
    for i, arg in enumerate(args):
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
        if arg == flag and i + 1 < len(args):
            return args[i + 1]
    return None


# ----------------------------------------------------------------------------------------------------------
# What runs where
# ----------------------------------------------------------------------------------------------------------
@dataclass
class Container:
    kind: str  # collector | gateway | tempo | prometheus
    config: Any = None  # parsed config file (collector, tempo, prometheus)
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)  # named container ports (Kubernetes)
    config_path: Path | None = None


@dataclass
class Unit:
    """One network namespace: a compose service or a Kubernetes pod template."""

    name: str
    containers: list[Container]
    annotations: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Listener:
    unit: str
    port: int
    bind: str
    protocol: str  # grpc | http | scrape
    node: Node


def container_kind(image: str) -> str | None:
    if "opentelemetry-collector" in image:
        return "collector"
    if "rag-confidence-gateway" in image:
        return "gateway"
    if "grafana/tempo" in image:
        return "tempo"
    if "prom/prometheus" in image:
        return "prometheus"
    return None


def collector_listeners(unit: Unit, c: Container) -> Iterator[Listener]:
    for rid, rcfg in (c.config.get("receivers") or {}).items():
        if rid.split("/")[0] != "otlp":
            continue
        for proto, pcfg in ((rcfg or {}).get("protocols") or {}).items():
            default = "0.0.0.0:4317" if proto == "grpc" else "0.0.0.0:4318"
            host, port = split_hostport((pcfg or {}).get("endpoint") or default)
            yield Listener(unit.name, port, host, proto, ("receiver", unit.name, rid))
    for eid, ecfg in (c.config.get("exporters") or {}).items():
        if eid.split("/")[0] == "prometheus":
            host, port = split_hostport(ecfg["endpoint"])
            yield Listener(unit.name, port, host, "scrape", ("scrape", unit.name, str(port)))


def listeners_of(unit: Unit) -> Iterator[Listener]:
    for c in unit.containers:
        if c.kind == "collector":
            yield from collector_listeners(unit, c)
        elif c.kind == "gateway":
            for flag, default, proto in (
                ("--grpc-listen", GATEWAY_DEFAULT_GRPC, "grpc"),
                ("--http-listen", GATEWAY_DEFAULT_HTTP, "http"),
            ):
                host, port = split_hostport(flag_value(c.args, flag) or default)
                yield Listener(unit.name, port, host, proto, ("gateway", unit.name))
        elif c.kind == "tempo":
            otlp = c.config["distributor"]["receivers"]["otlp"]["protocols"]
            for proto, pcfg in otlp.items():
                host, port = split_hostport(pcfg["endpoint"])
                yield Listener(unit.name, port, host, proto, TRACE_STORE)


# ----------------------------------------------------------------------------------------------------------
# The graph
# ----------------------------------------------------------------------------------------------------------
@dataclass
class Deployment:
    units: dict[str, Unit]
    resolve_host: Any  # (host, port, from_unit) -> list[(unit, container_port)] or [] when external
    external: dict[str, Node] = field(default_factory=dict)  # host:port -> node for known outside endpoints
    scraped: set[tuple[str, int]] = field(default_factory=set)  # (unit, port) Prometheus scrapes
    edges: dict[str, dict[Node, list[Node]]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def listeners(self) -> list[Listener]:
        return [lst for unit in self.units.values() for lst in listeners_of(unit)]

    def resolve(self, endpoint: str, from_unit: str, protocol: str) -> list[Node]:
        host, port = split_hostport(endpoint)
        if host in ("localhost", "127.0.0.1"):
            targets = [(from_unit, port)]
        else:
            targets = self.resolve_host(host, port, from_unit)
        if not targets:
            key = f"{host}:{port}"
            if key in self.external:
                return [self.external[key]]
            self.problems.append(f"{from_unit}: {endpoint} resolves to nothing in the deployment")
            return []
        nodes: list[Node] = []
        for unit, cport in targets:
            found = [
                lst
                for lst in self.listeners()
                if lst.unit == unit
                and lst.port == cport
                and (unit == from_unit or lst.bind not in ("127.0.0.1", "localhost"))
            ]
            if not found:
                self.problems.append(f"{from_unit}: {endpoint} -> {unit}:{cport}, where nothing listens")
            for lst in found:
                if lst.protocol != protocol:
                    self.problems.append(
                        f"{from_unit}: {endpoint} speaks {protocol} but {unit}:{cport} is {lst.protocol}"
                    )
                nodes.append(lst.node)
        return nodes

    def add(self, signal: str, src: Node, dst: Node) -> None:
        self.edges.setdefault(signal, {}).setdefault(src, []).append(dst)

    def build(self) -> Deployment:
        for unit in self.units.values():
            for c in unit.containers:
                if c.kind == "collector":
                    self._collector(unit, c)
                elif c.kind == "gateway":
                    self._gateway(unit, c)
        return self

    def _collector(self, unit: Unit, c: Container) -> None:
        cfg = c.config
        pipelines = cfg["service"]["pipelines"]
        connectors = cfg.get("connectors") or {}
        for pid, p in pipelines.items():
            signal = pid.split("/")[0]
            node: Node = ("pipeline", unit.name, pid)
            for rid in p["receivers"]:
                src: Node = (
                    ("connector", unit.name, rid) if rid in connectors else ("receiver", unit.name, rid)
                )
                self.add(signal, src, node)
            for eid in p["exporters"]:
                for dst in self._exporter_targets(unit, c, eid):
                    self.add(signal, node, dst)

    def _exporter_targets(self, unit: Unit, c: Container, eid: str) -> list[Node]:
        cfg = c.config
        if eid in (cfg.get("connectors") or {}):
            return [("connector", unit.name, eid)]
        ecfg = cfg["exporters"][eid] or {}
        etype = eid.split("/")[0]
        if etype == "debug":
            return [("debug", unit.name)]
        if etype == "prometheus":
            _, port = split_hostport(ecfg["endpoint"])
            return [("scrape", unit.name, str(port))]
        if etype in ("otlp", "otlp_grpc"):
            return self.resolve(expand_env(ecfg["endpoint"], c.env), unit.name, "grpc")
        if etype in ("otlphttp", "otlp_http"):
            return self.resolve(expand_env(ecfg["endpoint"], c.env), unit.name, "http")
        if etype in ("loadbalancing", "load_balancing"):
            resolver = ecfg["resolver"]
            if "k8s" in resolver:
                ports = resolver["k8s"].get("ports") or [4317]
                return [
                    n
                    for port in ports
                    for n in self.resolve(f"{resolver['k8s']['service']}:{port}", unit.name, "grpc")
                ]
            if "dns" in resolver:
                port = resolver["dns"].get("port", 4317)
                return self.resolve(f"{resolver['dns']['hostname']}:{port}", unit.name, "grpc")
            return [n for h in resolver["static"]["hostnames"] for n in self.resolve(h, unit.name, "grpc")]
        self.problems.append(f"{unit.name}: exporter {eid} is not followed by this test")
        return []

    def _gateway(self, unit: Unit, c: Container) -> None:
        protocol = c.env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        wire = "grpc" if protocol == "grpc" else "http"
        for signal, specific in (("traces", "TRACES"), ("metrics", "METRICS")):
            endpoint = c.env.get(f"OTEL_EXPORTER_OTLP_{specific}_ENDPOINT") or c.env.get(
                "OTEL_EXPORTER_OTLP_ENDPOINT"
            )
            if endpoint is None:
                self.problems.append(f"{unit.name}: gateway has no downstream endpoint for {signal}")
                continue
            for dst in self.resolve(endpoint, unit.name, wire):
                self.add(signal, ("gateway", unit.name), dst)

    def resolved_edges(self, signal: str) -> dict[Node, list[Node]]:
        """Edges of one signal, with each scraped endpoint leading to Prometheus."""
        edges = {k: list(v) for k, v in self.edges.get(signal, {}).items()}
        for unit, port in self.scraped:
            edges.setdefault(("scrape", unit, str(port)), []).append(PROMETHEUS)
        return edges


def paths(edges: Mapping[Node, list[Node]], start: Node) -> Iterator[list[Node]]:
    """Every path from start to a node with no way out (asserting there is no cycle on the way)."""
    stack: list[tuple[Node, list[Node]]] = [(start, [start])]
    while stack:
        node, path = stack.pop()
        nexts = edges.get(node, [])
        if not nexts:
            yield path
        for nxt in nexts:
            assert nxt not in path, f"loop: {' -> '.join(map(str, path + [nxt]))}"
            stack.append((nxt, path + [nxt]))


# ----------------------------------------------------------------------------------------------------------
# compose.yaml -> Deployment
# ----------------------------------------------------------------------------------------------------------
def as_list(command: Any) -> list[str]:
    if command is None:
        return []
    return shlex.split(command) if isinstance(command, str) else [str(a) for a in command]


def compose_env(service: Mapping[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        return dict(item.split("=", 1) for item in env)
    return {k: str(v) for k, v in env.items()}


def compose_mounted(service: Mapping[str, Any], target: str) -> Path:
    """The repository file that a compose bind mount puts at ``target`` in the container."""
    for volume in service.get("volumes") or []:
        source, _, rest = volume.partition(":")
        if rest.split(":")[0] == target:
            return (COLLECTOR / source).resolve()
    raise AssertionError(f"nothing is mounted at {target}")


def compose_deployment() -> tuple[Deployment, dict[str, Any]]:
    compose = load_yaml(COLLECTOR / "compose.yaml")
    units: dict[str, Unit] = {}
    for name, svc in compose["services"].items():
        kind = container_kind(svc.get("image", ""))
        if kind is None:
            continue
        args = as_list(svc.get("command"))
        c = Container(kind=kind, args=args, env=compose_env(svc))
        flag = {"collector": "--config", "tempo": "-config.file", "prometheus": "--config.file"}.get(kind)
        if flag:
            target = flag_value(args, flag)
            assert target, f"service {name} does not say where its config is ({flag})"
            c.config_path = compose_mounted(svc, target)
            c.config = load_yaml(c.config_path)
        units[name] = Unit(name, [c])

    def resolve_host(host: str, port: int, from_unit: str) -> list[tuple[str, int]]:
        return [(host, port)] if host in units else []

    dep = Deployment(units, resolve_host)
    for unit in units.values():
        for c in unit.containers:
            if c.kind == "prometheus":
                for job in c.config["scrape_configs"]:
                    for sc in job.get("static_configs", []):
                        for target in sc["targets"]:
                            host, port = split_hostport(target)
                            dep.scraped.add((host, port))
    return dep.build(), compose


def compose_entry(compose: Mapping[str, Any], dep: Deployment, host_port: int) -> list[Node]:
    """Where an application on the host lands when it exports to localhost:<host_port>."""
    landed: list[Node] = []
    for name, svc in compose["services"].items():
        for mapping in svc.get("ports") or []:
            parts = str(mapping).split(":")
            if int(parts[-2]) == host_port:
                landed += [
                    lst.node for lst in dep.listeners() if lst.unit == name and lst.port == int(parts[-1])
                ]
    return landed


# ----------------------------------------------------------------------------------------------------------
# kubernetes/ -> Deployment
# ----------------------------------------------------------------------------------------------------------
def kube_objects() -> tuple[list[dict[str, Any]], dict[str, Path]]:
    """The kustomization's resources, and generated ConfigMap name -> the file behind its config.yaml."""
    kustomization = load_yaml(KUBE / "kustomization.yaml")
    objects = [obj for res in kustomization["resources"] for obj in load_yaml_all(KUBE / res)]
    namespace = kustomization.get("namespace")
    for obj in objects:
        if namespace and obj["kind"] != "Namespace":
            obj["metadata"].setdefault("namespace", namespace)
    generated: dict[str, Path] = {}
    for gen in kustomization.get("configMapGenerator", []):
        for entry in gen["files"]:
            key, _, file = entry.partition("=")
            if key == "config.yaml":
                generated[gen["name"]] = KUBE / file
    return objects, generated


def kube_deployment() -> Deployment:
    objects, generated = kube_objects()
    units: dict[str, Unit] = {}
    templates: dict[str, dict[str, Any]] = {}
    for obj in objects:
        if obj["kind"] != "Deployment":
            continue
        pod = obj["spec"]["template"]
        templates[obj["metadata"]["name"]] = pod
        volumes = {v["name"]: v for v in pod["spec"].get("volumes", [])}
        containers: list[Container] = []
        for spec in pod["spec"]["containers"]:
            kind = container_kind(spec["image"])
            assert kind, f"unknown image {spec['image']}"
            env = {e["name"]: e["value"] for e in spec.get("env", []) if "value" in e}
            ports = {p["name"]: p["containerPort"] for p in spec.get("ports", [])}
            c = Container(kind=kind, args=as_list(spec.get("args")), env=env, ports=ports)
            if kind == "collector":
                config = flag_value(c.args, "--config")
                assert config, "Collector container without --config"
                mount = next(m for m in spec["volumeMounts"] if config.startswith(m["mountPath"] + "/"))
                cm = volumes[mount["name"]]["configMap"]["name"]
                assert config[len(mount["mountPath"]) + 1 :] == "config.yaml"
                c.config_path = generated[cm]
                c.config = load_yaml(c.config_path)
            containers.append(c)
        units[obj["metadata"]["name"]] = Unit(
            obj["metadata"]["name"], containers, pod["metadata"].get("annotations", {})
        )

    services = [obj for obj in objects if obj["kind"] == "Service"]

    def service_names(svc: Mapping[str, Any]) -> set[str]:
        name, ns = svc["metadata"]["name"], svc["metadata"]["namespace"]
        return {name, f"{name}.{ns}", f"{name}.{ns}.svc", f"{name}.{ns}.svc.cluster.local"}

    def resolve_host(host: str, port: int, from_unit: str) -> list[tuple[str, int]]:
        out: list[tuple[str, int]] = []
        for svc in services:
            if host not in service_names(svc):
                continue
            sel = svc["spec"]["selector"]
            sport = next((p for p in svc["spec"]["ports"] if p["port"] == port), None)
            assert sport, f"Service {svc['metadata']['name']} has no port {port}"
            for dname, pod in templates.items():
                if all(pod["metadata"]["labels"].get(k) == v for k, v in sel.items()):
                    target = sport.get("targetPort", port)
                    if isinstance(target, str):
                        named = [c.ports[target] for c in units[dname].containers if target in c.ports]
                        assert named, f"{dname} has no container port named {target}"
                        target = named[0]
                    out.append((dname, target))
        return out

    external: dict[str, Node] = dict.fromkeys(KUBE_EXTERNAL_TRACE_STORES, TRACE_STORE)
    dep = Deployment(units, resolve_host, external=external)
    for unit in units.values():
        if unit.annotations.get("prometheus.io/scrape") == "true":
            dep.scraped.add((unit.name, int(unit.annotations["prometheus.io/port"])))
    return dep.build()


# ----------------------------------------------------------------------------------------------------------
# Tests
# ----------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def compose() -> tuple[Deployment, dict[str, Any]]:
    return compose_deployment()


@pytest.fixture(scope="module")
def kube() -> Deployment:
    return kube_deployment()


def expand(edges: Mapping[Node, list[Node]], start: Node) -> list[list[Node]]:
    return list(paths(edges, start))


def span_paths(dep: Deployment, entry: list[Node]) -> list[list[Node]]:
    edges = dep.resolved_edges("traces")
    edges[("app",)] = entry
    return expand(edges, ("app",))


def assert_each_span_stored_once(all_paths: list[list[Node]]) -> None:
    stored = [p for p in all_paths if p[-1] == TRACE_STORE]
    assert len(stored) == 1, "a span must reach exactly one trace store, by exactly one path:\n" + "\n".join(
        " -> ".join(map(str, p)) for p in stored
    )
    (path,) = stored
    gateways = [n for n in path if n[0] == "gateway"]
    assert len(gateways) == 1, f"the stored copy must pass the gateway exactly once: {path}"
    for p in all_paths:
        assert p[-1] in (TRACE_STORE,) or p[-1][0] == "debug", f"spans end somewhere unexpected: {p}"


def test_compose_every_endpoint_resolves(compose: tuple[Deployment, dict[str, Any]]) -> None:
    dep, _ = compose
    assert dep.problems == []


def test_compose_span_reaches_tempo_once_through_the_gateway(
    compose: tuple[Deployment, dict[str, Any]],
) -> None:
    dep, spec = compose
    for port in (4317, 4318):
        entry = compose_entry(spec, dep, port)
        assert entry, f"nothing published on localhost:{port}"
        assert_each_span_stored_once(span_paths(dep, entry))


def test_compose_gateway_metrics_reach_prometheus(compose: tuple[Deployment, dict[str, Any]]) -> None:
    dep, _ = compose
    gateway = next(("gateway", u.name) for u in dep.units.values() if u.containers[0].kind == "gateway")
    ends = {p[-1] for p in expand(dep.resolved_edges("metrics"), gateway)}
    assert ends == {PROMETHEUS}


def test_compose_gateway_downstream_is_a_receiver_only_the_gateway_uses(
    compose: tuple[Deployment, dict[str, Any]],
) -> None:
    """The second receiver must not also be the applications' entry, or app spans would bypass scoring."""
    dep, spec = compose
    gateway = next(("gateway", u.name) for u in dep.units.values() if u.containers[0].kind == "gateway")
    downstream = set(dep.edges["traces"][gateway])
    entries = set(compose_entry(spec, dep, 4317) + compose_entry(spec, dep, 4318))
    assert downstream and not downstream & entries


def test_kube_every_endpoint_resolves(kube: Deployment) -> None:
    assert kube.problems == []


def test_kube_span_reaches_tempo_once_through_one_gateway(kube: Deployment) -> None:
    objects, _ = kube_objects()
    tier1 = next(o for o in objects if o["kind"] == "Service" and o["spec"].get("clusterIP") != "None")
    ns = tier1["metadata"]["namespace"]
    for port in (4317, 4318):
        proto = "grpc" if port == 4317 else "http"
        entry = kube.resolve(f"{tier1['metadata']['name']}.{ns}.svc.cluster.local:{port}", "app", proto)
        assert entry, f"applications cannot reach tier 1 on {port}"
        assert_each_span_stored_once(span_paths(kube, entry))
    assert kube.problems == []


def test_kube_gateway_metrics_reach_prometheus(kube: Deployment) -> None:
    gateways = [
        ("gateway", u.name) for u in kube.units.values() if any(c.kind == "gateway" for c in u.containers)
    ]
    assert gateways
    for gateway in gateways:
        ends = {p[-1] for p in expand(kube.resolved_edges("metrics"), gateway)}
        assert ends == {PROMETHEUS}


def test_kube_loadbalancing_targets_the_headless_service(kube: Deployment) -> None:
    """The resolver must see pods, not a virtual IP: the Service it names is headless and selects tier 2."""
    objects, _ = kube_objects()
    services = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Service"}
    for unit in kube.units.values():
        for c in unit.containers:
            if c.kind != "collector":
                continue
            for eid, ecfg in c.config["exporters"].items():
                if eid.split("/")[0] not in ("loadbalancing", "load_balancing"):
                    continue
                resolver = ecfg["resolver"]
                target = resolver["k8s"]["service"] if "k8s" in resolver else resolver["dns"]["hostname"]
                assert services[target.split(".")[0]]["spec"].get("clusterIP") == "None"


def _pipelines_feeding_a_gateway(dep: Deployment) -> list[tuple[str, str]]:
    found = []
    for src, dsts in dep.edges.get("traces", {}).items():
        if src[0] == "pipeline" and any(d[0] == "gateway" for d in dsts):
            found.append((src[1], src[2]))
    return found


@pytest.mark.parametrize("which", ["compose", "kube"])
def test_whole_traces_reach_the_gateway(which: str, request: pytest.FixtureRequest) -> None:
    """Every pipeline that exports to a gateway groups by trace first and batches only after that."""
    dep = request.getfixturevalue(which)
    dep = dep[0] if isinstance(dep, tuple) else dep
    feeding = _pipelines_feeding_a_gateway(dep)
    assert feeding
    for unit_name, pid in feeding:
        (cfg,) = [c.config for c in dep.units[unit_name].containers if c.kind == "collector"]
        procs = [p.split("/")[0] for p in cfg["service"]["pipelines"][pid]["processors"]]
        assert "groupbytrace" in procs, f"{unit_name}/{pid} feeds the gateway without groupbytrace"
        if "batch" in procs:
            assert procs.index("batch") > procs.index("groupbytrace"), (
                f"{unit_name}/{pid}: batch before groupbytrace"
            )
            batch_id = cfg["service"]["pipelines"][pid]["processors"][procs.index("batch")]
            assert "send_batch_max_size" not in (cfg["processors"][batch_id] or {}), "would split traces"


# ----------------------------------------------------------------------------------------------------------
# The checker itself: it must see the mistakes it is there to catch.
# ----------------------------------------------------------------------------------------------------------
def _mutated_compose(mutate: Any) -> tuple[Deployment, dict[str, Any]]:
    dep, spec = compose_deployment()
    for unit in dep.units.values():
        for c in unit.containers:
            mutate(unit.name, c)
    dep.edges, dep.problems = {}, []
    return dep.build(), spec


def test_checker_sees_a_second_copy_to_tempo() -> None:
    def add_tempo_to_entry_pipeline(name: str, c: Container) -> None:
        if c.kind == "collector":
            c.config["service"]["pipelines"]["traces/in"]["exporters"].append("otlp/tempo")

    dep, spec = _mutated_compose(add_tempo_to_entry_pipeline)
    with pytest.raises(AssertionError, match="exactly one trace store"):
        assert_each_span_stored_once(span_paths(dep, compose_entry(spec, dep, 4317)))


def test_checker_sees_a_loop_through_the_gateway() -> None:
    def gateway_back_to_app_receiver(name: str, c: Container) -> None:
        if c.kind == "gateway":
            c.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://collector:4317"

    dep, spec = _mutated_compose(gateway_back_to_app_receiver)
    with pytest.raises(AssertionError, match="loop"):
        span_paths(dep, compose_entry(spec, dep, 4317))


def test_checker_sees_a_port_mismatch() -> None:
    def wrong_gateway_port(name: str, c: Container) -> None:
        if c.kind == "collector":
            c.config["exporters"]["otlp/gateway"]["endpoint"] = "gateway:14318"

    dep, _ = _mutated_compose(wrong_gateway_port)
    assert any("speaks grpc" in p for p in dep.problems)


def test_checker_sees_a_loopback_listener_reached_from_another_unit() -> None:
    def scored_on_loopback(name: str, c: Container) -> None:
        if c.kind == "collector":
            c.config["receivers"]["otlp/scored"]["protocols"]["grpc"]["endpoint"] = "127.0.0.1:24317"

    dep, _ = _mutated_compose(scored_on_loopback)
    assert any("nothing listens" in p for p in dep.problems)


def test_application_metrics_reach_prometheus_too(
    compose: tuple[Deployment, dict[str, Any]], kube: Deployment
) -> None:
    """An application that scores in process exports its metrics to the same entry as its spans."""
    dep, spec = compose
    edges = dep.resolved_edges("metrics")
    edges[("app",)] = compose_entry(spec, dep, 4317)
    assert {p[-1] for p in expand(edges, ("app",))} == {PROMETHEUS}
    edges = kube.resolved_edges("metrics")
    edges[("app",)] = kube.resolve("rag-confidence-tier1.observability:4317", "app", "grpc")
    assert {p[-1] for p in expand(edges, ("app",))} == {PROMETHEUS}
