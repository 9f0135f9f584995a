"""Listener behaviour an upstream Collector or an operator meets: which addresses a listen setting reaches."""

from __future__ import annotations

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

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
