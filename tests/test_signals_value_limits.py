"""A retrieval span whose documents the SDK's attribute value length limit cut short, under the real tracer.

``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT`` (``SpanLimits.max_attribute_length``) truncates every string attribute,
and the OpenLLMetry LangChain tracer reports a retriever's documents as one JSON string
(``traceloop.entity.output``): cut, it parses as nothing. Real ``langchain-core`` objects traced by the real
``opentelemetry-instrumentation-langchain``, on a provider with the limit set.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from opentelemetry.instrumentation.langchain import LangchainInstrumentor
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence import compute_confidence, semconv
from rag_confidence.signals import extract_signals
from tests.instrumented import assert_scoreable, restored_wrapt_patches
from tests.test_signals_langchain import (
    CORPUS,
    QUESTION,
    format_documents,
    only_answer,
    prompt,
)

LIMIT = 1000
HITS = (("doc-1", 0.91), ("doc-2", 0.73), ("doc-4", 0.56))
ANSWER = "Paris is the capital of France [1]. Berlin is the capital of Germany [2]."


class PaddedRetriever(BaseRetriever):
    """Returns the corpus documents with ids and scores in the metadata, each text padded by ``padding``."""

    padding: int = 0

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [
            Document(
                page_content=CORPUS[doc_id][0] + " Lorem ipsum." * self.padding,
                metadata={"id": doc_id, "score": score},
            )
            for doc_id, score in HITS
        ]


@pytest.fixture(scope="module")
def limited() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=SpanLimits(max_attribute_length=LIMIT))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = LangchainInstrumentor()
    with restored_wrapt_patches():
        instrumentor.instrument(tracer_provider=provider)
        try:
            yield exporter
        finally:
            instrumentor.uninstrument()


def run(exporter: InMemorySpanExporter, padding: int) -> Any:
    exporter.clear()
    chain = (
        {
            "context": PaddedRetriever(padding=padding) | RunnableLambda(format_documents),
            "question": RunnablePassthrough(),
        }
        | prompt()
        | FakeListChatModel(responses=[ANSWER])
        | StrOutputParser()
    )
    assert chain.invoke(QUESTION) == ANSWER
    group = only_answer(exporter)
    (retriever,) = [
        span
        for span in group.spans
        if span.attributes.get(semconv.GEN_AI_OPERATION_NAME) == semconv.GEN_AI_OPERATION_VECTOR_DB_RETRIEVE
    ]
    return retriever, extract_signals(group.spans)


def test_documents_within_the_limit_are_read(limited: InMemorySpanExporter) -> None:
    _, signals = run(limited, padding=0)
    assert_scoreable(signals.inputs)
    assert [c["documentId"] for c in signals.inputs["candidates"]] == [doc_id for doc_id, _ in HITS]
    assert signals.inputs["citationCount"] == 2
    assert semconv.RAG_CONFIDENCE_RETRIEVAL_UNREADABLE_SPANS not in signals.diagnostics


def test_a_retrieval_cut_by_the_value_length_limit_is_reported_and_its_citations_not_judged(
    limited: InMemorySpanExporter,
) -> None:
    retriever, signals = run(limited, padding=20)
    output = retriever.attributes[semconv.TRACELOOP_ENTITY_OUTPUT]
    assert len(output) == LIMIT and output.startswith('{"documents": [')  # cut mid-JSON by the SDK
    assert_scoreable(signals.inputs)
    assert signals.inputs["candidates"] == []
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_UNREADABLE_SPANS] == 1
    assert signals.skipped == 1
    # Both markers cite documents that were retrieved but cannot be read: neither valid nor invalid is known.
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
    for name in ("citationCount", "invalidCitationCount", "citationCoverageScore"):
        assert name not in signals.inputs
    warnings = [warning.code for warning in compute_confidence(signals.inputs).meta.warnings]
    assert "invalid-citations" not in warnings and "low-citation-coverage" not in warnings
