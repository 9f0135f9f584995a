"""Hosted retrieval: OpenAI's Responses API with the ``file_search`` tool, under the real OpenAI instrumentors.

The client is the real ``openai`` package; only its HTTP server is faked (``httpx.MockTransport``), because no
network is available here. The server's JSON is built from the openai package's own Response types, so the
client parses it as it would parse OpenAI's answer. The tracers are the real
``openinference-instrumentation-openai`` and ``opentelemetry-instrumentation-openai`` (OpenLLMetry); the third,
``opentelemetry-instrumentation-openai-v2``, wraps Chat Completions and Embeddings only and records no span for
the Responses API (docs/signals.md). Expected inputs are written from the results the fake server
returns, never from the code under test.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseCreatedEvent,
    ResponseFileSearchToolCall,
    ResponseTextDeltaEvent,
)
from openai.types.responses.response import IncompleteDetails
from openai.types.responses.response_file_search_tool_call import Result
from openai.types.responses.response_output_text import AnnotationFileCitation
from openinference.instrumentation.openai import OpenAIInstrumentor as OpenInferenceOpenAIInstrumentor
from opentelemetry import trace
from opentelemetry.instrumentation.openai import OpenAIInstrumentor as OpenLLMetryOpenAIInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence import compute_confidence, semconv
from rag_confidence.signals import (
    SpanRecord,
    extract_signals,
    find_answers,
    is_retrieval_span,
    may_hold_answer,
)
from tests.fake_openai import mock_openai, openai_response, output_message
from tests.instrumented import (
    assert_feedback_grades_the_answer,
    assert_scored_as,
    bare_call_signals,
    candidates,
    openinference_retrieval,
    records,
    scored,
    traced_fixture,
)

QUESTION = "What is the capital of France, and which river is the longest there?"
ANSWER = "Paris is the capital of France. The Loire is the longest river in France."
VECTOR_STORE = "vs_atlas"
# What the vector store holds and the fake server's file_search finds: (file_id, filename, score, chunk text,
# file attributes). Two chunks of one file: the candidate is the file, at its best chunk's score.
RESULTS = [
    ("file-atlas", "atlas.md", 0.91, "Paris is the capital of France.", {"document_type": "atlas"}),
    (
        "file-rivers",
        "rivers.md",
        0.74,
        "The Loire is the longest river in France.",
        {"document_type": "guide"},
    ),
    ("file-atlas", "atlas.md", 0.52, "Berlin is the capital of Germany.", {"document_type": "atlas"}),
]
TOOLS: Any = [{"type": "file_search", "vector_store_ids": [VECTOR_STORE]}]
INCLUDE: Any = ["file_search_call.results"]


def file_search_response(
    *,
    results: bool = True,
    cited: tuple[str, ...] = ("file-atlas", "file-rivers"),
    response_id: str = "resp_1",
) -> Response:
    """A Response as OpenAI returns it for a file_search call: the search item (with ``results`` only when the
    request included them), then the message with its file citations."""
    return openai_response(
        [
            ResponseFileSearchToolCall(
                id="fs_1",
                type="file_search_call",
                status="completed",
                queries=["capital of France", "longest river in France"],
                results=[
                    Result(file_id=file_id, filename=name, score=score, text=text, attributes=attributes)
                    for file_id, name, score, text, attributes in RESULTS
                ]
                if results
                else None,
            ),
            output_message(
                ANSWER,
                [
                    AnnotationFileCitation(
                        type="file_citation", file_id=file_id, filename=f"{file_id}.md", index=index
                    )
                    for file_id, index in zip(cited, (31, len(ANSWER), len(ANSWER)), strict=False)
                ],
            ),
        ],
        response_id=response_id,
        tools=TOOLS,
    )


def fake_openai(response: Response, requests: list[dict[str, Any]], *, stream: bool = False) -> openai.OpenAI:
    """The real client over a fake server (no network here) answering every request with ``response``."""

    def handle(request: httpx.Request) -> httpx.Response:
        requests.append(json.loads(request.content))
        if not stream:
            return httpx.Response(200, json=response.model_dump(mode="json"))
        created = response.model_copy(update={"status": "in_progress", "output": []})
        events = [
            ResponseCreatedEvent(type="response.created", response=created, sequence_number=0),
            ResponseTextDeltaEvent(
                type="response.output_text.delta",
                item_id="msg_1",
                output_index=1,
                content_index=0,
                delta=ANSWER,
                logprobs=[],
                sequence_number=1,
            ),
            ResponseCompletedEvent(type="response.completed", response=response, sequence_number=2),
        ]
        body = "".join(f"event: {event.type}\ndata: {event.model_dump_json()}\n\n" for event in events)
        return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})

    return mock_openai(handle)


def ask(client: openai.OpenAI, *, include: bool = True) -> str:
    response = client.responses.create(
        model="gpt-4.1-mini", input=QUESTION, tools=TOOLS, **({"include": INCLUDE} if include else {})
    )
    return response.output_text


def expected_inputs(cited: tuple[str, ...] = ("file-atlas", "file-rivers")) -> dict[str, Any]:
    """What the file_search results say, written out: one candidate per file at its best chunk's score."""
    best: dict[str, tuple[float, dict[str, Any]]] = {}
    for file_id, _, score, _, attributes in RESULTS:
        if file_id not in best or score > best[file_id][0]:
            best[file_id] = (score, attributes)
    candidates = []
    for rank, (file_id, (score, attributes)) in enumerate(
        sorted(best.items(), key=lambda item: -item[1][0]), start=1
    ):
        candidates.append(
            {
                "retrievalScores": {"file_search": score},
                "combinedScore": score,
                "documentId": file_id,
                "documentType": attributes["document_type"],
                "rank": rank,
            }
        )
    valid = {file_id for file_id in cited if file_id in best}
    return {
        "candidates": candidates,
        "citationCount": len(valid),
        "invalidCitationCount": len(set(cited) - valid),
        "supportLevel": "medium",  # the default: nothing on these spans says more
    }


openinference = traced_fixture(OpenInferenceOpenAIInstrumentor, SimpleSpanProcessor)
# Exporting through ConfidenceSpanProcessor, as an application would.
openinference_scored = traced_fixture(OpenInferenceOpenAIInstrumentor)
openllmetry = traced_fixture(OpenLLMetryOpenAIInstrumentor)


# -- what the instrumentors record -----------------------------------------------------------------------------


def test_openinference_records_the_whole_response_results_and_annotations_included(
    openinference: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """One LLM span, no retriever span; its ``output.value`` is the Response JSON, with the file_search results
    (only because the request asked for them) and the file citations."""
    exporter, _ = openinference
    requests: list[dict[str, Any]] = []
    assert ask(fake_openai(file_search_response(), requests)) == ANSWER
    assert requests[0]["include"] == INCLUDE

    (span,) = exporter.get_finished_spans()
    attributes = dict(span.attributes or {})
    assert attributes[semconv.OPENINFERENCE_SPAN_KIND] == "LLM"
    recorded = json.loads(attributes[semconv.OI_OUTPUT_VALUE])
    search, message = recorded["output"]
    assert search["type"] == "file_search_call"
    assert [(r["file_id"], r["score"], r["text"]) for r in search["results"]] == [
        (file_id, score, text) for file_id, _, score, text, _ in RESULTS
    ]
    assert [a["file_id"] for a in message["content"][0]["annotations"]] == ["file-atlas", "file-rivers"]
    # The message text is also in the flattened output messages, which the answer text is read from.
    assert ANSWER in attributes.values()


def test_openllmetry_records_the_text_but_neither_results_nor_citations(
    openllmetry: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """opentelemetry-instrumentation-openai: one ``chat`` span with the output text and finish reason
    ``tool_call``; nothing of what file_search found, nothing of the annotations. No retrieval, no answer, no
    scorecard."""
    exporter, _ = openllmetry
    ask(fake_openai(file_search_response(), []))

    (span,) = exporter.get_finished_spans()
    attributes = dict(span.attributes or {})
    assert attributes[semconv.GEN_AI_OPERATION_NAME] == "chat"
    assert json.loads(attributes[semconv.GEN_AI_OUTPUT_MESSAGES])[0]["parts"] == [
        {"type": "text", "content": ANSWER}
    ]
    flat = json.dumps(attributes, default=str)
    assert "file-atlas" not in flat and "file_citation" not in flat
    assert find_answers(records(exporter)) == []
    assert scored(exporter) == []


# -- scoring what OpenInference records ------------------------------------------------------------------------


def test_a_bare_file_search_call_is_its_own_answer(
    openinference: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """No span of the application's: the LLM span is the trace's root, a retrieval and a generation at once,
    and so the answer (rule (c) without the step exception)."""
    exporter, _ = openinference
    ask(fake_openai(file_search_response(), []))

    signals = bare_call_signals(exporter)
    assert signals.inputs == expected_inputs()
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_SPANS] == 1
    assert compute_confidence(signals.inputs).total == compute_confidence(expected_inputs()).total


def test_the_span_processor_scores_the_bare_call_and_the_application_span_around_one(
    openinference_scored: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """End to end through ConfidenceSpanProcessor: a bare call's LLM span carries the scorecard; inside a span of
    the application's, that span (the local root) does, and the LLM span does not."""
    exporter, provider = openinference_scored
    expected = compute_confidence(expected_inputs())

    ask(fake_openai(file_search_response(), []))
    (answer,) = scored(exporter)
    assert answer.name == "Response" and answer.parent is None
    assert answer.attributes is not None
    assert answer.attributes[semconv.RAG_CONFIDENCE_TOTAL] == expected.total
    assert answer.attributes[semconv.RAG_CONFIDENCE_CANDIDATES] == 2

    exporter.clear()
    with provider.get_tracer("app").start_as_current_span("POST /ask"):
        ask(fake_openai(file_search_response(), []))
    (answer,) = scored(exporter)
    assert answer.name == "POST /ask"
    assert answer.attributes is not None
    assert answer.attributes[semconv.RAG_CONFIDENCE_TOTAL] == expected.total
    assert len(exporter.get_finished_spans()) == 2


def test_a_streamed_file_search_call_is_read_from_the_completed_response(
    openinference: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """With ``stream=True`` the tracer records the ``response.completed`` event's Response: the same inputs."""
    exporter, _ = openinference
    client = fake_openai(file_search_response(), [], stream=True)
    stream = client.responses.create(
        model="gpt-4.1-mini", input=QUESTION, tools=TOOLS, include=INCLUDE, stream=True
    )
    deltas = [event.delta for event in stream if event.type == "response.output_text.delta"]
    assert "".join(deltas) == ANSWER

    (group,) = find_answers(records(exporter))
    assert extract_signals(group.spans).inputs == expected_inputs()


def test_a_citation_of_a_file_the_search_did_not_return_is_invalid(
    openinference: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    exporter, _ = openinference
    cited = ("file-atlas", "file-elsewhere")
    ask(fake_openai(file_search_response(cited=cited), []))

    (group,) = find_answers(records(exporter))
    signals = extract_signals(group.spans)
    assert signals.inputs == expected_inputs(cited)
    assert signals.inputs["invalidCitationCount"] == 1
    assert "invalid-citations" in [w.code for w in compute_confidence(signals.inputs).meta.warnings]


def test_without_include_the_search_is_known_but_not_what_it_found(
    openinference: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """OpenAI returns ``results: null`` unless the request includes ``file_search_call.results``. The answer is
    still found and scored, without candidates; the retrieval counts as unreadable, so the file citations are
    not judged against documents nobody knows."""
    exporter, _ = openinference
    requests: list[dict[str, Any]] = []
    ask(fake_openai(file_search_response(results=False), requests), include=False)
    assert "include" not in requests[0]

    (group,) = find_answers(records(exporter))
    signals = extract_signals(group.spans)
    assert signals.inputs == {"candidates": [], "supportLevel": "medium"}
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_UNREADABLE_SPANS] == 1
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
    assert "missing-candidates" in [w.code for w in compute_confidence(signals.inputs).meta.warnings]


def test_feedback_on_the_call_is_about_its_answer(
    openinference: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """Span feedback on a retriever grades the retrieval; on a call that retrieved and answered, it grades the
    answer (here an OpenInference evaluation a judge attached to the recorded span)."""
    exporter, _ = openinference
    ask(fake_openai(file_search_response(), []))
    (call,) = records(exporter)
    assert call.parent_span_id is None
    assert_feedback_grades_the_answer(call)


def test_a_tool_span_around_a_file_search_call_answers(
    openinference: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """A tool root is a bare step unless a generation lies beneath it: a file_search call is one."""
    exporter, provider = openinference
    with provider.get_tracer("app").start_as_current_span(
        "lookup", attributes={"openinference.span.kind": "TOOL"}
    ):
        ask(fake_openai(file_search_response(), []))

    (group,) = find_answers(records(exporter))
    assert group.answer.name == "lookup"
    assert extract_signals(group.spans).inputs == expected_inputs()


def test_a_response_that_did_not_search_is_no_retrieval(
    openinference: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """The tool offered but not called, and an answer that merely quotes the item type: no retrieval."""
    exporter, _ = openinference
    response = file_search_response()
    quoting = response.model_copy(
        update={"output": [output_message('Items look like {"type": "file_search_call"}.')]}
    )
    ask(fake_openai(quoting, []))
    (span,) = records(exporter)
    assert not is_retrieval_span(span) and not may_hold_answer(span.attributes)
    assert find_answers([span]) == []


def langchain_llm_result(response: Response) -> str:
    """``output.value`` as the OpenInference LangChain tracer writes it for a ``ChatOpenAI`` on the Responses API
    (``json.dumps`` of the run's ``LLMResult``): the built-in tool calls in the message's ``tool_outputs``
    (langchain-openai's default output format), the Response's own fields in ``response_metadata``."""
    message = {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain", "schema", "messages", "AIMessage"],
        "kwargs": {
            "content": response.output_text,
            "additional_kwargs": {
                "tool_outputs": [
                    item.model_dump() for item in response.output if item.type == "file_search_call"
                ]
            },
            "response_metadata": {"id": response.id, "object": "response", "model": response.model},
        },
    }
    generation = {"text": response.output_text, "type": "ChatGeneration", "message": message}
    return json.dumps({"generations": [[generation]], "llm_output": None, "run": None, "type": "LLMResult"})


def test_a_framework_llm_span_holding_the_search_in_its_own_json_is_no_response(
    openinference: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """LangChain's LLM span around the OpenAI call holds the ``file_search_call`` item inside its ``LLMResult``,
    not as an output item of a Response. Read as a Response it was a retrieval that could not be read: no
    citation input was derived for the whole answer (the OpenAI span beneath had every result) and a value was
    counted as skipped. Only the OpenAI instrumentor's span is the search."""
    exporter, _ = openinference
    response = file_search_response()
    ask(fake_openai(response, []))
    (openai_span,) = records(exporter)
    trace_id = openai_span.trace_id
    chain = SpanRecord(
        trace_id, 1, None, "RunnableSequence", {"openinference.span.kind": "CHAIN"}, end_time=(1 << 62)
    )
    langchain_llm = SpanRecord(
        trace_id,
        2,
        1,
        "ChatOpenAI",
        {
            "openinference.span.kind": "LLM",
            "llm.model_name": "gpt-4.1-mini",
            "output.value": langchain_llm_result(response),
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": response.output_text,
        },
        end_time=(1 << 62) - 1,
    )
    nested = dataclasses.replace(openai_span, parent_span_id=2, parent_is_remote=False)

    assert not is_retrieval_span(langchain_llm) and not may_hold_answer(langchain_llm.attributes)
    (group,) = find_answers([chain, langchain_llm, nested])
    assert group.answer is chain
    signals = extract_signals(group.spans)
    assert signals.skipped == 0
    assert semconv.RAG_CONFIDENCE_RETRIEVAL_UNREADABLE_SPANS not in signals.diagnostics
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_SPANS] == 1
    assert signals.inputs["candidates"] == expected_inputs()["candidates"]


# -- the workaround where the spans do not carry the results ----------------------------------------------------


def record_file_search(response: Any, tracer: trace.Tracer) -> None:
    """The documented workaround: put what file_search found on a GenAI retrieval span of the application's."""
    documents = [
        {"id": result.file_id, "score": result.score, "content": result.text, "metadata": result.attributes}
        for item in response.output
        if item.type == "file_search_call"
        for result in item.results or ()
    ]
    with tracer.start_as_current_span("retrieval file_search") as span:
        span.set_attribute(semconv.GEN_AI_OPERATION_NAME, semconv.GEN_AI_OPERATION_RETRIEVAL)
        span.set_attribute(semconv.GEN_AI_DATA_SOURCE_ID, "file_search")
        span.set_attribute(semconv.GEN_AI_RETRIEVAL_DOCUMENTS, json.dumps(documents))


def test_under_openllmetry_a_retrieval_span_of_your_own_is_scored(
    openllmetry: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """OpenLLMetry's span says nothing of the search: record its results yourself (with ``include=``) and the
    application's span is scored on them, the answer text coming from OpenLLMetry's span. The file citations
    are not on any span: count them yourself (``record_signals``) if they should count."""
    exporter, provider = openllmetry
    tracer = provider.get_tracer("app")
    client = fake_openai(file_search_response(), [])
    with tracer.start_as_current_span("POST /ask"):
        response = client.responses.create(model="gpt-4.1-mini", input=QUESTION, tools=TOOLS, include=INCLUDE)
        record_file_search(response, tracer)

    expected = expected_inputs()
    del expected["citationCount"], expected["invalidCitationCount"]
    assert_scored_as(exporter, expected, "POST /ask")


def test_a_value_cut_short_is_a_search_only_where_the_response_itself_holds_one() -> None:
    """``output.value`` cut by a value length limit parses as nothing. A Response cut inside its results still
    ran the search (read as one whose results are unreadable); a framework's JSON holding a
    ``file_search_call`` deeper down (LangChain's ``LLMResult`` of a Responses call, the item in
    ``tool_outputs``) is no Response whether it is cut or not."""
    from rag_confidence.signals.hosted import holds_file_search

    response = file_search_response().model_dump_json()
    cut_response = response[: response.index('"results"') + 40]
    framework = json.dumps(
        {
            "generations": [
                [
                    {
                        "text": ANSWER,
                        "message": {
                            "kwargs": {
                                "content": ANSWER,
                                "additional_kwargs": {"tool_outputs": [json.loads(response)["output"][0]]},
                            }
                        },
                    }
                ]
            ],
            "llm_output": {"model_name": "gpt-4o"},
        }
    )
    cut_framework = framework[: framework.index('"results"') + 40]

    def llm(output: str) -> dict[str, Any]:
        return {
            semconv.OPENINFERENCE_SPAN_KIND: semconv.OPENINFERENCE_KIND_LLM,
            semconv.OI_OUTPUT_VALUE: output,
        }

    for text in (cut_response, cut_framework):
        with pytest.raises(ValueError):
            json.loads(text)
    assert holds_file_search(llm(response)) and holds_file_search(llm(cut_response))
    assert not holds_file_search(llm(framework))
    assert not holds_file_search(llm(cut_framework))


def test_a_response_cut_at_max_output_tokens_is_truncated(
    openinference: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """A Response that ran out of ``max_output_tokens`` comes back ``status = incomplete`` with
    ``incomplete_details.reason = max_output_tokens``: OpenInference writes no ``llm.finish_reason`` for it,
    only the Response as ``output.value``, which says the answer was cut short. (OpenLLMetry 0.62 records no
    span at all for a Response that is not ``completed``.)"""
    exporter, provider = openinference
    tracer = provider.get_tracer("app")
    documents = [("doc-atlas", 0.91, "Paris is the capital of France.")]
    cut = openai_response([output_message("Paris is the capital of")]).model_copy(
        update={
            "status": "incomplete",
            "incomplete_details": IncompleteDetails(reason="max_output_tokens"),
        }
    )
    with tracer.start_as_current_span("POST /ask"):
        openinference_retrieval(tracer, documents)
        fake_openai(cut, []).responses.create(model="gpt-4.1-mini", input=QUESTION, max_output_tokens=5)

    (group,) = find_answers(records(exporter))
    signals = extract_signals(group.spans)
    assert signals.inputs["candidates"] == candidates(documents, "app")
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED] is True
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_FINISH_REASON] == "max_output_tokens"
