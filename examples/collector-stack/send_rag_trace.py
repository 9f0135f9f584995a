"""Send RAG answer traces to the Collector stack, as an instrumented application would.

    python examples/collector-stack/send_rag_trace.py            # to localhost:4317 (the compose Collector)
    python examples/collector-stack/send_rag_trace.py --answers 20

Each answer is one trace: an answer span marked ``rag.answer`` over a retriever span (OpenInference
``retrieval.documents.*``, what the LangChain and LlamaIndex instrumentors write) and an LLM span. Nothing
here scores: the application only needs the OpenTelemetry SDK and an OTLP exporter; the gateway in the
Collector pipeline adds the ``rag.confidence.*`` scorecard. The endpoint comes from
``OTEL_EXPORTER_OTLP_ENDPOINT`` (default ``http://localhost:4317``), like any OTLP exporter. Prints one trace
ID per answer, to paste into Grafana's Tempo search.
"""

from __future__ import annotations

import argparse
import os
import random

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import format_trace_id

from rag_confidence import semconv

QUESTIONS = [
    ("What is the refund window?", "Refunds are accepted within 30 days of delivery."),
    ("Can I return opened items?", "Opened items can be returned if unused, within 14 days."),
    ("Who pays return shipping?", "Return shipping is free for defective items only."),
]


def send(provider: TracerProvider, rng: random.Random, support_level: str) -> str:
    """One answer; returns its trace ID in hex."""
    tracer = provider.get_tracer("rag-confidence-example")
    question, passage = rng.choice(QUESTIONS)
    with tracer.start_as_current_span("answer") as answer:
        answer.set_attribute(semconv.RAG_ANSWER, True)
        answer.set_attribute(semconv.RAG_SIGNAL_SUPPORT_LEVEL, support_level)
        with tracer.start_as_current_span("retrieve") as retrieve:
            retrieve.set_attribute(semconv.OPENINFERENCE_SPAN_KIND, semconv.OPENINFERENCE_KIND_RETRIEVER)
            for index in range(3):
                prefix = f"{semconv.OI_RETRIEVAL_DOCUMENTS}.{index}."
                retrieve.set_attribute(prefix + semconv.OI_DOCUMENT_ID, f"policy-{index}")
                retrieve.set_attribute(prefix + semconv.OI_DOCUMENT_SCORE, round(rng.uniform(0.55, 0.95), 3))
                retrieve.set_attribute(prefix + semconv.OI_DOCUMENT_CONTENT, passage)
        with tracer.start_as_current_span("generate") as generate:
            generate.set_attribute(semconv.OPENINFERENCE_SPAN_KIND, semconv.OPENINFERENCE_KIND_LLM)
            generate.set_attribute(semconv.OI_OUTPUT_VALUE, f"{passage} [1]")
        return format_trace_id(answer.get_span_context().trace_id)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--answers", type=int, default=5, help="answers to send (default 5)")
    parser.add_argument("--seed", type=int, default=7, help="random seed (default 7)")
    args = parser.parse_args(argv)
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4317")
    provider = TracerProvider(resource=Resource.create({"service.name": "rag-example-app"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    rng = random.Random(args.seed)
    for index in range(args.answers):
        # A mix of support levels, so the dashboards show more than one label and action.
        print(send(provider, rng, ("high", "medium", "low")[index % 3]))
    provider.shutdown()  # flushes: every span is exported before the process exits
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
