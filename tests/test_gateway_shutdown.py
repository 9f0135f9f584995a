"""SIGTERM in a real subprocess: stop accepting, finish the request in flight, flush, exit 0."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.test_gateway_support import DownstreamReceiver, free_port, plain_trace, tracer_provider

_SOURCE = str(Path(__file__).resolve().parents[1] / "src")


class _SlowReceiver(DownstreamReceiver):
    """Holds each export for a while, so a request is still in flight when SIGTERM arrives."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay
        self.arrived = threading.Event()

    def record(self, request: trace_service_pb2.ExportTraceServiceRequest) -> None:
        self.arrived.set()
        time.sleep(self.delay)
        super().record(request)


def _wait_ready(url: str, process: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[1].decode(errors="replace")
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.1)
    raise AssertionError("gateway did not become ready")


def test_sigterm_drains_in_flight_request_then_exits_zero() -> None:
    receiver = _SlowReceiver(delay=1.5).start()
    http_port, grpc_port = free_port(), free_port()
    env = {
        **os.environ,
        "PYTHONPATH": _SOURCE + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "5",
        "OTEL_METRIC_EXPORT_INTERVAL": "600000",
        "RAG_CONFIDENCE_GATEWAY_HTTP_LISTEN": f"127.0.0.1:{http_port}",
    }
    command = [
        sys.executable,
        "-c",
        "import sys; from rag_confidence.gateway import main; sys.exit(main(sys.argv[1:]))",
        "--grpc-listen",
        f"127.0.0.1:{grpc_port}",
    ]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_ready(f"http://127.0.0.1:{http_port}/readyz", process)
        memory = InMemorySpanExporter()
        plain_trace(tracer_provider(memory, batch=False), spans=3)
        body = encode_spans(memory.get_finished_spans()).SerializeToString()
        result: dict[str, int] = {}

        def post() -> None:
            request = urllib.request.Request(
                f"http://127.0.0.1:{http_port}/v1/traces",
                data=body,
                headers={"Content-Type": "application/x-protobuf"},
            )
            with urllib.request.urlopen(request, timeout=30) as response:
                result["status"] = response.status

        in_flight = threading.Thread(target=post)
        in_flight.start()
        assert receiver.arrived.wait(10)  # the request is being forwarded right now
        process.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        with pytest.raises((urllib.error.URLError, ConnectionError)):  # no longer accepting
            urllib.request.urlopen(f"http://127.0.0.1:{http_port}/healthz", timeout=2)
        in_flight.join(20)
        assert result == {"status": 200}  # the in-flight request finished, successfully
        assert process.wait(20) == 0
        assert len(receiver.spans()) == 3
        stderr = process.stderr.read().decode(errors="replace") if process.stderr else ""
        assert "shutting down" in stderr and "stopped" in stderr
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        receiver.stop()


def test_missing_downstream_is_a_clear_startup_error() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_EXPORTER_OTLP")}
    env["PYTHONPATH"] = _SOURCE
    completed = subprocess.run(
        [sys.executable, "-c", "import sys; from rag_confidence.gateway import main; sys.exit(main([]))"],
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert completed.returncode == 2
    assert b"OTEL_EXPORTER_OTLP_ENDPOINT" in completed.stderr
