"""Signals from real Haystack pipelines under Haystack's own OpenTelemetry tracer, offline.

``haystack.tracing`` with the ``OpenTelemetryTracer`` of ``opentelemetry-haystack`` (part of ``haystack-ai``
itself before 3.0) and content tracing on (``HAYSTACK_CONTENT_TRACING_ENABLED=true``, which Haystack reads when
it is imported; the fixture sets the flag it is read into): a ``haystack.pipeline.run`` root with one
``haystack.component.run`` span per component, each naming its class in ``haystack.component.type`` and holding
its output as JSON in ``haystack.component.output``. The same pipelines and fakes (a bag-of-words embedder, a
canned generator, a word-overlap ranker; no network, no model) as ``test_signals_haystack.py``, held to the
same expectations.
"""

from __future__ import annotations

import sys

import pytest

if sys.version_info < (3, 11):
    # The test extra installs it on 3.11 and newer only (pyproject.toml): nothing to test on 3.10.
    pytest.skip(
        "opentelemetry-haystack 2 (the tracer for Haystack 3) requires Python 3.11", allow_module_level=True
    )

from collections.abc import Iterator
from typing import Any

from haystack import Pipeline, component, tracing
from haystack.components.builders import ChatPromptBuilder
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.dataclasses import ChatMessage
from haystack_integrations.tracing.opentelemetry import OpenTelemetryTracer
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence import semconv
from rag_confidence.otel import ConfidenceSpanProcessor
from rag_confidence.signals import extract_signals

from .test_signals_haystack import (
    ANSWER,
    QUESTION,
    CannedGenerator,
    assert_bm25_candidates,
    assert_hybrid_merges_by_id,
    assert_ranker_is_final,
    assert_scoreable,
    assert_scored_root,
    bm25_hits,
    bm25_pipeline,
    document_store,
    only_answer,
    run_bm25,
)

ROOT = "haystack.pipeline.run"


@pytest.fixture(scope="module")
def exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(ConfidenceSpanProcessor(SimpleSpanProcessor(exporter)))
    previous_tracer = tracing.tracer.actual_tracer
    previous_content = tracing.tracer.is_content_tracing_enabled
    tracing.enable_tracing(OpenTelemetryTracer(provider.get_tracer("haystack")))
    tracing.tracer.is_content_tracing_enabled = True
    try:
        yield exporter
    finally:
        tracing.tracer.actual_tracer = previous_tracer
        tracing.tracer.is_content_tracing_enabled = previous_content
        provider.shutdown()


def component_types(exporter: InMemorySpanExporter) -> list[str]:
    return [
        str((span.attributes or {}).get(semconv.HAYSTACK_COMPONENT_TYPE))
        for span in exporter.get_finished_spans()
        if span.name == "haystack.component.run"
    ]


def test_bm25_pipeline_documents_citations_and_scorecard(exporter: InMemorySpanExporter) -> None:
    expected = bm25_hits()
    exporter.clear()

    run_bm25(bm25_pipeline(CannedGenerator(ANSWER)))

    assert component_types(exporter) == ["InMemoryBM25Retriever", "PromptBuilder", "CannedGenerator"]
    group = only_answer(exporter.get_finished_spans())
    assert group.rule == "root" and group.answer.name == ROOT
    signals = extract_signals(group.spans)
    assert_scoreable(signals.inputs)
    # Named as under OpenInference (the class, ``Retriever`` dropped), metadata flattened beside the fields.
    assert_bm25_candidates(signals.inputs["candidates"], expected)
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_SPANS] == 1
    # The generator's reply is the answer (the prompt builder's prompt, which numbers the documents, is not).
    assert (signals.inputs["citationCount"], signals.inputs["invalidCitationCount"]) == (2, 1)
    assert signals.inputs["citationCoverageScore"] == pytest.approx(2 / 3)
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_FINISH_REASON] == "stop"
    assert signals.skipped == 0
    assert_scored_root(exporter.get_finished_spans(), ROOT, len(expected))


def test_ranker_scores_and_order_are_final(exporter: InMemorySpanExporter) -> None:
    assert_ranker_is_final(exporter)


def test_hybrid_retrieval_merges_by_id_and_the_joiner_is_no_method(exporter: InMemorySpanExporter) -> None:
    assert_hybrid_merges_by_id(exporter)
    assert "DocumentJoiner" in component_types(exporter)


@component
class CannedChatGenerator:
    """Fake chat generator (no LLM): one assistant ``ChatMessage``, stopped on length."""

    @component.output_types(replies=list[ChatMessage])
    def run(self, messages: list[ChatMessage]) -> dict[str, Any]:
        reply = ChatMessage.from_assistant(ANSWER, meta={"model": "canned", "finish_reason": "length"})
        return {"replies": [reply]}


def test_chat_generator_reply_and_truncation(exporter: InMemorySpanExporter) -> None:
    pipeline = Pipeline()
    pipeline.add_component("retriever", InMemoryBM25Retriever(document_store(), top_k=3))
    template = [
        ChatMessage.from_user("{% for d in documents %}[{{ loop.index }}] {{ d.content }}\n{% endfor %}")
    ]
    pipeline.add_component("prompt_builder", ChatPromptBuilder(template=template))
    pipeline.add_component("llm", CannedChatGenerator())
    pipeline.connect("retriever.documents", "prompt_builder.documents")
    pipeline.connect("prompt_builder.prompt", "llm.messages")
    exporter.clear()

    pipeline.run({"retriever": {"query": QUESTION}})

    signals = extract_signals(only_answer(exporter.get_finished_spans()).spans)
    assert (signals.inputs["citationCount"], signals.inputs["invalidCitationCount"]) == (2, 1)
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED] is True
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_FINISH_REASON] == "length"


def test_content_tracing_off_still_finds_the_answer(
    exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without content tracing no component output is written: the retriever's span is still a retrieval (the
    answer is found and scored), but it reports no documents, so there are no candidates, and none is lost."""
    monkeypatch.setattr(tracing.tracer, "is_content_tracing_enabled", False)
    exporter.clear()

    run_bm25(bm25_pipeline(CannedGenerator(ANSWER)))

    group = only_answer(exporter.get_finished_spans())
    assert group.answer.name == ROOT and group.has_retrieval
    signals = extract_signals(group.spans)
    assert signals.inputs["candidates"] == []
    assert semconv.RAG_CONFIDENCE_RETRIEVAL_UNREADABLE_SPANS not in signals.diagnostics
    assert_scored_root(exporter.get_finished_spans(), ROOT, 0)
