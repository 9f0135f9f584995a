#!/usr/bin/env python3
"""Score a steady stream of RAG traces and serve the resulting metrics for Prometheus to scrape.

    python dashboards/demo_traffic.py --port 9464     # then scrape http://127.0.0.1:9464/metrics

It is what the dashboard tests scrape, and a way to see the dashboards populated on a laptop. The traces are
real OpenTelemetry spans in the shapes instrumentors emit (an OpenInference RETRIEVER span with documents, a
root span carrying ``rag.signal.*`` attributes), scored by the real ``ConfidenceSpanProcessor``; its
instruments record on a ``MeterProvider`` read by the OpenTelemetry Prometheus exporter. Nothing about the
metrics is simulated: only the RAG application is.

The scenarios cover every recommended action, the tier 2 dimensions, and every warning code the dashboards
and alert rules query (deleted-source leakage, embedding version mismatch, unconfirmed ACL filter, missing
signals), so every panel has data.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
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
    complete = {"has_conflict": False, "faithfulness_score": 0.93, "answer_relevance_score": 0.9}
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


def serve(port: int, interval_s: float, port_file: Path | None, service_name: str) -> None:
    reader = PrometheusMetricReader()
    meter_provider = MeterProvider(
        metric_readers=[reader], resource=Resource.create({"service.name": service_name})
    )
    tracer_provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    processor = ConfidenceSpanProcessor(
        SimpleSpanProcessor(_Discard()),
        config=SCORING_CONFIG,
        meter_provider=meter_provider,
        emit_events=False,
    )
    tracer_provider.add_span_processor(processor)
    tracer = tracer_provider.get_tracer("rag_confidence.demo_traffic")
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
    while not stop.is_set():
        for scenario in scenarios:
            scenario()
        stop.wait(interval_s)
    server.shutdown()
    tracer_provider.shutdown()
    meter_provider.shutdown()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=9464, help="metrics port on 127.0.0.1 (0: any free port)")
    parser.add_argument("--port-file", type=Path, help="write the bound port here once serving")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between rounds of scenarios")
    parser.add_argument("--service-name", default="rag-demo", help="service.name of the resource")
    args = parser.parse_args(argv)
    serve(args.port, args.interval, args.port_file, args.service_name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
