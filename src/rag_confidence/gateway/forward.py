"""Downstream: the SDK's own OTLP span exporters, fed requests the gateway already holds in protobuf form.

Why this way. The SDK exporters take ``ReadableSpan`` objects; rebuilding those from received protobuf spans
would lose fields the SDK cannot represent (``flags``, dropped counts, foreign scopes) and encode everything
twice. Writing our own gRPC/HTTP client would re-implement what the exporters already get right: every
``OTEL_EXPORTER_OTLP_*`` variable (endpoint, insecure, headers, certificate and client certificate,
compression, timeout, the ``..._TRACES_...`` forms, credential-provider entry points), retries with backoff,
``RetryInfo`` and ``Retry-After``, reconnection. So the gateway constructs the exporter exactly as an
application would, and hands it the encoded ``ExportTraceServiceRequest`` at the one seam each exporter has
below encoding:

- gRPC: ``OTLPExporterMixin._export(data)`` calls ``self._translate_data(data)`` to obtain the request; the
  subclass's ``_translate_data`` returns the request it is given.
- HTTP: ``OTLPSpanExporter.export`` serializes and calls ``self._client.export(bytes)`` (the
  ``_OTLPHTTPClient`` that retries, compresses and honours ``Retry-After``); the subclass calls it with the
  request's bytes.

Both seams are private API of ``opentelemetry-exporter-otlp-proto-*``; :func:`check_exporter_seams` verifies
them at start-up so an incompatible SDK fails loudly instead of silently, and a test pins them.

The exporter's retry budget is its timeout (``OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT``); the gateway's default
is :data:`~rag_confidence.gateway.config.DEFAULT_DOWNSTREAM_TIMEOUT` seconds rather than the SDK's 10, so the
gateway answers before a Collector upstream (5 s default) gives up on the request.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import grpc  # type: ignore[import-untyped,unused-ignore]
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.environment_variables import (
    OTEL_EXPORTER_OTLP_COMPRESSION,
    OTEL_EXPORTER_OTLP_ENDPOINT,
    OTEL_EXPORTER_OTLP_PROTOCOL,
    OTEL_EXPORTER_OTLP_TIMEOUT,
    OTEL_EXPORTER_OTLP_TRACES_COMPRESSION,
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
    OTEL_EXPORTER_OTLP_TRACES_TIMEOUT,
)
from opentelemetry.sdk.trace.export import SpanExportResult

from ..errors import ConfigValidationError
from .config import DEFAULT_DOWNSTREAM_TIMEOUT
from .spans import span_count

_logger = logging.getLogger(__name__)

PROTOCOL_GRPC = "grpc"
PROTOCOL_HTTP_PROTOBUF = "http/protobuf"
PROTOCOL_HTTP_JSON = "http/json"
# The OTLP exporter specification's default.
DEFAULT_PROTOCOL = PROTOCOL_HTTP_PROTOBUF
#: Longest exporter timeout accepted, in seconds (see :func:`exporter_timeout`).
MAX_EXPORT_TIMEOUT = 600.0


@dataclass(frozen=True, slots=True)
class ForwardResult:
    """Outcome of handing one request downstream (the exporter has already retried what it could)."""

    ok: bool
    detail: str = ""


class Forwarder(Protocol):
    """Sends an encoded request downstream; thread-safe; ``shutdown`` aborts retries in progress."""

    @property
    def description(self) -> str: ...

    def forward(self, request: ExportTraceServiceRequest) -> ForwardResult: ...

    def shutdown(self) -> None: ...


def split_userinfo(endpoint: str) -> tuple[str, str, str]:
    """``endpoint`` as (its scheme with ``://``, its userinfo or "", the rest).

    >>> split_userinfo("https://user:p/w@collector:4318/v1")
    ('https://', 'user:p/w', 'collector:4318/v1')
    """
    # The userinfo ends at the last "@" before the path: a raw "/" in a password is not the path yet.
    scheme, separator, rest = endpoint.partition("://")
    if not separator:
        scheme, rest = "", endpoint
    userinfo, at, after = rest.rpartition("@")
    return (scheme + separator, userinfo, after) if at else (scheme + separator, "", rest)


def without_credentials(endpoint: str) -> str:
    """``endpoint`` for a log line: a password in it becomes ``***``, and so does a query (tokens travel there).

    >>> without_credentials("https://user:hunter2@collector:4318/v1/traces?token=abc")
    'https://user:***@collector:4318/v1/traces?***'
    >>> without_credentials("https://glc_token@collector:4318")  # a token given as the user name
    'https://***@collector:4318'
    >>> without_credentials("collector:4317")
    'collector:4317'
    """
    prefix, userinfo, rest = split_userinfo(endpoint)
    if userinfo:
        user, _, password = userinfo.partition(":")
        rest = f"{user}:***@{rest}" if password else f"***@{rest}"
    path, question, _ = rest.partition("?")
    masked = f"{path}?***" if question else path
    return f"{prefix}{masked}"


def _shown(configured: str, parsed: str) -> str:
    # With credentials in the URL, the endpoint as the user wrote it, masked: the exporter's own parse of an
    # unusual userinfo (a raw "/" in the password) may keep part of the secret where no "@" marks it any more.
    return without_credentials(configured if "@" in configured else parsed)


class _GrpcRequestExporter(GrpcSpanExporter):
    """The SDK gRPC span exporter, given an ``ExportTraceServiceRequest`` instead of ``ReadableSpan``s."""

    def _translate_data(self, data: Any) -> ExportTraceServiceRequest:
        assert isinstance(data, ExportTraceServiceRequest)
        return data

    def _count_data(self, data: Any) -> int:
        return span_count(data)


class GrpcForwarder:
    """One SDK exporter per worker thread: on UNAVAILABLE the exporter closes its channel and opens another,
    which cancels every export in progress on that channel. Shared, one request's refusal cancelled the others'
    calls after the downstream had stored them, and their retries delivered them twice. (Channels with the same
    settings still share their connection.)"""

    def __init__(
        self, timeout: float | None, compression: grpc.Compression | None = None, *, configured: str = ""
    ) -> None:
        self._timeout = timeout
        self._compression = compression
        # Built now, so settings the SDK refuses stop the gateway at start; the first thread to forward takes it.
        self._exporter = self._new_exporter()
        self._idle = [self._exporter]
        self._exporters = [self._exporter]
        self._lock = threading.Lock()
        self._closed = False
        self._local = threading.local()
        self._configured = configured

    def _new_exporter(self) -> _GrpcRequestExporter:
        return _GrpcRequestExporter(timeout=self._timeout, compression=self._compression)

    def _own_exporter(self) -> _GrpcRequestExporter:
        exporter: _GrpcRequestExporter | None = getattr(self._local, "exporter", None)
        if exporter is None:
            with self._lock:
                exporter = self._idle.pop() if self._idle else self._new_exporter()
                if exporter is not self._exporter:
                    self._exporters.append(exporter)
                if self._closed:
                    exporter.shutdown()  # type: ignore[no-untyped-call,unused-ignore]
            self._local.exporter = exporter
        return exporter

    @property
    def description(self) -> str:
        return f"{PROTOCOL_GRPC} {_shown(self._configured, str(self._exporter._endpoint))}"

    def forward(self, request: ExportTraceServiceRequest) -> ForwardResult:
        try:
            result = self._own_exporter()._export(request)
        except Exception as error:  # a channel closed under us by shutdown, ...
            return ForwardResult(False, f"gRPC export raised {type(error).__name__}")
        if result is SpanExportResult.SUCCESS:
            return ForwardResult(True)
        return ForwardResult(False, "gRPC export failed")

    def shutdown(self) -> None:
        with self._lock:
            self._closed = True
            exporters = list(self._exporters)
        for exporter in exporters:
            exporter.shutdown()  # type: ignore[no-untyped-call,unused-ignore]


class _HttpRequestExporter(HttpSpanExporter):
    """The SDK HTTP span exporter, given an ``ExportTraceServiceRequest`` instead of ``ReadableSpan``s."""

    def export_request(self, request: ExportTraceServiceRequest) -> ForwardResult:
        if self._shutdown:
            return ForwardResult(False, "exporter shut down")
        outcome = self._client.export(request.SerializeToString())
        if outcome.success:
            return ForwardResult(True)
        status = f"HTTP {outcome.status_code}" if outcome.status_code else type(outcome.error).__name__
        return ForwardResult(False, f"HTTP export failed ({status})")


class HttpForwarder:
    def __init__(self, timeout: float | None, *, configured: str = "") -> None:
        self._exporter = _HttpRequestExporter(timeout=timeout)
        self._configured = configured

    @property
    def description(self) -> str:
        return f"{PROTOCOL_HTTP_PROTOBUF} {_shown(self._configured, str(self._exporter._endpoint))}"

    def forward(self, request: ExportTraceServiceRequest) -> ForwardResult:
        try:
            return self._exporter.export_request(request)
        except Exception as error:
            return ForwardResult(False, f"HTTP export raised {type(error).__name__}")

    def shutdown(self) -> None:
        self._exporter.shutdown()  # type: ignore[no-untyped-call,unused-ignore]


def check_exporter_seams() -> None:
    """Fail at start-up, not at the first request, if the installed exporters lack the seams we use."""
    missing = [
        name
        for owner, name in (
            (GrpcSpanExporter, "_export"),
            (GrpcSpanExporter, "_translate_data"),
            (GrpcSpanExporter, "_count_data"),
        )
        if not callable(getattr(owner, name, None))
    ]
    if missing:
        raise RuntimeError(
            f"opentelemetry-exporter-otlp-proto-grpc lacks {missing}; this version is not supported"
        )
    probe = _HttpRequestExporter(endpoint="http://127.0.0.1:9/v1/traces", timeout=1)
    try:
        if not callable(getattr(getattr(probe, "_client", None), "export", None)):
            raise RuntimeError("opentelemetry-exporter-otlp-proto-http has no _client.export; not supported")
    finally:
        probe.shutdown()  # type: ignore[no-untyped-call,unused-ignore]


def traces_protocol(environ: Mapping[str, str] | None = None) -> str:
    return _protocol_setting(os.environ if environ is None else environ)[1]


def _protocol_setting(env: Mapping[str, str]) -> tuple[str, str]:
    """The variable the traces protocol comes from (for messages) and its value, lower case."""
    for variable in (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, OTEL_EXPORTER_OTLP_PROTOCOL):
        protocol = (env.get(variable) or "").strip()
        if protocol:
            return variable, protocol.lower()
    return OTEL_EXPORTER_OTLP_PROTOCOL, DEFAULT_PROTOCOL


def downstream_timeout(environ: Mapping[str, str] | None = None) -> float:
    """The traces exporter's timeout in seconds: ``OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT``, else the gateway's
    shorter default (see :func:`exporter_timeout`)."""
    timeout = exporter_timeout(OTEL_EXPORTER_OTLP_TRACES_TIMEOUT, environ)
    return DEFAULT_DOWNSTREAM_TIMEOUT if timeout is None else timeout


def exporter_timeout(signal_variable: str, environ: Mapping[str, str] | None = None) -> float | None:
    """``signal_variable`` or ``OTEL_EXPORTER_OTLP_TIMEOUT`` in seconds; None when neither is set.

    Seconds, because the OpenTelemetry Python SDK's exporters read them so (the specification says
    milliseconds). Read here, not left to the exporter, so that a value no exporter should run with fails at
    start-up: a malformed one (the SDK would fall back to 10 s, or raise at the first export) or one over
    :data:`MAX_EXPORT_TIMEOUT` seconds (most likely milliseconds: ``3000`` would hold every request for 50
    minutes while the upstream Collector long gave up).
    """
    env = os.environ if environ is None else environ
    for variable in (signal_variable, OTEL_EXPORTER_OTLP_TIMEOUT):
        text = (env.get(variable) or "").strip()
        if not text:
            continue
        try:
            seconds = float(text)
        except ValueError:
            seconds = math.nan
        if not (math.isfinite(seconds) and 0 < seconds <= MAX_EXPORT_TIMEOUT):
            raise ConfigValidationError(
                f"{variable}={text!r}: expected seconds (as the OpenTelemetry Python SDK reads it; the "
                f"specification's milliseconds would be 1000 times too long), more than 0 and at most "
                f"{MAX_EXPORT_TIMEOUT:g}",
                path=variable,
            )
        return seconds
    return None


def check_http_compression(signal_variable: str, environ: Mapping[str, str] | None = None) -> None:
    """Refuse a compression the SDK's HTTP exporters do not know (they would log and send uncompressed)."""
    env = os.environ if environ is None else environ
    for variable in (signal_variable, OTEL_EXPORTER_OTLP_COMPRESSION):
        raw = env.get(variable) or ""
        text = raw.strip().lower()
        if not raw:
            continue
        # A blank but set value still wins in the SDK, which then logs and sends uncompressed: refuse it too.
        if text not in ("gzip", "deflate", "none"):
            raise ConfigValidationError(f"{variable}={text!r}: use gzip, deflate or none", path=variable)
        return


def grpc_compression(signal_variable: str, environ: Mapping[str, str] | None = None) -> grpc.Compression:
    """``signal_variable`` or ``OTEL_EXPORTER_OTLP_COMPRESSION`` for a gRPC exporter: ``gzip`` or ``none``.

    Read here because the SDK's gRPC exporters know only ``gzip`` and raise on ``none``, which the
    specification allows (and is their own default).
    """
    env = os.environ if environ is None else environ
    for variable in (signal_variable, OTEL_EXPORTER_OTLP_COMPRESSION):
        text = (env.get(variable) or "").strip().lower()
        if not text:
            continue
        if text == "gzip":
            return grpc.Compression.Gzip
        if text == "none":
            return grpc.Compression.NoCompression
        raise ConfigValidationError(f"{variable}={text!r}: use gzip or none", path=variable)
    return grpc.Compression.NoCompression


def forwarder_from_environment(environ: Mapping[str, str] | None = None) -> Forwarder:
    """Build the downstream from ``OTEL_EXPORTER_OTLP_*`` (the exporters read ``os.environ`` themselves).

    Refuses to start without an endpoint: the exporters' defaults (``localhost:4317``/``4318``) are the
    gateway's own ports, so a forgotten variable would loop every span back into the gateway.
    """
    env = os.environ if environ is None else environ
    if not (env.get(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or env.get(OTEL_EXPORTER_OTLP_ENDPOINT)):
        raise ConfigValidationError(
            f"no downstream: set {OTEL_EXPORTER_OTLP_ENDPOINT} (or {OTEL_EXPORTER_OTLP_TRACES_ENDPOINT}); "
            "the exporter default would point back at the gateway's own port",
            path=OTEL_EXPORTER_OTLP_ENDPOINT,
        )
    variable, protocol = _protocol_setting(env)
    timeout = downstream_timeout(env)
    configured = env.get(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or env.get(OTEL_EXPORTER_OTLP_ENDPOINT) or ""
    if protocol == PROTOCOL_GRPC:
        compression = grpc_compression(OTEL_EXPORTER_OTLP_TRACES_COMPRESSION, env)
        return GrpcForwarder(timeout, compression, configured=configured)
    if protocol == PROTOCOL_HTTP_PROTOBUF:
        check_http_compression(OTEL_EXPORTER_OTLP_TRACES_COMPRESSION, env)
        return HttpForwarder(timeout, configured=configured)
    if protocol == PROTOCOL_HTTP_JSON:
        raise ConfigValidationError(
            f"{variable}=http/json: the OpenTelemetry Python SDK has no OTLP/JSON exporter; use grpc or "
            "http/protobuf",
            path=variable,
        )
    raise ConfigValidationError(
        f"{variable}={protocol!r}: unknown OTLP protocol; use grpc or http/protobuf", path=variable
    )
