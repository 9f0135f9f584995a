"""Signals from real LlamaIndex pipelines under OpenLLMetry's ``opentelemetry-instrumentation-llamaindex``.

That instrumentor names every span after the class whose method ran (``VectorIndexRetriever.task``,
``RetrieverQueryEngine.workflow`` for the root) and writes the method's return value as
``traceloop.entity.output``: for a retriever or a reranking postprocessor, a JSON list of ``NodeWithScore``.
The same ``llama-index-core`` objects as ``test_signals_llamaindex.py`` (the OpenInference tracer), so both
tracers are held to the same expectations, taken from running the retrievers directly.

The instrumentor adds its handlers to LlamaIndex's root dispatcher and ``uninstrument()`` leaves them there,
so the fixture removes them itself: later modules' LlamaIndex calls must not open OpenLLMetry spans.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import VectorIndexAutoRetriever
from llama_index.core.vector_stores.types import VectorStoreInfo
from opentelemetry.instrumentation.llamaindex import LlamaIndexInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence import compute_confidence, semconv
from rag_confidence.otel import ConfidenceSpanProcessor
from rag_confidence.signals import extract_signals
from tests.instrumented import assert_scoreable, restored_wrapt_patches

from .test_signals_llamaindex import (
    QUESTION,
    FixedLLM,
    OverlapReranker,
    build_index,
    direct,
    hybrid,
    only_answer,
    word_embedding,
)


@pytest.fixture(scope="module")
def openllmetry() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(ConfidenceSpanProcessor(SimpleSpanProcessor(exporter)))
    root = get_dispatcher()
    span_handlers, event_handlers = list(root.span_handlers), list(root.event_handlers)
    instrumentor = LlamaIndexInstrumentor()
    with restored_wrapt_patches():
        instrumentor.instrument(tracer_provider=provider)
        try:
            yield exporter
        finally:
            instrumentor.uninstrument()
            root.span_handlers[:] = span_handlers
            root.event_handlers[:] = event_handlers
            provider.shutdown()


def entity_names(exporter: InMemorySpanExporter) -> list[str]:
    return [
        str((span.attributes or {}).get(semconv.TRACELOOP_ENTITY_NAME))
        for span in exporter.get_finished_spans()
    ]


def test_query_engine_retriever_documents_and_citations(openllmetry: InMemorySpanExporter) -> None:
    index = build_index(word_embedding())
    expected = direct(index.as_retriever(similarity_top_k=3))
    metadata = {node.node_id: node.metadata for node in index.docstore.docs.values()}
    text = f"The capital is Paris [{expected[0][0]}]. France is in Europe [2]. And Spain [5]."
    openllmetry.clear()

    index.as_query_engine(similarity_top_k=3, llm=FixedLLM(text=text)).query(QUESTION)

    # The retriever's retrieve() around its _retrieve(): two spans of the same class, one retrieval.
    assert entity_names(openllmetry).count("VectorIndexRetriever.task") == 2
    group = only_answer(openllmetry)
    assert group.rule == "root" and group.answer.name == "RetrieverQueryEngine.workflow"
    signals = extract_signals(group.spans)
    assert_scoreable(signals.inputs)
    candidates = signals.inputs["candidates"]
    assert [(c["documentId"], c["combinedScore"]) for c in candidates] == [
        (node_id, pytest.approx(score)) for node_id, score in expected
    ]
    # Named as under OpenInference and LangChain: the class without "Retriever", lower case.
    assert all(c["retrievalScores"] == {"vectorindex": c["combinedScore"]} for c in candidates)
    assert [c["documentType"] for c in candidates] == [
        metadata[node_id]["document_type"] for node_id, _ in expected
    ]
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_SPANS] == 1
    # The answer text from the LLM span: [node id] and [2] valid, [5] points past the three documents.
    assert signals.inputs["citationCount"] == 2
    assert signals.inputs["invalidCitationCount"] == 1
    assert signals.inputs["citationCoverageScore"] == pytest.approx(2 / 3)
    assert signals.skipped == 0


def test_reranker_scores_and_order_are_final(openllmetry: InMemorySpanExporter) -> None:
    index = build_index(word_embedding())
    vector = dict(direct(index.as_retriever(similarity_top_k=3)))
    reranker = OverlapReranker()
    reranked = [
        (item.node.node_id, float(item.score or 0.0))
        for item in reranker.postprocess_nodes(
            index.as_retriever(similarity_top_k=3).retrieve(QUESTION), query_str=QUESTION
        )
    ]
    openllmetry.clear()

    index.as_query_engine(
        similarity_top_k=3, llm=FixedLLM(text="Paris [1]."), node_postprocessors=[reranker]
    ).query(QUESTION)

    assert "OverlapReranker.task" in entity_names(openllmetry)
    signals = extract_signals(only_answer(openllmetry).spans)
    candidates = signals.inputs["candidates"]
    assert [(c["documentId"], c["combinedScore"], c["rank"]) for c in candidates] == [
        (node_id, pytest.approx(score), rank) for rank, (node_id, score) in enumerate(reranked, start=1)
    ]
    for candidate in candidates:
        assert candidate["retrievalScores"] == {
            "vectorindex": pytest.approx(vector[candidate["documentId"]]),
            "rerank": pytest.approx(candidate["combinedScore"]),
        }


def test_query_fusion_hybrid_retrieval(openllmetry: InMemorySpanExporter) -> None:
    fusion, vector, keyword = hybrid(FixedLLM(text="-"))
    top_keyword = max(keyword.values())
    fused_order = [node_id for node_id, _ in direct(fusion)]
    openllmetry.clear()

    RetrieverQueryEngine.from_args(fusion, llm=FixedLLM(text="Paris.")).query(QUESTION)

    signals = extract_signals(only_answer(openllmetry).spans)
    candidates = signals.inputs["candidates"]
    # The fusion retriever wraps the two: it presents the documents (its order is the rank) and is no method.
    assert [c["documentId"] for c in candidates] == fused_order
    for candidate in candidates:
        node_id = candidate["documentId"]
        expected = {}
        if node_id in vector:
            expected["vectorindex"] = pytest.approx(vector[node_id])
        if node_id in keyword:
            expected["keyword"] = pytest.approx(
                keyword[node_id] / top_keyword
            )  # raw scores above 1, rescaled
        assert candidate["retrievalScores"] == expected
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_SPANS] == 2


def test_the_span_processor_scores_the_query_engine_root(openllmetry: InMemorySpanExporter) -> None:
    """End to end: the fixture's provider exports through ConfidenceSpanProcessor; the root carries the
    scorecard of the inputs extraction reads from the same spans, and every span is exported once."""
    index = build_index(word_embedding())
    expected = direct(index.as_retriever(similarity_top_k=2))
    openllmetry.clear()

    index.as_query_engine(similarity_top_k=2, llm=FixedLLM(text=f"Paris [{expected[0][0]}].")).query(QUESTION)

    spans = openllmetry.get_finished_spans()
    assert len({span.context.span_id for span in spans if span.context is not None}) == len(spans)
    (answer,) = [span for span in spans if semconv.RAG_CONFIDENCE_TOTAL in (span.attributes or {})]
    assert answer.name == "RetrieverQueryEngine.workflow" and answer.parent is None
    inputs = extract_signals(only_answer(openllmetry).spans).inputs
    assert [c["documentId"] for c in inputs["candidates"]] == [node_id for node_id, _ in expected]
    assert answer.attributes is not None
    assert answer.attributes[semconv.RAG_CONFIDENCE_TOTAL] == compute_confidence(inputs).total
    assert answer.attributes[semconv.RAG_CONFIDENCE_CANDIDATES] == len(expected)


def test_content_tracing_off_still_finds_the_answer(
    openllmetry: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``TRACELOOP_TRACE_CONTENT=false`` drops every ``traceloop.entity.output``: the retriever spans are still
    retrievals (the answer is found and scored) but report no documents, so there are no candidates."""
    monkeypatch.setenv("TRACELOOP_TRACE_CONTENT", "false")
    index = build_index(word_embedding())
    openllmetry.clear()

    index.as_query_engine(similarity_top_k=2, llm=FixedLLM(text="Paris.")).query(QUESTION)

    group = only_answer(openllmetry)
    assert group.has_retrieval
    signals = extract_signals(group.spans)
    assert signals.inputs["candidates"] == []
    assert semconv.RAG_CONFIDENCE_RETRIEVAL_UNREADABLE_SPANS not in signals.diagnostics
    assert "missing-candidates" in [w.code for w in compute_confidence(signals.inputs).meta.warnings]


def test_another_method_of_a_retriever_class_is_no_lost_retrieval(openllmetry: InMemorySpanExporter) -> None:
    """``VectorIndexAutoRetriever`` also opens a span for ``generate_retrieval_spec``, named after the class like
    its ``retrieve``: its output is a query spec, not documents. No documents are lost there, so citations are
    still judged (an unreadable retrieval would stop that)."""
    index = build_index(word_embedding())
    spec = json.dumps({"query": "capital France", "filters": [], "top_k": 2})
    auto = VectorIndexAutoRetriever(
        index,
        vector_store_info=VectorStoreInfo(content_info="facts", metadata_info=[]),
        llm=FixedLLM(text=spec),
    )
    openllmetry.clear()

    RetrieverQueryEngine.from_args(auto, llm=FixedLLM(text="Paris is the capital [1].")).query(QUESTION)

    assert (
        entity_names(openllmetry).count("VectorIndexAutoRetriever.task") >= 3
    )  # retrieve, _retrieve, the spec
    signals = extract_signals(only_answer(openllmetry).spans)
    assert semconv.RAG_CONFIDENCE_RETRIEVAL_UNREADABLE_SPANS not in signals.diagnostics
    assert signals.inputs["candidates"] and signals.inputs["citationCount"] == 1
