"""Gateway throughput against a pass-through forwarder, and peak memory under a 10x overload. One command:

    python benchmarks/bench_gateway.py [--requests 600] [--rounds 3] [--concurrency 4]

Both gateways run as real subprocesses (``rag-confidence gateway``), receive the same pre-encoded OTLP/gRPC
requests over loopback, and forward to the same real OTLP gRPC receiver. The pass-through is the gateway with
``--no-scoring``: identical decode, validation, encode and export, no answer detection or scoring. Ratios are
measured side by side in one run; the target is scoring throughput >= 0.5x the pass-through, judged on the
"mixed" workload (one trace in twenty is a RAG answer, as in a Collector pipeline carrying a whole service's
traffic). Also printed: the same traffic with the assembly window on (``--assembly-max-age``), and the
"answer-dense" workload (every other trace an answer), where the per-answer cost of the design's metrics, signal
extraction and scoring dominates and the ratio is far below the target.

Memory: peak RSS (``VmHWM``) of a scoring gateway after a 1x load, then after 10x as many concurrent requests
as it admits (``--max-concurrent-requests`` + ``--max-queued-requests``). Bounded means the overload does not
grow the peak in proportion: the extra requests are refused with UNAVAILABLE before they cost memory.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence import semconv

ROOT = Path(__file__).resolve().parents[1]
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
MAX_CONCURRENT = 4
MAX_QUEUED = 32


class _Sink(trace_service_pb2_grpc.TraceServiceServicer):  # type: ignore[misc]
    def __init__(self) -> None:
        self.spans = 0
        self._lock = threading.Lock()

    def Export(self, request: Any, context: Any) -> Any:  # noqa: N802
        count = sum(len(scope.spans) for resource in request.resource_spans for scope in resource.scope_spans)
        with self._lock:
            self.spans += count
        return trace_service_pb2.ExportTraceServiceResponse()


class _MetricSink(metrics_service_pb2_grpc.MetricsServiceServicer):  # type: ignore[misc]
    """Receives the gateways' own metrics: both export them, as deployed (design: metrics go downstream)."""

    def Export(self, request: Any, context: Any) -> Any:  # noqa: N802
        return metrics_service_pb2.ExportMetricsServiceResponse()


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


# Instrumentation scopes as a service's libraries name their tracers: the RAG spans come from the RAG framework's
# instrumentation and the application's answer span, plain traffic from the web framework's and the database
# client's instrumentation.
SCOPES = {
    "answer": "rag_confidence",
    "rag": "openinference.instrumentation.langchain",
    "http": "opentelemetry.instrumentation.fastapi",
    "db": "opentelemetry.instrumentation.sqlalchemy",
}


def build_request(rag_traces: int = 2, plain_traces: int = 38, one_scope: bool = False) -> tuple[bytes, int]:
    """One batch as a BatchSpanProcessor would send it: RAG answers (retriever with 5 documents, LLM) and plain
    request traces, each span from its library's scope (``one_scope``: every span from one tracer, the worst
    case for the gateway's screen, which then reads every span's attribute keys). Returns the encoded request
    and its span count."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracers = {role: provider.get_tracer("bench" if one_scope else name) for role, name in SCOPES.items()}
    for index in range(rag_traces):
        with tracers["answer"].start_as_current_span("answer") as answer:
            answer.set_attribute(semconv.RAG_ANSWER, True)
            answer.set_attribute(semconv.RAG_SIGNAL_SUPPORT_LEVEL, "medium")
            with tracers["rag"].start_as_current_span("retrieve") as retrieve:
                retrieve.set_attribute(semconv.OPENINFERENCE_SPAN_KIND, semconv.OPENINFERENCE_KIND_RETRIEVER)
                for doc in range(5):
                    prefix = f"{semconv.OI_RETRIEVAL_DOCUMENTS}.{doc}."
                    retrieve.set_attribute(prefix + semconv.OI_DOCUMENT_ID, f"doc-{index}-{doc}")
                    retrieve.set_attribute(prefix + semconv.OI_DOCUMENT_SCORE, 0.9 - doc * 0.05)
                    retrieve.set_attribute(prefix + semconv.OI_DOCUMENT_CONTENT, "Policy text. " * 40)
            with tracers["rag"].start_as_current_span("generate") as generate:
                generate.set_attribute(semconv.OPENINFERENCE_SPAN_KIND, semconv.OPENINFERENCE_KIND_LLM)
                generate.set_attribute(semconv.OI_OUTPUT_VALUE, "Refunds are accepted within 30 days [1].")
    for _ in range(plain_traces):
        with tracers["http"].start_as_current_span("http request"):
            for step in range(4):
                with tracers["db"].start_as_current_span(f"step {step}") as span:
                    span.set_attribute("http.route", "/api/items")
    spans = memory.get_finished_spans()
    return encode_spans(spans).SerializeToString(), len(spans)


_INSTALLED = importlib.util.find_spec("rag_confidence") is not None


class GatewayProcess:
    def __init__(self, downstream_port: int, *extra: str) -> None:
        self.grpc_port, self.http_port = _free_port(), _free_port()
        env = {
            **os.environ,
            # The installed package (compiled scoring core with `pip install .`); the source tree only when the
            # package is not installed.
            **(
                {}
                if _INSTALLED
                else {"PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
            ),
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{downstream_port}",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            # Metrics on, as deployed: every scorecard is recorded on the SDK instruments (export interval
            # is the SDK default, 60 s, so recording is measured, exporting hardly).
            "OTEL_METRICS_EXPORTER": "otlp",
        }
        command = [
            sys.executable,
            "-c",
            "import sys; from rag_confidence.gateway import main; sys.exit(main(sys.argv[1:]))",
            "--grpc-listen",
            f"127.0.0.1:{self.grpc_port}",
            "--http-listen",
            f"127.0.0.1:{self.http_port}",
            "--max-concurrent-requests",
            str(MAX_CONCURRENT),
            "--max-queued-requests",
            str(MAX_QUEUED),
            "--log-level",
            "ERROR",
            *extra,
        ]
        self.process = subprocess.Popen(command, env=env, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/readyz", timeout=1):
                    return
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.1)
        raise RuntimeError("gateway did not start")

    def peak_rss_mib(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def cpu_seconds(self) -> float:
        """CPU time (user + system) the gateway process has used so far."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


def drive(port: int, body: bytes, requests: int, concurrency: int) -> tuple[float, int, int]:
    """Send ``requests`` requests keeping ``concurrency`` in flight; returns (seconds, ok, refused)."""
    ok = refused = 0
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        export = channel.unary_unary(EXPORT)
        export(body, timeout=30)  # warm-up: connection, first import of everything
        started = time.perf_counter()
        pending: list[Any] = []
        sent = 0
        while sent < requests or pending:
            while sent < requests and len(pending) < concurrency:
                pending.append(export.future(body, timeout=60))
                sent += 1
            done = pending.pop(0)
            try:
                done.result()
                ok += 1
            except grpc.RpcError as error:
                if error.code() != grpc.StatusCode.UNAVAILABLE:
                    raise
                refused += 1
        return time.perf_counter() - started, ok, refused


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=600)
    parser.add_argument("--concurrency", type=int, default=MAX_CONCURRENT)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    sink = _Sink()
    downstream_port = _free_port()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(sink, server)
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(_MetricSink(), server)
    server.add_insecure_port(f"127.0.0.1:{downstream_port}")
    server.start()

    ratios: dict[str, float] = {}
    for workload, rag_traces, plain_traces, one_scope, scoring_flags in (
        ("mixed", 2, 38, False, ()),
        ("mixed, one scope", 2, 38, True, ()),
        # The assembly window for set-ups without groupbytrace: every span is kept (encoded) until its root.
        ("mixed, assembly window on", 2, 38, False, ("--assembly-max-age", "30")),
        ("answer-dense", 20, 20, False, ()),
    ):
        body, spans_per_request = build_request(rag_traces, plain_traces, one_scope)
        print(
            f"{workload}: {rag_traces} RAG answers + {plain_traces} plain traces per request, "
            f"{spans_per_request} spans, {len(body) / 1024:.0f} KiB; {args.requests} requests per run"
        )
        gateways = {
            "pass-through": GatewayProcess(downstream_port, "--no-scoring"),
            "scoring": GatewayProcess(downstream_port, *scoring_flags),
        }
        runs: dict[str, list[float]] = {name: [] for name in gateways}
        cpu_runs: dict[str, list[float]] = {name: [] for name in gateways}
        round_ratios: list[float] = []
        cpu_ratios: list[float] = []
        try:
            for _ in range(args.rounds):  # alternate the two, so drift and neighbours hit both alike
                for name, gateway in gateways.items():
                    before = sink.spans
                    cpu_before = gateway.cpu_seconds()
                    seconds, ok, refused = drive(gateway.grpc_port, body, args.requests, args.concurrency)
                    cpu = gateway.cpu_seconds() - cpu_before
                    assert refused == 0 and ok == args.requests, (ok, refused)
                    forwarded = sink.spans - before - spans_per_request  # minus the warm-up request
                    assert forwarded == ok * spans_per_request, (forwarded, ok)
                    runs[name].append(forwarded / seconds)
                    cpu_runs[name].append((forwarded + spans_per_request) / cpu)
                round_ratios.append(runs["scoring"][-1] / runs["pass-through"][-1])
                cpu_ratios.append(cpu_runs["scoring"][-1] / cpu_runs["pass-through"][-1])
        finally:
            for gateway in gateways.values():
                gateway.stop()
        for name, values in runs.items():
            print(
                f"  {name:>13}: {statistics.median(values):>9,.0f} spans/s, "
                f"{statistics.median(cpu_runs[name]):>9,.0f} spans per gateway CPU-second (medians of {len(values)})"
            )
        cpu_ratio = statistics.median(cpu_ratios)
        print(
            f"  per gateway CPU-second: {cpu_ratio:.2f}x (rounds "
            + ", ".join(f"{v:.2f}" for v in cpu_ratios)
            + ")"
        )
        ratios[workload] = statistics.median(round_ratios)
        verdict = "PASS" if ratios[workload] >= 0.5 else "FAIL"
        print(
            f"  scoring / pass-through: {ratios[workload]:.2f}x (median; rounds "
            + ", ".join(f"{value:.2f}" for value in round_ratios)
            + f"; target >= 0.5x) -> {verdict}"
        )
    ratio = ratios["mixed"]
    body, _ = build_request()

    admitted = MAX_CONCURRENT + MAX_QUEUED
    gateway = GatewayProcess(downstream_port)
    try:
        drive(gateway.grpc_port, body, admitted * 3, admitted)
        normal = gateway.peak_rss_mib()
        _, ok, refused = drive(gateway.grpc_port, body, admitted * 30, admitted * 10)
        overload = gateway.peak_rss_mib()
    finally:
        gateway.stop()
    growth = overload / normal
    print(
        f"peak RSS: {normal:.0f} MiB at 1x ({admitted} in flight), {overload:.0f} MiB at 10x ({admitted * 10} in "
        f"flight; {ok} accepted, {refused} refused with UNAVAILABLE): {growth:.2f}x -> "
        f"{'bounded' if growth < 2 else 'NOT bounded'}"
    )
    server.stop(None)
    return 0 if ratio >= 0.5 and growth < 2 else 1


if __name__ == "__main__":
    sys.exit(main())
