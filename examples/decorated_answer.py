"""A decorated ``answer()``: scored before its span ends, gated on the recommended action.

Run: ``python examples/decorated_answer.py``. Offline by default (spans are kept in memory and printed); set
``OTEL_EXPORTER_OTLP_ENDPOINT`` (e.g. ``http://localhost:4317``) to send traces, metrics and the evaluation
events over OTLP instead, configured from the standard ``OTEL_*`` variables.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence import semconv
from rag_confidence.otel import (
    ConfidenceSpanProcessor,
    configure_from_env,
    last_scorecard,
    record_signals,
    scored_answer,
)
from rag_confidence.scoring.render import render_scorecard

KNOWLEDGE_BASE = {
    "refund-policy": "Refunds are issued within 14 days of a return being received.",
    "shipping-faq": "Standard shipping takes 3 to 5 business days within the EU.",
    "warranty": "All devices carry a two-year warranty against manufacturing defects.",
}

tracer = trace.get_tracer("examples.decorated_answer")


@dataclass
class Answer:
    text: str
    faithfulness: float


def search(question: str) -> list[tuple[str, float]]:
    """A keyword search, traced as an OTel GenAI retrieval span."""
    terms = set(question.lower().replace("?", "").split())
    with tracer.start_as_current_span("search knowledge-base", kind=trace.SpanKind.CLIENT) as span:
        hits = sorted(
            (
                (doc_id, round(len(terms & set(text.lower().split())) / len(terms), 3))
                for doc_id, text in KNOWLEDGE_BASE.items()
            ),
            key=lambda hit: -hit[1],
        )[:2]
        span.set_attributes(
            {
                semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OPERATION_RETRIEVAL,
                semconv.GEN_AI_DATA_SOURCE_ID: "knowledge-base",
                semconv.GEN_AI_RETRIEVAL_DOCUMENTS: json.dumps(
                    [{"id": doc_id, "score": score} for doc_id, score in hits]
                ),
            }
        )
    return hits


# ``signals`` reads inputs from the return value; they win over anything read from spans.
@scored_answer(signals=lambda answer: {"faithfulness_score": answer.faithfulness})
def answer(question: str) -> Answer:
    hits = search(question)
    best_id, best_score = hits[0]
    record_signals(has_conflict=False)  # this pipeline knows its sources agree
    if best_score < 0.2:
        return Answer("I could not find this in the knowledge base.", faithfulness=0.0)
    return Answer(f"{KNOWLEDGE_BASE[best_id]} [{best_id}]", faithfulness=0.9)


def main() -> None:
    exporter = InMemorySpanExporter()
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        telemetry = configure_from_env()
    else:
        provider = TracerProvider()
        provider.add_span_processor(ConfidenceSpanProcessor(SimpleSpanProcessor(exporter)))
        trace.set_tracer_provider(provider)
        telemetry = None

    for question in ("How many days until refunds are issued?", "Do you sell gift cards?"):
        result = answer(question)
        card = last_scorecard()
        print(f"\nQ: {question}\nA: {result.text}")
        if card is None:
            print("(not scored)")
            continue
        print(render_scorecard(card), end="")
        if card.recommended_action == "abstain":
            print("-> gated: the application would hand this question to a human")
    for span in exporter.get_finished_spans():
        if span.name == "answer":
            attributes = span.attributes or {}
            total, action = (
                str(attributes[semconv.RAG_CONFIDENCE_TOTAL]),
                str(attributes[semconv.RAG_CONFIDENCE_ACTION]),
            )
            print(f"exported span {span.name!r}: total={total} action={action}")
    if telemetry is not None:
        telemetry.shutdown()


if __name__ == "__main__":
    main()
