"""Signals from real LangChain pipelines under both LangChain tracers, offline.

The pipelines are real ``langchain-core`` objects (an ``InMemoryVectorStore`` searched with a small
bag-of-words embedding, a keyword retriever, a prompt, ``FakeListLLM``/``FakeListChatModel``) traced by
the real ``openinference-instrumentation-langchain`` and ``opentelemetry-instrumentation-langchain``.
Expected ids and scores come from calling the vector store directly, never from the code under test.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel, BaseLLM, FakeListChatModel, FakeListLLM
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.outputs import ChatGeneration, ChatResult, LLMResult
from langchain_core.outputs import Generation as LCGeneration
from langchain_core.prompts import PromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda, RunnableParallel, RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore
from openinference.instrumentation import using_prompt_template
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry import trace
from opentelemetry.instrumentation.langchain import LangchainInstrumentor as OpenLLMetryLangchainInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence import semconv
from rag_confidence.signals import (
    AnswerGroup,
    SignalOptions,
    SpanRecord,
    extract_signals,
    find_answers,
    records_from_readable_spans,
)
from tests.instrumented import assert_scoreable, traced

CORPUS = {
    "doc-1": ("Paris is the capital of France.", {"document_type": "atlas", "last_updated": "2024-05-01"}),
    "doc-2": ("Berlin is the capital of Germany.", {"document_type": "atlas"}),
    "doc-3": ("France borders Spain and Italy.", {"document_type": "guide", "authority_rank": 2}),
    "doc-4": ("The Loire is the longest river in France.", {"document_type": "guide"}),
}
QUESTION = "What is the capital of France?"
_WORD = re.compile(r"[a-z]+")


class WordEmbeddings(Embeddings):
    """Bag-of-words vectors over the corpus vocabulary: deterministic, offline, non-negative cosines."""

    def __init__(self) -> None:
        words = sorted({word for text, _ in CORPUS.values() for word in _WORD.findall(text.lower())})
        self.vocabulary = {word: index for index, word in enumerate(words)}

    def _embed(self, text: str) -> list[float]:
        vector = [0.0] * len(self.vocabulary)
        for word in _WORD.findall(text.lower()):
            if word in self.vocabulary:
                vector[self.vocabulary[word]] += 1.0
        return vector

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._embed(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._embed(text)


def make_store() -> InMemoryVectorStore:
    store = InMemoryVectorStore(WordEmbeddings())
    store.add_documents(
        [Document(page_content=text, metadata=dict(metadata)) for text, metadata in CORPUS.values()],
        ids=list(CORPUS),
    )
    return store


class ScoredVectorRetriever(BaseRetriever):
    """Puts the store's id and similarity into the metadata: the LangChain tracer records no id or score."""

    store: InMemoryVectorStore
    k: int = 3

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [
            Document(
                id=doc.id,
                page_content=doc.page_content,
                metadata={**doc.metadata, "id": doc.id, "score": score},
            )
            for doc, score in self.store.similarity_search_with_score(query, k=self.k)
        ]


class KeywordRetriever(BaseRetriever):
    """A BM25-like keyword retriever: the score is the number of shared words, so it runs above 1."""

    k: int = 2

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [
            Document(page_content=text, metadata={"doc_id": doc_id, "relevance_score": float(hits)})
            for doc_id, text, hits in keyword_hits(query)[: self.k]
        ]


def keyword_hits(query: str) -> list[tuple[str, str, int]]:
    words = set(_WORD.findall(query.lower()))
    scored = [
        (doc_id, text, len(words & set(_WORD.findall(text.lower())))) for doc_id, (text, _) in CORPUS.items()
    ]
    return sorted((item for item in scored if item[2] > 0), key=lambda item: -item[2])


def prompt() -> PromptTemplate:
    return PromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}")


def format_documents(documents: list[Document]) -> str:
    return "\n".join(f"[{index}] {doc.page_content}" for index, doc in enumerate(documents, start=1))


@pytest.fixture(scope="module")
def openinference() -> Iterator[InMemorySpanExporter]:
    for exporter, _ in traced(LangChainInstrumentor(), SimpleSpanProcessor):
        yield exporter


@pytest.fixture(scope="module")
def openllmetry() -> Iterator[InMemorySpanExporter]:
    for exporter, _ in traced(OpenLLMetryLangchainInstrumentor(), SimpleSpanProcessor):
        yield exporter


def _end_time(span: Any) -> int:
    return int(span.end_time or 0)


def only_answer(exporter: InMemorySpanExporter) -> AnswerGroup:
    groups = find_answers(records_from_readable_spans(exporter.get_finished_spans()))
    assert len(groups) == 1, [group.answer.name for group in groups]
    return groups[0]


def expected_vector_hits(store: InMemoryVectorStore, k: int = 3) -> list[tuple[str, float]]:
    hits = [(doc.id, score) for doc, score in store.similarity_search_with_score(QUESTION, k=k)]
    assert all(doc_id is not None for doc_id, _ in hits)
    return [(str(doc_id), score) for doc_id, score in hits]


def single_retriever_chain(llm: Any, store: InMemoryVectorStore) -> Any:
    retriever = ScoredVectorRetriever(store=store)
    return (
        {"context": retriever | RunnableLambda(format_documents), "question": RunnablePassthrough()}
        | prompt()
        | llm
        | StrOutputParser()
    )


@pytest.mark.parametrize("chat", [False, True], ids=["FakeListLLM", "FakeListChatModel"])
def test_openinference_single_retriever(openinference: InMemorySpanExporter, chat: bool) -> None:
    store = make_store()
    expected = expected_vector_hits(store)
    # Cites the first presented document by position, the second by id, and a document nobody retrieved.
    second_id = expected[1][0]
    text = f"Paris is the capital of France [1]. It is not Berlin [{second_id}]. Rome is in Italy [doc-99]."
    llm = FakeListChatModel(responses=[text]) if chat else FakeListLLM(responses=[text])
    openinference.clear()

    assert single_retriever_chain(llm, store).invoke(QUESTION) == text

    group = only_answer(openinference)
    assert group.rule == "root" and group.answer.parent_span_id is None
    signals = extract_signals(group.spans)
    assert_scoreable(signals.inputs)
    candidates = signals.inputs["candidates"]
    assert [(c["documentId"], c["retrievalScores"]) for c in candidates] == [
        (doc_id, {"scoredvector": pytest.approx(score)}) for doc_id, score in expected
    ]
    assert [c["combinedScore"] for c in candidates] == pytest.approx([score for _, score in expected])
    assert [c["rank"] for c in candidates] == [1, 2, 3]
    # Metadata through the key map: document_type, last_updated, authority_rank.
    by_id = {c["documentId"]: c for c in candidates}
    for doc_id, candidate in by_id.items():
        assert candidate["documentType"] == CORPUS[doc_id][1]["document_type"]
    if "doc-1" in by_id:
        assert by_id["doc-1"]["lastUpdated"] == "2024-05-01"
    if "doc-3" in by_id:
        assert by_id["doc-3"]["authorityRank"] == 2

    assert signals.inputs["citationCount"] == 2
    assert signals.inputs["invalidCitationCount"] == 1
    assert signals.inputs["citationCoverageScore"] == pytest.approx(2 / 3)
    assert signals.inputs["supportLevel"] == "medium"
    assert set(signals.derived) == {
        "supportLevel",
        "citationCount",
        "invalidCitationCount",
        "citationCoverageScore",
    }
    assert signals.skipped == 0
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 3


def hybrid_chain(llm: Any, store: InMemoryVectorStore) -> Any:
    retrievers = RunnableParallel(
        vector=ScoredVectorRetriever(store=store), keyword=KeywordRetriever(), question=RunnablePassthrough()
    )

    def merge(inputs: dict[str, Any]) -> dict[str, Any]:
        seen: dict[str, Document] = {}
        for doc in [*inputs["vector"], *inputs["keyword"]]:
            seen.setdefault(doc.metadata.get("id") or doc.metadata["doc_id"], doc)
        return {"context": format_documents(list(seen.values())), "question": inputs["question"]}

    return retrievers | RunnableLambda(merge) | prompt() | llm | StrOutputParser()


def test_openinference_hybrid_retrieval_merges_by_document_id(openinference: InMemorySpanExporter) -> None:
    store = make_store()
    vector = dict(expected_vector_hits(store))
    keyword = {doc_id: float(hits) for doc_id, _, hits in keyword_hits(QUESTION)[:2]}
    top_keyword = max(keyword.values())
    assert top_keyword > 1  # the keyword scores really are outside 0..1
    openinference.clear()

    hybrid_chain(FakeListLLM(responses=["Paris [doc-1]."]), store).invoke(QUESTION)

    signals = extract_signals(only_answer(openinference).spans)
    assert_scoreable(signals.inputs)
    candidates = {c["documentId"]: c for c in signals.inputs["candidates"]}
    assert set(candidates) == set(vector) | set(keyword)
    for doc_id, candidate in candidates.items():
        expected_scores = {}
        if doc_id in vector:
            expected_scores["scoredvector"] = pytest.approx(vector[doc_id])
        if doc_id in keyword:
            # Documented rule: a span with scores above 1 is divided by its largest score.
            expected_scores["keyword"] = pytest.approx(keyword[doc_id] / top_keyword)
        assert candidate["retrievalScores"] == expected_scores
        assert candidate["combinedScore"] == pytest.approx(max(candidate["retrievalScores"].values()))
    combined = [c["combinedScore"] for c in signals.inputs["candidates"]]
    assert combined == sorted(combined, reverse=True)
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_SPANS] == 2
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_SCORES_RESCALED] is True
    assert signals.inputs["citationCount"] == 1 and signals.inputs["invalidCitationCount"] == 0


def test_openinference_method_from_run_metadata(openinference: InMemorySpanExporter) -> None:
    store = make_store()
    retriever = ScoredVectorRetriever(store=store).with_config(
        metadata={semconv.RAG_RETRIEVAL_METHOD: "dense"}
    )
    openinference.clear()

    (retriever | RunnableLambda(format_documents)).invoke(QUESTION)

    signals = extract_signals(only_answer(openinference).spans)
    assert_scoreable(signals.inputs)
    assert {method for c in signals.inputs["candidates"] for method in c["retrievalScores"]} == {"dense"}


def test_application_span_around_the_chain_is_the_answer(openinference: InMemorySpanExporter) -> None:
    """The documented pattern for ``record_signals`` with LangChain: the application's own span."""
    store = make_store()
    app_provider = TracerProvider()
    app_provider.add_span_processor(SimpleSpanProcessor(openinference))
    tracer = app_provider.get_tracer("app")
    openinference.clear()

    with tracer.start_as_current_span("answer") as span:
        span.set_attribute(semconv.RAG_ANSWER, True)
        single_retriever_chain(FakeListLLM(responses=["Paris."]), store).invoke(QUESTION)
        span.set_attribute(semconv.RAG_SIGNAL_FAITHFULNESS_SCORE, 0.93)

    group = only_answer(openinference)
    assert group.rule == "marked" and group.answer.name == "answer"
    assert len(group.spans) == len(openinference.get_finished_spans())
    signals = extract_signals(group.spans)
    assert_scoreable(signals.inputs)
    assert len(signals.inputs["candidates"]) == 3
    assert signals.inputs["faithfulnessScore"] == 0.93
    assert signals.inputs["supportLevel"] == "high" and signals.sources["supportLevel"] == "faithfulnessScore"
    # No markers in the answer: nothing derived, nothing penalised.
    assert "citationCount" not in signals.inputs
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 0


class UnnamedModelLLM(BaseLLM):
    """An in-house completion endpoint wrapped as a LangChain LLM: it names no model (nor does ``LlamaCpp``),
    so its OpenInference span has no ``llm.model_name``; it was cut short."""

    text: str

    def _generate(
        self,
        prompts: list[str],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> LLMResult:
        return LLMResult(
            generations=[
                [LCGeneration(text=self.text, generation_info={"finish_reason": "length"})] for _ in prompts
            ]
        )

    @property
    def _llm_type(self) -> str:
        return "in-house"


def test_a_model_call_inside_using_prompt_template_is_a_generation(
    openinference: InMemorySpanExporter,
) -> None:
    """``using_prompt_template`` (prompt versioning) puts ``llm.prompt_template.template`` on every span of the
    block, the model call's too. A model call that names no model was then taken for a Haystack prompt builder
    and dropped: the answer's text, citations and truncation were lost. Its request (``llm.invocation_parameters``,
    ``llm.prompts``) says it called a model."""
    store = make_store()
    app_provider = TracerProvider()
    app_provider.add_span_processor(SimpleSpanProcessor(openinference))
    tracer = app_provider.get_tracer("app")
    second_id = expected_vector_hits(store)[1][0]
    text = f"Paris is the capital of France [1]. Not Berlin [{second_id}]."
    openinference.clear()

    with tracer.start_as_current_span("answer") as span:
        span.set_attribute(semconv.RAG_ANSWER, True)
        with using_prompt_template(template="Context:\n{context}\n\nQuestion: {question}", version="v3"):
            single_retriever_chain(UnnamedModelLLM(text=text), store).invoke(QUESTION)

    llm_spans = [
        s
        for s in openinference.get_finished_spans()
        if (s.attributes or {}).get("openinference.span.kind") == "LLM"
    ]
    assert len(llm_spans) == 1
    attributes = llm_spans[0].attributes or {}
    assert semconv.OI_LLM_PROMPT_TEMPLATE in attributes and semconv.OI_LLM_MODEL_NAME not in attributes
    signals = extract_signals(only_answer(openinference).spans)
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
    assert signals.inputs["citationCount"] == 2 and signals.inputs["invalidCitationCount"] == 0
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED] is True


def test_openinference_spans_are_not_current_inside_runnables(openinference: InMemorySpanExporter) -> None:
    """Why ``record_signals`` inside a chain step is a no-op under the OpenInference LangChain tracer."""
    seen: list[bool] = []

    def step(value: str) -> str:
        seen.append(trace.get_current_span().is_recording())
        return value

    openinference.clear()
    RunnableLambda(step).invoke("x")
    assert seen == [False]
    assert len(openinference.get_finished_spans()) == 1  # the step itself was traced, just not made current


@pytest.mark.parametrize("chat", [False, True], ids=["FakeListLLM", "FakeListChatModel"])
def test_openllmetry_single_retriever(openllmetry: InMemorySpanExporter, chat: bool) -> None:
    store = make_store()
    expected = expected_vector_hits(store)
    text = "Paris is the capital [1]. Nothing else [2] [3] [4]."
    llm = FakeListChatModel(responses=[text]) if chat else FakeListLLM(responses=[text])
    openllmetry.clear()

    single_retriever_chain(llm, store).invoke(QUESTION)

    group = only_answer(openllmetry)
    retrieval_spans = [
        span
        for span in group.spans
        if span.attributes.get(semconv.GEN_AI_OPERATION_NAME) == semconv.GEN_AI_OPERATION_VECTOR_DB_RETRIEVE
    ]
    assert len(retrieval_spans) == 1 and retrieval_spans[0].kind == "CLIENT"
    signals = extract_signals(group.spans)
    assert_scoreable(signals.inputs)
    assert [(c["documentId"], c["combinedScore"]) for c in signals.inputs["candidates"]] == [
        (doc_id, pytest.approx(score)) for doc_id, score in expected
    ]
    # LangChain names the retriever ``scoredvector``; both tracers record that name, so methods agree.
    assert all(set(c["retrievalScores"]) == {"scoredvector"} for c in signals.inputs["candidates"])
    assert signals.inputs["citationCount"] == 3
    assert signals.inputs["invalidCitationCount"] == 1  # [4]: only three documents were retrieved
    assert signals.inputs["citationCoverageScore"] == 1.0


def test_openllmetry_streamed_chat_answer_is_read_like_an_invoked_one(
    openllmetry: InMemorySpanExporter,
) -> None:
    """The tracer writes a streamed ``AIMessageChunk`` as role ``unknown``: it is the answer all the same."""
    store = make_store()
    text = "Paris is the capital of France [1]. Berlin is the capital of Germany [2]."
    found: dict[str, tuple[list[str], Any]] = {}
    for mode in ("invoke", "stream"):
        openllmetry.clear()
        chain = single_retriever_chain(FakeListChatModel(responses=[text]), store)
        assert (chain.invoke(QUESTION) if mode == "invoke" else "".join(chain.stream(QUESTION))) == text
        group = only_answer(openllmetry)
        (chat,) = [
            span
            for span in group.spans
            if span.attributes.get(semconv.GEN_AI_OPERATION_NAME) == semconv.GEN_AI_OPERATION_CHAT
        ]
        roles = [message["role"] for message in json.loads(chat.attributes[semconv.GEN_AI_OUTPUT_MESSAGES])]
        found[mode] = (roles, extract_signals(group.spans))
    assert found["invoke"][0] == ["assistant"] and found["stream"][0] == ["unknown"]
    for _, signals in found.values():
        assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
        assert signals.inputs["citationCount"] == 2
        assert signals.inputs["citationCoverageScore"] == 1.0
        assert signals.skipped == 0
    assert found["stream"][1].inputs == found["invoke"][1].inputs


class CutShortChat(BaseChatModel):
    """A chat model that stops on its token limit, saying so as providers do (``finish_reason = length``)."""

    @property
    def _llm_type(self) -> str:
        return "cut-short"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        message = AIMessage(content="Paris is the capital [1] and its population is")
        return ChatResult(
            generations=[ChatGeneration(message=message, generation_info={"finish_reason": "length"})]
        )


def test_openllmetry_with_content_tracing_off_still_reports_a_truncated_answer(
    openllmetry: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``TRACELOOP_TRACE_CONTENT=false`` (the privacy setting) drops ``gen_ai.output.messages``, which the GenAI
    conventions make opt-in, and keeps ``gen_ai.response.finish_reasons``, which they recommend."""
    monkeypatch.setenv("TRACELOOP_TRACE_CONTENT", "false")
    openllmetry.clear()

    single_retriever_chain(CutShortChat(), make_store()).invoke(QUESTION)

    group = only_answer(openllmetry)
    (chat,) = [
        span
        for span in group.spans
        if span.attributes.get(semconv.GEN_AI_OPERATION_NAME) == semconv.GEN_AI_OPERATION_CHAT
    ]
    assert semconv.GEN_AI_OUTPUT_MESSAGES not in chat.attributes
    assert tuple(chat.attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS]) == ("length",)
    signals = extract_signals(group.spans)
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED] is True
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_FINISH_REASON] == "length"
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 0  # no text to search


@pytest.mark.parametrize(
    "declared",
    [semconv.OPENINFERENCE_KIND_EVALUATOR, semconv.OPENINFERENCE_KIND_GUARDRAIL, None],
    ids=["judge in an EVALUATOR span", "output guard in a GUARDRAIL span", "undeclared judge"],
)
def test_an_inline_judge_in_an_evaluator_span_is_not_read_as_the_answer(
    openllmetry: InMemorySpanExporter, declared: str | None
) -> None:
    """The documented inline-judge pattern: the judge's LLM call ends after the answer's. Inside a span that
    declares itself an evaluator (or an output guardrail, whose LLM check runs after the answer the same way)
    it is the judge's; undeclared, nothing tells it apart (a documented limit)."""
    store = make_store()
    app_provider = TracerProvider()
    app_provider.add_span_processor(SimpleSpanProcessor(openllmetry))
    tracer = app_provider.get_tracer("app")
    text = "Paris is the capital of France [1]. Berlin is the capital of Germany [2]."
    judge = FakeListChatModel(responses=["Supported by the context [7]. Verdict: faithful."])
    openllmetry.clear()

    with tracer.start_as_current_span("answer") as answer:
        answer.set_attribute(semconv.RAG_ANSWER, True)
        assert single_retriever_chain(FakeListChatModel(responses=[text]), store).invoke(QUESTION) == text
        with tracer.start_as_current_span("faithfulness judge") as evaluator:
            if declared:
                evaluator.set_attribute(semconv.OPENINFERENCE_SPAN_KIND, declared)
            judge.invoke(f"Is this answer faithful to the context? {text}")
        # What EvaluationLogProcessor hands over for a verdict logged in the answer's context.
        answer.add_event(
            semconv.GEN_AI_EVALUATION_RESULT,
            {semconv.GEN_AI_EVALUATION_NAME: "faithfulness", semconv.GEN_AI_EVALUATION_SCORE_VALUE: 0.92},
        )

    group = only_answer(openllmetry)
    chats = [
        span
        for span in group.spans
        if span.attributes.get(semconv.GEN_AI_OPERATION_NAME) == semconv.GEN_AI_OPERATION_CHAT
    ]
    (judge_span,) = [span for span in group.spans if span.name == "faithfulness judge"]
    # The judge's call is the generation that ended last.
    assert len(chats) == 2 and max(chats, key=_end_time).parent_span_id == judge_span.span_id
    signals = extract_signals(group.spans)
    assert_scoreable(signals.inputs)
    assert signals.inputs["faithfulnessScore"] == 0.92
    if declared:
        assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
        assert signals.inputs["citationCount"] == 2 and signals.inputs["invalidCitationCount"] == 0
    else:
        assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 1  # the judge's [7]
        assert signals.inputs["invalidCitationCount"] == 1


def test_openllmetry_hybrid_retrieval(openllmetry: InMemorySpanExporter) -> None:
    store = make_store()
    vector = dict(expected_vector_hits(store))
    keyword = {doc_id for doc_id, _, _ in keyword_hits(QUESTION)[:2]}
    openllmetry.clear()

    hybrid_chain(FakeListLLM(responses=["Paris."]), store).invoke(QUESTION)

    signals = extract_signals(only_answer(openllmetry).spans)
    assert_scoreable(signals.inputs)
    methods = {c["documentId"]: set(c["retrievalScores"]) for c in signals.inputs["candidates"]}
    assert methods == {
        doc_id: {name for name, ids in (("scoredvector", vector), ("keyword", keyword)) if doc_id in ids}
        for doc_id in set(vector) | keyword
    }


PINECONE_HITS = [("doc-1", 0.91), ("doc-2", 0.73), ("doc-4", 0.56)]


class PineconeLikeRetriever(BaseRetriever):
    """A LangChain retriever over a vector-DB client, as langchain-pinecone is under OpenLLMetry.

    Each query gets a client span with one ``db.query.result`` event per hit carrying id, score and metadata but
    no text (the shape opentelemetry-instrumentation-pinecone writes, here with JSON metadata); the retriever
    returns documents with text and metadata, no score, and an id that the OpenLLMetry tracer does not record.
    ``returned`` lists the ids returned, in order (default: the first query's hits as the store ranked them).
    """

    tracer: Any
    queries: list[list[tuple[str, float]]]
    returned: list[str] | None = None

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        for hits in self.queries:
            with self.tracer.start_as_current_span("pinecone.query", kind=trace.SpanKind.CLIENT) as span:
                span.set_attribute(semconv.DB_SYSTEM, "pinecone")
                for doc_id, score in hits:
                    text, metadata = CORPUS[doc_id]
                    span.add_event(
                        semconv.DB_QUERY_RESULT,
                        {
                            semconv.DB_QUERY_RESULT_ID: doc_id,
                            semconv.DB_QUERY_RESULT_SCORE: score,
                            # The store keeps the text in the metadata; LangChain pops it into page_content.
                            semconv.DB_QUERY_RESULT_METADATA: json.dumps({**metadata, "text": text}),
                        },
                    )
        ids = self.returned if self.returned is not None else [doc_id for doc_id, _ in self.queries[0]]
        return [
            Document(id=doc_id, page_content=CORPUS[doc_id][0], metadata=dict(CORPUS[doc_id][1]))
            for doc_id in ids
        ]


class ReversingRetriever(BaseRetriever):
    """A retriever around a retriever that reorders its documents (as a reranking compressor does)."""

    inner: BaseRetriever

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return list(reversed(self.inner.invoke(query, config={"callbacks": run_manager.get_child()})))


@pytest.fixture
def vector_db_tracer(openllmetry: InMemorySpanExporter) -> trace.Tracer:
    # Not shut down afterwards: that would shut the module's shared exporter down too.
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(openllmetry))
    return provider.get_tracer("opentelemetry.instrumentation.pinecone")


def retriever_chain(retriever: BaseRetriever, text: str) -> Any:
    return (
        {"context": retriever | RunnableLambda(format_documents), "question": RunnablePassthrough()}
        | prompt()
        | FakeListChatModel(responses=[text])
        | StrOutputParser()
    )


def test_openllmetry_retriever_over_a_vector_db_client_presents_the_clients_scored_results(
    openllmetry: InMemorySpanExporter, vector_db_tracer: trace.Tracer
) -> None:
    """The retriever span has text and no id, the client span ids and scores and no text: position pairs them."""
    openllmetry.clear()
    retriever = PineconeLikeRetriever(tracer=vector_db_tracer, queries=[PINECONE_HITS])
    retriever_chain(retriever, "Paris is the capital of France [1]. Berlin is in Germany [2].").invoke(
        QUESTION
    )

    group = only_answer(openllmetry)
    (client,) = [span for span in group.spans if span.name == "pinecone.query"]
    (wrapper,) = [span for span in group.spans if span.span_id == client.parent_span_id]
    assert wrapper.attributes[semconv.GEN_AI_OPERATION_NAME] == semconv.GEN_AI_OPERATION_VECTOR_DB_RETRIEVE
    signals = extract_signals(group.spans)
    assert_scoreable(signals.inputs)
    assert [
        (c["documentId"], c["retrievalScores"], c["combinedScore"], c["rank"])
        for c in signals.inputs["candidates"]
    ] == [(doc_id, {"pinecone": score}, score, rank) for rank, (doc_id, score) in enumerate(PINECONE_HITS, 1)]
    assert signals.inputs["candidates"][0]["documentType"] == "atlas"
    assert signals.inputs["citationCount"] == 2 and signals.inputs["invalidCitationCount"] == 0
    assert semconv.RAG_CONFIDENCE_RETRIEVAL_UNSCORED_DOCUMENTS not in signals.diagnostics
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_SPANS] == 1
    assert signals.skipped == 0


@pytest.mark.parametrize(
    ("queries", "returned"),
    [
        ([[*PINECONE_HITS, ("doc-3", 0.41)]], ["doc-1", "doc-2", "doc-4"]),  # four results, three returned
        ([PINECONE_HITS, [("doc-3", 0.8), ("doc-2", 0.7), ("doc-1", 0.6)]], None),  # two queries: which one?
        ([PINECONE_HITS], ["doc-4", "doc-2", "doc-1"]),  # reordered inside the retriever: metadata disagrees
    ],
    ids=["counts differ", "several inner retrievals", "reordered"],
)
def test_openllmetry_retriever_over_a_vector_db_client_is_not_paired_by_position_when_position_may_lie(
    openllmetry: InMemorySpanExporter,
    vector_db_tracer: trace.Tracer,
    queries: list[list[tuple[str, float]]],
    returned: list[str] | None,
) -> None:
    openllmetry.clear()
    retriever = PineconeLikeRetriever(tracer=vector_db_tracer, queries=queries, returned=returned)
    retriever_chain(retriever, "Paris [1].").invoke(QUESTION)

    signals = extract_signals(only_answer(openllmetry).spans)
    assert_scoreable(signals.inputs)
    # Nothing invented: the presented documents stay unscored, as before the rule.
    assert signals.inputs["candidates"] == []
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_UNSCORED_DOCUMENTS] == 3


def test_a_reordering_retriever_around_it_keeps_its_order_and_the_clients_scores(
    openllmetry: InMemorySpanExporter, vector_db_tracer: trace.Tracer
) -> None:
    """Reranker-like wrapper -> retriever -> client: the retriever pairs with the client by position, the wrapper
    with the retriever by text, so the order is the wrapper's and no score moves to another document."""
    openllmetry.clear()
    inner = PineconeLikeRetriever(tracer=vector_db_tracer, queries=[PINECONE_HITS])
    retriever_chain(ReversingRetriever(inner=inner), "The Loire is long [1].").invoke(QUESTION)

    signals = extract_signals(only_answer(openllmetry).spans)
    assert_scoreable(signals.inputs)
    scores = dict(PINECONE_HITS)
    assert [(c["documentId"], c["retrievalScores"], c["rank"]) for c in signals.inputs["candidates"]] == [
        ("doc-4", {"pinecone": scores["doc-4"]}, 1),
        ("doc-2", {"pinecone": scores["doc-2"]}, 2),
        ("doc-1", {"pinecone": scores["doc-1"]}, 3),
    ]
    assert signals.inputs["citationCount"] == 1 and signals.inputs["invalidCitationCount"] == 0


def test_both_tracers_at_once_count_one_retrieval(
    openinference: InMemorySpanExporter, openllmetry: InMemorySpanExporter
) -> None:
    """Two tracers on one retriever report the same documents twice: one retrieval, one method."""
    store = make_store()
    openinference.clear()
    openllmetry.clear()

    single_retriever_chain(FakeListLLM(responses=["Paris [1]."]), store).invoke(QUESTION)

    spans = [*openinference.get_finished_spans(), *openllmetry.get_finished_spans()]
    records = records_from_readable_spans(spans)
    groups = find_answers(records)
    # The two tracers build separate traces (each its own root): score each trace once...
    assert len(groups) == 2
    # ...and the same spans merged into one list still give one retrieval.
    merged = extract_signals(records)
    assert merged.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_SPANS] == 1
    assert len(merged.inputs["candidates"]) == 3


def test_unscored_langchain_documents_are_counted_not_invented(openinference: InMemorySpanExporter) -> None:
    store = make_store()
    openinference.clear()
    store.as_retriever(search_kwargs={"k": 2}).invoke(QUESTION)

    # A bare retriever is no answer (see test_signals_answers); its spans are read all the same.
    signals = extract_signals(records_from_readable_spans(openinference.get_finished_spans()))
    assert_scoreable(signals.inputs)
    assert signals.inputs["candidates"] == []
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_UNSCORED_DOCUMENTS] == 2


def test_custom_key_map_reads_other_metadata_names(openinference: InMemorySpanExporter) -> None:
    class SourceRetriever(BaseRetriever):
        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            return [Document(page_content="x", metadata={"source_id": "kb-7", "similarity_pct": 0.42})]

    openinference.clear()
    SourceRetriever().invoke(QUESTION)
    spans = records_from_readable_spans(openinference.get_finished_spans())

    default = extract_signals(spans)
    assert default.inputs["candidates"] == []
    options = SignalOptions(document_keys={"id": ("source_id",), "score": ("similarity_pct",)})
    custom = extract_signals(spans, options)
    assert custom.inputs["candidates"] == [
        {"retrievalScores": {"source": 0.42}, "combinedScore": 0.42, "documentId": "kb-7", "rank": 1}
    ]
    assert not math.isnan(custom.inputs["candidates"][0]["combinedScore"])


class ManyDocumentsRetriever(BaseRetriever):
    """Returns more documents than a span's default attribute limit (128) can hold."""

    count: int = 64

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [
            Document(id=f"d{index}", page_content=f"text {index}", metadata={"score": 1 - index / 200})
            for index in range(self.count)
        ]


def test_a_retrieval_past_the_attribute_limit_keeps_the_documents_left_and_says_how_many_it_lost(
    openinference: InMemorySpanExporter,
) -> None:
    openinference.clear()
    ManyDocumentsRetriever(count=64).invoke("q")
    (span,) = openinference.get_finished_spans()
    assert (span.attributes or {}).get(
        semconv.OPENINFERENCE_SPAN_KIND
    ) == semconv.OPENINFERENCE_KIND_RETRIEVER
    assert span.dropped_attributes > 0  # the SDK evicted the first document's attributes
    kept = {
        int(key.split(".")[2])
        for key in (span.attributes or {})
        if key.startswith(f"{semconv.OI_RETRIEVAL_DOCUMENTS}.") and key.endswith(".document.content")
    }
    extracted = extract_signals(records_from_readable_spans([span]))
    lost = min(kept)
    assert lost >= 1
    assert len(extracted.inputs["candidates"]) == len(
        kept
    )  # was 0: nothing read past a missing first document
    assert extracted.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_DROPPED_DOCUMENTS] == lost


def test_a_langchain_step_named_retrieve_under_openllmetry_is_no_retriever(
    openllmetry: InMemorySpanExporter,
) -> None:
    """OpenLLMetry's LangChain tracer names a step's span after the runnable (``retrieve``, the tutorials'
    name): not one of its LlamaIndex sibling's ``<Class>.task`` retriever spans, so its dict output is no lost
    retrieval and the citations are judged."""
    store = make_store()
    retriever = ScoredVectorRetriever(store=store)

    def retrieve(question: str) -> str:
        return format_documents(retriever.invoke(question))

    text = "Paris is the capital of France [1]."
    chain: Any = (
        {"context": RunnableLambda(retrieve), "question": RunnablePassthrough()}
        | prompt()
        | FakeListChatModel(responses=[text])
        | StrOutputParser()
    )
    openllmetry.clear()
    assert chain.invoke(QUESTION) == text

    names = [
        (span.attributes or {}).get(semconv.TRACELOOP_ENTITY_NAME)
        for span in openllmetry.get_finished_spans()
    ]
    assert "retrieve" in names
    signals = extract_signals(only_answer(openllmetry).spans)
    assert semconv.RAG_CONFIDENCE_RETRIEVAL_UNREADABLE_SPANS not in signals.diagnostics
    assert signals.inputs["citationCount"] == 1


def test_documents_with_metadata_shaped_like_a_bedrock_reference_keep_their_own_metadata(
    openinference: InMemorySpanExporter,
) -> None:
    """Metadata of exactly the keys a Bedrock Knowledge Base reference has (``location``, ``metadata``,
    ``type``) is this retriever's own: its nested ``metadata`` is not read in its place (no score, no
    document type taken from there)."""

    class SectionRetriever(BaseRetriever):
        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            return [
                Document(
                    id="doc-1",
                    page_content=CORPUS["doc-1"][0],
                    metadata={
                        "location": {"page": 3},
                        "metadata": {"document_type": "atlas", "score": 0.9},
                        "type": "faq",
                    },
                )
            ]

    openinference.clear()
    chain = SectionRetriever() | RunnableLambda(lambda documents: "Paris is the capital of France [doc-1].")
    chain.invoke(QUESTION)

    signals = extract_signals(only_answer(openinference).spans)
    assert signals.inputs["candidates"] == []  # the documents carry no score of their own
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_UNSCORED_DOCUMENTS] == 1
    assert signals.inputs["citationCount"] == 1


class GroundedChatModel(BaseChatModel):
    """A chat model answering as ``langchain-google-genai``'s ``ChatGoogleGenerativeAI`` does for a grounded
    Gemini call: the response's ``grounding_metadata`` (snake_case, as the SDK dumps it) in the generation's
    ``generation_info``, which LangChain copies into the message's ``response_metadata``."""

    text: str

    @property
    def _llm_type(self) -> str:
        return "grounded-chat"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        grounding = {
            "grounding_chunks": [
                {"web": {"uri": f"https://example.org/{i}", "title": f"site {i}"}} for i in range(30)
            ],
            "grounding_supports": [
                {"segment": {"text": "Paris is the capital of France."}, "grounding_chunk_indices": [i]}
                for i in range(30)
            ],
        }
        info = {"finish_reason": "STOP", "grounding_metadata": grounding}
        message = AIMessage(content=self.text, response_metadata=info)
        return ChatResult(generations=[ChatGeneration(message=message, generation_info=info)])


def _cut_output_values(records: list[SpanRecord], limit: int) -> list[SpanRecord]:
    """The records as a value length limit (``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT``) leaves them: every
    ``output.value`` cut to ``limit`` characters, as the SDK cuts string attributes."""
    cut = []
    for record in records:
        output = record.attributes.get(semconv.OI_OUTPUT_VALUE)
        if isinstance(output, str) and len(output) > limit:
            record = dataclasses.replace(
                record, attributes={**record.attributes, semconv.OI_OUTPUT_VALUE: output[:limit]}
            )
        cut.append(record)
    return cut


@pytest.mark.parametrize("limit", [None, 2000])
def test_grounding_in_a_langchain_llm_result_is_no_retrieval_even_cut_short(
    openinference: InMemorySpanExporter, limit: int | None
) -> None:
    """The OpenInference LangChain tracer's ``output.value`` of a chat model wrapping grounded Gemini holds the
    grounding deeper down (``generations[0][0].generation_info``): no response of the model, so no retrieval,
    whole or cut short by a length limit. Counted as one, its unreadable chunks withheld the citation inputs of
    the chain's own retrieval, and a bare chat call became an answer."""
    store = make_store()
    text = "Paris is the capital of France [doc-1]."
    openinference.clear()
    single_retriever_chain(GroundedChatModel(text=text), store).invoke(QUESTION)
    records = records_from_readable_spans(openinference.get_finished_spans())
    if limit is not None:
        records = _cut_output_values(records, limit)
    (group,) = find_answers(records)
    signals = extract_signals(group.spans)
    assert semconv.RAG_CONFIDENCE_RETRIEVAL_UNREADABLE_SPANS not in signals.diagnostics
    assert signals.inputs["citationCount"] == 1
    assert signals.inputs["invalidCitationCount"] == 0

    openinference.clear()
    GroundedChatModel(text=text).invoke(QUESTION)
    records = records_from_readable_spans(openinference.get_finished_spans())
    assert find_answers(_cut_output_values(records, limit) if limit is not None else records) == []


class ChunkRetriever(BaseRetriever):
    """Chunks of source documents, each chunk's metadata naming its source (``doc_id``) and similarity."""

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [
            Document(page_content="Refunds take 30 days.", metadata={"doc_id": "handbook", "score": 0.9}),
            Document(page_content="Refunds need a receipt.", metadata={"doc_id": "handbook", "score": 0.8}),
            Document(page_content="Shipping is free.", metadata={"doc_id": "faq", "score": 0.7}),
        ]


def test_positions_count_the_chunks_the_prompt_numbered_when_chunks_share_a_source_id(
    openinference: InMemorySpanExporter,
) -> None:
    """The prompt numbers the three chunks [1]..[3]; two of them come from one source document. ``[3]`` is the
    third chunk (the FAQ), not past the end of a list of two sources, and ``[2]`` the handbook's second chunk:
    two source documents cited, none invalid, every sentence covered."""
    openinference.clear()
    llm = FakeListLLM(responses=["Refunds take 30 days [1]. A receipt is needed [2]. Shipping is free [3]."])
    chain = (
        {"context": ChunkRetriever() | RunnableLambda(format_documents), "question": RunnablePassthrough()}
        | prompt()
        | llm
        | StrOutputParser()
    )
    chain.invoke("How do refunds work?")

    signals = extract_signals(only_answer(openinference).spans)
    assert [candidate["documentId"] for candidate in signals.inputs["candidates"]] == ["handbook", "faq"]
    assert signals.inputs["citationCount"] == 2
    assert signals.inputs["invalidCitationCount"] == 0
    assert signals.inputs["citationCoverageScore"] == 1.0
