"""Signals from real Haystack pipelines under ``openinference-instrumentation-haystack``, offline.

Real ``haystack-ai`` objects: an ``InMemoryDocumentStore`` with four documents, the ``InMemoryBM25Retriever`` and
``InMemoryEmbeddingRetriever``, a ``DocumentJoiner`` for hybrid retrieval and a ``PromptBuilder``. Only the model
calls are fakes: a bag-of-words text embedder and a generator returning a canned answer (no network, no model),
plus a word-overlap ranker, all plain ``@component`` classes. Expected ids and scores come from running the
components directly. ``test_signals_haystack_native.py`` holds Haystack's own tracer to the same expectations.

The instrumentor sorts components into kinds by class name and ``run`` signature: ``*Retriever`` -> RETRIEVER,
``*Ranker`` with documents in and out -> RERANKER, ``*Generator`` -> LLM, a ``PromptBuilder`` -> LLM as well
(with the template), anything else (the joiner) -> CHAIN; the pipeline's ``run`` is the CHAIN root.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from haystack import Document, Pipeline, component
from haystack.components.builders import PromptBuilder
from haystack.components.joiners import DocumentJoiner
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever, InMemoryEmbeddingRetriever
from haystack.document_stores.in_memory import InMemoryDocumentStore
from openinference.instrumentation.haystack import HaystackInstrumentor
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence import compute_confidence, semconv
from rag_confidence.signals import AnswerGroup, extract_signals, find_answers, records_from_readable_spans
from tests.instrumented import confidence_processor, traced

TEXTS = {
    "doc-paris": ("Paris is the capital of France.", {"document_type": "atlas"}),
    "doc-berlin": ("Berlin is the capital of Germany.", {"document_type": "atlas"}),
    "doc-loire": ("The Loire is the longest river in France.", {"document_type": "guide"}),
    "doc-alps": ("The Alps cross France, Italy and Switzerland.", {"document_type": "guide"}),
}
QUESTION = "What is the capital of France?"
# The prompt numbers the documents it shows: ``[1]`` is the first document the generator saw.
TEMPLATE = "{% for d in documents %}[{{ loop.index }}] {{ d.content }}\n{% endfor %}Question: {{ question }}"
# [1] and [2] point at the two documents shown; [7] at none.
ANSWER = "Paris is the capital of France [1]. Berlin is not [2]. Spain is elsewhere [7]."
_WORD = re.compile(r"[a-z]+")
_VOCABULARY = sorted({word for text, _ in TEXTS.values() for word in _WORD.findall(text.lower())})


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def word_vector(text: str) -> list[float]:
    """A normalised bag-of-words vector over the documents' words: offline, deterministic, distinct scores."""
    present = words(text)
    vector = [1.0 if word in present else 0.0 for word in _VOCABULARY]
    norm = sum(value * value for value in vector) ** 0.5 or 1.0
    return [value / norm for value in vector]


@component
class WordTextEmbedder:
    """Fake text embedder (offline stand-in for a model): the question's bag-of-words vector."""

    @component.output_types(embedding=list[float])
    def run(self, text: str) -> dict[str, Any]:
        return {"embedding": word_vector(text)}


@component
class CannedGenerator:
    """Fake generator (no LLM): answers every prompt with one fixed text, reporting a finish reason."""

    def __init__(self, answer: str, finish_reason: str = "stop") -> None:
        self.answer = answer
        self.finish_reason = finish_reason

    @component.output_types(replies=list[str], meta=list[dict[str, Any]])
    def run(self, prompt: str) -> dict[str, Any]:
        return {"replies": [self.answer], "meta": [{"model": "canned", "finish_reason": self.finish_reason}]}


@component
class OverlapRanker:
    """Reranks by the share of the query's words a document holds (offline stand-in for a cross-encoder)."""

    def __init__(self, top_k: int = 2) -> None:
        self.top_k = top_k

    @component.output_types(documents=list[Document])
    def run(self, query: str, documents: list[Document]) -> dict[str, Any]:
        asked = words(query)
        scored = [
            Document(
                id=document.id,
                content=document.content,
                meta=document.meta,
                score=len(asked & words(document.content or "")) / len(asked),
            )
            for document in documents
        ]
        scored.sort(key=lambda document: -(document.score or 0.0))
        return {"documents": scored[: self.top_k]}


def document_store() -> InMemoryDocumentStore:
    store = InMemoryDocumentStore()
    store.write_documents(
        [
            Document(id=doc_id, content=text, meta=dict(meta), embedding=word_vector(text))
            for doc_id, (text, meta) in TEXTS.items()
        ]
    )
    return store


def bm25_pipeline(generator: Any, *, top_k: int = 3, ranker: OverlapRanker | None = None) -> Pipeline:
    pipeline = Pipeline()
    pipeline.add_component("retriever", InMemoryBM25Retriever(document_store(), top_k=top_k))
    pipeline.add_component(
        "prompt_builder", PromptBuilder(template=TEMPLATE, required_variables=["question"])
    )
    pipeline.add_component("llm", generator)
    if ranker is not None:
        pipeline.add_component("ranker", ranker)
        pipeline.connect("retriever.documents", "ranker.documents")
        pipeline.connect("ranker.documents", "prompt_builder.documents")
    else:
        pipeline.connect("retriever.documents", "prompt_builder.documents")
    pipeline.connect("prompt_builder.prompt", "llm.prompt")
    return pipeline


def run_bm25(pipeline: Pipeline) -> dict[str, Any]:
    data: dict[str, Any] = {"retriever": {"query": QUESTION}, "prompt_builder": {"question": QUESTION}}
    if "ranker" in pipeline.graph.nodes:
        data["ranker"] = {"query": QUESTION}
    return pipeline.run(data)


def hybrid_pipeline(generator: Any) -> Pipeline:
    """Dense and BM25 retrieval (two documents each, not the same two), joined by a ``DocumentJoiner``."""
    store = document_store()
    pipeline = Pipeline()
    pipeline.add_component("embedder", WordTextEmbedder())
    pipeline.add_component("dense", InMemoryEmbeddingRetriever(store, top_k=2))
    pipeline.add_component("bm25", InMemoryBM25Retriever(store, top_k=2))
    pipeline.add_component("joiner", DocumentJoiner(join_mode="reciprocal_rank_fusion"))
    pipeline.add_component(
        "prompt_builder", PromptBuilder(template=TEMPLATE, required_variables=["question"])
    )
    pipeline.add_component("llm", generator)
    pipeline.connect("embedder.embedding", "dense.query_embedding")
    pipeline.connect("dense.documents", "joiner.documents")
    pipeline.connect("bm25.documents", "joiner.documents")
    pipeline.connect("joiner.documents", "prompt_builder.documents")
    pipeline.connect("prompt_builder.prompt", "llm.prompt")
    return pipeline


HYBRID_QUESTION = "capital Berlin river"  # dense and BM25 agree on one document, not on the second


def run_hybrid(pipeline: Pipeline) -> dict[str, Any]:
    return pipeline.run(
        {
            "embedder": {"text": HYBRID_QUESTION},
            "bm25": {"query": HYBRID_QUESTION},
            "prompt_builder": {"question": HYBRID_QUESTION},
        }
    )


def bm25_hits(query: str = QUESTION, top_k: int = 3) -> list[tuple[str, float]]:
    """The BM25 retriever's own hits, run directly: (id, score rescaled by the best, as extraction does)."""
    found = InMemoryBM25Retriever(document_store(), top_k=top_k).run(query=query)["documents"]
    best = max(float(document.score) for document in found)
    return [(document.id, float(document.score) / best) for document in found]


def dense_hits(query: str, top_k: int = 2) -> list[tuple[str, float]]:
    found = InMemoryEmbeddingRetriever(document_store(), top_k=top_k).run(query_embedding=word_vector(query))
    return [(document.id, float(document.score)) for document in found["documents"]]


def reranked(hits: list[tuple[str, float]], top_k: int = 2) -> list[tuple[str, float]]:
    documents = [Document(id=doc_id, content=TEXTS[doc_id][0]) for doc_id, _ in hits]
    ranked = OverlapRanker(top_k=top_k).run(query=QUESTION, documents=documents)["documents"]
    return [(document.id, float(document.score)) for document in ranked]


def hybrid_expectations() -> tuple[dict[str, float], dict[str, float]]:
    dense = dict(dense_hits(HYBRID_QUESTION))
    keyword = dict(bm25_hits(HYBRID_QUESTION, top_k=2))
    # Each retriever found a document the other did not: a merge by id, not a union of two equal lists.
    assert set(dense) != set(keyword) and set(dense) & set(keyword)
    return dense, keyword


def only_answer(spans: tuple[ReadableSpan, ...] | list[ReadableSpan]) -> AnswerGroup:
    groups = find_answers(records_from_readable_spans(spans))
    assert len(groups) == 1, [group.answer.name for group in groups]
    return groups[0]


def assert_scoreable(inputs: dict[str, Any]) -> None:
    """The inputs pass the scoring core's strict validation (no input warning at all)."""
    scorecard = compute_confidence(inputs, {"validation": "strict"})
    assert 0 <= scorecard.total <= 100


@pytest.fixture(scope="module")
def exporter() -> Iterator[InMemorySpanExporter]:
    for exporter, provider in traced(HaystackInstrumentor(), confidence_processor):
        yield exporter
        provider.shutdown()


def assert_scored_root(spans: tuple[ReadableSpan, ...], root_name: str, candidates: int) -> None:
    """End to end through ``ConfidenceSpanProcessor``: every span exported once, and the pipeline's root span
    carries the scorecard of the inputs extraction reads from the same spans."""
    assert len({span.context.span_id for span in spans if span.context is not None}) == len(spans)
    (answer,) = [span for span in spans if semconv.RAG_CONFIDENCE_TOTAL in (span.attributes or {})]
    assert answer.name == root_name and answer.parent is None and answer.attributes is not None
    inputs = extract_signals(only_answer(spans).spans).inputs
    assert answer.attributes[semconv.RAG_CONFIDENCE_TOTAL] == compute_confidence(inputs).total
    assert answer.attributes[semconv.RAG_CONFIDENCE_CANDIDATES] == candidates == len(inputs["candidates"])


def assert_bm25_candidates(candidates: list[dict[str, Any]], expected: list[tuple[str, float]]) -> None:
    """The candidates of the BM25 retrieval alone: ``expected`` (id, score) in order, one method
    (``inmemorybm25``), each document's type from its metadata."""
    assert [(c["documentId"], c["combinedScore"], c["rank"]) for c in candidates] == [
        (doc_id, pytest.approx(score), rank) for rank, (doc_id, score) in enumerate(expected, start=1)
    ]
    assert all(c["retrievalScores"] == {"inmemorybm25": c["combinedScore"]} for c in candidates)
    assert [c["documentType"] for c in candidates] == [
        TEXTS[doc_id][1]["document_type"] for doc_id, _ in expected
    ]


def kinds(exporter: InMemorySpanExporter) -> dict[str, str]:
    return {
        span.name: str((span.attributes or {}).get(semconv.OPENINFERENCE_SPAN_KIND))
        for span in exporter.get_finished_spans()
    }


def test_bm25_pipeline_documents_and_citations(exporter: InMemorySpanExporter) -> None:
    expected = bm25_hits()
    exporter.clear()

    run_bm25(bm25_pipeline(CannedGenerator(ANSWER)))

    assert (
        kinds(exporter)["PromptBuilder.run"] == "LLM"
    )  # the instrumentor's choice; no model is called there
    group = only_answer(exporter.get_finished_spans())
    assert group.rule == "root" and group.answer.name == "Pipeline.run"
    signals = extract_signals(group.spans)
    assert_scoreable(signals.inputs)
    # Ids, BM25 scores (above 1, rescaled by the best), metadata through the key map, positions in order.
    assert_bm25_candidates(signals.inputs["candidates"], expected)
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_SPANS] == 1
    # The generator's reply is the answer: [1] and [2] valid, [7] points past the three documents.
    assert (signals.inputs["citationCount"], signals.inputs["invalidCitationCount"]) == (2, 1)
    assert signals.inputs["citationCoverageScore"] == pytest.approx(2 / 3)
    assert signals.skipped == 0
    assert_scored_root(exporter.get_finished_spans(), "Pipeline.run", len(expected))


def assert_ranker_is_final(exporter: InMemorySpanExporter) -> None:
    """Run BM25 then a ranker keeping two documents: the ranker's scores and order are final, each candidate
    keeps its retrieval score beside the rerank one, and a marker of the dropped document is invalid. Shared
    by both Haystack tracers' tests."""
    retrieved = dict(bm25_hits())
    expected = reranked(bm25_hits())
    exporter.clear()

    run_bm25(bm25_pipeline(CannedGenerator(ANSWER), ranker=OverlapRanker(top_k=2)))

    signals = extract_signals(only_answer(exporter.get_finished_spans()).spans)
    assert_scoreable(signals.inputs)
    candidates = signals.inputs["candidates"]
    assert [(c["documentId"], c["combinedScore"], c["rank"]) for c in candidates] == [
        (doc_id, pytest.approx(score), rank) for rank, (doc_id, score) in enumerate(expected, start=1)
    ]
    for candidate in candidates:
        assert candidate["retrievalScores"] == {
            "inmemorybm25": pytest.approx(retrieved[candidate["documentId"]]),
            "rerank": pytest.approx(candidate["combinedScore"]),
        }
    # The third retrieved document was dropped by the ranker: [1] and [2] are the two it kept.
    assert (signals.inputs["citationCount"], signals.inputs["invalidCitationCount"]) == (2, 1)


def assert_hybrid_merges_by_id(exporter: InMemorySpanExporter) -> None:
    """Run dense and keyword retrievers joined by a ``DocumentJoiner``: each document is one candidate with one
    score per retriever, the best one combined; the joiner (and the embedder) add no method and no document.
    Shared by both Haystack tracers' tests."""
    dense, keyword = hybrid_expectations()
    exporter.clear()

    run_hybrid(hybrid_pipeline(CannedGenerator("Berlin is a capital [1].")))

    signals = extract_signals(only_answer(exporter.get_finished_spans()).spans)
    assert_scoreable(signals.inputs)
    candidates = {c["documentId"]: c for c in signals.inputs["candidates"]}
    assert set(candidates) == set(dense) | set(keyword)  # each document once
    for doc_id, candidate in candidates.items():
        expected = {}
        if doc_id in dense:
            expected["inmemoryembedding"] = pytest.approx(dense[doc_id])
        if doc_id in keyword:
            expected["inmemorybm25"] = pytest.approx(keyword[doc_id])
        assert candidate["retrievalScores"] == expected
        assert candidate["combinedScore"] == pytest.approx(max(candidate["retrievalScores"].values()))
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_SPANS] == 2


def test_ranker_scores_and_order_are_final(exporter: InMemorySpanExporter) -> None:
    assert_ranker_is_final(exporter)
    assert kinds(exporter)["OverlapRanker.run"] == "RERANKER"


def test_hybrid_retrieval_merges_by_id_and_the_joiner_is_no_method(exporter: InMemorySpanExporter) -> None:
    assert_hybrid_merges_by_id(exporter)
    assert kinds(exporter)["DocumentJoiner.run"] == "CHAIN"


@component
class CannedLLM:
    """A fake generator the instrumentor does not take for one: no ``Generator`` in its name, and ``replies``
    typed ``list[str]`` (its signature check compares with ``typing.List[str]``), so its span is a CHAIN."""

    @component.output_types(replies=list[str])
    def run(self, prompt: str) -> dict[str, Any]:
        return {"replies": [ANSWER]}


def test_the_prompt_builder_is_no_generation(exporter: InMemorySpanExporter) -> None:
    """The PromptBuilder's LLM span holds the rendered prompt, which numbers every document it shows. Read as the
    answer (no later generation had text), it cited all three documents validly, covering the prompt's lines;
    the answer's own invalid [7] went unseen. A span that fills a template and names no model is no
    generation: no answer text is known, so no citation input is derived rather than a wrong one."""
    exporter.clear()

    run_bm25(bm25_pipeline(CannedLLM()))

    assert kinds(exporter)["CannedLLM.run"] == "CHAIN"
    signals = extract_signals(only_answer(exporter.get_finished_spans()).spans)
    assert_scoreable(signals.inputs)
    assert signals.inputs["candidates"]
    for name in ("citationCount", "invalidCitationCount", "citationCoverageScore"):
        assert name not in signals.inputs
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 0
