"""Signals from real LlamaIndex pipelines under ``openinference-instrumentation-llama-index``, offline.

``llama-index-core`` objects only: an in-memory ``VectorStoreIndex`` (``MockEmbedding`` or a
bag-of-words embedding), ``MockLLM`` or a fixed-text ``CustomLLM``, a keyword retriever fused with the
vector retriever by the real ``QueryFusionRetriever``, and a reranking postprocessor that reports through
LlamaIndex's own rerank events, as published rerankers do. Expected node ids and scores come from running
the retrievers directly.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.llms.types import CompletionResponse, CompletionResponseGen, LLMMetadata
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
from llama_index.core.llms import CustomLLM, MockLLM
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import BaseRetriever, QueryFusionRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence import semconv
from rag_confidence.signals import AnswerGroup, extract_signals, find_answers, records_from_readable_spans
from tests.fake_llamaindex import WordEmbedding, words
from tests.instrumented import assert_scoreable, traced

TEXTS = {
    "doc-paris": ("Paris is the capital of France.", {"document_type": "atlas", "content_hash": "sha256:aa"}),
    "doc-berlin": ("Berlin is the capital of Germany.", {"document_type": "atlas"}),
    "doc-loire": ("The Loire is the longest river in France.", {"document_type": "guide"}),
    "doc-alps": ("The Alps cross France, Italy and Switzerland.", {"document_type": "guide"}),
}
QUESTION = "What is the capital of France?"
dispatcher = get_dispatcher(__name__)


class FixedLLM(CustomLLM):
    """A completion model answering with one fixed text and finish reason (``raw`` as providers report it)."""

    text: str
    finish_reason: str = "stop"

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="fixed")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=self.text, raw={"finish_reason": self.finish_reason})

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        yield self.complete(prompt)


class KeywordRetriever(BaseRetriever):
    """A keyword retriever with BM25-like raw scores (shared word counts, above 1)."""

    def __init__(self, nodes: list[Any]) -> None:
        super().__init__()
        self._nodes = nodes

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query = words(query_bundle.query_str)
        scored = [
            NodeWithScore(node=node, score=float(len(query & words(node.get_content()))))
            for node in self._nodes
        ]
        return sorted((item for item in scored if item.score), key=lambda item: -(item.score or 0.0))[:2]


class OverlapReranker(BaseNodePostprocessor):
    """Reranks by the share of query words a node holds, reporting through LlamaIndex rerank events."""

    top_n: int = 2

    @classmethod
    def class_name(cls) -> str:
        return "OverlapReranker"

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        assert query_bundle is not None
        dispatcher.event(
            ReRankStartEvent(query=query_bundle, nodes=nodes, top_n=self.top_n, model_name="overlap")
        )
        query = words(query_bundle.query_str)
        reranked = sorted(
            (
                NodeWithScore(node=item.node, score=len(query & words(item.node.get_content())) / len(query))
                for item in nodes
            ),
            key=lambda item: -(item.score or 0.0),
        )[: self.top_n]
        dispatcher.event(ReRankEndEvent(nodes=reranked))
        return reranked


@pytest.fixture(scope="module")
def exporter() -> Iterator[InMemorySpanExporter]:
    for exporter, _ in traced(LlamaIndexInstrumentor(), SimpleSpanProcessor):
        yield exporter


def build_index(embedding: BaseEmbedding) -> VectorStoreIndex:
    documents = [
        Document(text=text, doc_id=doc_id, metadata=dict(meta)) for doc_id, (text, meta) in TEXTS.items()
    ]
    return VectorStoreIndex.from_documents(documents, embed_model=embedding)


def word_embedding() -> WordEmbedding:
    return WordEmbedding(vocabulary=sorted({word for text, _ in TEXTS.values() for word in words(text)}))


def only_answer(exporter: InMemorySpanExporter) -> AnswerGroup:
    groups = find_answers(records_from_readable_spans(exporter.get_finished_spans()))
    assert len(groups) == 1, [group.answer.name for group in groups]
    return groups[0]


def direct(retriever: Any) -> list[tuple[str, float]]:
    return [(item.node.node_id, float(item.score)) for item in retriever.retrieve(QUESTION)]


def test_query_engine_with_mock_embedding_and_mock_llm(exporter: InMemorySpanExporter) -> None:
    index = build_index(MockEmbedding(embed_dim=8))
    expected = direct(index.as_retriever(similarity_top_k=3))
    exporter.clear()

    index.as_query_engine(similarity_top_k=3, llm=MockLLM(max_tokens=8)).query(QUESTION)

    group = only_answer(exporter)
    assert group.rule == "root" and group.answer.parent_span_id is None
    signals = extract_signals(group.spans)
    assert_scoreable(signals.inputs)
    candidates = signals.inputs["candidates"]
    assert [(c["documentId"], c["combinedScore"]) for c in candidates] == [
        (node_id, pytest.approx(score)) for node_id, score in expected
    ]
    # ``VectorIndexRetriever.retrieve`` wraps ``VectorIndexRetriever._retrieve``: one retrieval, one method.
    retriever_spans = [
        span for span in group.spans if span.attributes.get(semconv.OPENINFERENCE_SPAN_KIND) == "RETRIEVER"
    ]
    assert len(retriever_spans) == 2
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_SPANS] == 1
    assert all(c["retrievalScores"] == {"vectorindex": c["combinedScore"]} for c in candidates)
    # Node metadata through the key map.
    node_metadata = {
        item.node.node_id: item.node.metadata for item in index.as_retriever().retrieve(QUESTION)
    }
    for candidate in candidates:
        metadata = node_metadata.get(candidate["documentId"])
        if metadata is not None:
            assert candidate["documentType"] == metadata["document_type"]
    assert signals.inputs["supportLevel"] == "medium" and signals.sources["supportLevel"] == "default"
    assert signals.skipped == 0


def test_citations_and_truncation_from_the_llm_span(exporter: InMemorySpanExporter) -> None:
    index = build_index(word_embedding())
    expected = direct(index.as_retriever(similarity_top_k=2))
    first_node = expected[0][0]
    text = f"The capital is Paris [{first_node}]. France is in Europe [2]. And Spain [5]."
    exporter.clear()

    llm = FixedLLM(text=text, finish_reason="length")
    response = index.as_query_engine(similarity_top_k=2, llm=llm).query(QUESTION)
    assert str(response) == text

    signals = extract_signals(only_answer(exporter).spans)
    assert_scoreable(signals.inputs)
    assert [c["documentId"] for c in signals.inputs["candidates"]] == [node_id for node_id, _ in expected]
    assert signals.inputs["candidates"][0]["combinedScore"] == pytest.approx(expected[0][1])
    assert signals.inputs["citationCount"] == 2
    assert signals.inputs["invalidCitationCount"] == 1
    assert signals.inputs["citationCoverageScore"] == pytest.approx(2 / 3)
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED] is True
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_FINISH_REASON] == "length"


def hybrid(
    llm: Any, **fusion_options: Any
) -> tuple[QueryFusionRetriever, dict[str, float], dict[str, float]]:
    """A ``QueryFusionRetriever`` over a vector and a keyword retriever, and each one's own hits (id -> score)."""
    index = build_index(word_embedding())
    vector_retriever = index.as_retriever(similarity_top_k=2)
    keyword_retriever = KeywordRetriever(list(index.docstore.docs.values()))
    fusion = QueryFusionRetriever(
        [vector_retriever, keyword_retriever], llm=llm, num_queries=1, use_async=False, **fusion_options
    )
    return fusion, dict(direct(vector_retriever)), dict(direct(keyword_retriever))


def test_query_fusion_hybrid_retrieval(exporter: InMemorySpanExporter) -> None:
    fusion, vector, keyword = hybrid(MockLLM(), mode="reciprocal_rerank")
    top_keyword = max(keyword.values())
    assert top_keyword > 1
    fused_order = [node_id for node_id, _ in direct(fusion)]
    exporter.clear()

    RetrieverQueryEngine.from_args(fusion, llm=MockLLM(max_tokens=4)).query(QUESTION)

    signals = extract_signals(only_answer(exporter).spans)
    assert_scoreable(signals.inputs)
    candidates = signals.inputs["candidates"]
    # The fusion retriever presents the documents: its order is the rank; its RRF scores are no method.
    assert [c["documentId"] for c in candidates] == fused_order
    assert [c["rank"] for c in candidates] == list(range(1, len(fused_order) + 1))
    for candidate in candidates:
        node_id = candidate["documentId"]
        expected_scores = {}
        if node_id in vector:
            expected_scores["vectorindex"] = pytest.approx(vector[node_id])
        if node_id in keyword:
            expected_scores["keyword"] = pytest.approx(keyword[node_id] / top_keyword)
        assert candidate["retrievalScores"] == expected_scores
        assert candidate["combinedScore"] == pytest.approx(max(candidate["retrievalScores"].values()))
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_SPANS] == 2


def test_reranker_scores_and_order_are_final(exporter: InMemorySpanExporter) -> None:
    index = build_index(word_embedding())
    retriever = index.as_retriever(similarity_top_k=4)
    retrieved = dict(direct(retriever))
    query = words(QUESTION)
    by_overlap = sorted(
        (
            (item.node.node_id, len(query & words(item.node.get_content())) / len(query))
            for item in retriever.retrieve(QUESTION)
        ),
        key=lambda item: -item[1],
    )[:2]
    exporter.clear()

    engine = RetrieverQueryEngine.from_args(
        retriever, llm=MockLLM(max_tokens=4), node_postprocessors=[OverlapReranker()]
    )
    engine.query(QUESTION)

    group = only_answer(exporter)
    assert any(span.attributes.get(semconv.OPENINFERENCE_SPAN_KIND) == "RERANKER" for span in group.spans)
    signals = extract_signals(group.spans)
    assert_scoreable(signals.inputs)
    candidates = signals.inputs["candidates"]
    assert [(c["documentId"], c["rank"]) for c in candidates] == [
        (node_id, rank) for rank, (node_id, _) in enumerate(by_overlap, start=1)
    ]
    for candidate, (node_id, overlap) in zip(candidates, by_overlap, strict=True):
        assert candidate["retrievalScores"] == {
            "vectorindex": pytest.approx(retrieved[node_id]),
            "rerank": pytest.approx(overlap),
        }
        assert candidate["combinedScore"] == pytest.approx(overlap)


def test_a_reranker_per_sub_question_each_presents_its_own_documents(exporter: InMemorySpanExporter) -> None:
    """``SubQuestionQueryEngine`` over two query engines, each reranking its retrieval down to one node: the
    generator saw both sub-answers' nodes, so both are candidates, in the order the rerankers ended."""
    from llama_index.core.query_engine import SubQuestionQueryEngine
    from llama_index.core.question_gen.types import BaseQuestionGenerator, SubQuestion
    from llama_index.core.tools import QueryEngineTool, ToolMetadata

    questions = {
        "capitals": "What is the capital of France?",
        "geography": "Which river is longest in France?",
    }

    class FixedQuestions(BaseQuestionGenerator):
        def _get_prompts(self) -> dict[str, Any]:
            return {}

        def _update_prompts(self, prompts: Any) -> None:
            pass

        def generate(self, tools: Any, query: Any) -> list[SubQuestion]:
            return [SubQuestion(sub_question=text, tool_name=name) for name, text in questions.items()]

        async def agenerate(self, tools: Any, query: Any) -> list[SubQuestion]:
            return self.generate(tools, query)

    index = build_index(word_embedding())
    expected: list[str] = []
    retrieved: set[str] = set()
    for text in questions.values():
        nodes = index.as_retriever(similarity_top_k=3).retrieve(text)
        retrieved.update(item.node.node_id for item in nodes)
        query = words(text)
        ranked = sorted(nodes, key=lambda item: -len(query & words(item.node.get_content())))
        expected += [item.node.node_id for item in ranked[:1] if item.node.node_id not in expected]
    assert len(expected) == 2
    dropped = sorted(retrieved - set(expected))[0]
    answer = f"Paris [{expected[0]}]; the Loire [{expected[-1]}]; also [{dropped}]."
    tools = [
        QueryEngineTool(
            index.as_query_engine(
                similarity_top_k=3, llm=MockLLM(max_tokens=4), node_postprocessors=[OverlapReranker(top_n=1)]
            ),
            ToolMetadata(name=name, description=name),
        )
        for name in questions
    ]
    engine = SubQuestionQueryEngine.from_defaults(
        query_engine_tools=tools,
        question_gen=FixedQuestions(),
        llm=FixedLLM(text=answer),
        use_async=False,
    )
    exporter.clear()
    engine.query("Capital and longest river of France?")

    group = only_answer(exporter)
    rerankers = [
        span for span in group.spans if span.attributes.get(semconv.OPENINFERENCE_SPAN_KIND) == "RERANKER"
    ]
    assert len(rerankers) == 2
    signals = extract_signals(group.spans)
    assert_scoreable(signals.inputs)
    assert [c["documentId"] for c in signals.inputs["candidates"]] == expected
    assert all("rerank" in c["retrievalScores"] for c in signals.inputs["candidates"])
    # Ids the generator was shown count; the id of a node both rerankers dropped does not.
    assert signals.inputs["citationCount"] == 2 and signals.inputs["invalidCitationCount"] == 1
