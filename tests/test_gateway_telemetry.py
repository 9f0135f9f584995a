"""Which meter provider the gateway records into, from the standard ``OTEL_*`` variables."""

from __future__ import annotations

from concurrent import futures
from typing import Any

import grpc
import pytest
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider

from rag_confidence import semconv
from rag_confidence.errors import ConfigValidationError
from rag_confidence.gateway.telemetry import GatewayMetrics, meter_provider_from_environment
from rag_confidence.otel.metrics import ConfidenceInstruments
from rag_confidence.scoring import compute_confidence


@pytest.mark.parametrize(
    "environ",
    [
        {"OTEL_METRICS_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"},
        {},  # no endpoint: nothing would receive them
    ],
)
def test_metrics_off_means_nothing_is_recorded(environ: dict[str, str]) -> None:
    provider = meter_provider_from_environment(environ)
    # A no-op provider, not an SDK provider without readers: the latter still builds every measurement.
    assert isinstance(provider, NoOpMeterProvider)
    GatewayMetrics(provider).received("grpc", 3)
    ConfidenceInstruments(provider).record(
        compute_confidence({"supportLevel": "high", "candidates": []}), 0.001
    )


class _MetricsReceiver(metrics_service_pb2_grpc.MetricsServiceServicer):  # type: ignore[misc]
    def __init__(self) -> None:
        self.requests: list[Any] = []

    def Export(self, request: Any, context: Any) -> Any:  # noqa: N802
        self.requests.append(request)
        return metrics_service_pb2.ExportMetricsServiceResponse()


def test_metrics_on_are_exported_over_otlp_to_the_configured_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    receiver = _MetricsReceiver()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(receiver, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
    monkeypatch.delenv("OTEL_METRICS_EXPORTER", raising=False)
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    provider = meter_provider_from_environment()
    try:
        assert isinstance(provider, SdkMeterProvider)
        GatewayMetrics(provider).received("grpc", 3)
        assert provider.force_flush(10_000)
    finally:
        provider.shutdown(timeout_millis=5_000)
        server.stop(None)
    names = {
        metric.name
        for request in receiver.requests
        for resource in request.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }
    assert semconv.METRIC_GATEWAY_SPANS_RECEIVED in names
    services = {
        attribute.value.string_value
        for request in receiver.requests
        for resource in request.resource_metrics
        for attribute in resource.resource.attributes
        if attribute.key == "service.name"
    }
    assert services == {"rag-confidence-gateway"}


def test_an_unknown_metrics_protocol_is_a_config_error() -> None:
    with pytest.raises(ConfigValidationError):
        meter_provider_from_environment(
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "carrier-pigeon",
            }
        )
