"""Real frameworks under real instrumentors, offline, through the processor and the decorator.

LangChain (``langchain-core`` retriever, prompt and ``FakeListChatModel``) under OpenInference and under
OpenLLMetry, and LlamaIndex (``VectorStoreIndex`` with a bag-of-words embedding and ``MockLLM``) under
OpenInference. Expected inputs are built from what the retriever returns when called directly, and the
scored span is compared with ``compute_confidence`` on them; metrics and the event are checked too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnablePassthrough
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence import semconv
from rag_confidence.otel import ConfidenceSpanProcessor, last_scorecard, record_signals, scored_answer
from rag_confidence.scoring import compute_confidence
from tests import instrumented

from .conftest import undo_openllmetry_langchain_callback_patch

PASSAGES = {
    "kb-retention": ("Backups are retained for 35 days in the primary region.", "runbook", "2024-11-02"),
    "kb-restore": ("A restore takes about 20 minutes per 100 GB of data.", "runbook", "2024-08-19"),
    "kb-regions": ("Backups are replicated to a second region every 6 hours.", "architecture", "2023-05-30"),
}
QUESTION = "How many days are backups retained in the primary region?"
ANSWER = "Backups are retained for 35 days."


class KeywordRetriever(BaseRetriever):
    """Share of query words in each passage; the id and score go into the metadata (the tracer reads no other)."""

    k: int = 2

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        words = set(re.findall(r"[a-z0-9]+", query.lower()))
        documents = []
        for doc_id, (text, doc_type, updated) in PASSAGES.items():
            score = round(len(words & set(re.findall(r"[a-z0-9]+", text.lower()))) / len(words), 4)
            metadata = {"id": doc_id, "score": score, "document_type": doc_type, "last_updated": updated}
            documents.append(Document(page_content=text, metadata=metadata))
        return sorted(documents, key=lambda doc: -doc.metadata["score"])[: self.k]


class Telemetry:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.reader = InMemoryMetricReader()
        self.logs = InMemoryLogRecordExporter()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.logger_provider = LoggerProvider()
        self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.logs))
        self.provider = TracerProvider()
        self.provider.add_span_processor(
            ConfidenceSpanProcessor(
                SimpleSpanProcessor(self.exporter),
                meter_provider=self.meter_provider,
                logger_provider=self.logger_provider,
            )
        )

    def scored(self) -> list[ReadableSpan]:
        return [
            s
            for s in self.exporter.get_finished_spans()
            if semconv.RAG_CONFIDENCE_TOTAL in (s.attributes or {})
        ]

    def score_points(self) -> int:
        return sum(point.count for point in instrumented.score_points(self.reader))


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    built = Telemetry()
    yield built
    built.provider.shutdown()
    # Each test here instruments on its own: the OpenLLMetry test's leftover patch must not reach the next.
    undo_openllmetry_langchain_callback_patch()


def langchain_chain() -> Any:
    prompt = ChatPromptTemplate.from_template("Context:\n{context}\nQuestion: {question}")
    retriever = KeywordRetriever().with_config(metadata={semconv.RAG_RETRIEVAL_METHOD: "keyword"})
    return (
        {
            "context": retriever | (lambda docs: "\n".join(d.page_content for d in docs)),
            "question": RunnablePassthrough(),
        }
        | prompt
        | FakeListChatModel(responses=[ANSWER])
        | StrOutputParser()
    )


def expected_candidates(method: str) -> list[dict[str, Any]]:
    documents = KeywordRetriever().invoke(QUESTION)
    return [
        {
            "retrievalScores": {method: doc.metadata["score"]},
            "combinedScore": doc.metadata["score"],
            "documentId": doc.metadata["id"],
            "documentType": doc.metadata["document_type"],
            "lastUpdated": doc.metadata["last_updated"],
            "rank": rank,
        }
        for rank, doc in enumerate(documents, start=1)
    ]


def test_langchain_under_openinference_with_the_decorator(telemetry: Telemetry) -> None:
    from openinference.instrumentation.langchain import LangChainInstrumentor

    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=telemetry.provider)
    try:
        chain = langchain_chain()

        @scored_answer(
            name="ask",
            tracer_provider=telemetry.provider,
            meter_provider=telemetry.meter_provider,
            logger_provider=telemetry.logger_provider,
        )
        def ask(question: str) -> str:
            # Inside the chain the OpenInference spans are not current: signals go on the decorator's span.
            record_signals(support_level="high", has_conflict=False, faithfulness_score=0.9)
            return str(chain.invoke(question))

        assert ask(QUESTION) == ANSWER
    finally:
        instrumentor.uninstrument()

    expected = compute_confidence(
        {
            "supportLevel": "high",
            "hasConflict": False,
            "faithfulnessScore": 0.9,
            "candidates": expected_candidates("keyword"),
        }
    )
    (scored,) = telemetry.scored()
    assert scored.name == "ask"
    attributes = scored.attributes or {}
    assert attributes[semconv.RAG_CONFIDENCE_TOTAL] == expected.total
    assert attributes[semconv.RAG_CONFIDENCE_ACTION] == expected.recommended_action
    assert list(attributes[semconv.RAG_CONFIDENCE_ACTIVE_DIMENSIONS]) == expected.meta.active_dimensions
    card = last_scorecard()
    assert card is not None and card.model_dump() == expected.model_dump()
    assert telemetry.score_points() == 1
    (event,) = telemetry.logs.get_finished_logs()
    assert scored.context is not None and event.log_record.span_id == scored.context.span_id


def test_langchain_under_openllmetry_scores_the_root_without_a_decorator(telemetry: Telemetry) -> None:
    from opentelemetry.instrumentation.langchain import LangchainInstrumentor

    # Called before instrumenting: OpenLLMetry's uninstrument() leaves its LangChain callback in place, so a
    # direct call afterwards would be traced (and scored) too.
    documents = KeywordRetriever().invoke(QUESTION)
    expected = compute_confidence(
        {"supportLevel": "medium", "hasConflict": False, "candidates": expected_candidates("keyword")}
    )
    instrumentor = LangchainInstrumentor()
    instrumentor.instrument(tracer_provider=telemetry.provider)
    try:
        tracer = telemetry.provider.get_tracer("app")
        with tracer.start_as_current_span("handle question"):
            record_signals(support_level="medium", has_conflict=False)
            assert langchain_chain().invoke(QUESTION) == ANSWER
    finally:
        instrumentor.uninstrument()

    (scored,) = telemetry.scored()
    assert scored.name == "handle question"
    attributes = scored.attributes or {}
    assert attributes[semconv.RAG_CONFIDENCE_CANDIDATES] == len(documents)
    assert attributes[semconv.RAG_CONFIDENCE_TOTAL] == expected.total
    assert telemetry.score_points() == 1


def test_llamaindex_under_openinference_scores_the_query_root(telemetry: Telemetry) -> None:
    from llama_index.core import Document as LlamaDocument
    from llama_index.core import VectorStoreIndex
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.llms import MockLLM
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    vocabulary = sorted(
        {w for text, _, _ in PASSAGES.values() for w in re.findall(r"[a-z0-9]+", text.lower())}
    )

    class WordEmbedding(BaseEmbedding):
        def _vector(self, text: str) -> list[float]:
            present = set(re.findall(r"[a-z0-9]+", text.lower()))
            return [1.0 if word in present else 0.0 for word in vocabulary]

        def _get_query_embedding(self, query: str) -> list[float]:
            return self._vector(query)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._vector(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._vector(text)

    documents = [LlamaDocument(text=text, id_=doc_id) for doc_id, (text, _, _) in PASSAGES.items()]
    index = VectorStoreIndex.from_documents(documents, embed_model=WordEmbedding())
    direct = [
        (hit.node.node_id, hit.score) for hit in index.as_retriever(similarity_top_k=2).retrieve(QUESTION)
    ]

    instrumentor = LlamaIndexInstrumentor()
    instrumentor.instrument(tracer_provider=telemetry.provider)
    try:
        index.as_query_engine(similarity_top_k=2, llm=MockLLM(max_tokens=8)).query(QUESTION)
    finally:
        instrumentor.uninstrument()

    (scored,) = telemetry.scored()
    assert scored.parent is None  # the query engine's root span: the root rule, no decorator involved
    attributes = scored.attributes or {}
    assert attributes[semconv.RAG_CONFIDENCE_CANDIDATES] == len(direct)
    assert list(attributes[semconv.RAG_CONFIDENCE_DERIVED_SIGNALS]) == ["supportLevel"]
    retriever_methods = {
        (span.attributes or {}).get(semconv.OPENINFERENCE_SPAN_KIND)
        for span in telemetry.exporter.get_finished_spans()
    }
    assert semconv.OPENINFERENCE_KIND_RETRIEVER in retriever_methods
    assert telemetry.score_points() == 1
    assert len(telemetry.logs.get_finished_logs()) == 1


class FailingChatModel(FakeListChatModel):
    """The model backend is down: the call raises after the retrieval ran (streamed or not)."""

    def _call(self, *args: Any, **kwargs: Any) -> str:
        raise RuntimeError("model backend answered 503")

    def _stream(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        raise RuntimeError("model backend answered 503")
        yield  # pragma: no cover - makes this a generator, as LangChain expects


def test_a_request_that_failed_after_its_retrieval_is_not_scored(telemetry: Telemetry) -> None:
    from openinference.instrumentation.langchain import LangChainInstrumentor

    retriever = KeywordRetriever()
    chain = (
        {"context": retriever | (lambda docs: str(docs)), "question": RunnablePassthrough()}
        | ChatPromptTemplate.from_template("{context}\n{question}")
        | FailingChatModel(responses=[ANSWER])
        | StrOutputParser()
    )
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=telemetry.provider)
    try:
        with pytest.raises(RuntimeError):
            chain.invoke(QUESTION)
        with pytest.raises(RuntimeError):
            list(chain.stream(QUESTION))
    finally:
        instrumentor.uninstrument()

    spans = telemetry.exporter.get_finished_spans()
    roots = [span for span in spans if span.parent is None]
    assert len(roots) == 2 and all(not root.status.is_ok for root in roots)
    assert any(
        (span.attributes or {}).get(semconv.OPENINFERENCE_SPAN_KIND) == semconv.OPENINFERENCE_KIND_RETRIEVER
        for span in spans
    )
    assert telemetry.scored() == []  # no scorecard, metric or event for an answer never given
    assert telemetry.score_points() == 0
    assert telemetry.logs.get_finished_logs() == ()
