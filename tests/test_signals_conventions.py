"""GenAI-convention and OpenLLMetry vector-DB spans, built with the real SDK as the specs describe them.

No instrumentor emits GenAI ``retrieval`` spans offline yet, so these spans are written by hand with the SDK
tracer, following the semantic conventions (``gen_ai.operation.name = retrieval``, ``gen_ai.data_source.id``,
``gen_ai.retrieval.documents``, ``gen_ai.output.messages``, ``gen_ai.evaluation.result`` events) and the
OpenLLMetry vector-DB instrumentors' event shapes (``db.query.result`` / ``db.search.result``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Tracer

from rag_confidence import semconv
from rag_confidence.signals import (
    EventRecord,
    SignalOptions,
    SpanRecord,
    extract_signals,
    find_answers,
    records_from_readable_spans,
)
from tests.instrumented import assert_scoreable


def retrieval_span(tracer: Tracer, source: str, documents: object) -> None:
    with tracer.start_as_current_span(f"retrieval {source}", kind=SpanKind.CLIENT) as span:
        span.set_attribute(semconv.GEN_AI_OPERATION_NAME, semconv.GEN_AI_OPERATION_RETRIEVAL)
        span.set_attribute(semconv.GEN_AI_DATA_SOURCE_ID, source)
        span.set_attribute(semconv.GEN_AI_RETRIEVAL_QUERY_TEXT, "capital of France")
        span.set_attribute(semconv.GEN_AI_RETRIEVAL_DOCUMENTS, documents)  # type: ignore[arg-type]


def chat_span(tracer: Tracer, text: str, finish_reason: str) -> None:
    with tracer.start_as_current_span("chat model", kind=SpanKind.CLIENT) as span:
        span.set_attribute(semconv.GEN_AI_OPERATION_NAME, semconv.GEN_AI_OPERATION_CHAT)
        messages = [
            {
                "role": "assistant",
                "parts": [{"type": "text", "content": text}],
                "finish_reason": finish_reason,
            }
        ]
        span.set_attribute(semconv.GEN_AI_OUTPUT_MESSAGES, json.dumps(messages))
        span.set_attribute(semconv.GEN_AI_RESPONSE_FINISH_REASONS, [finish_reason])


def evaluation(name: str, score: float) -> dict[str, object]:
    return {semconv.GEN_AI_EVALUATION_NAME: name, semconv.GEN_AI_EVALUATION_SCORE_VALUE: score}


def test_genai_hybrid_retrieval_structured_and_json_documents(
    traced: tuple[Tracer, InMemorySpanExporter],
) -> None:
    tracer, exporter = traced
    with tracer.start_as_current_span("rag pipeline") as root:
        # SDK 1.45 takes structured values; older producers send the same list as a JSON string.
        retrieval_span(tracer, "kb-vector", [{"id": "a", "score": 0.82}, {"id": "b", "score": 0.61}])
        retrieval_span(
            tracer, "kb-keyword", json.dumps([{"id": "b", "score": 0.9}, {"id": "c", "score": 0.4}])
        )
        chat_span(tracer, "Paris is the capital [a]. It is large [b].", "stop")
        root.add_event(semconv.GEN_AI_EVALUATION_RESULT, evaluation("faithfulness", 0.55))
        root.add_event(semconv.GEN_AI_EVALUATION_RESULT, evaluation("answer_relevancy", 0.9))

    (group,) = find_answers(records_from_readable_spans(exporter.get_finished_spans()))
    assert group.rule == "root"
    signals = extract_signals(group.spans)
    assert_scoreable(signals.inputs)
    assert signals.inputs["candidates"] == [
        {
            "retrievalScores": {"kb-vector": 0.61, "kb-keyword": 0.9},
            "combinedScore": 0.9,
            "documentId": "b",
            "rank": 1,
        },
        {"retrievalScores": {"kb-vector": 0.82}, "combinedScore": 0.82, "documentId": "a", "rank": 2},
        {"retrievalScores": {"kb-keyword": 0.4}, "combinedScore": 0.4, "documentId": "c", "rank": 3},
    ]
    assert signals.inputs["faithfulnessScore"] == 0.55
    assert signals.inputs["answerRelevanceScore"] == 0.9
    assert (
        signals.inputs["supportLevel"] == "medium" and signals.sources["supportLevel"] == "faithfulnessScore"
    )
    assert signals.inputs["citationCount"] == 2 and signals.inputs["citationCoverageScore"] == 1.0
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED] is False
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_FINISH_REASON] == "stop"
    assert signals.skipped == 0


def test_genai_truncated_generation_and_explicit_signals_win(
    traced: tuple[Tracer, InMemorySpanExporter],
) -> None:
    tracer, exporter = traced
    with tracer.start_as_current_span("answer") as answer:
        answer.set_attribute(semconv.RAG_ANSWER, True)
        retrieval_span(tracer, "kb", [{"id": "a", "score": 0.7}])
        chat_span(tracer, "Paris is [a", "length")
        answer.add_event(semconv.GEN_AI_EVALUATION_RESULT, evaluation("faithfulness", 0.95))
        answer.set_attribute(semconv.RAG_SIGNAL_SUPPORT_LEVEL, "low")
        answer.set_attribute(semconv.RAG_SIGNAL_CITATION_COUNT, 4)

    (group,) = find_answers(records_from_readable_spans(exporter.get_finished_spans()))
    signals = extract_signals(group.spans)
    assert_scoreable(signals.inputs)
    assert group.rule == "marked"
    assert signals.inputs["supportLevel"] == "low" and signals.sources["supportLevel"] == "rag.signal"
    assert signals.inputs["citationCount"] == 4
    assert "supportLevel" not in signals.derived and "citationCount" not in signals.derived
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED] is True


@pytest.mark.parametrize(
    ("reported", "shown"),
    [
        ("end_turn", "end_turn"),
        ("MAX_TOKENS", "max_tokens"),
        ("OTHER", "other"),  # Gemini's own
        ("eos_token", "eos_token"),
        ("SECRET-CONTENT-123 patient notes", "unrecognized"),
    ],
)
def test_the_finish_reason_diagnostic_is_a_known_reason_or_unrecognized(
    traced: tuple[Tracer, InMemorySpanExporter], reported: str, shown: str
) -> None:
    # Read from inside the model's output messages: copied as it was, any text there reached a new attribute.
    tracer, exporter = traced
    with tracer.start_as_current_span("answer") as answer:
        answer.set_attribute(semconv.RAG_ANSWER, True)
        retrieval_span(tracer, "kb", [{"id": "a", "score": 0.7}])
        chat_span(tracer, "Paris [a]", reported)
    (group,) = find_answers(records_from_readable_spans(exporter.get_finished_spans()))
    signals = extract_signals(group.spans)
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_FINISH_REASON] == shown
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED] is (shown == "max_tokens")


def test_hand_rolled_step_spans_with_the_three_genai_attributes_are_read_as_docs_signals_shows(
    traced: tuple[Tracer, InMemorySpanExporter],
) -> None:
    # docs/signals.md, "Your own spans, without an instrumentor": one span per step, named after the step.
    tracer, exporter = traced
    with tracer.start_as_current_span("answer_question"):
        for method, hits in (("dense", [("d1", 0.82), ("d2", 0.77)]), ("bm25", [("d1", 0.7), ("d3", 0.5)])):
            with tracer.start_as_current_span(f"{method}_retriever") as span:
                span.set_attribute(semconv.GEN_AI_OPERATION_NAME, "retrieval")
                span.set_attribute(semconv.GEN_AI_DATA_SOURCE_ID, method)
                span.set_attribute(
                    semconv.GEN_AI_RETRIEVAL_DOCUMENTS, json.dumps([{"id": d, "score": s} for d, s in hits])
                )
        with tracer.start_as_current_span("synthesizer"):
            pass
    (group,) = find_answers(records_from_readable_spans(exporter.get_finished_spans()))
    assert group.rule == "root" and group.answer.name == "answer_question"
    candidates = {
        c["documentId"]: c["retrievalScores"] for c in extract_signals(group.spans).inputs["candidates"]
    }
    assert candidates == {"d1": {"dense": 0.82, "bm25": 0.7}, "d2": {"dense": 0.77}, "d3": {"bm25": 0.5}}


def test_our_own_evaluation_event_is_never_read_back(traced: tuple[Tracer, InMemorySpanExporter]) -> None:
    tracer, exporter = traced
    with tracer.start_as_current_span("answer") as answer:
        answer.set_attribute(semconv.RAG_ANSWER, True)
        answer.add_event(
            semconv.GEN_AI_EVALUATION_RESULT, evaluation(semconv.RAG_CONFIDENCE_EVALUATION_NAME, 0.2)
        )
    signals = extract_signals(records_from_readable_spans(exporter.get_finished_spans()))
    assert_scoreable(signals.inputs)
    assert signals.sources["supportLevel"] == "default"


@pytest.mark.parametrize(
    ("name", "source", "method"),
    [
        ("retrieval kb", None, "kb"),  # GenAI names a span ``{operation} {data source}``
        ("retrieval Docs.v2", None, "Docs.v2"),  # the data source as written, dots and case kept
        ("retrieval", None, "retrieval"),  # no target in the name
        ("retrieval kb", "kb-main", "kb-main"),  # gen_ai.data_source.id wins over the name
    ],
)
def test_a_genai_retrieval_without_a_data_source_is_named_by_the_target_in_its_span_name(
    name: str, source: str | None, method: str
) -> None:
    attributes: dict[str, Any] = {
        semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OPERATION_RETRIEVAL,
        semconv.GEN_AI_RETRIEVAL_DOCUMENTS: json.dumps([{"id": "a", "score": 0.8}]),
    }
    if source is not None:
        attributes[semconv.GEN_AI_DATA_SOURCE_ID] = source
    signals = extract_signals([SpanRecord(1, 2, None, name, attributes)])
    assert [candidate["retrievalScores"] for candidate in signals.inputs["candidates"]] == [{method: 0.8}]


def test_output_messages_of_any_role_but_the_input_ones_are_the_answer() -> None:
    """Producers name the model's role differently (``assistant``, Gemini's ``model``, ``unknown`` for a streamed
    LangChain chunk under OpenLLMetry); user, system and tool messages are never the answer. Each model message
    is one choice (the conventions: "each message represents a single output choice"), so the first is the
    answer, not all of them joined."""
    inputs = [
        {"role": "user", "parts": [{"type": "text", "content": "Which [9]?"}]},
        {"role": "System", "content": "Cite as [8]."},
        {"role": "tool", "parts": [{"type": "text", "content": "[7]"}]},
        {"role": 3, "content": "Rome [6]."},
    ]
    retrieval = SpanRecord(
        1,
        2,
        1,
        "retrieval kb",
        {
            semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OPERATION_RETRIEVAL,
            semconv.GEN_AI_RETRIEVAL_DOCUMENTS: json.dumps(
                [{"id": "a", "score": 0.8}, {"id": "b", "score": 0.6}]
            ),
        },
        end_time=1,
    )

    def chat(messages: list[dict[str, Any]]) -> SpanRecord:
        return SpanRecord(
            1,
            3,
            1,
            "chat model",
            {
                semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OPERATION_CHAT,
                semconv.GEN_AI_OUTPUT_MESSAGES: json.dumps(messages),
            },
            end_time=2,
        )

    legacy = SpanRecord(
        1,
        4,
        1,
        "openai.chat",
        {
            "gen_ai.completion.0.role": "user",
            "gen_ai.completion.0.content": "Which [9]?",
            "gen_ai.completion.1.role": "unknown",
            "gen_ai.completion.1.content": "Paris [a]. Berlin [b].",
        },
        end_time=3,
    )
    root = SpanRecord(1, 1, None, "rag", {}, end_time=4)

    for answer in (
        {"role": "unknown", "parts": [{"type": "text", "content": "Paris [a]. Berlin [b]."}]},
        {"role": "model", "content": "Paris [a]. Berlin [b]."},
        {"parts": [{"type": "text", "content": "Paris [a]. Berlin [b]."}], "finish_reason": "stop"},
    ):
        later = {"role": "assistant", "content": "Madrid [7]."}  # another choice: not the answer
        current = extract_signals([root, retrieval, chat([*inputs, answer, later])])
        assert current.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2, answer
        assert current.inputs["citationCount"] == 2 and current.inputs["invalidCitationCount"] == 0
        assert current.skipped == 1  # the role that is no string
    legacy_signals = extract_signals([root, retrieval, legacy])
    assert legacy_signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
    assert legacy_signals.inputs["invalidCitationCount"] == 0


def test_a_thinking_message_before_the_answer_is_no_choice() -> None:
    """Some tracers write a model's thinking as a message of its own before the answer's (a ``thinking`` role,
    as older OpenLLMetry Anthropic completions did). The first choice is the answer: the thinking message is
    passed over, not taken for it (nor joined to it, as all messages were before: its markers counted)."""
    retrieval = SpanRecord(
        1,
        2,
        1,
        "retrieval kb",
        {
            semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OPERATION_RETRIEVAL,
            semconv.GEN_AI_RETRIEVAL_DOCUMENTS: json.dumps([{"id": "a", "score": 0.8}]),
        },
        end_time=1,
    )
    root = SpanRecord(1, 1, None, "rag", {}, end_time=4)
    thinking, answer = "Maybe [7] says so.", "Paris [a]."
    for attributes in (
        {
            "gen_ai.completion.0.role": "thinking",
            "gen_ai.completion.0.content": thinking,
            "gen_ai.completion.1.role": "assistant",
            "gen_ai.completion.1.content": answer,
        },
        {
            semconv.OPENINFERENCE_SPAN_KIND: semconv.OPENINFERENCE_KIND_LLM,
            "llm.output_messages.0.message.role": "thinking",
            "llm.output_messages.0.message.content": thinking,
            "llm.output_messages.1.message.role": "assistant",
            "llm.output_messages.1.message.content": answer,
        },
        {
            semconv.GEN_AI_OUTPUT_MESSAGES: json.dumps(
                [{"role": "thinking", "content": thinking}, {"role": "assistant", "content": answer}]
            )
        },
    ):
        signals = extract_signals([root, retrieval, SpanRecord(1, 3, 1, "chat", attributes, end_time=2)])
        assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 1, attributes
        assert signals.inputs["citationCount"] == 1 and signals.inputs["invalidCitationCount"] == 0


def test_a_legacy_completion_with_a_finish_reason_and_no_text_is_read_for_truncation() -> None:
    """opentelemetry-instrumentation-openai ``shared/completion_wrappers.py`` ``_set_completions`` sets
    ``gen_ai.completion.{i}.finish_reason`` and then ``.content`` from the choice's text, which
    ``_set_span_attribute`` leaves out when empty: a completion cut at once has a finish reason only."""
    completion = SpanRecord(
        1, 2, 1, "openai.completion", {"gen_ai.completion.0.finish_reason": "length"}, end_time=2
    )
    root = SpanRecord(1, 1, None, "rag", {semconv.RAG_ANSWER: True}, end_time=3)
    signals = extract_signals([root, completion])
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED] is True
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_FINISH_REASON] == "length"


@pytest.mark.parametrize(
    "reason_key", [semconv.SK_RESPONSE_FINISH_REASON, semconv.GEN_AI_RESPONSE_FINISH_REASONS]
)
def test_legacy_completions_beside_a_genai_finish_reason_keep_their_text(reason_key: str) -> None:
    """OpenLLMetry-style instrumentors write the text as ``gen_ai.completion.{i}.content`` and the reason under
    a GenAI key: traceloop's ``SpanAttributes.GEN_AI_RESPONSE_FINISH_REASON`` is the singular key Semantic
    Kernel writes too. The GenAI reader, first, took the reason for a generation with content capture off, and
    the text was never read: no citation input, though the answer cites. The span's text and both readers'
    reasons make one generation."""
    retriever = SpanRecord(
        1,
        2,
        1,
        "search",
        {
            semconv.GEN_AI_OPERATION_NAME: "retrieval",
            semconv.GEN_AI_RETRIEVAL_DOCUMENTS: '[{"id": "doc-1", "score": 0.9}, {"id": "doc-2", "score": 0.5}]',
        },
        end_time=1,
    )
    completion = SpanRecord(
        1,
        3,
        1,
        "openai.chat",
        {
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "Paris is the capital of France [doc-1].",
            reason_key: "length" if reason_key == semconv.SK_RESPONSE_FINISH_REASON else ("length",),
        },
        end_time=2,
    )
    root = SpanRecord(1, 1, None, "rag", {semconv.RAG_ANSWER: True}, end_time=3)
    signals = extract_signals([root, retriever, completion])
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 1
    assert signals.inputs["citationCount"] == 1 and signals.inputs["invalidCitationCount"] == 0
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED] is True
    assert signals.skipped == 0


def test_an_ai_sdk_operation_id_of_another_type_is_no_reason_to_lose_the_generation() -> None:
    """``ai.operationId`` is compared as a string only: a kvlist (a dict in the gateway) is unhashable, and the
    set lookup raised, which cost the span its GenAI generation (and counted a skip)."""
    chat = SpanRecord(
        1,
        2,
        1,
        "chat",
        {
            semconv.GEN_AI_OPERATION_NAME: "chat",
            semconv.AI_SDK_OPERATION_ID: {"name": "ai.generateText.doGenerate"},
            semconv.GEN_AI_OUTPUT_MESSAGES: json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": "Paris [1]."}]}]
            ),
        },
        end_time=2,
    )
    root = SpanRecord(1, 1, None, "rag", {semconv.RAG_ANSWER: True}, end_time=3)
    signals = extract_signals([root, chat])
    assert signals.skipped == 0
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 1


def test_openllmetry_vector_db_events(traced: tuple[Tracer, InMemorySpanExporter]) -> None:
    tracer, exporter = traced
    with tracer.start_as_current_span("workflow"):
        with tracer.start_as_current_span("chroma.query", kind=SpanKind.CLIENT) as span:
            span.set_attribute(semconv.DB_SYSTEM, "chroma")
            for doc_id, distance in (("x", 0.25), ("y", 1.0)):
                span.add_event(
                    semconv.DB_QUERY_RESULT,
                    {
                        semconv.DB_QUERY_RESULT_ID: doc_id,
                        semconv.DB_QUERY_RESULT_DISTANCE: distance,
                        semconv.DB_QUERY_RESULT_METADATA: json.dumps({"document_type": "faq"}),
                        semconv.DB_QUERY_RESULT_DOCUMENT: f"text of {doc_id}",
                    },
                )
        with tracer.start_as_current_span("milvus.search", kind=SpanKind.CLIENT) as span:
            span.set_attribute(semconv.DB_SYSTEM, "milvus")
            span.add_event(
                semconv.DB_SEARCH_RESULT,
                {semconv.DB_SEARCH_RESULT_ID: "y", semconv.DB_SEARCH_RESULT_SCORE: 0.7},
            )
        with tracer.start_as_current_span("openai.completion") as span:
            span.set_attribute("gen_ai.completion.0.role", "assistant")
            span.set_attribute("gen_ai.completion.0.content", "See [y].")
            span.set_attribute("gen_ai.completion.0.finish_reason", "stop")

    (group,) = find_answers(records_from_readable_spans(exporter.get_finished_spans()))
    signals = extract_signals(group.spans)
    assert_scoreable(signals.inputs)
    candidates = {c["documentId"]: c for c in signals.inputs["candidates"]}
    # Distances become similarities by the documented rule 1 / (1 + d).
    assert candidates["x"]["retrievalScores"] == {"chroma": pytest.approx(1 / 1.25)}
    assert candidates["y"]["retrievalScores"] == {"chroma": pytest.approx(0.5), "milvus": 0.7}
    assert candidates["x"]["documentType"] == "faq"
    assert signals.inputs["citationCount"] == 1


def test_a_retriever_span_joined_by_text_to_the_client_it_wraps_keeps_its_own_order() -> None:
    """Position pairs a wrapper with what it wraps only when nothing else does: here the client reports the text
    too (as the Chroma instrumentor does), so the retriever's documents join the client's by text, in the
    retriever's order, even though the two lists have the same length."""
    texts = {"a": "Paris is the capital of France.", "b": "Berlin is the capital of Germany."}
    retriever = SpanRecord(
        1,
        2,
        1,
        "vector_db_retrieve ChromaRetriever",
        {
            semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OPERATION_VECTOR_DB_RETRIEVE,
            semconv.TRACELOOP_ENTITY_OUTPUT: json.dumps(
                {"documents": [{"page_content": texts[key], "metadata": {}} for key in ("b", "a")]}
            ),
        },
        end_time=3,
    )
    client = SpanRecord(
        1,
        3,
        2,
        "chroma.query",
        {semconv.DB_SYSTEM: "chroma"},
        events=tuple(
            EventRecord(
                semconv.DB_QUERY_RESULT,
                {
                    semconv.DB_QUERY_RESULT_ID: key,
                    semconv.DB_QUERY_RESULT_DISTANCE: distance,
                    semconv.DB_QUERY_RESULT_DOCUMENT: texts[key],
                },
            )
            for key, distance in (("a", 0.25), ("b", 1.0))
        ),
        end_time=2,
    )
    root = SpanRecord(1, 1, None, "workflow", {}, end_time=4)

    signals = extract_signals([root, retriever, client])
    assert_scoreable(signals.inputs)
    assert [(c["documentId"], c["retrievalScores"]) for c in signals.inputs["candidates"]] == [
        ("b", {"chroma": pytest.approx(0.5)}),
        ("a", {"chroma": pytest.approx(0.8)}),
    ]


def test_retrieval_spans_whose_documents_cannot_be_read_are_reported_and_leave_citations_unjudged() -> None:
    documents = json.dumps([{"id": "a", "score": 0.9}, {"id": "b", "score": 0.7}])
    cut = SpanRecord(
        1,
        2,
        1,
        "retrieval kb",
        {
            semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OPERATION_RETRIEVAL,
            semconv.GEN_AI_RETRIEVAL_DOCUMENTS: documents[:20],  # what a value length limit leaves
        },
        end_time=1,
    )
    odd = SpanRecord(
        1,
        3,
        1,
        "vector_db_retrieve VectorStoreRetriever",
        {
            semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OPERATION_VECTOR_DB_RETRIEVE,
            semconv.TRACELOOP_ENTITY_OUTPUT: json.dumps({"documents": "a, b"}),
        },
        end_time=2,
    )
    readable = SpanRecord(
        1,
        4,
        1,
        "retrieval web",
        {
            semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OPERATION_RETRIEVAL,
            semconv.GEN_AI_RETRIEVAL_DOCUMENTS: json.dumps([{"id": "c", "score": 0.8}]),
        },
        end_time=3,
    )
    chat = SpanRecord(
        1,
        5,
        1,
        "chat model",
        {
            semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OPERATION_CHAT,
            semconv.GEN_AI_OUTPUT_MESSAGES: json.dumps([{"role": "assistant", "content": "A [1]. C [2]."}]),
        },
        end_time=4,
    )
    root = SpanRecord(1, 1, None, "rag", {}, end_time=5)

    signals = extract_signals([root, cut, odd, readable, chat])
    assert_scoreable(signals.inputs)
    assert [c["documentId"] for c in signals.inputs["candidates"]] == ["c"]
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_UNREADABLE_SPANS] == 2
    assert signals.skipped == 2
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
    assert "citationCount" not in signals.inputs and "invalidCitationCount" not in signals.inputs
    # Without the unreadable spans the same answer is judged as usual.
    judged = extract_signals([root, readable, chat])
    assert judged.inputs["citationCount"] == 1 and judged.inputs["invalidCitationCount"] == 1
    assert semconv.RAG_CONFIDENCE_RETRIEVAL_UNREADABLE_SPANS not in judged.diagnostics


def vector_db_span(system: str, event: str, results: list[dict[str, Any]]) -> SpanRecord:
    return SpanRecord(
        1,
        2,
        None,
        f"{system}.query",
        {semconv.DB_SYSTEM: system},
        events=tuple(EventRecord(event, attributes) for attributes in results),
    )


def test_vector_db_metadata_written_as_the_str_of_a_dict_is_read_as_a_python_literal() -> None:
    """opentelemetry-instrumentation-pinecone writes ``str(match["metadata"])`` and the Milvus one
    ``str(match["entity"])`` (Milvus also the distance as a string): Python literal syntax, not JSON."""
    pinecone_metadata = {
        "document_type": "policy",
        "last_updated": "2024-05-01",
        "authority_rank": 1,
        "is_amendment": True,
        "tags": ["hr", "leave"],
        "text": "Staff get 25 days' leave.",
    }
    pinecone = vector_db_span(
        "pinecone",
        semconv.DB_QUERY_RESULT,
        [
            {
                semconv.DB_QUERY_RESULT_ID: "doc-1",
                semconv.DB_QUERY_RESULT_SCORE: 0.91,
                semconv.DB_QUERY_RESULT_METADATA: str(pinecone_metadata),
            },
            # A match without metadata (include_metadata=False) is written as str(None).
            {
                semconv.DB_QUERY_RESULT_ID: "doc-2",
                semconv.DB_QUERY_RESULT_SCORE: 0.72,
                semconv.DB_QUERY_RESULT_METADATA: str(None),
            },
        ],
    )
    assert "'" in pinecone.events[0].attributes[semconv.DB_QUERY_RESULT_METADATA]  # really no JSON
    signals = extract_signals([pinecone])
    assert_scoreable(signals.inputs)
    assert signals.inputs["candidates"] == [
        {
            "retrievalScores": {"pinecone": 0.91},
            "combinedScore": 0.91,
            "documentId": "doc-1",
            "documentType": "policy",
            "lastUpdated": "2024-05-01",
            "authorityRank": 1,
            "isAmendment": True,
            "rank": 1,
        },
        {"retrievalScores": {"pinecone": 0.72}, "combinedScore": 0.72, "documentId": "doc-2", "rank": 2},
    ]
    assert signals.skipped == 0

    milvus = vector_db_span(
        "milvus",
        semconv.DB_SEARCH_RESULT,
        [
            {
                semconv.DB_SEARCH_RESULT_ID: 7,
                semconv.DB_SEARCH_RESULT_DISTANCE: str(0.25),
                semconv.DB_SEARCH_RESULT_ENTITY: str({"doc_type": "faq", "updated_at": None}),
            }
        ],
    )
    signals = extract_signals([milvus])
    # One hit has no order to tell a distance from a similarity: read as the similarity of MilvusClient's
    # default COSINE metric (tests/test_signals_vector_db.py).
    assert signals.inputs["candidates"] == [
        {
            "retrievalScores": {"milvus": 0.25},
            "combinedScore": 0.25,
            "documentId": "7",
            "documentType": "faq",
            "rank": 1,
        }
    ]
    assert signals.skipped == 0


@pytest.mark.parametrize(
    "metadata",
    [
        "{'a': __import__('os').getpid()}",  # a call: literal_eval refuses it, nothing runs
        "{'a': (lambda: 1)()}",
        "{'a': 1 + 2}",
        "{'a': " + "[" * 500 + "]" * 500 + "}",  # nesting beyond the parser's depth
        # Longer than the literal cap, never parsed: a Milvus entity holding its 1536-dimension vector (the
        # cap was 100,000 characters; ten such entities cost 60 ms of literal parsing per answer).
        "{'id': 7, 'vector': [" + ", ".join(["0.0123456789"] * 1536) + "]}",
        "{'a': 1",  # cut short
        "{1, 2}",  # a set, no mapping
        "page_content='a' metadata={}",
    ],
    ids=["call", "lambda", "arithmetic", "deep", "oversized", "truncated", "set", "repr of an object"],
)
def test_vector_db_metadata_that_is_no_literal_dict_is_skipped_and_counted(metadata: str) -> None:
    span = vector_db_span(
        "pinecone",
        semconv.DB_QUERY_RESULT,
        [
            {
                semconv.DB_QUERY_RESULT_ID: "doc-1",
                semconv.DB_QUERY_RESULT_SCORE: 0.5,
                semconv.DB_QUERY_RESULT_METADATA: metadata,
            }
        ],
    )
    signals = extract_signals([span])
    assert signals.inputs["candidates"] == [
        {"retrievalScores": {"pinecone": 0.5}, "combinedScore": 0.5, "documentId": "doc-1", "rank": 1}
    ]
    assert signals.skipped == 1


def test_openllmetry_task_span_with_stringified_documents_is_counted() -> None:
    output = json.dumps(
        {
            "documents": [
                "page_content='a' metadata={}",
                {"page_content": "b", "metadata": {"id": "b", "score": 0.5}},
            ]
        }
    )
    span = SpanRecord(
        1,
        2,
        None,
        "vector_db_retrieve VectorStoreRetriever",
        {
            semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OPERATION_VECTOR_DB_RETRIEVE,
            semconv.TRACELOOP_ENTITY_OUTPUT: output,
        },
    )
    signals = extract_signals([span])
    assert_scoreable(signals.inputs)
    assert signals.inputs["candidates"] == [
        {"retrievalScores": {"vectorstore": 0.5}, "combinedScore": 0.5, "documentId": "b", "rank": 1}
    ]
    assert signals.skipped == 1


def test_openinference_evaluator_span_and_structured_answer() -> None:
    answer = SpanRecord(1, 1, None, "answer", {semconv.RAG_ANSWER: True}, end_time=30)
    retriever = SpanRecord(
        1,
        2,
        1,
        "retrieve",
        {
            semconv.OPENINFERENCE_SPAN_KIND: "RETRIEVER",
            "retrieval.documents.0.document.id": "policy-7",
            "retrieval.documents.0.document.score": 0.8,
            "retrieval.documents.1.document.id": "policy-9",
            "retrieval.documents.1.document.score": 0.3,
        },
        end_time=10,
    )
    structured = json.dumps(
        {
            "answer": "Refunds take 14 days [policy-7].",
            "support_level": "HIGH",
            "citations": ["policy-7", "policy-2"],
        }
    )
    llm = SpanRecord(
        1,
        3,
        1,
        "llm",
        {
            semconv.OPENINFERENCE_SPAN_KIND: "LLM",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": f"```json\n{structured}\n```",
        },
        end_time=20,
    )
    evaluator = SpanRecord(
        1,
        4,
        1,
        "eval",
        {
            semconv.OPENINFERENCE_SPAN_KIND: "EVALUATOR",
            "evaluations.0.evaluation.name": "Groundedness",
            "evaluations.0.evaluation.score": 0.4,
            "evaluations.1.evaluation.name": "qa-relevance",
            "evaluations.1.evaluation.score": 0.75,
        },
        end_time=25,
    )
    signals = extract_signals([answer, retriever, llm, evaluator])
    assert_scoreable(signals.inputs)
    assert signals.inputs["supportLevel"] == "high" and signals.sources["supportLevel"] == "structured answer"
    assert signals.inputs["faithfulnessScore"] == 0.4
    assert signals.inputs["answerRelevanceScore"] == 0.75
    # The marker [policy-7] and the listed citations: policy-7 valid (once), policy-2 retrieved by nobody.
    assert signals.inputs["citationCount"] == 1
    assert signals.inputs["invalidCitationCount"] == 1
    assert signals.inputs["citationCoverageScore"] == 1.0
    assert "supportLevel" not in signals.derived


def test_reranker_span_output_documents() -> None:
    retriever = SpanRecord(
        1,
        2,
        1,
        "retrieve",
        {
            semconv.OPENINFERENCE_SPAN_KIND: "RETRIEVER",
            **{f"retrieval.documents.{i}.document.id": doc for i, doc in enumerate("abc")},
            **{f"retrieval.documents.{i}.document.score": s for i, s in enumerate((0.9, 0.8, 0.7))},
        },
        end_time=1,
    )
    reranker = SpanRecord(
        1,
        3,
        1,
        "rerank",
        {
            semconv.OPENINFERENCE_SPAN_KIND: "RERANKER",
            "reranker.output_documents.0.document.id": "c",
            "reranker.output_documents.0.document.score": 0.95,
            "reranker.output_documents.1.document.id": "a",
            "reranker.output_documents.1.document.score": 0.5,
        },
        end_time=2,
    )
    root = SpanRecord(1, 1, None, "root", end_time=3)
    signals = extract_signals([root, retriever, reranker])
    assert_scoreable(signals.inputs)
    assert signals.inputs["candidates"] == [
        {
            "retrievalScores": {"retrieve": 0.7, "rerank": 0.95},
            "combinedScore": 0.95,
            "documentId": "c",
            "rank": 1,
        },
        {
            "retrievalScores": {"retrieve": 0.9, "rerank": 0.5},
            "combinedScore": 0.5,
            "documentId": "a",
            "rank": 2,
        },
    ]
    custom = extract_signals([root, retriever, reranker], SignalOptions(rerank_method="cross-encoder"))
    assert set(custom.inputs["candidates"][0]["retrievalScores"]) == {"retrieve", "cross-encoder"}


def test_events_given_as_log_records_count_like_span_events() -> None:
    """The gateway attaches ``gen_ai.evaluation.result`` log records parented to a span as its events."""
    record = EventRecord(semconv.GEN_AI_EVALUATION_RESULT, evaluation("faithfulness", 0.3))
    answer = SpanRecord(1, 1, None, "answer", {semconv.RAG_ANSWER: True}, events=(record,))
    signals = extract_signals([answer])
    assert_scoreable(signals.inputs)
    assert signals.inputs["supportLevel"] == "low" and signals.inputs["faithfulnessScore"] == 0.3
