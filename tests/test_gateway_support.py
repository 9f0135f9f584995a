"""Real parts for the gateway tests: an OTLP gRPC receiver downstream, a gateway on its own event loop, spans.

No mocks: the downstream is a grpcio server with opentelemetry-proto's TraceService servicer, clients are the
SDK's OTLP exporters, and everything talks over loopback sockets on ephemeral ports.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from contextlib import contextmanager
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, MetricsData
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter

from rag_confidence import semconv
from rag_confidence.gateway import Gateway, GatewayConfig, ListenAddress
from rag_confidence.gateway.forward import forwarder_from_environment

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


class _Collecting(trace_service_pb2_grpc.TraceServiceServicer):  # type: ignore[misc]
    def __init__(self, sink: DownstreamReceiver) -> None:
        self._sink = sink

    def Export(self, request: Any, context: Any) -> Any:  # noqa: N802 (generated name)
        self._sink.record(request)
        return trace_service_pb2.ExportTraceServiceResponse()


class DownstreamReceiver:
    """A real OTLP/gRPC trace receiver (what a Collector's otlp receiver is to the gateway)."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port if port is not None else free_port()
        self.requests: list[trace_service_pb2.ExportTraceServiceRequest] = []
        self._lock = threading.Lock()
        self._server: grpc.Server | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def record(self, request: trace_service_pb2.ExportTraceServiceRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def start(self) -> DownstreamReceiver:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_Collecting(self), server)
        bound = server.add_insecure_port(f"{LOOPBACK}:{self.port}")
        assert bound == self.port
        server.start()
        self._server = server
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(grace=None).wait()
            self._server = None

    def spans(self) -> list[ProtoSpan]:
        with self._lock:
            return [
                span
                for request in self.requests
                for resource in request.resource_spans
                for scope in resource.scope_spans
                for span in scope.spans
            ]

    def wait_for_spans(self, count: int, timeout: float = 20.0) -> list[ProtoSpan]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            spans = self.spans()
            if len(spans) >= count:
                return spans
            time.sleep(0.02)
        return self.spans()


@pytest.fixture
def downstream(monkeypatch: pytest.MonkeyPatch) -> Iterator[DownstreamReceiver]:
    receiver = DownstreamReceiver().start()
    point_downstream_at(monkeypatch, receiver)
    yield receiver
    receiver.stop()


def point_downstream_at(
    monkeypatch: pytest.MonkeyPatch, receiver: DownstreamReceiver, timeout: float = 2
) -> None:
    """The standard variables, as an operator would set them (the SDK exporters read os.environ)."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", str(timeout))
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_PROTOCOL", raising=False)


class RunningGateway:
    def __init__(
        self, gateway: Gateway, loop: asyncio.AbstractEventLoop, reader: InMemoryMetricReader
    ) -> None:
        self.gateway = gateway
        self.loop = loop
        self.reader = reader

    @property
    def grpc_port(self) -> int:
        assert self.gateway.grpc_port is not None
        return self.gateway.grpc_port

    @property
    def http_port(self) -> int:
        assert self.gateway.http_port is not None
        return self.gateway.http_port

    @property
    def http_url(self) -> str:
        return f"http://{LOOPBACK}:{self.http_port}"

    def metric_points(self, name: str) -> list[Any]:
        data: MetricsData | None = self.reader.get_metrics_data()
        points: list[Any] = []
        for resource_metrics in data.resource_metrics if data is not None else ():
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    if metric.name == name:
                        points.extend(metric.data.data_points)
        return points

    def counter(self, name: str, **attributes: str) -> int:
        total = 0
        for point in self.metric_points(name):
            if all(point.attributes.get(_attribute_key(key)) == value for key, value in attributes.items()):
                total += int(point.value)
        return total


def _attribute_key(keyword: str) -> str:
    return {
        "transport": semconv.METRIC_ATTR_GATEWAY_TRANSPORT,
        "reason": semconv.METRIC_ATTR_GATEWAY_REASON,
        "outcome": semconv.METRIC_ATTR_GATEWAY_OUTCOME,
    }[keyword]


def test_config(**overrides: Any) -> GatewayConfig:
    values: dict[str, Any] = {
        "grpc_listen": ListenAddress(LOOPBACK, 0),
        "http_listen": ListenAddress(LOOPBACK, 0),
        "shutdown_timeout": 5.0,
    }
    values.update(overrides)
    return GatewayConfig(**values)


test_config.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


@contextmanager
def running_gateway(config: GatewayConfig | None = None) -> Iterator[RunningGateway]:
    """The gateway on its own event loop thread, downstream from the environment, metrics in memory."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    gateway = Gateway(config or test_config(), forwarder_from_environment(), meter_provider=provider)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="gateway-loop", daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(gateway.start(), loop).result(10)
    try:
        yield RunningGateway(gateway, loop, reader)
    finally:
        asyncio.run_coroutine_threadsafe(gateway.stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


# ------------------------------------------------------------------------------------------------------ spans


def rag_trace(
    provider: TracerProvider, *, question: str = "What is the refund window?", documents: int = 3
) -> None:
    """One RAG answer as an application instruments it: answer span over a retriever and an LLM span."""
    tracer = provider.get_tracer("rag-app")
    with tracer.start_as_current_span("answer") as answer:
        answer.set_attribute(semconv.RAG_ANSWER, True)
        answer.set_attribute(semconv.RAG_SIGNAL_SUPPORT_LEVEL, "high")
        with tracer.start_as_current_span("retrieve") as retrieve:
            retrieve.set_attribute(semconv.OPENINFERENCE_SPAN_KIND, semconv.OPENINFERENCE_KIND_RETRIEVER)
            for index in range(documents):
                prefix = f"{semconv.OI_RETRIEVAL_DOCUMENTS}.{index}."
                retrieve.set_attribute(prefix + semconv.OI_DOCUMENT_ID, f"doc-{index}")
                retrieve.set_attribute(prefix + semconv.OI_DOCUMENT_SCORE, 0.9 - index * 0.1)
                retrieve.set_attribute(
                    prefix + semconv.OI_DOCUMENT_CONTENT, f"Refunds within {30 + index} days."
                )
        with tracer.start_as_current_span("generate") as generate:
            generate.set_attribute(semconv.OPENINFERENCE_SPAN_KIND, semconv.OPENINFERENCE_KIND_LLM)
            generate.set_attribute(semconv.OI_OUTPUT_VALUE, f"{question} 30 days [1].")


def plain_trace(provider: TracerProvider, spans: int = 3) -> None:
    tracer = provider.get_tracer("plain-app")
    with tracer.start_as_current_span("request"):
        for index in range(spans - 1):
            with tracer.start_as_current_span(f"step-{index}"):
                pass


def tracer_provider(exporter: SpanExporter, *, batch: bool = True) -> TracerProvider:
    """Batching (one request at ``shutdown``/``force_flush``) like production, or one request per span."""
    provider = TracerProvider(resource=Resource.create({"service.name": "gateway-test-app"}))
    processor = (
        BatchSpanProcessor(exporter, schedule_delay_millis=60_000, max_export_batch_size=512)
        if batch
        else SimpleSpanProcessor(exporter)
    )
    provider.add_span_processor(processor)
    return provider


class Recording(SpanExporter):
    """Wraps an exporter and remembers each batch's result (what the application would see)."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.results: list[Any] = []
        self.exported: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> Any:
        result = self.inner.export(spans)
        self.results.append(result)
        self.exported.extend(spans)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()


def attributes_of(span: ProtoSpan) -> dict[str, Any]:
    from rag_confidence.gateway.spans import attributes_to_dict

    return attributes_to_dict(span.attributes)


def by_name(spans: Sequence[ProtoSpan]) -> dict[str, ProtoSpan]:
    return {span.name: span for span in spans}


def eventually(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()
