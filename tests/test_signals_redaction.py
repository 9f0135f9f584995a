"""OpenInference ``TraceConfig`` redaction: hidden values are written as ``__REDACTED__``, which is no data.

The spans come from the real ``openinference-instrumentation-langchain`` under ``openinference-instrumentation``'s
``TraceConfig`` (``config.py``: ``hide_retrieval_documents`` replaces every ``retrieval.documents.{i}.document.
{content,metadata}``, ``hide_output_text`` every ``llm.output_messages.{i}.message.content``, by
``REDACTED_VALUE``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel
from langchain_core.retrievers import BaseRetriever
from openinference.instrumentation import TraceConfig
from openinference.instrumentation.langchain import LangChainInstrumentor
from openinference.instrumentation.openai import OpenAIInstrumentor as OpenInferenceOpenAIInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from rag_confidence import semconv
from rag_confidence.signals import (
    ExtractedSignals,
    SpanRecord,
    extract_signals,
    find_answers,
    records_from_readable_spans,
)
from tests.instrumented import assert_scored_as, confidence_processor, records, restored_wrapt_patches
from tests.test_signals_openai_chat import (
    ANSWER,
    MODEL,
    expected_inputs,
    fake_openai,
    messages,
    retrieve,
    two_choices,
)


class Store(BaseRetriever):
    """Ids and scores in the metadata, as the OpenInference LangChain tracer needs them."""

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [
            Document(page_content=f"text {index}", metadata={"id": f"doc-{index}", "score": score})
            for index, score in ((1, 0.9), (2, 0.8), (3, 0.7))
        ]


@pytest.fixture
def hidden(request: pytest.FixtureRequest) -> Iterator[tuple[Tracer, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider, config=TraceConfig(**request.param))
    try:
        yield provider.get_tracer("app"), exporter
    finally:
        instrumentor.uninstrument()
        provider.shutdown()


def scored(exporter: InMemorySpanExporter) -> ExtractedSignals:
    (group,) = find_answers(records_from_readable_spans(exporter.get_finished_spans()))
    return extract_signals(group.spans)


@pytest.mark.parametrize("hidden", [{"hide_retrieval_documents": True}], indirect=True)
def test_hidden_retrieval_documents_stay_apart_and_leave_citations_unjudged(
    hidden: tuple[Tracer, InMemorySpanExporter],
) -> None:
    tracer, exporter = hidden
    with tracer.start_as_current_span("answer") as root:
        root.set_attribute(semconv.RAG_ANSWER, True)
        Store().invoke("q")
        root.set_attribute(semconv.OI_OUTPUT_VALUE, "Paris [doc-1]. Lyon [doc-2]. Nice [doc-3].")
    retriever = next(
        span
        for span in exporter.get_finished_spans()
        if (span.attributes or {}).get(semconv.OPENINFERENCE_SPAN_KIND)
        == semconv.OPENINFERENCE_KIND_RETRIEVER
    )
    assert (retriever.attributes or {})[
        "retrieval.documents.0.document.metadata"
    ] == semconv.OI_REDACTED_VALUE

    signals = scored(exporter)
    # Three documents, not one "__REDACTED__" text shared by all; their ids and scores went with the metadata.
    assert signals.inputs["candidates"] == []
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_UNSCORED_DOCUMENTS] == 3
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_UNREADABLE_SPANS] == 1
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 3
    assert "citationCount" not in signals.inputs and "invalidCitationCount" not in signals.inputs


@pytest.mark.parametrize("hidden", [{"hide_output_text": True}], indirect=True)
def test_hidden_output_text_gives_way_to_the_answer_spans_own_output(
    hidden: tuple[Tracer, InMemorySpanExporter],
) -> None:
    tracer, exporter = hidden
    with tracer.start_as_current_span("answer") as root:
        root.set_attribute(semconv.RAG_ANSWER, True)
        Store().invoke("q")
        text = FakeListChatModel(responses=["Paris [doc-1]. Lyon [doc-9]."]).invoke("q").content
        root.set_attribute(semconv.OI_OUTPUT_VALUE, str(text))

    signals = scored(exporter)
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
    assert signals.inputs["citationCount"] == 1
    assert signals.inputs["invalidCitationCount"] == 1


def test_hidden_content_of_documents_with_ids_of_their_own_is_only_absent() -> None:
    """The LlamaIndex tracer records each node's id and score next to its content and metadata: with those
    hidden (``config.py`` ``_is_retrieval_document_content``), the documents are still told apart by id."""
    attributes: dict[str, object] = {semconv.OPENINFERENCE_SPAN_KIND: semconv.OPENINFERENCE_KIND_RETRIEVER}
    for index, score in ((0, 0.9), (1, 0.6)):
        attributes[f"retrieval.documents.{index}.document.id"] = f"node-{index}"
        attributes[f"retrieval.documents.{index}.document.score"] = score
        attributes[f"retrieval.documents.{index}.document.content"] = semconv.OI_REDACTED_VALUE
        attributes[f"retrieval.documents.{index}.document.metadata"] = semconv.OI_REDACTED_VALUE
    retriever = SpanRecord(1, 2, 1, "retrieve", attributes, end_time=1)
    root = SpanRecord(1, 1, None, "query", {semconv.OI_OUTPUT_VALUE: "A [node-0]. B [9]."}, end_time=2)

    signals = extract_signals([root, retriever])
    assert [c["documentId"] for c in signals.inputs["candidates"]] == ["node-0", "node-1"]
    assert semconv.RAG_CONFIDENCE_RETRIEVAL_UNREADABLE_SPANS not in signals.diagnostics
    assert signals.inputs["citationCount"] == 1 and signals.inputs["invalidCitationCount"] == 1
    assert signals.skipped == 0  # "__REDACTED__" is no metadata JSON gone bad


def test_documents_whose_text_alone_was_hidden_keep_the_ids_of_their_metadata() -> None:
    """A redactor hiding only the text (a custom TraceConfig masking, say) leaves the metadata that names each
    document: its retrieval is readable and the answer's citations are judged."""
    attributes: dict[str, object] = {semconv.OPENINFERENCE_SPAN_KIND: semconv.OPENINFERENCE_KIND_RETRIEVER}
    for index, score in ((1, 0.9), (2, 0.6)):
        attributes[f"retrieval.documents.{index - 1}.document.content"] = semconv.OI_REDACTED_VALUE
        attributes[f"retrieval.documents.{index - 1}.document.metadata"] = (
            f'{{"id": "doc-{index}", "score": {score}}}'
        )
    retriever = SpanRecord(1, 2, 1, "retrieve", attributes, end_time=1)
    root = SpanRecord(1, 1, None, "query", {semconv.OI_OUTPUT_VALUE: "A [doc-1]. B [doc-7]."}, end_time=2)

    signals = extract_signals([root, retriever])
    assert [c["documentId"] for c in signals.inputs["candidates"]] == ["doc-1", "doc-2"]
    assert semconv.RAG_CONFIDENCE_RETRIEVAL_UNREADABLE_SPANS not in signals.diagnostics
    assert signals.inputs["citationCount"] == 1 and signals.inputs["invalidCitationCount"] == 1


# -- OpenAI Chat Completions with hidden invocation parameters ---------------------------------------------------


@pytest.fixture
def openai_hidden(request: pytest.FixtureRequest) -> Iterator[tuple[InMemorySpanExporter, TracerProvider]]:
    """The real OpenInference OpenAI tracer under a ``TraceConfig``, exporting through ConfidenceSpanProcessor."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(confidence_processor(exporter))
    instrumentor = OpenInferenceOpenAIInstrumentor()
    with restored_wrapt_patches():
        instrumentor.instrument(tracer_provider=provider, config=TraceConfig(**request.param))
        try:
            yield exporter, provider
        finally:
            instrumentor.uninstrument()


@pytest.mark.parametrize(
    "openai_hidden",
    [{"hide_llm_invocation_parameters": True}, {"hide_llm_invocation_parameters": True, "hide_inputs": True}],
    indirect=True,
    ids=["parameters", "parameters-and-inputs"],
)
def test_with_n_choices_and_the_parameters_hidden_the_first_choice_is_still_the_answer(
    openai_hidden: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """``n=2`` with ``llm.invocation_parameters`` hidden (and the request too): nothing on the span says ``n``,
    but the Chat Completion recorded as ``output.value`` holds two choices, so its output messages are
    alternatives and the answer is ``choices[0]``. Before, the second (unsure, citing a source it was not given)
    was joined to it: an invalid citation and a sentence without a valid marker."""
    exporter, provider = openai_hidden
    tracer = provider.get_tracer("app")
    client = fake_openai(two_choices)
    with tracer.start_as_current_span("POST /ask"):
        context = retrieve(tracer)
        response = client.chat.completions.create(model=MODEL, messages=messages(context), n=2)
    assert response.choices[0].message.content == ANSWER and len(response.choices) == 2
    (llm,) = [
        span for span in records(exporter) if span.attributes.get(semconv.OPENINFERENCE_SPAN_KIND) == "LLM"
    ]
    assert semconv.OI_LLM_INVOCATION_PARAMETERS not in llm.attributes
    assert f"{semconv.OI_LLM_OUTPUT_MESSAGES}.1.message.content" in llm.attributes

    diagnostics = assert_scored_as(exporter, expected_inputs(), "POST /ask").diagnostics
    assert diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
    assert diagnostics[semconv.RAG_CONFIDENCE_GENERATION_FINISH_REASON] == "stop"
