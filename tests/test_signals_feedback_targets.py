"""Which span a piece of feedback grades: the answer, or something else in its trace.

The OpenInference feedback spec (``spec/annotations.md``): span feedback describes the span carrying it, and a
post-hoc *carrier* span with a link describes the linked span (span scope) or the linked span's trace (trace
scope); parentage must not be used to find the target. The GenAI conventions parent ``gen_ai.evaluation.result``
to the span being evaluated. So feedback on a retrieval span, or a carrier linked to one, grades the retrieval
and must not become the answer's ``answerRelevanceScore``. Spans are made with the real SDK (real links), and
the same spans go through the gateway's OTLP conversion so both entry points read them alike.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanContext, Tracer

from rag_confidence import semconv
from rag_confidence.gateway.spans import iter_spans, to_record
from rag_confidence.signals import (
    SpanRecord,
    extract_signals,
    find_answers,
    records_from_readable_spans,
)

DOCUMENTS = json.dumps([{"id": "doc-1", "score": 0.9}, {"id": "doc-2", "score": 0.5}])
ANSWER = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "Paris [doc-1]."}]}])


def span_feedback(name: str, score: float) -> dict[str, Any]:
    return {
        f"{semconv.OI_EVALUATIONS}.0.{semconv.OI_EVALUATION_NAME}": name,
        f"{semconv.OI_EVALUATIONS}.0.{semconv.OI_EVALUATION_SCORE}": score,
    }


def trace_feedback(name: str, score: float) -> dict[str, Any]:
    return {
        f"{semconv.OI_TRACE_EVALUATIONS}.0.{semconv.OI_EVALUATION_NAME}": name,
        f"{semconv.OI_TRACE_EVALUATIONS}.0.{semconv.OI_EVALUATION_SCORE}": score,
    }


def genai_event(name: str, score: float) -> dict[str, Any]:
    return {semconv.GEN_AI_EVALUATION_NAME: name, semconv.GEN_AI_EVALUATION_SCORE_VALUE: score}


def both_ways(spans: Sequence[ReadableSpan]) -> list[list[SpanRecord]]:
    """The in-process records and the gateway's records of the same spans (through the OTLP encoder)."""
    request = encode_spans(spans)
    return [records_from_readable_spans(spans), [to_record(span) for span in iter_spans(request)]]


def relevance(records: Sequence[SpanRecord]) -> tuple[Any, Any]:
    (group,) = find_answers(records)
    signals = extract_signals(group.spans)
    return signals.inputs.get("answerRelevanceScore"), signals.sources.get("answerRelevanceScore")


def steps(
    tracer: Tracer,
    *,
    on_retrieval: Mapping[str, Any] | None = None,
    retrieval_event: Mapping[str, Any] | None = None,
    chat_event: Mapping[str, Any] | None = None,
    openinference_retriever: bool = False,
) -> dict[str, SpanContext]:
    """A retrieval and a chat span under the current span, feedback optionally on either; their contexts."""
    attributes: dict[str, Any] = (
        {
            semconv.OPENINFERENCE_SPAN_KIND: semconv.OPENINFERENCE_KIND_RETRIEVER,
            "retrieval.documents.0.document.id": "doc-1",
            "retrieval.documents.0.document.score": 0.9,
        }
        if openinference_retriever
        else {
            semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OPERATION_RETRIEVAL,
            semconv.GEN_AI_RETRIEVAL_DOCUMENTS: DOCUMENTS,
        }
    )
    with tracer.start_as_current_span("retrieval kb", attributes={**attributes, **(on_retrieval or {})}) as r:
        if retrieval_event is not None:
            r.add_event(semconv.GEN_AI_EVALUATION_RESULT, dict(retrieval_event))
    chat_attributes = {
        semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OPERATION_CHAT,
        semconv.GEN_AI_OUTPUT_MESSAGES: ANSWER,
    }
    with tracer.start_as_current_span("chat m", attributes=chat_attributes) as chat:
        if chat_event is not None:
            chat.add_event(semconv.GEN_AI_EVALUATION_RESULT, dict(chat_event))
    return {"retrieval": r.get_span_context(), "chat": chat.get_span_context()}


def pipeline(tracer: Tracer, **feedback: Any) -> None:
    """root -> retrieval, chat (see :func:`steps`)."""
    with tracer.start_as_current_span("rag"):
        steps(tracer, **feedback)


@pytest.mark.parametrize(
    "case",
    ["GenAI event on a GenAI retrieval span", "OpenInference span feedback on a GenAI retrieval span"],
)
def test_feedback_on_a_retrieval_span_of_any_convention_grades_the_retrieval(
    traced: tuple[Tracer, InMemorySpanExporter], case: str
) -> None:
    tracer, exporter = traced
    if case.startswith("GenAI event"):
        pipeline(tracer, retrieval_event=genai_event("relevance", 0.1))
    else:
        pipeline(tracer, on_retrieval=span_feedback("relevance", 0.1))
    for records in both_ways(exporter.get_finished_spans()):
        assert relevance(records) == (None, None)


def test_trace_feedback_on_a_retrieval_span_still_grades_the_trace(
    traced: tuple[Tracer, InMemorySpanExporter],
) -> None:
    tracer, exporter = traced
    pipeline(tracer, on_retrieval=trace_feedback("relevance", 0.7), openinference_retriever=True)
    for records in both_ways(exporter.get_finished_spans()):
        assert relevance(records) == (0.7, "evaluation relevance")


def test_the_same_feedback_on_the_generation_grades_the_answer(
    traced: tuple[Tracer, InMemorySpanExporter],
) -> None:
    tracer, exporter = traced
    pipeline(tracer, chat_event=genai_event("relevance", 0.8))
    for records in both_ways(exporter.get_finished_spans()):
        assert relevance(records) == (0.8, "evaluation relevance")


@pytest.mark.parametrize(
    ("target", "feedback", "expected"),
    [
        ("retrieval", "span", None),  # grades the retrieval
        ("chat", "span", 0.2),  # grades the answer's generation
        ("root", "span", 0.2),  # grades the answer span itself
        ("elsewhere", "span", None),  # grades a span of another trace
        ("retrieval", "trace", 0.2),  # trace feedback: the linked span's trace is this one
        ("elsewhere", "trace", None),  # trace feedback about another trace
        ("retrieval", "genai", None),  # a GenAI event on a carrier describes the linked span too
        ("chat", "genai", 0.2),
    ],
)
def test_a_carrier_span_grades_the_span_it_links_to_not_the_one_it_sits_under(
    traced: tuple[Tracer, InMemorySpanExporter], target: str, feedback: str, expected: float | None
) -> None:
    tracer, exporter = traced
    with tracer.start_as_current_span("elsewhere") as other:
        elsewhere = other.get_span_context()
    with tracer.start_as_current_span("rag") as root:
        contexts = {"root": root.get_span_context(), "elsewhere": elsewhere, **steps(tracer)}
        attributes = {semconv.OPENINFERENCE_SPAN_KIND: semconv.OPENINFERENCE_KIND_EVALUATOR}
        if feedback == "span":
            attributes.update(span_feedback("relevance", 0.2))
        elif feedback == "trace":
            attributes.update(trace_feedback("relevance", 0.2))
        # Parented to the answer, as an inline judge's span is; only the link says what it grades.
        with tracer.start_as_current_span(
            "relevance evaluation", links=[Link(contexts[target])], attributes=attributes
        ) as carrier:
            if feedback == "genai":
                carrier.add_event(semconv.GEN_AI_EVALUATION_RESULT, genai_event("relevance", 0.2))
    spans = [span for span in exporter.get_finished_spans() if span.name != "elsewhere"]
    for records in both_ways(spans):
        (carrier_record,) = [record for record in records if record.name == "relevance evaluation"]
        linked = contexts[target]
        assert carrier_record.links == ((linked.trace_id, linked.span_id),)
        score, _ = relevance(records)
        assert score == expected


def test_links_of_records_default_to_none_and_survive_a_replace() -> None:
    import dataclasses

    record = SpanRecord(1, 2, None, "answer")
    assert record.links == ()
    linked = dataclasses.replace(record, links=((1, 3),))
    assert dataclasses.replace(linked, name="renamed").links == ((1, 3),)


@pytest.mark.parametrize("feedback", ["span", "trace", "genai"])
def test_a_span_with_links_of_its_own_keeps_its_own_feedback(
    traced: tuple[Tracer, InMemorySpanExporter], feedback: str
) -> None:
    """Only an EVALUATOR span with links is a carrier. An answer span that links elsewhere (a queue consumer
    linking its producer) is graded by the feedback it carries, as before links were read."""
    tracer, exporter = traced
    with tracer.start_as_current_span("producer") as producer:
        produced = producer.get_span_context()
    attributes: dict[str, Any] = {}
    if feedback == "span":
        attributes = span_feedback("relevance", 0.8)
    elif feedback == "trace":
        attributes = trace_feedback("relevance", 0.8)
    with tracer.start_as_current_span("consume", links=[Link(produced)], attributes=attributes) as answer:
        answer.set_attribute(semconv.RAG_ANSWER, True)
        if feedback == "genai":
            answer.add_event(semconv.GEN_AI_EVALUATION_RESULT, genai_event("relevance", 0.8))
        pipeline(tracer)
    spans = [span for span in exporter.get_finished_spans() if span.name != "producer"]
    for records in both_ways(spans):
        groups = find_answers(records)
        (group,) = [group for group in groups if group.answer.name == "consume"]
        assert extract_signals(group.spans).inputs.get("answerRelevanceScore") == 0.8


def test_a_guardrail_that_makes_the_answer_is_read_when_there_is_no_other_generation() -> None:
    """Guardrails AI under OpenInference: ``Runner.step`` is a GUARDRAIL span that calls the model itself. Its
    generation is the answer; only a guard's check beside another generation is a judge's."""
    kind = semconv.OPENINFERENCE_SPAN_KIND

    def llm(span_id: int, parent: int, text: str, end: int) -> SpanRecord:
        return SpanRecord(
            1,
            span_id,
            parent,
            "llm",
            {
                kind: semconv.OPENINFERENCE_KIND_LLM,
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": text,
            },
            end_time=end,
        )

    answer = SpanRecord(1, 1, None, "answer", {semconv.RAG_ANSWER: True}, end_time=20)
    retriever = SpanRecord(
        1,
        2,
        1,
        "retrieve",
        {
            kind: semconv.OPENINFERENCE_KIND_RETRIEVER,
            "retrieval.documents.0.document.id": "d1",
            "retrieval.documents.0.document.score": 0.9,
        },
        end_time=2,
    )
    guard = SpanRecord(1, 3, 1, "Runner.step", {kind: semconv.OPENINFERENCE_KIND_GUARDRAIL}, end_time=10)
    guarded = extract_signals([answer, retriever, guard, llm(4, 3, "Paris [1].", 9)])
    assert guarded.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 1
    beside = extract_signals(
        [answer, retriever, llm(5, 1, "Paris [1] [d1].", 8), guard, llm(4, 3, "SAFE", 9)]
    )
    assert beside.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
