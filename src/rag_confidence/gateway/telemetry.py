"""The gateway's own metrics, next to the confidence instruments, and their OTLP export downstream."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping

from opentelemetry.environment_variables import OTEL_METRICS_EXPORTER
from opentelemetry.metrics import CallbackOptions, MeterProvider, NoOpMeterProvider, Observation
from opentelemetry.sdk.environment_variables import (
    OTEL_EXPORTER_OTLP_ENDPOINT,
    OTEL_EXPORTER_OTLP_METRICS_COMPRESSION,
    OTEL_EXPORTER_OTLP_METRICS_ENDPOINT,
    OTEL_EXPORTER_OTLP_METRICS_PROTOCOL,
    OTEL_EXPORTER_OTLP_METRICS_TIMEOUT,
    OTEL_EXPORTER_OTLP_PROTOCOL,
)
from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider
from opentelemetry.sdk.metrics.export import MetricExporter, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import SERVICE_NAME as SERVICE_NAME_KEY
from opentelemetry.sdk.resources import Resource

from .. import semconv
from ..errors import ConfigValidationError
from .forward import (
    DEFAULT_PROTOCOL,
    PROTOCOL_GRPC,
    PROTOCOL_HTTP_PROTOBUF,
    check_http_compression,
    exporter_timeout,
    grpc_compression,
)

_logger = logging.getLogger(__name__)
SERVICE_NAME = "rag-confidence-gateway"
# Request durations: sub-millisecond decode-and-forward up to a downstream retrying for its whole timeout.
REQUEST_DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class GatewayMetrics:
    """Counters and histograms of the gateway itself (every attribute value from a closed set).

    >>> from opentelemetry.sdk.metrics import MeterProvider
    >>> metrics = GatewayMetrics(MeterProvider())
    >>> metrics.received("grpc", 3)
    """

    def __init__(self, meter_provider: MeterProvider) -> None:
        meter = meter_provider.get_meter(semconv.GATEWAY_INSTRUMENTATION_SCOPE)
        self._received = meter.create_counter(
            semconv.METRIC_GATEWAY_SPANS_RECEIVED, unit=semconv.UNIT_SPAN, description="Spans received."
        )
        self._forwarded = meter.create_counter(
            semconv.METRIC_GATEWAY_SPANS_FORWARDED,
            unit=semconv.UNIT_SPAN,
            description="Spans handed downstream successfully.",
        )
        self._rejected = meter.create_counter(
            semconv.METRIC_GATEWAY_SPANS_REJECTED,
            unit=semconv.UNIT_SPAN,
            description="Spans not forwarded, by reason (retryable refusals are retried by the client).",
        )
        self._export_failures = meter.create_counter(
            semconv.METRIC_GATEWAY_EXPORT_FAILURES,
            unit=semconv.UNIT_FAILURE,
            description="Downstream exports that failed after the exporter's own retries.",
        )
        self._active = meter.create_up_down_counter(
            semconv.METRIC_GATEWAY_ACTIVE_REQUESTS,
            unit=semconv.UNIT_REQUEST,
            description="Requests being received, scored or forwarded.",
        )
        self._duration = meter.create_histogram(
            semconv.METRIC_GATEWAY_REQUEST_DURATION,
            unit=semconv.UNIT_SECONDS,
            description="Time from receiving a request to answering it, by outcome.",
            explicit_bucket_boundaries_advisory=REQUEST_DURATION_BUCKETS,
        )
        self._answers = meter.create_counter(
            semconv.METRIC_GATEWAY_ANSWERS,
            unit=semconv.UNIT_ANSWER,
            description="Answer spans found, by outcome (scored, failed, already_scored).",
        )
        self._evictions = meter.create_counter(
            semconv.METRIC_GATEWAY_ASSEMBLY_EVICTIONS,
            unit=semconv.UNIT_TRACE,
            description="Traces dropped from the assembly window before completing, by reason.",
        )
        self._window_size: Callable[[], int] | None = None
        meter.create_observable_up_down_counter(
            semconv.METRIC_GATEWAY_ASSEMBLY_TRACES,
            callbacks=[self._observe_window],
            unit=semconv.UNIT_TRACE,
            description="Traces held in the assembly window.",
        )

    def watch_window(self, size: Callable[[], int]) -> None:
        """Observe the window's size through ``size`` (which may expire old traces first, see
        :meth:`~.assembly.AssemblyWindow.expire`)."""
        self._window_size = size

    def _observe_window(self, options: CallbackOptions) -> Iterable[Observation]:
        if self._window_size is None:
            return []
        return [Observation(self._window_size())]

    def received(self, transport: str, spans: int) -> None:
        self._received.add(spans, {semconv.METRIC_ATTR_GATEWAY_TRANSPORT: transport})

    def forwarded(self, transport: str, spans: int) -> None:
        self._forwarded.add(spans, {semconv.METRIC_ATTR_GATEWAY_TRANSPORT: transport})

    def rejected(self, transport: str, spans: int, reason: str) -> None:
        if spans:
            self._rejected.add(
                spans,
                {
                    semconv.METRIC_ATTR_GATEWAY_TRANSPORT: transport,
                    semconv.METRIC_ATTR_GATEWAY_REASON: reason,
                },
            )

    def export_failed(self) -> None:
        self._export_failures.add(1)

    def active(self, transport: str, delta: int) -> None:
        self._active.add(delta, {semconv.METRIC_ATTR_GATEWAY_TRANSPORT: transport})

    def request_done(self, transport: str, outcome: str, seconds: float) -> None:
        self._duration.record(
            seconds,
            {semconv.METRIC_ATTR_GATEWAY_TRANSPORT: transport, semconv.METRIC_ATTR_GATEWAY_OUTCOME: outcome},
        )

    def answer(self, outcome: str, count: int = 1) -> None:
        if count:
            self._answers.add(count, {semconv.METRIC_ATTR_GATEWAY_OUTCOME: outcome})

    def evicted(self, reason: str, count: int) -> None:
        self._evictions.add(count, {semconv.METRIC_ATTR_GATEWAY_REASON: reason})


def metric_exporter_from_environment(environ: Mapping[str, str] | None = None) -> MetricExporter | None:
    """The SDK's OTLP metric exporter per ``OTEL_EXPORTER_OTLP_[METRICS_]*``; None when metrics are off.

    Off when ``OTEL_METRICS_EXPORTER=none`` or when no endpoint is configured (the exporter default is the
    gateway's own port).
    """
    env = os.environ if environ is None else environ
    choice = (env.get(OTEL_METRICS_EXPORTER) or "").strip().lower()
    if choice == "none":
        return None
    if choice not in ("", "otlp"):
        raise ConfigValidationError(
            f"{OTEL_METRICS_EXPORTER}={choice!r}: the gateway exports its metrics over OTLP only (otlp or none)",
            path=OTEL_METRICS_EXPORTER,
        )
    if not (env.get(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT) or env.get(OTEL_EXPORTER_OTLP_ENDPOINT)):
        _logger.warning(
            "gateway metrics are not exported: set %s or %s",
            OTEL_EXPORTER_OTLP_ENDPOINT,
            OTEL_EXPORTER_OTLP_METRICS_ENDPOINT,
        )
        return None
    protocol = (
        env.get(OTEL_EXPORTER_OTLP_METRICS_PROTOCOL) or env.get(OTEL_EXPORTER_OTLP_PROTOCOL) or ""
    ).strip()
    protocol = protocol.lower() or DEFAULT_PROTOCOL
    timeout = exporter_timeout(OTEL_EXPORTER_OTLP_METRICS_TIMEOUT, env)
    if protocol == PROTOCOL_GRPC:
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
            OTLPMetricExporter as GrpcMetricExporter,
        )

        return GrpcMetricExporter(
            timeout=timeout, compression=grpc_compression(OTEL_EXPORTER_OTLP_METRICS_COMPRESSION, env)
        )
    if protocol == PROTOCOL_HTTP_PROTOBUF:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
            OTLPMetricExporter as HttpMetricExporter,
        )

        check_http_compression(OTEL_EXPORTER_OTLP_METRICS_COMPRESSION, env)
        return HttpMetricExporter(timeout=timeout)
    raise ConfigValidationError(
        f"unsupported OTLP metrics protocol {protocol!r}; use grpc or http/protobuf",
        path=OTEL_EXPORTER_OTLP_METRICS_PROTOCOL,
    )


def meter_provider_from_environment(environ: Mapping[str, str] | None = None) -> MeterProvider:
    """A meter provider exporting periodically (``OTEL_METRIC_EXPORT_INTERVAL``) over OTLP, if configured;
    a no-op provider when metrics are off, so no measurement is taken that nothing would read.

    The resource comes from ``OTEL_RESOURCE_ATTRIBUTES``/``OTEL_SERVICE_NAME``, ``service.name`` defaulting
    to ``rag-confidence-gateway``.
    """
    exporter = metric_exporter_from_environment(environ)
    if exporter is None:
        return NoOpMeterProvider()
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME_KEY, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME_KEY: SERVICE_NAME}))
    return SdkMeterProvider(metric_readers=[PeriodicExportingMetricReader(exporter)], resource=resource)
