"""``rag-confidence gateway``: score RAG answers in OTLP traces between Collectors.

Receives OTLP/gRPC and OTLP/HTTP (protobuf or JSON), finds answer spans with the same rules as
the in-process ``ConfidenceSpanProcessor``, writes the ``rag.confidence.*`` attributes onto them and
forwards every valid span to the downstream configured by the standard ``OTEL_EXPORTER_OTLP_*`` variables.
A request is answered with success only once the downstream accepted it; downstream failures are answered
with a retryable status so the upstream Collector's queue keeps the data. See ``docs/gateway.md``.

Run it::

    OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318 rag-confidence gateway --http-listen 0.0.0.0:4318

or from Python: ``rag_confidence.gateway.main(["--grpc-listen", "127.0.0.1:4317"])``.
"""

from __future__ import annotations

from .command import add_subparser, main, serve
from .config import AssemblySettings, GatewayConfig, ListenAddress, TlsSettings
from .forward import Forwarder, ForwardResult, forwarder_from_environment
from .service import Gateway

__all__ = [
    "AssemblySettings",
    "ForwardResult",
    "Forwarder",
    "Gateway",
    "GatewayConfig",
    "ListenAddress",
    "TlsSettings",
    "add_subparser",
    "forwarder_from_environment",
    "main",
    "serve",
]
