#!/usr/bin/env python3
"""Score a steady stream of RAG traces and serve the resulting metrics for Prometheus to scrape.

    python dashboards/demo_traffic.py --port 9464             # in-process ConfidenceSpanProcessor
    python dashboards/demo_traffic.py --port 9465 --gateway   # the gateway, fed over OTLP/HTTP on loopback
    # then scrape http://127.0.0.1:9464/metrics (and :9465)

It is what the dashboard tests scrape, and a way to see the dashboards populated on a laptop. The traces are
real OpenTelemetry spans in the shapes instrumentors emit (an OpenInference RETRIEVER span with documents, a
root span carrying ``rag.signal.*`` attributes), scored by the real ``ConfidenceSpanProcessor``; its
instruments, and its own pipeline metrics (``rag_confidence_processor_*``: spans in and out, answers by
outcome, failures, trace buffer), record on a ``MeterProvider`` read by the OpenTelemetry Prometheus exporter.
Nothing about the metrics is simulated: only the RAG application is.

With ``--gateway`` the application exports its spans unscored over OTLP/HTTP to a real gateway
(``rag_confidence.gateway.Gateway``) on a loopback port, which scores them and forwards them to a loopback
OTLP sink; the gateway's own metrics (spans received, forwarded, rejected, export failures, assembly
evictions, request durations) join the confidence instruments on the Prometheus endpoint. The sink refuses
every fifth export with 400 and every round also sends one span with an invalid id and one span whose trace
never completes, so rejections, export failures and evictions show on the Pipeline health dashboard.

The scenarios cover every recommended action, the tier 2 dimensions, and every warning code the dashboards
and alert rules query (deleted-source leakage, embedding version mismatch, unconfirmed ACL filter, missing
signals), so every panel has data.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import signal
import sys
import threading
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from prometheus_client import start_http_server

try:
    from rag_confidence import semconv
    from rag_confidence.otel import ConfidenceSpanProcessor, record_signals
except ImportError:  # a source checkout that was never installed
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    from rag_confidence import semconv
    from rag_confidence.otel import ConfidenceSpanProcessor, record_signals

# Tier 2 extensions on (corpus, freshness, index integrity), ACL confirmation required, and faithfulness
# required by the signal policy: the configuration under which every readiness warning can occur.
SCORING_CONFIG: Mapping[str, Any] = {
    "corpus": {"expectedTypeCount": 3},
    "freshness": {},
    "indexIntegrity": {"requireAclFilterConfirmation": True},
    "signalPolicy": {"require": ["faithfulnessScore"]},
}

HEALTHY_INDEX: Mapping[str, Any] = {
    "expected_embedding_model_version": "text-embedding-3-large@2024-01",
    "actual_embedding_model_version": "text-embedding-3-large@2024-01",
    "source_version_match_ratio": 0.99,
    "stale_indexed_document_ratio": 0.01,
    "failed_ingestion_count": 0,
    "acl_filter_confirmed": True,
    "deleted_source_leakage_count": 0,
}


class _Discard(SpanExporter):
    """Where the scored spans go: a trace backend is not what this process is about."""

    def export(self, spans: Any) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


def _documents(scores: list[float], age_days: int | None) -> dict[str, Any]:
    """OpenInference retriever attributes (``retrieval.documents.{i}.document.*``)."""
    attributes: dict[str, Any] = {semconv.OPENINFERENCE_SPAN_KIND: semconv.OPENINFERENCE_KIND_RETRIEVER}
    now = datetime.now(timezone.utc)
    for i, score in enumerate(scores):
        prefix = f"{semconv.OI_RETRIEVAL_DOCUMENTS}.{i}."
        metadata: dict[str, Any] = {"document_type": ("policy", "faq", "memo")[i % 3]}
        if age_days is not None:
            metadata["last_updated"] = (now - timedelta(days=age_days + 30 * i)).isoformat()
        attributes[prefix + semconv.OI_DOCUMENT_ID] = f"doc-{i}"
        attributes[prefix + semconv.OI_DOCUMENT_SCORE] = score
        attributes[prefix + semconv.OI_DOCUMENT_CONTENT] = f"content of document {i}"
        attributes[prefix + semconv.OI_DOCUMENT_METADATA] = json.dumps(metadata)
    return attributes


def _answer(
    tracer: trace.Tracer,
    scores: list[float],
    *,
    age_days: int | None = 20,
    index: Mapping[str, Any] | None = HEALTHY_INDEX,
    **signals: Any,
) -> None:
    """One RAG request: a root span (the answer) with a retriever child, signals recorded on the root."""
    with tracer.start_as_current_span("rag.request"):
        with tracer.start_as_current_span("retrieve", attributes=_documents(scores, age_days)):
            pass
        with tracer.start_as_current_span("generate"):
            pass
        if index is not None:
            signals["index_integrity"] = dict(index)
        record_signals(**signals)


def _scenarios(tracer: trace.Tracer) -> list[Callable[[], None]]:
    complete: dict[str, Any] = {
        "has_conflict": False,
        "faithfulness_score": 0.93,
        "answer_relevance_score": 0.9,
    }
    return [
        # Well supported, fresh, complete corpus: answer.
        lambda: _answer(tracer, [0.92, 0.88, 0.81], support_level="high", corpus_type_count=3, **complete),
        lambda: _answer(tracer, [0.86, 0.7], support_level="high", corpus_type_count=2, **complete),
        # No conflict signal: the default policy sends it to review (missing-conflict-signal).
        lambda: _answer(
            tracer, [0.8, 0.75], support_level="medium", corpus_type_count=3, faithfulness_score=0.8
        ),
        # Weak retrieval, low support, contradicted claims: abstain.
        lambda: _answer(
            tracer,
            [0.3, 0.22],
            support_level="low",
            has_conflict=True,
            faithfulness_score=0.2,
            corpus_type_count=1,
            age_days=900,
        ),
        # A deleted source was served (error severity).
        lambda: _answer(
            tracer,
            [0.9, 0.85],
            support_level="high",
            corpus_type_count=3,
            index={**HEALTHY_INDEX, "deleted_source_leakage_count": 1},
            **complete,
        ),
        # The index was built with another embedding model version.
        lambda: _answer(
            tracer,
            [0.84, 0.8],
            support_level="high",
            corpus_type_count=3,
            index={**HEALTHY_INDEX, "actual_embedding_model_version": "text-embedding-3-small@2023-11"},
            **complete,
        ),
        # ACL filter not confirmed.
        lambda: _answer(
            tracer,
            [0.88, 0.8],
            support_level="high",
            corpus_type_count=3,
            index={**HEALTHY_INDEX, "acl_filter_confirmed": False},
            **complete,
        ),
        # Instrumentation gaps: no faithfulness (required by the policy), no dates, no corpus count, no index
        # signals.
        lambda: _answer(
            tracer, [0.82, 0.79], support_level="high", has_conflict=False, age_days=None, index=None
        ),
    ]


class _SinkHandler(BaseHTTPRequestHandler):
    """An OTLP/HTTP trace receiver standing in for the trace backend; refuses every fifth export with 400."""

    requests = 0
    lock = threading.Lock()

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with _SinkHandler.lock:
            _SinkHandler.requests += 1
            refuse = _SinkHandler.requests % 5 == 0
        body = ExportTraceServiceResponse().SerializeToString()
        self.send_response(400 if refuse else 200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return None


def _raw_spans(gateway_url: str, round_number: int) -> None:
    """Send what instrumented applications sometimes send: a span with an all-zero trace id (rejected as
    invalid) and a child span whose trace never completes (held, then evicted from the assembly window)."""
    invalid = Span(trace_id=bytes(16), span_id=os.urandom(8), name="broken", start_time_unix_nano=1)
    orphan = Span(
        trace_id=os.urandom(16),
        span_id=os.urandom(8),
        parent_span_id=os.urandom(8),
        name=f"orphan-{round_number}",
        start_time_unix_nano=1,
        end_time_unix_nano=2,
    )
    request = ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=[invalid, orphan])])]
    )
    post = urllib.request.Request(
        gateway_url,
        data=request.SerializeToString(),
        headers={"Content-Type": "application/x-protobuf"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(post, timeout=5):  # noqa: S310 (loopback)
            pass
    except OSError:  # a refused export (503 from the sink's 400) is part of the show
        pass


@contextmanager
def _gateway(meter_provider: MeterProvider) -> Iterator[str]:
    """A real gateway on a loopback port, forwarding to a loopback sink; yields its OTLP/HTTP traces URL."""
    from rag_confidence.gateway.config import add_arguments, config_from_arguments
    from rag_confidence.gateway.forward import forwarder_from_environment
    from rag_confidence.gateway.service import Gateway

    sink = ThreadingHTTPServer(("127.0.0.1", 0), _SinkHandler)
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = f"http://127.0.0.1:{sink.server_port}/v1/traces"
    os.environ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] = "http/protobuf"
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    flags = ["--grpc-listen", "off", "--http-listen", "127.0.0.1:0", "--assembly-max-age", "2"]
    config = dataclasses.replace(
        config_from_arguments(parser.parse_args(flags)), scoring_config=SCORING_CONFIG
    )
    gateway = Gateway(config, forwarder_from_environment(), meter_provider=meter_provider)
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    asyncio.run_coroutine_threadsafe(gateway.start(), loop).result(timeout=30)
    try:
        yield f"http://127.0.0.1:{gateway.http_port}/v1/traces"
    finally:
        asyncio.run_coroutine_threadsafe(gateway.stop(), loop).result(timeout=60)
        loop.call_soon_threadsafe(loop.stop)
        sink.shutdown()


def serve(port: int, interval_s: float, port_file: Path | None, service_name: str, via_gateway: bool) -> None:
    reader = PrometheusMetricReader()
    meter_provider = MeterProvider(
        metric_readers=[reader], resource=Resource.create({"service.name": service_name})
    )
    tracer_provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    with _gateway(meter_provider) if via_gateway else _nothing() as gateway_url:
        if gateway_url is not None:
            exporter = OTLPSpanExporter(endpoint=gateway_url, timeout=5)
            tracer_provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=200))
        else:
            processor = ConfidenceSpanProcessor(
                SimpleSpanProcessor(_Discard()),
                config=SCORING_CONFIG,
                meter_provider=meter_provider,
                emit_events=False,
            )
            tracer_provider.add_span_processor(processor)
        tracer = tracer_provider.get_tracer("rag_confidence.demo_traffic")
        _run(tracer, reader, port, interval_s, port_file, gateway_url)
        tracer_provider.shutdown()
    meter_provider.shutdown()


@contextmanager
def _nothing() -> Iterator[None]:
    yield None


def _run(
    tracer: trace.Tracer,
    reader: PrometheusMetricReader,
    port: int,
    interval_s: float,
    port_file: Path | None,
    gateway_url: str | None,
) -> None:
    scenarios = _scenarios(tracer)
    server, _thread = start_http_server(port, addr="127.0.0.1")
    bound = server.server_port
    if port_file is not None:
        partial = port_file.with_suffix(".partial")
        partial.write_text(str(bound), encoding="utf-8")
        os.replace(partial, port_file)  # the reader never sees a half-written file
    print(f"serving metrics on http://127.0.0.1:{bound}/metrics", flush=True)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    rounds = 0
    while not stop.is_set():
        for scenario in scenarios:
            scenario()
        if gateway_url is not None:
            _raw_spans(gateway_url, rounds)
        rounds += 1
        stop.wait(interval_s)
    server.shutdown()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=9464, help="metrics port on 127.0.0.1 (0: any free port)")
    parser.add_argument("--port-file", type=Path, help="write the bound port here once serving")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between rounds of scenarios")
    parser.add_argument("--service-name", default="rag-demo", help="service.name of the resource")
    parser.add_argument("--gateway", action="store_true", help="score in a gateway fed over OTLP/HTTP")
    args = parser.parse_args(argv)
    serve(args.port, args.interval, args.port_file, args.service_name, args.gateway)
    return 0


if __name__ == "__main__":
    sys.exit(main())
