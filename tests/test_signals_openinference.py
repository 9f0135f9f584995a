"""OpenInference LLM spans of instrumentors not installed in the test environment (Anthropic, OpenAI), built
with the SDK tracer exactly as the upstream instrumentors write them; each test cites the upstream source.
"""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer
from opentelemetry.util.types import AttributeValue

from rag_confidence import semconv
from rag_confidence.signals import (
    ExtractedSignals,
    SpanRecord,
    extract_signals,
    find_answers,
    records_from_readable_spans,
)

DOCUMENTS = (("doc-1", 0.9), ("doc-2", 0.8))


def answer_with_llm_span(
    traced: tuple[Tracer, InMemorySpanExporter], llm_attributes: dict[str, AttributeValue]
) -> ExtractedSignals:
    tracer, exporter = traced
    with tracer.start_as_current_span("answer") as root:
        root.set_attribute(semconv.RAG_ANSWER, True)
        with tracer.start_as_current_span("retrieve") as retriever:
            retriever.set_attribute(semconv.OPENINFERENCE_SPAN_KIND, semconv.OPENINFERENCE_KIND_RETRIEVER)
            for index, (doc_id, score) in enumerate(DOCUMENTS):
                retriever.set_attribute(f"retrieval.documents.{index}.document.id", doc_id)
                retriever.set_attribute(f"retrieval.documents.{index}.document.score", score)
        with tracer.start_as_current_span("Messages") as llm:
            llm.set_attribute(semconv.OPENINFERENCE_SPAN_KIND, semconv.OPENINFERENCE_KIND_LLM)
            llm.set_attributes(llm_attributes)
    (group,) = find_answers(records_from_readable_spans(exporter.get_finished_spans()))
    return extract_signals(group.spans)


def anthropic_blocks(*blocks: tuple[str, str]) -> dict[str, AttributeValue]:
    """openinference-instrumentation-anthropic 3.1.0 ``_content.py`` ``_get_content_block_attributes``: block j
    of output message 0 as ``llm.output_messages.0.message.contents.{j}.message_content.{type,text}``, a
    ``thinking`` block as type ``reasoning`` with its thinking as the text."""
    attributes: dict[str, AttributeValue] = {"llm.output_messages.0.message.role": "assistant"}
    for index, (kind, text) in enumerate(blocks):
        prefix = f"llm.output_messages.0.message.contents.{index}.message_content"
        attributes[f"{prefix}.type"] = "reasoning" if kind == "thinking" else kind
        attributes[f"{prefix}.text"] = text
        if kind == "thinking":
            attributes[f"{prefix}.signature"] = "sig"
    attributes[semconv.OI_LLM_FINISH_REASON] = "end_turn"
    return attributes


def test_a_thinking_block_is_not_part_of_the_answer(traced: tuple[Tracer, InMemorySpanExporter]) -> None:
    signals = answer_with_llm_span(
        traced,
        anthropic_blocks(
            ("thinking", "Doc [doc-2] looks stale; maybe [doc-7] has it. Draft: Paris [3]."),
            ("text", "The capital is Paris [doc-1]."),
        ),
    )
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 1
    assert signals.inputs["citationCount"] == 1
    assert signals.inputs["invalidCitationCount"] == 0
    assert signals.inputs["citationCoverageScore"] == 1.0


def test_text_blocks_are_read_in_index_order_and_keep_their_sentences(
    traced: tuple[Tracer, InMemorySpanExporter],
) -> None:
    """Anthropic splits an answer into text blocks at each cited passage, mid-sentence as often as not; twelve
    blocks put index 10 before 2 in string order. Sentence-ending blocks without a trailing space must not run
    into the next sentence (one sentence with a marker would hide one without)."""
    blocks = [("text", f"Claim {index} [doc-1].") for index in range(11)]
    blocks.append(("text", "Unsupported claim."))
    signals = answer_with_llm_span(traced, anthropic_blocks(*blocks))
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 11
    assert signals.inputs["citationCoverageScore"] == pytest.approx(11 / 12)

    # Blocks that split one sentence stay one sentence.
    _, exporter = traced
    exporter.clear()
    signals = answer_with_llm_span(
        traced, anthropic_blocks(("text", "The capital is "), ("text", "Paris [doc-1]"), ("text", "."))
    )
    assert signals.inputs["citationCoverageScore"] == 1.0


def test_legacy_completions_text_is_read_from_the_choices(
    traced: tuple[Tracer, InMemorySpanExporter],
) -> None:
    """openinference-instrumentation-openai 0.1.66 ``_response_attributes_extractor.py``
    ``_get_attributes_from_completion`` (``client.completions.create``): each choice's text as
    ``llm.choices.{i}.completion.text``, the first choice's finish reason as ``llm.finish_reason``, and
    ``output.value`` the raw Completion JSON, which holds no answer of its own."""
    text = "Paris is the capital [doc-1]. It is big [doc-9]."
    completion = (
        '{"id":"cmpl-1","choices":[{"finish_reason":"length","index":0,"logprobs":null,"text":"'
        + text
        + '"}],"created":1,"model":"gpt-3.5-turbo-instruct","object":"text_completion"}'
    )
    signals = answer_with_llm_span(
        traced,
        {
            "llm.choices.0.completion.text": text,
            semconv.OI_LLM_FINISH_REASON: "length",
            semconv.OI_OUTPUT_VALUE: completion,
            semconv.OI_OUTPUT_MIME_TYPE: "application/json",
        },
    )
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
    assert signals.inputs["citationCount"] == 1
    assert signals.inputs["invalidCitationCount"] == 1
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED] is True


def test_an_anthropic_answer_that_ran_into_the_context_window_is_truncated(
    traced: tuple[Tracer, InMemorySpanExporter],
) -> None:
    """Anthropic's ``stop_reason`` ``model_context_window_exceeded`` (anthropic ``types/stop_reason.py``) is
    passed through as ``llm.finish_reason`` (openinference-instrumentation-anthropic ``_content.py``
    ``_get_output_message_attributes``): the output stopped where the window ended, as on ``max_tokens``."""
    attributes = anthropic_blocks(("text", "Paris is the capital [doc-1] and"))
    attributes[semconv.OI_LLM_FINISH_REASON] = "model_context_window_exceeded"
    signals = answer_with_llm_span(traced, attributes)
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED] is True
    assert (
        signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_FINISH_REASON]
        == "model_context_window_exceeded"
    )


def test_feedback_is_applied_to_the_scope_it_describes() -> None:
    """OpenInference ``spec/annotations.md`` (Scope): span feedback ``evaluations.*`` describes the span carrying
    it, trace feedback ``trace.evaluations.*`` the trace (recorded once, preferably on the root span). Phoenix's
    ``relevance`` on a retriever grades the retrieved documents, not the answer."""
    retriever = SpanRecord(
        1,
        2,
        1,
        "retrieve",
        {
            semconv.OPENINFERENCE_SPAN_KIND: semconv.OPENINFERENCE_KIND_RETRIEVER,
            "retrieval.documents.0.document.id": "doc-1",
            "retrieval.documents.0.document.score": 0.9,
            "evaluations.0.evaluation.name": "relevance",
            "evaluations.0.evaluation.score": 0.1,
            "evaluations.0.evaluation.annotator_kind": "LLM",
        },
        end_time=1,
    )
    root = SpanRecord(
        1,
        1,
        None,
        "answer",
        {
            semconv.RAG_ANSWER: True,
            "trace.evaluations.0.evaluation.name": "faithfulness",
            "trace.evaluations.0.evaluation.score": 0.2,
            "trace.evaluations.0.evaluation.annotator_kind": "CODE",
            "trace.annotations.0.annotation.name": "answer_relevance",
            "trace.annotations.0.annotation.score": 0.7,
        },
        end_time=2,
    )
    signals = extract_signals([root, retriever])
    assert signals.inputs["faithfulnessScore"] == 0.2
    assert signals.inputs["answerRelevanceScore"] == 0.7
    assert signals.inputs["supportLevel"] == "low"
