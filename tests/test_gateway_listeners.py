"""Listener behaviour an upstream Collector or an operator meets: which addresses a listen setting reaches."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence import semconv
from rag_confidence.gateway import ListenAddress
from rag_confidence.gateway.command import build_parser
from rag_confidence.gateway.config import (
    DEFAULT_GRPC_LISTEN,
    DEFAULT_HTTP_LISTEN,
    ENV_GRPC_LISTEN,
    ENV_HTTP_LISTEN,
    config_from_arguments,
)

from .test_gateway_support import (
    DownstreamReceiver,
    Recording,
    downstream,
    eventually,
    plain_trace,
    running_gateway,
    test_config,
    tracer_provider,
)

__all__ = ["downstream"]  # the fixture, imported for pytest


def test_the_ipv6_wildcard_accepts_ipv4_clients_on_both_listeners(downstream: DownstreamReceiver) -> None:
    # "[::]:4318" is how a dual-stack listener is written (gRPC's and Go's, the Collector's, accept IPv4 on
    # it): an IPv4 upstream must reach the HTTP listener as it reaches the gRPC one.
    config = test_config(grpc_listen=ListenAddress("::", 0), http_listen=ListenAddress("::", 0))
    with running_gateway(config) as running:
        exporters = [
            Recording(GrpcSpanExporter(endpoint=f"http://127.0.0.1:{running.grpc_port}", insecure=True)),
            Recording(
                HttpSpanExporter(endpoint=f"http://127.0.0.1:{running.http_port}/v1/traces", timeout=2)
            ),
        ]
        for exporter in exporters:
            provider = tracer_provider(exporter)
            plain_trace(provider, spans=2)
            provider.shutdown()
            assert exporter.results == [SpanExportResult.SUCCESS]
        assert len(downstream.wait_for_spans(4)) == 4


@pytest.mark.parametrize("variable", [ENV_GRPC_LISTEN, ENV_HTTP_LISTEN])
def test_a_blank_listen_variable_means_the_default_not_off(variable: str) -> None:
    # A manifest that templates the variable from an empty value sets it to "": like every other blank
    # variable of the gateway (and OpenTelemetry's rule for its own), that is unset, not a listener turned off.
    config = config_from_arguments(build_parser().parse_args([]), {variable: ""})
    assert str(config.grpc_listen) == DEFAULT_GRPC_LISTEN
    assert str(config.http_listen) == DEFAULT_HTTP_LISTEN
    off = config_from_arguments(build_parser().parse_args([]), {variable: "off"})
    assert None in (off.grpc_listen, off.http_listen)


_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
# Channels of one process share connections by default: each upstream here has its own, as separate
# Collectors do.
_OWN_CONNECTION = ("grpc.use_local_subchannel_pool", 1)
# What the Collector's otlp exporter retries: these codes, and RESOURCE_EXHAUSTED only with RetryInfo in the
# rich status (grpc-status-details-bin); anything else drops the batch for good.
_RETRIED = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.DEADLINE_EXCEEDED}


def _retried_by_a_collector(error: grpc.RpcError) -> bool:
    code = error.code()
    if code in _RETRIED:
        return True
    details = dict(error.trailing_metadata() or ()).get("grpc-status-details-bin")
    if code != grpc.StatusCode.RESOURCE_EXHAUSTED or details is None:
        return False
    status = status_pb2.Status.FromString(details)
    return any(detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR) for detail in status.details)


def _outcomes(running: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for point in running.metric_points(semconv.METRIC_GATEWAY_REQUEST_DURATION):
        outcome = str(point.attributes.get(semconv.METRIC_ATTR_GATEWAY_OUTCOME))
        counts[outcome] = counts.get(outcome, 0) + point.count
    return counts


def test_calls_past_every_grpc_bound_are_refused_retryably_never_dropped(
    downstream: DownstreamReceiver,
) -> None:
    memory = InMemorySpanExporter()
    plain_trace(tracer_provider(memory, batch=False), spans=2)
    body = encode_spans(memory.get_finished_spans()).SerializeToString()
    release = threading.Event()

    def slow_body() -> Iterator[
        bytes
    ]:  # an upstream on a slow link: the call is open, its message not in yet
        release.wait(30)
        yield body

    config = test_config(max_concurrent_requests=1, max_queued_requests=0, body_timeout=30.0)
    with running_gateway(config) as running, ThreadPoolExecutor(8) as pool:
        target = f"127.0.0.1:{running.grpc_port}"
        # Each on its own connection (one stream per connection at these settings), as many as the gateway
        # allows calls at once.
        channels = [grpc.insecure_channel(target, options=[_OWN_CONNECTION]) for _ in range(5)]
        try:
            slow = [
                pool.submit(channel.stream_unary(_EXPORT), slow_body(), timeout=30)
                for channel in channels[:4]
            ]
            time.sleep(1.0)  # the four calls are open on the gateway
            with pytest.raises(grpc.RpcError) as refused:
                channels[4].unary_unary(_EXPORT)(body, timeout=10)
            assert _retried_by_a_collector(refused.value), (refused.value.code(), refused.value.details())
        finally:
            release.set()
            for future in slow:
                with contextlib.suppress(grpc.RpcError):
                    future.result(30)
            for channel in channels:
                channel.close()


def test_grpc_calls_given_up_before_their_message_is_in_are_abandoned_and_free_their_slot(
    downstream: DownstreamReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    """An upstream whose deadline passes, or which cancels, while its call waits for a slot or while its
    message is read: the gRPC counterpart of an HTTP client hanging up mid-body. It gave up and will send the
    spans again, so the outcome is ``abandoned``: not ``invalid`` (the stream-unary handler saw EOF and took it
    for a call without a message) nor ``internal`` (a cancellation out of the slot wait)."""
    import logging

    memory = InMemorySpanExporter()
    plain_trace(tracer_provider(memory, batch=False), spans=2)
    body = encode_spans(memory.get_finished_spans()).SerializeToString()
    never = threading.Event()

    def stalled() -> Iterator[bytes]:  # the call is open, its message never comes
        never.wait(30)
        yield body

    caplog.set_level(logging.DEBUG)
    config = test_config(
        max_concurrent_requests=1, max_queued_requests=1, queue_timeout=30.0, body_timeout=30.0
    )
    with running_gateway(config) as running:
        admission = running.gateway.admission
        assert admission is not None
        channel = grpc.insecure_channel(f"127.0.0.1:{running.grpc_port}")
        try:
            # Its deadline passes while its message is read (it holds the slot).
            reading = channel.stream_unary(_EXPORT).future(stalled(), timeout=2.0)
            assert eventually(lambda: admission.active == 1)
            # Cancelled while it waits for that slot.
            queued = channel.unary_unary(_EXPORT).future(body, timeout=30)
            assert eventually(lambda: admission.waiting == 1)
            queued.cancel()
            with pytest.raises(grpc.RpcError) as expired:
                reading.result(10)
            assert expired.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            # Cancelled while its message is read.
            cancelled = channel.stream_unary(_EXPORT).future(stalled(), timeout=30)
            assert eventually(lambda: admission.active == 1)
            cancelled.cancel()
            assert eventually(lambda: admission.active == 0 and admission.waiting == 0)
            # The slot is free again: the next call is served.
            assert channel.unary_unary(_EXPORT)(body, timeout=10) == b""
        finally:
            never.set()
            channel.close()
        assert downstream.wait_for_spans(2)
        expected = {semconv.GATEWAY_OUTCOME_ABANDONED: 3, semconv.GATEWAY_OUTCOME_OK: 1}
        assert eventually(lambda: _outcomes(running) == expected), _outcomes(running)
        in_flight = running.metric_points(semconv.METRIC_GATEWAY_ACTIVE_REQUESTS)
        assert [point.value for point in in_flight] == [0]
    logged = [
        record
        for record in caplog.records
        if record.levelno >= logging.WARNING and record.name.startswith(("grpc", "rag_confidence"))
    ]
    assert not logged, caplog.text


@pytest.mark.parametrize("compression", [None, grpc.Compression.Gzip])
def test_a_grpc_message_over_the_size_limit_counts_as_too_large_not_abandoned(
    downstream: DownstreamReceiver, compression: grpc.Compression | None
) -> None:
    """grpcio refuses a message past ``grpc.max_receive_message_length`` itself (before reading it) and the
    handler only sees the call end: it must still count as the size refusal it is (``too_large``, as an
    oversize HTTP body), not as a caller that gave up. A gzip message is limited once inflated."""
    limit = 64 * 1024
    memory = InMemorySpanExporter()
    plain_trace(tracer_provider(memory, batch=False), spans=2)
    body = encode_spans(memory.get_finished_spans()).SerializeToString()
    oversize = body + b"\0" * (4 * limit)  # zero bytes: field 0 is invalid, but the size is refused first
    with running_gateway(test_config(max_request_bytes=limit)) as running:
        with grpc.insecure_channel(f"127.0.0.1:{running.grpc_port}") as channel:
            export = channel.unary_unary(_EXPORT)
            with pytest.raises(grpc.RpcError) as refused:
                export(oversize, timeout=10, compression=compression)
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "larger than max" in (refused.value.details() or ""), refused.value.details()
            assert export(body, timeout=10, compression=compression) == b""
        expected = {semconv.GATEWAY_OUTCOME_TOO_LARGE: 1, semconv.GATEWAY_OUTCOME_OK: 1}
        assert eventually(lambda: _outcomes(running) == expected), _outcomes(running)


def test_grpc_bdp_probing_is_off_by_default_and_a_setting(
    downstream: DownstreamReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BDP probing grows every connection's HTTP/2 windows, so what grpcio buffers of messages not read yet
    (calls waiting for a slot) grows with the connections: off unless asked for (memory measured with
    benchmarks/grpc_memory.py, see docs/gateway.md). Calls are still served with it off."""
    servers: list[dict[str, Any]] = []
    real_server = grpc.aio.server

    def recording_server(*args: Any, **kwargs: Any) -> Any:
        servers.append(dict(kwargs.get("options") or ()))
        return real_server(*args, **kwargs)

    monkeypatch.setattr(grpc.aio, "server", recording_server)
    parse = build_parser().parse_args
    assert not config_from_arguments(parse([]), {}).grpc_bdp_probe
    assert config_from_arguments(parse([]), {"RAG_CONFIDENCE_GATEWAY_GRPC_BDP_PROBE": "true"}).grpc_bdp_probe
    assert config_from_arguments(parse(["--grpc-bdp-probe"]), {}).grpc_bdp_probe
    variable_on = {"RAG_CONFIDENCE_GATEWAY_GRPC_BDP_PROBE": "on"}
    assert not config_from_arguments(parse(["--no-grpc-bdp-probe"]), variable_on).grpc_bdp_probe
    memory = InMemorySpanExporter()
    plain_trace(tracer_provider(memory, batch=False), spans=2)
    body = encode_spans(memory.get_finished_spans()).SerializeToString()
    for setting in (False, True):
        with (
            running_gateway(test_config(grpc_bdp_probe=setting)) as running,
            grpc.insecure_channel(f"127.0.0.1:{running.grpc_port}") as channel,
        ):
            assert channel.unary_unary(_EXPORT)(body, timeout=10) == b""
    assert [options.get("grpc.http2.bdp_probe") for options in servers] == [0, 1]
