"""Listener behaviour an upstream Collector or an operator meets: which addresses a listen setting reaches."""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from rag_confidence.gateway import ListenAddress

from .test_gateway_support import (
    DownstreamReceiver,
    Recording,
    downstream,
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
