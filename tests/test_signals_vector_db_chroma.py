"""A RAG answer retrieved from a real Chroma database under the real OpenLLMetry Chroma instrumentor, offline.

The database is a real in-process ``chromadb.EphemeralClient()``; its collections get explicit embeddings and
are queried with explicit ``query_embeddings`` (one is embedded by a fake embedding function of the test's),
so no embedding model is ever loaded. The tracers are the real
``opentelemetry-instrumentation-chromadb`` (one ``db.query.result`` event per hit) and
``opentelemetry-instrumentation-openai`` around the real ``openai`` client, whose server alone is faked
(``httpx.MockTransport``, tests/fake_openai.py). Spans go through ``ConfidenceSpanProcessor``, as in an
application. Expected inputs are built from what ``Collection.query`` returned to the application (its
distances, mapped as docs/signals.md says: ``1 / (1 + d)``, or ``1 - d`` rescaled for a span with a negative
distance), never from the code under test.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import chromadb
import httpx
import numpy as np
import pytest
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
from opentelemetry import trace
from opentelemetry.instrumentation.chromadb import ChromaInstrumentor
from opentelemetry.instrumentation.openai import OpenAIInstrumentor
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence import compute_confidence, semconv
from rag_confidence.otel import mark_answer, scorecard_attributes
from rag_confidence.signals import find_answers
from tests.fake_openai import chat_completion, mock_openai
from tests.instrumented import assert_scored_as, confidence_processor, records, scored

METHOD = "chroma"  # db.system, which names the retrieval method
MODEL = "gpt-4o-mini"
QUESTION = "How long do refunds take?"
# (id, text, metadata, embedding): 3-dimensional vectors the test chooses, so no embedding model runs.
CORPUS: list[tuple[str, str, dict[str, Any], list[float]]] = [
    ("doc-refund", "Refunds are paid within 14 days.", {"document_type": "policy"}, [1.0, 0.0, 0.0]),
    ("doc-returns", "Returns need the receipt.", {"document_type": "faq"}, [0.8, 0.6, 0.0]),
    ("doc-shipping", "Shipping takes 3 days.", {"document_type": "faq"}, [0.0, 1.0, 0.0]),
    ("doc-warranty", "The warranty lasts 2 years.", {"document_type": "policy"}, [0.0, 0.0, 1.0]),
]
QUERY = [0.95, 0.2, 0.1]
EVENT_LIMIT = 128
NOTHING = "I could not find that in the sources."
ANSWER = "Refunds are paid within 14 days [1]. Returns need the receipt [2]."


@pytest.fixture(scope="module")
def instrumented() -> Iterator[tuple[InMemorySpanExporter, TracerProvider]]:
    """Both real OpenLLMetry instrumentors on one provider exporting through ConfidenceSpanProcessor.

    Module-scoped, as tests/test_signals_openai_chat.py's: OpenLLMetry 0.62's OpenAI ``uninstrument()`` leaves
    its wrapper in place, so instrumenting once per module keeps one wrapper per module."""
    exporter = InMemorySpanExporter()
    # The SDK's default event limit, set here so that OTEL_SPAN_EVENT_COUNT_LIMIT cannot change it.
    provider = TracerProvider(span_limits=SpanLimits(max_events=EVENT_LIMIT))
    provider.add_span_processor(confidence_processor(exporter))
    instrumentors = (ChromaInstrumentor(), OpenAIInstrumentor())
    for instrumentor in instrumentors:
        instrumentor.instrument(tracer_provider=provider)
    try:
        yield exporter, provider
    finally:
        for instrumentor in instrumentors:
            instrumentor.uninstrument()


@pytest.fixture()
def traced_app(
    instrumented: tuple[InMemorySpanExporter, TracerProvider],
) -> Iterator[tuple[InMemorySpanExporter, trace.Tracer]]:
    exporter, provider = instrumented
    exporter.clear()
    yield exporter, provider.get_tracer("app")


def collection(
    name: str, space: str = "l2", corpus: Sequence[tuple[str, str, dict[str, Any], list[float]]] = CORPUS
) -> Any:
    """A fresh collection of ``corpus`` in an in-process Chroma, its embeddings given (no embedding function)."""
    client = chromadb.EphemeralClient()
    found = client.create_collection(name, embedding_function=None, configuration={"hnsw": {"space": space}})
    found.add(
        ids=[doc_id for doc_id, _, _, _ in corpus],
        documents=[text for _, text, _, _ in corpus],
        metadatas=[metadata for _, _, metadata, _ in corpus],
        embeddings=[vector for _, _, _, vector in corpus],
    )
    return found


def model_answering(text: str) -> Any:
    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=chat_completion(text))

    return mock_openai(handle)


def answer(
    tracer: trace.Tracer,
    store: Any,
    *,
    queries: Sequence[list[float]] = (QUERY,),
    mark: bool = False,
    text: str = ANSWER,
    **query: Any,
) -> Mapping[str, Any]:
    """The application: one request span around a Chroma query (``query``: more of ``Collection.query``'s
    keywords) and a Chat Completions call citing the hits as ``[n]``. Returns what ``Collection.query``
    returned."""
    query.setdefault("n_results", 3)
    with tracer.start_as_current_span("POST /ask"):
        if mark:
            mark_answer()
        result = store.query(query_embeddings=list(queries), **query)
        documents = [document for hits in result["documents"] for document in hits]
        context = "\n".join(f"[{index}] {document}" for index, document in enumerate(documents, start=1))
        messages: Any = [
            {"role": "system", "content": f"Answer from these sources and cite them as [n]:\n{context}"},
            {"role": "user", "content": QUESTION},
        ]
        reply = model_answering(text).chat.completions.create(model=MODEL, messages=messages)
        assert reply.choices[0].message.content == text
    return dict(result)


def expected_candidates(result: Mapping[str, Any], scores: Sequence[float]) -> list[dict[str, Any]]:
    """The candidates for the first query's hits, in Chroma's order, with the scores the test derived."""
    hits = zip(result["ids"][0], result["metadatas"][0], scores, strict=True)
    return [
        {
            "documentId": doc_id,
            "retrievalScores": {METHOD: score},
            "combinedScore": score,
            "rank": rank,
            "documentType": metadata["document_type"],
        }
        for rank, (doc_id, metadata, score) in enumerate(hits, start=1)
    ]


def assert_scorecard_of(exporter: InMemorySpanExporter, expected: dict[str, Any]) -> None:
    """The answer span holds the scorecard ``compute_confidence`` gives ``expected``: total, label, action,
    warnings, every dimension and the number of candidates."""
    (span,) = scored(exporter)
    assert span.attributes is not None
    want = scorecard_attributes(compute_confidence(expected), inputs=expected)
    del want[semconv.RAG_CONFIDENCE_DERIVED_SIGNALS]  # what extraction derived; the inputs alone cannot say
    assert {key: span.attributes.get(key) for key in want} == want


CITED = {
    "supportLevel": "medium",
    "citationCount": 2,
    "invalidCitationCount": 0,
    "citationCoverageScore": 1.0,
}


def test_chroma_hits_are_the_answers_candidates_scored_from_their_l2_distances(
    traced_app: tuple[InMemorySpanExporter, trace.Tracer],
) -> None:
    """The default ``l2`` space: each hit a candidate scored ``1 / (1 + d)``, in Chroma's order, its metadata's
    ``document_type`` read; the answer's two markers cite the first two hits."""
    exporter, tracer = traced_app
    result = answer(tracer, collection("refunds-l2"))
    distances = result["distances"][0]
    assert result["ids"][0] == ["doc-refund", "doc-returns", "doc-shipping"]  # the vectors' order
    expected = {"candidates": expected_candidates(result, [1 / (1 + d) for d in distances]), **CITED}

    signals = assert_scored_as(exporter, expected, "POST /ask")
    (span,) = scored(exporter)
    assert span.attributes is not None
    assert span.attributes[semconv.RAG_CONFIDENCE_CANDIDATES] == len(result["ids"][0]) == 3
    assert signals.skipped == 0
    assert_scorecard_of(exporter, expected)


def test_chroma_inner_product_hits_keep_their_order_and_the_best_scores_one(
    traced_app: tuple[InMemorySpanExporter, trace.Tracer],
) -> None:
    """``space = ip`` over vectors of norm 3: Chroma's distance ``1 - dot`` is below 0 for the best hits, so each
    hit reads as its inner product ``1 - d``, divided by the span's largest (``score_scale = "max"``)."""
    exporter, tracer = traced_app
    scaled = [(doc_id, text, metadata, [3 * x for x in vector]) for doc_id, text, metadata, vector in CORPUS]
    result = answer(tracer, collection("refunds-ip", "ip", scaled))
    distances = result["distances"][0]
    assert result["ids"][0] == ["doc-refund", "doc-returns", "doc-shipping"]
    assert distances[0] < distances[1] < 0 < distances[2]  # what makes this span an inner-product one
    products = [1 - d for d in distances]
    expected = {"candidates": expected_candidates(result, [p / products[0] for p in products]), **CITED}

    signals = assert_scored_as(exporter, expected, "POST /ask")
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_SCORES_RESCALED] is True
    assert_scorecard_of(exporter, expected)


def test_a_chroma_query_that_finds_nothing_leaves_a_marked_answer_without_candidates(
    traced_app: tuple[InMemorySpanExporter, trace.Tracer],
) -> None:
    """A filter no document matches: Chroma returns ``ids = [[]]`` and the instrumentor writes no event. The
    ``chroma.query`` span is a retrieval that found nothing (docs/signals.md, the table of what each reader
    reports as not recorded or found nothing): a marked answer is scored with no candidates
    (``missing-candidates``)."""
    exporter, tracer = traced_app
    result = answer(
        tracer, collection("refunds-none"), where={"document_type": "contract"}, mark=True, text=NOTHING
    )
    assert result["ids"] == [[]]
    expected = {"candidates": [], "supportLevel": "medium"}

    signals = assert_scored_as(exporter, expected, "POST /ask")
    assert semconv.RAG_CONFIDENCE_RETRIEVAL_SPANS not in signals.diagnostics
    assert_scorecard_of(exporter, expected)
    (span,) = scored(exporter)
    assert span.attributes is not None
    assert span.attributes[semconv.RAG_CONFIDENCE_CANDIDATES] == 0
    assert "missing-candidates" in span.attributes[semconv.RAG_CONFIDENCE_WARNINGS]


NOTHING_CITED = {"citationCount": 0, "invalidCitationCount": 2, "citationCoverageScore": 0.0}


def test_markers_after_a_chroma_query_that_found_nothing_are_invalid(
    traced_app: tuple[InMemorySpanExporter, trace.Tracer],
) -> None:
    """The query found nothing, yet the answer cites ``[1]`` and ``[2]``: they cite documents nobody retrieved,
    so both are invalid, as after any retrieval that recorded an empty list (docs/signals.md, *Citation
    targets*); before, the span was no retrieval and the markers went unjudged."""
    exporter, tracer = traced_app
    result = answer(tracer, collection("refunds-none-cited"), where={"document_type": "contract"}, mark=True)
    assert result["ids"] == [[]]
    expected = {"candidates": [], "supportLevel": "medium", **NOTHING_CITED}

    signals = assert_scored_as(exporter, expected, "POST /ask")
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
    assert_scorecard_of(exporter, expected)


def test_an_unmarked_request_whose_chroma_query_finds_nothing_is_scored_without_candidates(
    traced_app: tuple[InMemorySpanExporter, trace.Tracer],
) -> None:
    """Without a mark, the request span is an answer by holding a retrieval span (rule 2): the query that found
    nothing is one, so the request is scored, with no candidates and its markers invalid."""
    exporter, tracer = traced_app
    answer(tracer, collection("refunds-none-unmarked"), where={"document_type": "contract"})
    (query,) = [span for span in records(exporter) if span.name == "chroma.query"]
    assert list(query.events) == []
    (group,) = find_answers(records(exporter))
    assert group.rule == "root"
    expected = {"candidates": [], "supportLevel": "medium", **NOTHING_CITED}

    assert_scored_as(exporter, expected, "POST /ask")
    assert_scorecard_of(exporter, expected)


class _CountingEmbedding(EmbeddingFunction[Documents]):
    """An offline embedding function: a text's vector from its length, so no model is loaded."""

    def __init__(self) -> None:
        pass

    def __call__(self, input: Documents) -> Embeddings:
        return [np.array([float(len(text) % 3), 1.0, 0.0], dtype=np.float32) for text in input]

    @staticmethod
    def name() -> str:
        return "counting-test"

    def get_config(self) -> dict[str, Any]:
        return {}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> _CountingEmbedding:
        return _CountingEmbedding()


def test_a_chroma_text_query_that_finds_nothing_is_a_retrieval_too(
    traced_app: tuple[InMemorySpanExporter, trace.Tracer],
) -> None:
    """``query_texts`` (what LangChain's and LlamaIndex's Chroma stores pass when Chroma embeds): the span
    carries ``db.chroma.query.texts_count`` instead of the embeddings count, and finding nothing reads the same."""
    exporter, tracer = traced_app
    store = chromadb.EphemeralClient().create_collection(
        "refunds-texts", embedding_function=_CountingEmbedding()
    )
    store.add(
        ids=["doc-refund"],
        documents=["Refunds are paid within 14 days."],
        metadatas=[{"document_type": "policy"}],
    )
    with tracer.start_as_current_span("POST /ask"):
        result = store.query(query_texts=[QUESTION], n_results=3, where={"document_type": "contract"})
        model_answering(ANSWER).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": QUESTION}]
        )
    assert result["ids"] == [[]]
    (query,) = [span for span in records(exporter) if span.name == "chroma.query"]
    assert semconv.CHROMA_QUERY_TEXTS_COUNT in query.attributes
    assert semconv.CHROMA_QUERY_EMBEDDINGS_COUNT not in query.attributes
    expected = {"candidates": [], "supportLevel": "medium", **NOTHING_CITED}

    assert_scored_as(exporter, expected, "POST /ask")


def test_a_chroma_query_that_raised_found_out_nothing_so_the_markers_are_not_judged(
    traced_app: tuple[InMemorySpanExporter, trace.Tracer],
) -> None:
    """A query vector of the wrong dimension: Chroma raises, the instrumentor records ``error.type`` and no event,
    and the application answers anyway. Nothing is known of what the collection holds: no candidates, and the
    markers are counted but not judged (no citation input), rather than called invalid."""
    exporter, tracer = traced_app
    store = collection("refunds-failed")
    with tracer.start_as_current_span("POST /ask"):
        mark_answer()
        with pytest.raises(Exception, match="dimension"):
            store.query(query_embeddings=[[1.0, 0.0]], n_results=3)
        reply = model_answering(ANSWER).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": QUESTION}]
        )
        assert reply.choices[0].message.content == ANSWER
    (query,) = [span for span in records(exporter) if span.name == "chroma.query"]
    assert semconv.ERROR_TYPE in query.attributes and query.status_code == "ERROR"
    expected = {"candidates": [], "supportLevel": "medium"}

    signals = assert_scored_as(exporter, expected, "POST /ask")
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
    assert_scorecard_of(exporter, expected)


def test_chroma_spans_that_are_no_queries_are_no_retrievals(
    traced_app: tuple[InMemorySpanExporter, trace.Tracer],
) -> None:
    """``add``, ``get``, ``peek``, ``update``, ``upsert``, ``modify`` and ``delete`` spans of the instrumentor
    carry no hit and are no query: a request making only those is not scored, and a marked one's markers are not
    judged (no retrieval recorded what it found)."""
    exporter, tracer = traced_app
    store = collection("refunds-writes")
    exporter.clear()  # the add of the collection's set-up is outside any request
    with tracer.start_as_current_span("POST /maintain"):
        store.add(
            ids=["doc-new"], documents=["New."], metadatas=[{"document_type": "faq"}], embeddings=[[0.5] * 3]
        )
        store.get(ids=["doc-new"], where={"document_type": "faq"})
        store.peek(limit=2)
        store.update(ids=["doc-new"], documents=["Newer."], embeddings=[[0.6] * 3])
        store.upsert(ids=["doc-new"], documents=["Newest."], embeddings=[[0.4] * 3])
        store.modify(name="refunds-writes-renamed")
        store.delete(ids=["doc-new"])
    names = {span.name for span in records(exporter)}
    assert {"chroma.add", "chroma.get", "chroma.peek", "chroma.update", "chroma.upsert"} <= names
    assert {"chroma.modify", "chroma.delete"} <= names
    assert find_answers(records(exporter)) == []
    assert scored(exporter) == []

    exporter.clear()
    with tracer.start_as_current_span("POST /ask"):
        mark_answer()
        store.get(where={"document_type": "policy"})
        model_answering(ANSWER).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": QUESTION}]
        )
    signals = assert_scored_as(exporter, {"candidates": [], "supportLevel": "medium"}, "POST /ask")
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2


def test_several_query_vectors_in_one_chroma_query_keep_each_documents_best_score(
    traced_app: tuple[InMemorySpanExporter, trace.Tracer],
) -> None:
    """Two query vectors make one ``chroma.query`` span with the hits of both; a document both found is one
    candidate at its better score, and the candidates are ordered by score (docs/signals.md, *Rewrites are one
    method*)."""
    exporter, tracer = traced_app
    result = answer(
        tracer, collection("refunds-two-queries"), queries=(QUERY, [0.1, 0.9, 0.0]), n_results=2, text=NOTHING
    )
    best: dict[str, float] = {}
    for ids, distances in zip(result["ids"], result["distances"], strict=True):
        for doc_id, distance in zip(ids, distances, strict=True):
            best[doc_id] = max(best.get(doc_id, 0.0), 1 / (1 + distance))
    assert sum(len(ids) for ids in result["ids"]) == 4 and len(best) == 3  # one document found by both
    types = {doc_id: metadata["document_type"] for doc_id, _, metadata, _ in CORPUS}
    ordered = sorted(best.items(), key=lambda item: -item[1])
    expected = {
        "candidates": [
            {
                "documentId": doc_id,
                "retrievalScores": {METHOD: score},
                "combinedScore": score,
                "rank": rank,
                "documentType": types[doc_id],
            }
            for rank, (doc_id, score) in enumerate(ordered, start=1)
        ],
        "supportLevel": "medium",
    }

    assert_scored_as(exporter, expected, "POST /ask")
    assert_scorecard_of(exporter, expected)


def test_chroma_hits_queried_without_distances_are_cited_documents_but_no_candidates(
    traced_app: tuple[InMemorySpanExporter, trace.Tracer],
) -> None:
    """``include`` without ``distances``: the events carry ids, metadata and text but no distance. The hits are
    documents the answer's markers point at, counted as unscored, never candidates."""
    exporter, tracer = traced_app
    result = answer(tracer, collection("refunds-no-distances"), include=["documents", "metadatas"])
    assert result["distances"] is None and len(result["ids"][0]) == 3
    expected = {"candidates": [], **CITED}

    signals = assert_scored_as(exporter, expected, "POST /ask")
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_UNSCORED_DOCUMENTS] == 3
    assert_scorecard_of(exporter, expected)


def test_a_chroma_query_past_the_span_event_limit_reports_the_best_hits_lost(
    traced_app: tuple[InMemorySpanExporter, trace.Tracer],
) -> None:
    """150 hits make 150 events on a span that keeps 128 (the provider's limit, the SDK's default): the SDK
    drops the oldest, Chroma's 22 best hits. The candidates are the 128 left, and the scorecard says 22 were
    lost."""
    exporter, tracer = traced_app
    corpus = [
        (f"doc-{index:03}", f"text {index}", {"document_type": "faq"}, [1.0, index / 100, 0.0])
        for index in range(150)
    ]
    result = answer(
        tracer,
        collection("refunds-many", corpus=corpus),
        queries=([1.0, 0.0, 0.0],),
        n_results=150,
        text=NOTHING,
    )
    ids, distances = result["ids"][0], result["distances"][0]
    assert ids == [doc_id for doc_id, _, _, _ in corpus]  # nearest first
    lost = len(ids) - EVENT_LIMIT
    kept = {"ids": [ids[lost:]], "metadatas": [result["metadatas"][0][lost:]]}
    expected = {
        "candidates": expected_candidates(kept, [1 / (1 + d) for d in distances[lost:]]),
        "supportLevel": "medium",
    }

    signals = assert_scored_as(exporter, expected, "POST /ask")
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_DROPPED_RESULT_EVENTS] == lost == 22
    assert_scorecard_of(exporter, expected)
