"""Nothing lost: outages answered retryably, every span delivered exactly once; overload backpressure."""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence import semconv
from tests.test_gateway_support import (
    LOOPBACK,
    DownstreamReceiver,
    Recording,
    attributes_of,
    by_name,
    eventually,
    free_port,
    plain_trace,
    point_downstream_at,
    rag_trace,
    running_gateway,
    test_config,
    tracer_provider,
)
from tests.test_gateway_support import downstream as downstream  # the fixture, for pytest


def _start_later(receiver: DownstreamReceiver, delay: float) -> threading.Timer:
    timer = threading.Timer(delay, receiver.start)
    timer.start()
    return timer


@pytest.mark.parametrize("client", ["grpc", "http"])
def test_downstream_down_then_up_every_span_arrives_exactly_once(
    monkeypatch: pytest.MonkeyPatch, client: str
) -> None:
    receiver = DownstreamReceiver(port=free_port())  # not started: the downstream is down
    point_downstream_at(monkeypatch, receiver, timeout=0.5)
    with running_gateway(test_config(retry_after=1)) as running:
        inner = (
            GrpcSpanExporter(endpoint=f"http://127.0.0.1:{running.grpc_port}", insecure=True, timeout=30)
            if client == "grpc"
            else HttpSpanExporter(endpoint=f"{running.http_url}/v1/traces", timeout=30)
        )
        exporter = Recording(inner)
        provider = tracer_provider(exporter)
        for _ in range(3):
            rag_trace(provider)
        plain_trace(provider, spans=5)
        timer = _start_later(receiver, 2.0)
        try:
            provider.shutdown()  # flushes: the client exporter retries until the downstream is back
            assert exporter.results and all(result is SpanExportResult.SUCCESS for result in exporter.results)
            spans = receiver.wait_for_spans(14)
            time.sleep(0.3)  # a duplicate would arrive right behind
            spans = receiver.spans()
            counts = Counter(span.span_id for span in spans)
            assert len(counts) == 14 and set(counts.values()) == {1}
            answers = [span for span in spans if span.name == "answer"]
            assert all(semconv.RAG_CONFIDENCE_TOTAL in attributes_of(span) for span in answers)
            assert running.counter(semconv.METRIC_GATEWAY_EXPORT_FAILURES) >= 1
            assert (
                running.counter(semconv.METRIC_GATEWAY_SPANS_REJECTED, reason="downstream_unavailable") >= 14
            )
            assert running.counter(semconv.METRIC_GATEWAY_SPANS_FORWARDED) == 14
            # Metrics of a retried request are recorded once, when it is finally delivered.
            assert sum(point.count for point in running.metric_points(semconv.METRIC_SCORE)) == 3
        finally:
            timer.cancel()
            timer.join()
            receiver.stop()


def test_downstream_failure_is_unavailable_with_retry_info(monkeypatch: pytest.MonkeyPatch) -> None:
    receiver = DownstreamReceiver(port=free_port())
    point_downstream_at(monkeypatch, receiver, timeout=0.3)
    memory = InMemorySpanExporter()
    plain_trace(tracer_provider(memory, batch=False), spans=2)
    body = encode_spans(memory.get_finished_spans()).SerializeToString()
    with running_gateway(test_config(retry_after=7)) as running:
        with grpc.insecure_channel(f"127.0.0.1:{running.grpc_port}") as channel:
            export = channel.unary_unary(
                "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                request_serializer=None,
                response_deserializer=trace_service_pb2.ExportTraceServiceResponse.FromString,
            )
            with pytest.raises(grpc.RpcError) as raised:
                export(body, timeout=10)
        error: Any = raised.value
        assert error.code() == grpc.StatusCode.UNAVAILABLE
        retry_info = error_details_pb2.RetryInfo.FromString(
            dict(error.trailing_metadata())["google.rpc.retryinfo-bin"]
        )
        assert retry_info.retry_delay.seconds == 7
        import urllib.error
        import urllib.request

        request = urllib.request.Request(
            f"{running.http_url}/v1/traces", data=body, headers={"Content-Type": "application/x-protobuf"}
        )
        with pytest.raises(urllib.error.HTTPError) as http_error:
            urllib.request.urlopen(request, timeout=10)
        assert http_error.value.code == 503 and http_error.value.headers["Retry-After"] == "7"


class _GatedReceiver(DownstreamReceiver):
    """Holds every export until the test opens the gate."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()

    def record(self, request: trace_service_pb2.ExportTraceServiceRequest) -> None:
        self.gate.wait(30)
        super().record(request)


def test_overload_is_refused_retryably_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    receiver = _GatedReceiver().start()
    point_downstream_at(monkeypatch, receiver, timeout=30)
    memory = InMemorySpanExporter()
    plain_trace(tracer_provider(memory, batch=False), spans=2)
    body = encode_spans(memory.get_finished_spans()).SerializeToString()
    import urllib.error
    import urllib.request

    def post(_: int) -> tuple[int, str | None]:
        request = urllib.request.Request(
            f"{running.http_url}/v1/traces", data=body, headers={"Content-Type": "application/x-protobuf"}
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return int(response.status), None
        except urllib.error.HTTPError as error:
            return int(error.code), error.headers["Retry-After"]

    try:
        config = test_config(max_concurrent_requests=2, max_queued_requests=2, queue_timeout=30.0)
        with running_gateway(config) as running, ThreadPoolExecutor(12) as pool:
            admission = running.gateway.admission
            assert admission is not None
            admitted = [pool.submit(post, index) for index in range(4)]
            assert eventually(lambda: admission.active == 2 and admission.waiting == 2)
            # Two in progress, two waiting: every further request is turned away at once, retryably.
            assert list(pool.map(post, range(8))) == [(503, "1")] * 8
            receiver.gate.set()
            assert [future.result() for future in admitted] == [(200, None)] * 4
            assert len(receiver.spans()) == 8
            assert admission.active == 0 and admission.waiting == 0
    finally:
        receiver.gate.set()
        receiver.stop()


def test_answer_span_split_from_its_children_scored_with_the_assembly_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One request per span (SimpleSpanProcessor): the window supplies the children that came earlier."""
    from rag_confidence.gateway import AssemblySettings
    from rag_confidence.otel.answer_scoring import AnswerScorer
    from rag_confidence.signals import records_from_readable_spans

    receiver = DownstreamReceiver().start()
    point_downstream_at(monkeypatch, receiver)
    memory = InMemorySpanExporter()
    rag_trace(tracer_provider(memory, batch=False))
    expected = AnswerScorer().score(records_from_readable_spans(memory.get_finished_spans())).attributes
    try:
        for window, spans_seen in (
            (AssemblySettings(max_age=30), "whole trace"),
            (AssemblySettings(), "alone"),
        ):
            receiver.requests.clear()
            with running_gateway(test_config(assembly=window)) as running:
                provider = tracer_provider(
                    Recording(
                        GrpcSpanExporter(endpoint=f"http://127.0.0.1:{running.grpc_port}", insecure=True)
                    ),
                    batch=False,
                )
                rag_trace(provider)
                provider.shutdown()
                assert len(receiver.requests) == 3
                answer = attributes_of(by_name(receiver.wait_for_spans(3))["answer"])
                if spans_seen == "whole trace":
                    assert answer[semconv.RAG_CONFIDENCE_TOTAL] == expected[semconv.RAG_CONFIDENCE_TOTAL]
                    assert answer[semconv.RAG_CONFIDENCE_CANDIDATES] == 3
                    assert (
                        running.gateway.window is not None and len(running.gateway.window) == 1
                    )  # kept: may answer
                else:
                    assert answer[semconv.RAG_CONFIDENCE_CANDIDATES] == 0
    finally:
        receiver.stop()


def test_a_body_trickling_in_is_refused_retryably_at_its_deadline_and_frees_its_slot(
    downstream: DownstreamReceiver,
) -> None:
    """A client that sends its headers and then its body a byte at a time held the only processing slot for as
    long as it liked: every other request, on both listeners, waited and was refused with 503."""
    import socket
    import urllib.request

    memory = InMemorySpanExporter()
    plain_trace(tracer_provider(memory, batch=False), spans=2)
    body = encode_spans(memory.get_finished_spans()).SerializeToString()
    config = test_config(max_concurrent_requests=1, queue_timeout=10.0, body_timeout=0.5)
    with running_gateway(config) as running:
        slow = socket.create_connection((LOOPBACK, running.http_port))
        try:
            slow.sendall(
                b"POST /v1/traces HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/x-protobuf\r\n"
                b"Content-Length: 1000\r\n\r\n" + body[:1]
            )
            admission = running.gateway.admission
            assert admission is not None and eventually(lambda: admission.active == 1)
            started = time.monotonic()
            request = urllib.request.Request(
                f"{running.http_url}/v1/traces", data=body, headers={"Content-Type": "application/x-protobuf"}
            )
            with urllib.request.urlopen(request, timeout=10) as response:
                assert response.status == 200  # served once the slow body's deadline freed the slot
            assert time.monotonic() - started < 5.0
            slow.settimeout(5)
            reply = slow.recv(4096)
            assert reply.startswith(b"HTTP/1.1 503") and b"Retry-After: 1" in reply  # retryable, as OTLP says
        finally:
            slow.close()
        assert downstream.wait_for_spans(2)
        timed_out = [
            point
            for point in running.metric_points(semconv.METRIC_GATEWAY_REQUEST_DURATION)
            if point.attributes.get(semconv.METRIC_ATTR_GATEWAY_OUTCOME)
            == semconv.GATEWAY_OUTCOME_BODY_TIMEOUT
        ]
        assert sum(point.count for point in timed_out) == 1


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_client_hanging_up_mid_body_is_abandoned_quietly_and_frees_its_slot(
    downstream: DownstreamReceiver, caplog: pytest.LogCaptureFixture, framing: str
) -> None:
    """An upstream whose own timeout fires, or whose connection resets, while it uploads: aiohttp raised the
    reset out of the handler and logged a traceback at ERROR for every such request, unthrottled, and counted
    it as ``internal``. It is the caller giving up (``abandoned``), and the next request is served."""
    import logging
    import socket
    import urllib.request

    memory = InMemorySpanExporter()
    plain_trace(tracer_provider(memory, batch=False), spans=2)
    body = encode_spans(memory.get_finished_spans()).SerializeToString()
    caplog.set_level(logging.DEBUG)
    with running_gateway(test_config(max_concurrent_requests=1)) as running:
        for _ in range(3):
            hangs_up = socket.create_connection((LOOPBACK, running.http_port))
            head = b"POST /v1/traces HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/x-protobuf\r\n"
            if framing == "chunked":  # cut short inside a chunk of 1,000 bytes
                hangs_up.sendall(head + b"Transfer-Encoding: chunked\r\n\r\n3e8\r\n" + body[:3])
            else:
                hangs_up.sendall(head + b"Content-Length: 1000\r\n\r\n" + body[:3])
            hangs_up.close()

        def abandoned() -> int:
            return sum(
                point.count
                for point in running.metric_points(semconv.METRIC_GATEWAY_REQUEST_DURATION)
                if point.attributes.get(semconv.METRIC_ATTR_GATEWAY_OUTCOME)
                == semconv.GATEWAY_OUTCOME_ABANDONED
            )

        assert eventually(lambda: abandoned() == 3)
        request = urllib.request.Request(
            f"{running.http_url}/v1/traces", data=body, headers={"Content-Type": "application/x-protobuf"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
        assert downstream.wait_for_spans(2)
        outcomes = {
            point.attributes.get(semconv.METRIC_ATTR_GATEWAY_OUTCOME)
            for point in running.metric_points(semconv.METRIC_GATEWAY_REQUEST_DURATION)
        }
        assert semconv.GATEWAY_OUTCOME_INTERNAL not in outcomes
    # The gateway's and aiohttp's loggers only: asyncio may log here about a task an earlier test left behind.
    logged = [
        record
        for record in caplog.records
        if record.levelno >= logging.WARNING and record.name.startswith(("aiohttp", "rag_confidence"))
    ]
    assert not logged, caplog.text


def test_a_call_that_gave_up_keeps_its_slot_until_its_work_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    """A gRPC call cancelled by its deadline while its spans are being forwarded: the worker goes on (the
    spans are on their way), so the slot stays taken and the next request is refused at once, instead of
    being admitted to wait behind work admission no longer counted."""
    receiver = _GatedReceiver().start()
    point_downstream_at(monkeypatch, receiver, timeout=30)
    memory = InMemorySpanExporter()
    plain_trace(tracer_provider(memory, batch=False), spans=2)
    body = encode_spans(memory.get_finished_spans()).SerializeToString()
    method = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
    try:
        config = test_config(max_concurrent_requests=1, max_queued_requests=0)
        with (
            running_gateway(config) as running,
            grpc.insecure_channel(f"{LOOPBACK}:{running.grpc_port}") as ch,
        ):
            admission = running.gateway.admission
            assert admission is not None
            export = ch.unary_unary(method)
            with pytest.raises(grpc.RpcError) as gave_up:
                export(body, timeout=0.5)  # held at the gated downstream past its deadline
            assert gave_up.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            assert admission.active == 1  # its worker is still forwarding
            with pytest.raises(grpc.RpcError) as refused:
                export(body, timeout=5)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
            receiver.gate.set()
            assert eventually(lambda: admission.active == 0)
            assert len(receiver.spans()) == 2  # the first call's spans: they were on their way
    finally:
        receiver.gate.set()
        receiver.stop()


def test_spans_of_a_caller_that_gave_up_before_forwarding_are_not_forwarded(
    downstream: DownstreamReceiver,
) -> None:
    # Past its deadline the caller retries: forwarding the first copy too would store every span twice.
    memory = InMemorySpanExporter()
    plain_trace(tracer_provider(memory, batch=False), spans=2)
    body = encode_spans(memory.get_finished_spans()).SerializeToString()
    with running_gateway() as running:
        gateway = running.gateway
        outcome = gateway.process("grpc", body, "application/x-protobuf", None, lambda: True)
        assert outcome.label == semconv.GATEWAY_OUTCOME_ABANDONED and outcome.error is not None
        assert gateway.process("grpc", body, "application/x-protobuf", None, lambda: False).error is None
    assert len(downstream.wait_for_spans(2)) == 2
    time.sleep(0.3)  # a copy of the abandoned request would arrive right behind
    assert len(downstream.spans()) == 2


class _FirstCallUnavailable(trace_service_pb2_grpc.TraceServiceServicer):  # type: ignore[misc]
    """A downstream that stores what it receives, but refuses its first call with UNAVAILABLE once the other
    calls are in (stored, their answers still on the way): a Collector briefly out of memory, say."""

    def __init__(self, sink: DownstreamReceiver, others: int) -> None:
        self._sink = sink
        self._others = threading.Semaphore(0)
        self._expected = others
        self._first = threading.Lock()
        self._refused = threading.Event()

    def Export(self, request: Any, context: Any) -> Any:  # noqa: N802 (generated name)
        if self._first.acquire(blocking=False):
            for _ in range(self._expected):
                self._others.acquire(timeout=10)
            self._refused.set()
            context.abort(grpc.StatusCode.UNAVAILABLE, "try again")
        self._sink.record(request)
        self._others.release()
        self._refused.wait(10)
        time.sleep(0.3)  # the refusal reaches the gateway before these answers do
        return trace_service_pb2.ExportTraceServiceResponse()


def test_a_refused_export_does_not_make_concurrent_ones_deliver_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    receiver = DownstreamReceiver()
    server = grpc.server(ThreadPoolExecutor(max_workers=8))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(
        _FirstCallUnavailable(receiver, others=3), server
    )
    server.add_insecure_port(f"{LOOPBACK}:{receiver.port}")
    server.start()
    point_downstream_at(monkeypatch, receiver, timeout=10)
    bodies = []
    for _ in range(4):
        memory = InMemorySpanExporter()
        plain_trace(tracer_provider(memory, batch=False), spans=1)
        bodies.append(encode_spans(memory.get_finished_spans()).SerializeToString())
    try:
        with (
            running_gateway(test_config(max_concurrent_requests=4)) as running,
            ThreadPoolExecutor(4) as pool,
        ):

            def send(body: bytes) -> None:
                # Each upstream on its own connection, as separate Collectors are.
                options = [("grpc.use_local_subchannel_pool", 1)]
                with grpc.insecure_channel(f"{LOOPBACK}:{running.grpc_port}", options=options) as channel:
                    channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")(
                        body, timeout=20
                    )

            list(pool.map(send, bodies))  # every request answered OK: the gateway delivered each
        delivered = Counter(span.span_id for span in receiver.spans())
        assert len(delivered) == 4
        assert set(delivered.values()) == {1}, "a request answered once was delivered twice"
    finally:
        server.stop(None)
