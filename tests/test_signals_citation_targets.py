"""What an answer's citation markers are judged against: the documents retrieval spans recorded, the
application's explicit candidates, and neither.

The pipeline is real ``langchain-core`` (a retriever, a prompt, ``FakeListChatModel`` standing in for the model,
since there is no network here) traced by the real ``openinference-instrumentation-langchain``, on a provider
that exports through ``ConfidenceSpanProcessor``; the answer function is wrapped in the real ``@scored_answer``.
Retrievals that no LangChain retriever makes are the application's own spans, made with the OTel SDK tracer, as
docs/signals.md tells an application to record them. Each test compares the scorecard with ``compute_confidence``
on inputs written out from the documents and the answer text, and checks the gateway's extraction on the same
spans after the OTLP encoder (``to_record``, as the gateway reads them).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import PromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence import compute_confidence, semconv
from rag_confidence.gateway.spans import iter_spans, to_record
from rag_confidence.otel import last_scorecard, mark_answer, scored_answer
from rag_confidence.signals import (
    ExtractedSignals,
    extract_signals,
    find_answers,
    records_from_readable_spans,
)
from rag_confidence.signals.records import SpanRecord
from tests.instrumented import confidence_processor, scored, traced

QUESTION = "What is the capital of France?"
CORPUS = {
    "doc-paris": "Paris is the capital of France.",
    "doc-berlin": "Berlin is the capital of Germany.",
    "doc-loire": "The Loire is the longest river in France.",
}


class ListRetriever(BaseRetriever):
    """Returns the listed corpus documents, with the id in ``Document.id`` (which the tracer records)."""

    ids: list[str] = []

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [Document(id=doc_id, page_content=CORPUS[doc_id]) for doc_id in self.ids]


def format_documents(documents: list[Document]) -> str:
    return "\n".join(f"[{index}] {doc.page_content}" for index, doc in enumerate(documents, start=1))


def rag_chain(retriever: BaseRetriever, text: str) -> Any:
    return (
        {"context": retriever | RunnableLambda(format_documents), "question": RunnablePassthrough()}
        | PromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}")
        | FakeListChatModel(responses=[text])
        | StrOutputParser()
    )


def generate(text: str) -> str:
    """A model call with no retriever in the chain: the application retrieved with its own code."""
    return str((FakeListChatModel(responses=[text]) | StrOutputParser()).invoke(QUESTION))


def genai_retrieval(tracer: trace.Tracer, documents: Any = None) -> None:
    """The application's own GenAI retrieval span; ``documents`` None leaves the opt-in
    ``gen_ai.retrieval.documents`` unset, as an instrumentation does with content capture off."""
    with tracer.start_as_current_span("retrieval kb") as span:
        span.set_attribute(semconv.GEN_AI_OPERATION_NAME, semconv.GEN_AI_OPERATION_RETRIEVAL)
        span.set_attribute(semconv.GEN_AI_DATA_SOURCE_ID, "kb")
        if documents is not None:
            span.set_attribute(semconv.GEN_AI_RETRIEVAL_DOCUMENTS, documents)


def candidate(doc_id: str, score: float, **fields: Any) -> dict[str, Any]:
    return {"documentId": doc_id, "retrievalScores": {"app": score}, "combinedScore": score, **fields}


@pytest.fixture(scope="module")
def instrumented() -> Iterator[tuple[InMemorySpanExporter, TracerProvider]]:
    yield from traced(LangChainInstrumentor(), confidence_processor)


@pytest.fixture()
def app(
    instrumented: tuple[InMemorySpanExporter, TracerProvider],
) -> tuple[InMemorySpanExporter, TracerProvider]:
    instrumented[0].clear()
    return instrumented


def both_ways(spans: Sequence[ReadableSpan]) -> list[list[SpanRecord]]:
    """The in-process records and the gateway's records of the same spans (through the OTLP encoder)."""
    return [records_from_readable_spans(spans), [to_record(span) for span in iter_spans(encode_spans(spans))]]


def gateway_signals(exporter: InMemorySpanExporter) -> list[ExtractedSignals]:
    """What extraction finds on the exported spans, in-process records and the gateway's both."""
    found = []
    for records in both_ways(exporter.get_finished_spans()):
        (group,) = find_answers(records)
        found.append(extract_signals(group.spans))
    return found


def citations(inputs: dict[str, Any]) -> dict[str, Any]:
    return {
        name: inputs[name]
        for name in ("citationCount", "invalidCitationCount", "citationCoverageScore")
        if name in inputs
    }


def assert_card(exporter: InMemorySpanExporter, expected: dict[str, Any], derived: set[str]) -> None:
    """The decorated answer's scorecard is the one ``expected`` gives, and its span lists ``derived``."""
    card = last_scorecard()
    assert card is not None and card.total == compute_confidence(expected).total
    (answer,) = scored(exporter)
    assert answer.attributes is not None
    assert answer.attributes[semconv.RAG_CONFIDENCE_TOTAL] == card.total
    assert set(answer.attributes[semconv.RAG_CONFIDENCE_DERIVED_SIGNALS]) == derived


def assert_cited(
    exporter: InMemorySpanExporter, candidates: Any, *, cited: int, invalid: int, coverage: float
) -> None:
    """:func:`assert_card` for an answer whose citation inputs were all derived (and its support level
    assumed): ``candidates`` as handed over, ``cited`` valid sources, ``invalid`` markers, ``coverage``."""
    expected = {
        "candidates": candidates,
        "supportLevel": "medium",
        "citationCount": cited,
        "invalidCitationCount": invalid,
        "citationCoverageScore": coverage,
    }
    assert_card(
        exporter, expected, {"supportLevel", "citationCount", "invalidCitationCount", "citationCoverageScore"}
    )


# -- explicit candidates (the decorator's signals=) --------------------------------------------------------------

# Cites the first candidate by position, the third by id, and a document nobody handed over.
CITED = "Paris is the capital of France [1]. The Loire is the longest river there [doc-loire]. Rome is not [doc-99]."
EXPLICIT = [candidate("doc-paris", 0.91), candidate("doc-berlin", 0.62), candidate("doc-loire", 0.55)]


def test_explicit_candidates_are_citation_targets_without_a_retrieval_span(
    app: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """No retrieval span: the application hands its candidates over through ``signals=``. ``[1]`` is the first
    of them as given, ``[doc-loire]`` one by id, ``[doc-99]`` none: two cited, one invalid, two sentences of
    three covered. (Before, an answer with no retrieval span derived no citation input at all.)"""
    exporter, provider = app

    @scored_answer(tracer_provider=provider, signals=lambda result: {"candidates": EXPLICIT})
    def answer(question: str) -> str:
        return generate(CITED)

    assert answer(QUESTION) == CITED
    assert_cited(exporter, EXPLICIT, cited=2, invalid=1, coverage=2 / 3)
    # The gateway has no signals(result): the spans alone hold no retrieval, so no citation input.
    for signals in gateway_signals(exporter):
        assert citations(signals.inputs) == {}
        assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 3


def test_positions_follow_the_explicit_ranks_when_every_candidate_has_one(
    app: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """Candidates handed over out of order, each with its ``rank``: ``[1]`` is rank 1 (``doc-paris``), so with
    ``[doc-paris]`` one document is cited, not two."""
    exporter, provider = app
    text = "Paris is the capital of France [1]. It says so [doc-paris]."
    given = [candidate("doc-loire", 0.55, rank=2), candidate("doc-paris", 0.91, rank=1)]

    @scored_answer(tracer_provider=provider, signals=lambda result: {"candidates": given})
    def answer(question: str) -> str:
        return generate(text)

    answer(QUESTION)
    assert_cited(exporter, given, cited=1, invalid=0, coverage=1.0)


def test_explicit_candidates_add_to_the_retrieved_documents(
    app: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """A traced LangChain retriever found ``doc-paris`` and ``doc-berlin``; the application's candidates add
    ``doc-loire`` (and repeat ``doc-paris``). Markers are judged against both, merged by id: ``[1]`` stays the
    retriever's first document, ``[doc-loire]`` is valid through the explicit candidates, ``[doc-99]`` is not.
    (Before, ``[doc-loire]`` counted invalid: only the retrieval spans' documents were targets.)"""
    exporter, provider = app
    explicit = [candidate("doc-paris", 0.91), candidate("doc-loire", 0.55)]

    @scored_answer(tracer_provider=provider, signals=lambda result: {"candidates": explicit})
    def answer(question: str) -> str:
        return str(rag_chain(ListRetriever(ids=["doc-paris", "doc-berlin"]), CITED).invoke(QUESTION))

    answer(QUESTION)
    assert_cited(exporter, explicit, cited=2, invalid=1, coverage=2 / 3)
    # The spans alone (the gateway): the retriever's two documents, unscored; [doc-loire] is invalid there.
    for signals in gateway_signals(exporter):
        assert citations(signals.inputs) == {
            "citationCount": 1,
            "invalidCitationCount": 2,
            "citationCoverageScore": 1 / 3,
        }


def test_an_explicit_citation_count_wins_over_the_derived_one(
    app: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """``signals=`` gives candidates and ``citation_count``: the count is the application's, the invalid count
    and coverage are still derived from the markers, and only those are listed as derived."""
    exporter, provider = app

    @scored_answer(
        tracer_provider=provider, signals=lambda result: {"candidates": EXPLICIT, "citation_count": 5}
    )
    def answer(question: str) -> str:
        return generate(CITED)

    answer(QUESTION)
    expected = {
        "candidates": EXPLICIT,
        "supportLevel": "medium",
        "citationCount": 5,
        "invalidCitationCount": 1,
        "citationCoverageScore": 2 / 3,
    }
    assert_card(exporter, expected, {"supportLevel", "invalidCitationCount", "citationCoverageScore"})


def test_an_explicit_empty_candidate_list_makes_every_marker_invalid(
    app: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """``candidates: []`` says the application found nothing: the markers cite nothing it handed over."""
    exporter, provider = app

    @scored_answer(tracer_provider=provider, signals=lambda result: {"candidates": []})
    def answer(question: str) -> str:
        return generate(CITED)

    answer(QUESTION)
    assert_cited(exporter, [], cited=0, invalid=3, coverage=0.0)


def explicit_only(text: str, given: list[Any]) -> ExtractedSignals:
    """Extraction of an answer span holding ``text`` with the explicit candidates ``given`` and no retrieval."""
    span = SpanRecord(
        1, 1, None, "answer", {semconv.RAG_ANSWER: True, semconv.OI_OUTPUT_VALUE: text}, end_time=10
    )
    return extract_signals([span], explicit={"candidates": given})


@pytest.mark.parametrize(
    ("text", "given", "cited"),
    [
        # Candidates are chunks, and ``documentId`` names their source document: two chunks of ``a`` then one of
        # ``b``, numbered [1]..[3] in the application's prompt. ``[3]`` is ``b``, not past the end (the second
        # ``a`` chunk was dropped, so ``[3]`` counted invalid).
        (
            "Paris is the capital [3]. It is on the Seine [a].",
            [candidate("a", 0.9), candidate("a", 0.8), candidate("b", 0.7)],
            2,
        ),
        # Both markers cite chunks of ``a``: one document cited, as when a retrieval span listed the chunks.
        (
            "Paris is the capital [1]. It is on the Seine [2].",
            [candidate("a", 0.9), candidate("a", 0.8), candidate("b", 0.7)],
            1,
        ),
        # Ranks are compared as given: an int beyond a float's range still sorts (it raised OverflowError out of
        # extraction), last here, so ``[1]`` is ``b``.
        (
            "Paris is the capital [1]. See [b].",
            [candidate("a", 0.9, rank=10**400), candidate("b", 0.8, rank=1)],
            1,
        ),
        # ``{"documentId": None, "document_id": "a"}`` (as a caller of ``extract_signals`` may merge them): the
        # candidate is known as ``a``, so ``[a]`` is a valid citation (it was position-only, ``[a]`` no marker).
        ("Paris is the capital [a].", [{"documentId": None, "document_id": "a", "combinedScore": 0.9}], 1),
    ],
    ids=[
        "chunks of one document keep their numbering",
        "chunks of one document are one cited document",
        "a rank beyond a float",
        "a null camelCase id",
    ],
)
def test_explicit_candidates_read_as_the_application_gives_them(
    text: str, given: list[Any], cited: int
) -> None:
    """Review findings on how explicit candidates become citation targets: every marker is valid."""
    signals = explicit_only(text, given)
    assert citations(signals.inputs) == {
        "citationCount": cited,
        "invalidCitationCount": 0,
        "citationCoverageScore": 1.0,
    }


# -- retrieval spans that record no documents -------------------------------------------------------------------

TWO_MARKERS = "Paris is the capital of France [1]. Berlin is the capital of Germany [2]."


def marked_answer(provider: TracerProvider, retrieve: Callable[[trace.Tracer], None], text: str) -> None:
    """The application's own answer span (``mark_answer``) around its retrieval and the model call: the
    ConfidenceSpanProcessor scores it when it ends."""
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("answer"):
        mark_answer()
        retrieve(tracer)
        generate(text)


def processor_inputs(exporter: InMemorySpanExporter, expected: dict[str, Any]) -> None:
    (answer,) = scored(exporter)
    assert answer.name == "answer" and answer.attributes is not None
    assert answer.attributes[semconv.RAG_CONFIDENCE_TOTAL] == compute_confidence(expected).total
    for signals in gateway_signals(exporter):
        assert signals.inputs == expected
        assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2


def test_a_genai_retrieval_span_without_documents_leaves_the_markers_unjudged(
    app: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """A GenAI retrieval span without the opt-in ``gen_ai.retrieval.documents``: what it found is unknown, so
    ``[1]`` and ``[2]`` are counted as markers, not judged. (Before, both counted invalid.)"""
    exporter, provider = app
    marked_answer(provider, genai_retrieval, TWO_MARKERS)
    processor_inputs(exporter, {"candidates": [], "supportLevel": "medium"})


@pytest.mark.parametrize("documents", ["[]", []], ids=["json", "structured"])
def test_a_genai_retrieval_span_that_found_nothing_makes_the_markers_invalid(
    app: tuple[InMemorySpanExporter, TracerProvider], documents: Any
) -> None:
    """``gen_ai.retrieval.documents`` present and empty: the retrieval found nothing, so nothing the markers
    name was retrieved."""
    exporter, provider = app
    marked_answer(provider, lambda tracer: genai_retrieval(tracer, documents), TWO_MARKERS)
    processor_inputs(
        exporter,
        {
            "candidates": [],
            "supportLevel": "medium",
            "citationCount": 0,
            "invalidCitationCount": 2,
            "citationCoverageScore": 0.0,
        },
    )


def test_an_openinference_retriever_span_without_documents_leaves_the_markers_unjudged(
    app: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """The application's own OpenInference ``RETRIEVER`` span that lists no ``retrieval.documents.*`` and has no
    output: nothing recorded, nothing judged. (Before, both markers counted invalid.)"""
    exporter, provider = app

    def retrieve(tracer: trace.Tracer) -> None:
        with tracer.start_as_current_span("search") as span:
            span.set_attribute(semconv.OPENINFERENCE_SPAN_KIND, semconv.OPENINFERENCE_KIND_RETRIEVER)
            span.set_attribute(semconv.OI_INPUT_VALUE, QUESTION)

    marked_answer(provider, retrieve, TWO_MARKERS)
    processor_inputs(exporter, {"candidates": [], "supportLevel": "medium"})


def test_a_langchain_retriever_that_found_nothing_makes_the_markers_invalid(
    app: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """The LangChain tracer writes an empty result as ``retrieval.documents = []`` (and ``output.value``
    ``{"documents": []}``): found nothing, so the markers are invalid, as before."""
    exporter, provider = app
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("answer"):
        mark_answer()
        rag_chain(ListRetriever(ids=[]), TWO_MARKERS).invoke(QUESTION)
    (retriever,) = [
        span
        for span in exporter.get_finished_spans()
        if (span.attributes or {}).get(semconv.OPENINFERENCE_SPAN_KIND)
        == semconv.OPENINFERENCE_KIND_RETRIEVER
    ]
    assert retriever.attributes is not None
    assert retriever.attributes[semconv.OI_RETRIEVAL_DOCUMENTS] == ()
    assert json.loads(str(retriever.attributes[semconv.OI_OUTPUT_VALUE])) == {"documents": []}
    processor_inputs(
        exporter,
        {
            "candidates": [],
            "supportLevel": "medium",
            "citationCount": 0,
            "invalidCitationCount": 2,
            "citationCoverageScore": 0.0,
        },
    )


def test_explicit_candidates_judge_markers_beside_a_retrieval_span_without_documents(
    app: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """The GenAI retrieval span records no documents, and ``signals=`` hands the candidates over: the markers
    are judged against those. (Before, both counted invalid.)"""
    exporter, provider = app
    given = [candidate("doc-paris", 0.91), candidate("doc-loire", 0.55)]
    text = "Paris is the capital of France [1]. The Loire is long [doc-loire]. Berlin is German [doc-berlin]."

    @scored_answer(tracer_provider=provider, signals=lambda result: {"candidates": given})
    def answer(question: str) -> str:
        genai_retrieval(provider.get_tracer("app"))
        return generate(text)

    answer(QUESTION)
    assert_cited(exporter, given, cited=2, invalid=1, coverage=2 / 3)


# -- every reader: "not recorded" against "found nothing", on span data alone ------------------------------------

_READER_SHAPES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    # (reader, the retrieval span's attributes recording nothing, its attributes recording an empty list)
    (
        "genai",
        {"gen_ai.operation.name": "retrieval"},
        {"gen_ai.operation.name": "retrieval", "gen_ai.retrieval.documents": "[]"},
    ),
    (
        "openinference-langchain",
        {"openinference.span.kind": "RETRIEVER", "output.value": "__REDACTED__"},
        {
            "openinference.span.kind": "RETRIEVER",
            "retrieval.documents": (),
            "output.value": '{"documents": []}',
        },
    ),
    (
        "openinference-llamaindex",
        {"openinference.span.kind": "RETRIEVER", "input.value": "q"},
        {"openinference.span.kind": "RETRIEVER", "input.value": "q", "output.value": "[]"},
    ),
    (
        "openllmetry-langchain",
        {"gen_ai.operation.name": "vector_db_retrieve"},
        {
            "gen_ai.operation.name": "vector_db_retrieve",
            "traceloop.entity.output": '{"documents": [], "count": 0}',
        },
    ),
    (
        "openllmetry-llamaindex",
        {"traceloop.entity.name": "VectorIndexRetriever.task"},
        {"traceloop.entity.name": "VectorIndexRetriever.task", "traceloop.entity.output": "[]"},
    ),
    (
        "haystack",
        {"haystack.component.type": "InMemoryBM25Retriever"},
        {
            "haystack.component.type": "InMemoryBM25Retriever",
            "haystack.component.output": '{"documents": []}',
        },
    ),
    (
        "openllmetry-js",
        {"db.system": "Pinecone", "db.vector.query.result.matches_length": 2},  # hits lost to a limit
        {"db.system": "Pinecone", "db.vector.query.result.matches_length": 0},
    ),
    (
        "openllmetry-chroma",
        # a query that raised, then one that found nothing
        {"db.system": "chroma", "db.chroma.query.texts_count": 1, "error.type": "InvalidArgumentError"},
        {"db.system": "chroma", "db.operation": "query", "db.chroma.query.embeddings_count": 1},
    ),
]


@pytest.mark.parametrize(
    ("reader", "unrecorded", "empty"), _READER_SHAPES, ids=[r for r, _, _ in _READER_SHAPES]
)
def test_each_reader_tells_an_unrecorded_document_list_from_an_empty_one(
    reader: str, unrecorded: dict[str, Any], empty: dict[str, Any]
) -> None:
    """The same answer (``[1]``, ``[2]``) beside a retrieval span that records nothing of what it found (not
    judged: no citation input) and beside one that records an empty list (found nothing: both invalid), as
    each reader's tracer writes them (see docs/signals.md, *Citation targets*)."""
    answer = SpanRecord(
        1, 1, None, "answer", {semconv.RAG_ANSWER: True, semconv.OI_OUTPUT_VALUE: TWO_MARKERS}, end_time=3
    )
    for attributes, expected in (
        (unrecorded, {}),
        (empty, {"citationCount": 0, "invalidCitationCount": 2, "citationCoverageScore": 0.0}),
    ):
        retrieval = SpanRecord(1, 2, 1, "retrieve", attributes, end_time=1)
        (group,) = find_answers([retrieval, answer])
        signals = extract_signals(group.spans)
        assert citations(signals.inputs) == expected, attributes
        assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
