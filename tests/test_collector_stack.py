"""The compose stack's gateway service and the walkthrough's application, run for real over loopback.

Docker is not available here, so the containers cannot start; what can run does: the gateway process is
started with the exact command and environment of the ``gateway`` service in ``collector/compose.yaml``
(addresses moved to free loopback ports), the walkthrough's ``send_rag_trace.py`` exports to it with the
real OTLP gRPC exporter, and a real OTLP gRPC server stands in for the Collector's ``otlp/scored`` receiver.
The Collector hops around it are covered by ``test_collector_topology.py``.

Also: ``promtool check config`` on the stack's Prometheus config, the files the compose services mount and
build from, and the gateway image's Dockerfile.
"""

from __future__ import annotations

import os
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


def test_promtool_accepts_the_prometheus_config() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (scripts/ensure-prometheus.sh installs it)")
    run = subprocess.run(
        [promtool, "check", "config", "--syntax-only", str(COLLECTOR / "stack" / "prometheus.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stdout + run.stderr
