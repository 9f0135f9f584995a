"""Anthropic citations: Claude citing the ``search_result`` and ``document`` blocks of its request, under the
real Anthropic instrumentors.

The client is the real ``anthropic`` package; only its HTTP server is faked (a loopback server answering
``POST /v1/messages`` as the Messages API does, reached through ``base_url``), because no network is available
here. The server's JSON is built from the SDK's own types (``anthropic.types.Message``), so the client parses
it as it would parse Anthropic's answer. The tracers are the real ``openinference-instrumentation-anthropic``
and ``opentelemetry-instrumentation-anthropic`` (OpenLLMetry). The application's own retrieval is a GenAI
retrieval span written here, as an application reports its retriever. Expected inputs are written from what
the spans and the fake server say, never from the code under test.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest
from anthropic.types import (
    CitationCharLocation,
    CitationContentBlockLocation,
    CitationsSearchResultLocation,
    Message,
    TextBlock,
    Usage,
)
from openinference.instrumentation.anthropic import AnthropicInstrumentor as OpenInferenceInstrumentor
from opentelemetry import trace
from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor as OpenLLMetryInstrumentor
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence import compute_confidence, semconv
from rag_confidence.signals import (
    SpanRecord,
    extract_signals,
    find_answers,
    is_retrieval_span,
    may_hold_answer,
)
from tests.instrumented import (
    LoopbackFake,
    LoopbackService,
    assert_scored_as,
    records,
    scored,
    traced_fixture,
)

MODEL = "claude-sonnet-4-6"
QUESTION = "What is the capital of France, and which river is the longest there?"
PARIS = "Paris is the capital of France."
LOIRE = "The Loire is the longest river in France."
BERLIN = "Berlin is the capital of Germany."
# The application's retrieval: three hits with ids and scores (the GenAI retrieval span below reports them).
HITS = [
    {"id": "kb-paris", "score": 0.9, "content": PARIS},
    {"id": "kb-loire", "score": 0.6, "content": LOIRE},
    {"id": "kb-berlin", "score": 0.3, "content": BERLIN},
]
INTRO = "According to the sources, "
ANSWER = f"{INTRO}{PARIS} {LOIRE} Ask me more."


def search_results() -> list[dict[str, Any]]:
    """The hits as ``search_result`` blocks, each with the application's id as its ``source``."""
    return [
        {
            "type": "search_result",
            "source": hit["id"],
            "title": f"Atlas, {hit['id']}",
            "content": [{"type": "text", "text": hit["content"]}],
            "citations": {"enabled": True},
        }
        for hit in HITS
    ]


def documents() -> list[dict[str, Any]]:
    """The hits as ``document`` blocks: the first titled by its id, the second by a human title (known by its
    text only), plus a house style guide the application attaches itself (retrieved by nobody)."""
    return [
        {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": PARIS},
            "title": "kb-paris",
            "citations": {"enabled": True},
        },
        {
            "type": "document",
            "source": {"type": "content", "content": [{"type": "text", "text": LOIRE}]},
            "title": "Rivers of France",
            "citations": {"enabled": True},
        },
        {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "Answer politely. Ask me more."},
            "title": "Style guide",
            "citations": {"enabled": True},
        },
    ]


def search_result_message() -> Message:
    """Claude's answer citing the first two search results; the intro carries no citation."""
    return _message(
        [
            TextBlock(type="text", text=INTRO),
            TextBlock(
                type="text",
                text=PARIS,
                citations=[
                    CitationsSearchResultLocation(
                        type="search_result_location",
                        cited_text=PARIS,
                        source="kb-paris",
                        title="Atlas, kb-paris",
                        search_result_index=0,
                        start_block_index=0,
                        end_block_index=1,
                    )
                ],
            ),
            TextBlock(
                type="text",
                text=f" {LOIRE}",
                citations=[
                    CitationsSearchResultLocation(
                        type="search_result_location",
                        cited_text=LOIRE,
                        source="kb-loire",
                        title="Atlas, kb-loire",
                        search_result_index=1,
                        start_block_index=0,
                        end_block_index=1,
                    ),
                    # The same source again: one document cited, two markers.
                    CitationsSearchResultLocation(
                        type="search_result_location",
                        cited_text=LOIRE,
                        source="kb-loire",
                        title="Atlas, kb-loire",
                        search_result_index=1,
                        start_block_index=0,
                        end_block_index=1,
                    ),
                ],
            ),
            TextBlock(type="text", text=" Ask me more."),
        ]
    )


def document_message(cite_style_guide: bool) -> Message:
    """Claude's answer citing the first document by characters, the second by its content block and, when
    asked, the style guide (a source the application's retrieval never returned)."""
    tail_citations = (
        [
            CitationCharLocation(
                type="char_location",
                cited_text="Ask me more.",
                document_index=2,
                document_title="Style guide",
                start_char_index=17,
                end_char_index=29,
            )
        ]
        if cite_style_guide
        else None
    )
    return _message(
        [
            TextBlock(type="text", text=INTRO),
            TextBlock(
                type="text",
                text=PARIS,
                citations=[
                    CitationCharLocation(
                        type="char_location",
                        cited_text=PARIS,
                        document_index=0,
                        document_title="kb-paris",
                        start_char_index=0,
                        end_char_index=len(PARIS),
                    )
                ],
            ),
            TextBlock(
                type="text",
                text=f" {LOIRE}",
                citations=[
                    CitationContentBlockLocation(
                        type="content_block_location",
                        cited_text=LOIRE,
                        document_index=1,
                        document_title="Rivers of France",
                        start_block_index=0,
                        end_block_index=1,
                    )
                ],
            ),
            TextBlock(type="text", text=" Ask me more.", citations=tail_citations),
        ]
    )


def _message(content: list[TextBlock]) -> Message:
    return Message(
        id="msg_1",
        type="message",
        role="assistant",
        model=MODEL,
        content=content,
        stop_reason="end_turn",
        stop_sequence=None,
        usage=Usage(input_tokens=120, output_tokens=40),
    )


class FakeAnthropic(LoopbackFake):
    """A loopback server answering every ``POST /v1/messages`` with one message (no network here): as JSON, or
    for a request with ``"stream": true`` as the Messages API's server-sent events (:func:`message_events`)."""

    def __init__(self) -> None:
        self.message = search_result_message()
        self.requests: list[dict[str, Any]] = []
        self.service = LoopbackService(self._respond)

    def _respond(self, path: str, body: bytes) -> tuple[str, bytes]:
        request = json.loads(body)
        self.requests.append(request)
        if request.get("stream"):
            return "text/event-stream", message_events(self.message)
        return "application/json", json.dumps(
            self.message.model_dump(mode="json", exclude_none=True)
        ).encode()

    def client(self) -> anthropic.Anthropic:
        return anthropic.Anthropic(api_key="test-key", base_url=self.service.url, max_retries=0)


def message_events(message: Message) -> bytes:
    """``message`` streamed as the Messages API streams a cited answer: ``message_start`` with no content, then
    per text block a ``content_block_start`` with empty text, its text in ``text_delta`` pieces and each
    citation in a ``citations_delta`` after them, ``content_block_stop``; ``message_delta`` with the stop reason
    and ``message_stop``."""
    whole = message.model_dump(mode="json", exclude_none=True)
    blocks = whole.pop("content")
    start = {**whole, "content": [], "stop_reason": None, "usage": {"input_tokens": 120, "output_tokens": 1}}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(blocks):
        events.append(
            {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}
        )
        text = block["text"]
        deltas = [{"type": "text_delta", "text": text[i : i + 12]} for i in range(0, len(text), 12)]
        deltas += [{"type": "citations_delta", "citation": c} for c in block.get("citations") or ()]
        events += [{"type": "content_block_delta", "index": index, "delta": delta} for delta in deltas]
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": 40},
        }
    )
    events.append({"type": "message_stop"})
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


@pytest.fixture()
def claude() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as fake:
        yield fake


openinference = traced_fixture(OpenInferenceInstrumentor)
openllmetry = traced_fixture(OpenLLMetryInstrumentor)


def request(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    """The Messages API request: the content ``blocks`` (search results or documents), then the question."""
    return {
        "model": MODEL,
        "max_tokens": 512,
        "messages": [{"role": "user", "content": [*blocks, {"type": "text", "text": QUESTION}]}],
    }


def retrieve(tracer: trace.Tracer) -> None:
    """The application's own retrieval, reported on a GenAI retrieval span."""
    with tracer.start_as_current_span("retrieval kb") as span:
        span.set_attribute(semconv.GEN_AI_OPERATION_NAME, "retrieval")
        span.set_attribute("gen_ai.data_source.id", "kb")
        span.set_attribute("gen_ai.retrieval.documents", json.dumps(HITS))


def answer(client: anthropic.Anthropic, provider: TracerProvider, blocks: list[dict[str, Any]]) -> str:
    """The application: a request span, its own retrieval reported on a GenAI retrieval span, then Claude."""
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("POST /ask"):
        retrieve(tracer)
        response = client.messages.create(**request(blocks))
    return "".join(block.text for block in response.content if block.type == "text")


def answer_streamed(
    client: anthropic.Anthropic, provider: TracerProvider, blocks: list[dict[str, Any]], how: str
) -> str:
    """:func:`answer` with the answer streamed, as chat front ends do: ``client.messages.stream(...)`` (the
    SDK's helper) or ``client.messages.create(..., stream=True)`` (the raw events), read to the end."""
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("POST /ask"):
        retrieve(tracer)
        if how == "messages.stream":
            with client.messages.stream(**request(blocks)) as stream:
                return "".join(stream.text_stream)
        events = client.messages.create(**request(blocks), stream=True)
        return "".join(
            event.delta.text
            for event in events
            if event.type == "content_block_delta" and event.delta.type == "text_delta"
        )


def candidates() -> list[dict[str, Any]]:
    """The retrieval as candidates, written out: method ``kb`` (the data source), scores as reported."""
    return [
        {"documentId": "kb-paris", "retrievalScores": {"kb": 0.9}, "combinedScore": 0.9, "rank": 1},
        {"documentId": "kb-loire", "retrievalScores": {"kb": 0.6}, "combinedScore": 0.6, "rank": 2},
        {"documentId": "kb-berlin", "retrievalScores": {"kb": 0.3}, "combinedScore": 0.3, "rank": 3},
    ]


def two_cited() -> dict[str, Any]:
    """The inputs of the answer citing the first two retrieved documents (Paris and the Loire), none invalid:
    "According to the sources, Paris ... France." and "The Loire ..." cited, "Ask me more." not."""
    return {
        "candidates": candidates(),
        "citationCount": 2,
        "invalidCitationCount": 0,
        "citationCoverageScore": 2 / 3,
        "supportLevel": "medium",
    }


def _llm(exporter: InMemorySpanExporter) -> ReadableSpan:
    (span,) = [
        span for span in exporter.get_finished_spans() if span.name not in ("POST /ask", "retrieval kb")
    ]
    return span


# -- what the instrumentors record -----------------------------------------------------------------------------


def test_openinference_records_the_message_with_its_citations_and_the_request_with_its_documents(
    claude: FakeAnthropic, openinference: tuple[InMemorySpanExporter, TracerProvider]
) -> None:
    exporter, provider = openinference
    claude.message = document_message(cite_style_guide=False)
    assert answer(claude.client(), provider, documents()) == ANSWER
    assert claude.requests[0]["messages"][0]["content"][:3] == documents()

    attributes = dict(_llm(exporter).attributes or {})
    assert attributes[semconv.OPENINFERENCE_SPAN_KIND] == "LLM"
    content = json.loads(attributes[semconv.OI_OUTPUT_VALUE])["content"]
    assert [block["citations"] is not None for block in content] == [False, True, True, False]
    assert content[1]["citations"][0]["document_index"] == 0
    request = json.loads(attributes[semconv.OI_INPUT_VALUE])
    assert request["messages"][0]["content"][:3] == documents()
    # The citations once more in the metadata, by text block.
    assert sorted(json.loads(attributes["metadata"])["citations"]) == ["1", "2"]


def test_openllmetry_records_the_documents_but_not_the_citations(
    claude: FakeAnthropic, openllmetry: tuple[InMemorySpanExporter, TracerProvider]
) -> None:
    """opentelemetry-instrumentation-anthropic: the document blocks in ``gen_ai.input.messages``, the output
    text parts without their citations. The answer is scored from the application's retrieval, with no
    citation input."""
    exporter, provider = openllmetry
    assert answer(claude.client(), provider, search_results()) == ANSWER

    attributes = dict(_llm(exporter).attributes or {})
    parts = json.loads(attributes["gen_ai.input.messages"])[0]["parts"]
    assert [part["type"] for part in parts] == ["search_result"] * 3 + ["text"]
    output = json.loads(attributes[semconv.GEN_AI_OUTPUT_MESSAGES])
    assert "".join(part["content"] for part in output[0]["parts"]) == ANSWER
    assert "citations" not in attributes[semconv.GEN_AI_OUTPUT_MESSAGES]

    (group,) = find_answers(records(exporter))
    signals = extract_signals(group.spans)
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 0
    assert "citationCount" not in signals.inputs and "citationCoverageScore" not in signals.inputs


# -- scoring what OpenInference records ------------------------------------------------------------------------


def test_search_result_citations_count_by_source_against_the_application_retrieval(
    claude: FakeAnthropic, openinference: tuple[InMemorySpanExporter, TracerProvider]
) -> None:
    """Three citations of two search results, by the ids the retrieval span reports: two documents cited, none
    invalid; the sentences of the cited blocks (2 of 3: the intro sentence holds Paris) covered."""
    exporter, provider = openinference
    answer(claude.client(), provider, search_results())

    spans = records(exporter)
    llm = next(span for span in spans if span.span_id == _llm(exporter).context.span_id)
    # The Claude call is a generation, not a retrieval: the documents are the application's.
    assert not is_retrieval_span(llm) and not may_hold_answer(llm.attributes)
    (group,) = find_answers(spans)
    assert group.answer.name == "POST /ask" and group.rule == "root"
    signals = extract_signals(group.spans)
    expected = two_cited()
    assert signals.inputs == expected
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 3
    assert semconv.RAG_CONFIDENCE_CITATION_UNMATCHED_SOURCES not in signals.diagnostics

    (answer_span,) = scored(exporter)
    card = compute_confidence(expected)
    assert answer_span.name == "POST /ask"
    assert answer_span.attributes[semconv.RAG_CONFIDENCE_TOTAL] == card.total
    assert (
        card.model_dump(by_alias=True)["dimensions"]["grounding"]
        == (compute_confidence(signals.inputs).model_dump(by_alias=True)["dimensions"]["grounding"])
    )


def test_document_citations_match_by_title_or_text(
    claude: FakeAnthropic, openinference: tuple[InMemorySpanExporter, TracerProvider]
) -> None:
    """The first document is titled by its id, the second known by its text alone: both are retrieved ones."""
    exporter, provider = openinference
    claude.message = document_message(cite_style_guide=False)
    answer(claude.client(), provider, documents())

    assert_scored_as(exporter, two_cited())


def test_a_cited_document_nobody_retrieved_is_no_invalid_citation_and_leaves_the_count_out(
    claude: FakeAnthropic, openinference: tuple[InMemorySpanExporter, TracerProvider]
) -> None:
    """The style guide is a source the request held (so the citation is no invalid one) that no retrieval
    returned: the retrieved documents cited (2) would understate what was cited, so no ``citationCount``; every
    sentence is backed by a cited block."""
    exporter, provider = openinference
    claude.message = document_message(cite_style_guide=True)
    answer(claude.client(), provider, documents())

    expected = {
        "candidates": candidates(),
        "invalidCitationCount": 0,
        "citationCoverageScore": 1.0,
        "supportLevel": "medium",
    }
    signals = assert_scored_as(exporter, expected)
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 3
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_UNMATCHED_SOURCES] == 1


def test_citations_of_documents_nobody_retrieved_still_give_coverage_without_a_retrieval_span(
    claude: FakeAnthropic, openinference: tuple[InMemorySpanExporter, TracerProvider]
) -> None:
    """The application hands Claude documents of its own (no retriever, so no retrieval span) and marks the
    request span as its answer. Claude's citations name sources its request held: never invalid, and the text
    they back is covered, whatever was (not) retrieved; with no retrieved document to match them against, no
    ``citationCount``. (An answer with no retrieval span derives no input from ``[n]`` markers, which it could
    only judge against nothing; a response's own citations are not judged against the retrieval.)"""
    exporter, provider = openinference
    claude.message = document_message(cite_style_guide=False)
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("POST /ask") as request_span:
        request_span.set_attribute(semconv.RAG_ANSWER, True)
        claude.client().messages.create(**request(documents()))

    assert not any(is_retrieval_span(span) for span in records(exporter))
    expected = {
        "candidates": [],
        "invalidCitationCount": 0,
        # "According to the sources, Paris ... France." and "The Loire ..." cited; "Ask me more." not.
        "citationCoverageScore": 2 / 3,
        "supportLevel": "medium",
    }
    signals = assert_scored_as(exporter, expected)
    # Two document citations, neither matching a retrieved document (there is none).
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_UNMATCHED_SOURCES] == 2


def test_markers_beside_a_responses_citations_without_a_retrieval_span_derive_nothing() -> None:
    """A ``[1]`` in the text of the same answer can only be judged against a retrieval: with none, nothing is
    derived (every marker would be invalid), citations or not."""
    output = json.loads(document_message(cite_style_guide=False).model_dump_json())
    output["content"][-1]["text"] = " Ask me more [1]."
    signals = extract_signals(
        [SpanRecord(1, 1, None, "POST /ask", {"rag.answer": True}, end_time=10), _span(output)]
    )
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 3
    assert {"citationCount", "invalidCitationCount", "citationCoverageScore"}.isdisjoint(signals.inputs)


# -- streamed answers -------------------------------------------------------------------------------------------

STREAMS = ["messages.stream", "create(stream=True)"]


@pytest.mark.parametrize("how", STREAMS)
@pytest.mark.parametrize("cited", ["search results", "documents"])
def test_a_streamed_answer_scores_as_the_whole_message(
    claude: FakeAnthropic,
    openinference: tuple[InMemorySpanExporter, TracerProvider],
    how: str,
    cited: str,
) -> None:
    """Streamed, the citations arrive as ``citations_delta`` events beside the text pieces. The OpenInference
    tracer (3.1.0) accumulates the events with the SDK's own ``accumulate_event`` for both stream APIs and
    records the message it builds, citations included, as ``output.value``, and the request (with its document
    blocks) as ``input.value``: the same inputs as the call answered whole (the two tests above), and the same
    stop reason."""
    exporter, provider = openinference
    blocks = search_results() if cited == "search results" else documents()
    if cited == "documents":
        claude.message = document_message(cite_style_guide=False)
    assert answer_streamed(claude.client(), provider, blocks, how) == ANSWER
    assert claude.requests[0]["stream"] is True

    attributes = dict(_llm(exporter).attributes or {})
    content = json.loads(attributes[semconv.OI_OUTPUT_VALUE])["content"]
    assert [bool(block.get("citations")) for block in content] == [False, True, True, False]
    assert attributes["llm.finish_reason"] == "end_turn"
    assert json.loads(attributes[semconv.OI_INPUT_VALUE])["messages"][0]["content"][:3] == blocks

    signals = assert_scored_as(exporter, two_cited())
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_FINISH_REASON] == "end_turn"
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED] is False


@pytest.mark.parametrize("how", STREAMS)
def test_openllmetry_records_a_streamed_answer_as_a_whole_one_without_its_citations(
    claude: FakeAnthropic, openllmetry: tuple[InMemorySpanExporter, TracerProvider], how: str
) -> None:
    """opentelemetry-instrumentation-anthropic 0.62 on a stream: the text joined into ``gen_ai.output.messages``
    and the finish reason, no citations (as for a whole answer). No citation input is derived: the scorecard
    is the one of an answer without markers, not of one citing nothing (``citationCount`` 0)."""
    exporter, provider = openllmetry
    assert answer_streamed(claude.client(), provider, search_results(), how) == ANSWER

    attributes = dict(_llm(exporter).attributes or {})
    output = json.loads(attributes[semconv.GEN_AI_OUTPUT_MESSAGES])
    assert "".join(part["content"] for part in output[0]["parts"]) == ANSWER
    assert "citations" not in attributes[semconv.GEN_AI_OUTPUT_MESSAGES]
    assert tuple(attributes["gen_ai.response.finish_reasons"]) == ("stop",)

    signals = assert_scored_as(exporter, {"candidates": candidates(), "supportLevel": "medium"})
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 0


# -- the reader on recorded attributes -------------------------------------------------------------------------


def _span(output: dict[str, Any], request: dict[str, Any] | None = None) -> SpanRecord:
    attributes: dict[str, Any] = {
        semconv.OPENINFERENCE_SPAN_KIND: "LLM",
        semconv.OI_OUTPUT_VALUE: json.dumps(output),
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "".join(block["text"] for block in output["content"]),
    }
    if request is not None:
        attributes[semconv.OI_INPUT_VALUE] = json.dumps(request)
    return SpanRecord(1, 3, 1, "messages.create", attributes, end_time=5)


def _retrieval() -> list[SpanRecord]:
    return [
        SpanRecord(1, 1, None, "POST /ask", {}, end_time=10),
        SpanRecord(
            1,
            2,
            1,
            "retrieval kb",
            {
                semconv.GEN_AI_OPERATION_NAME: "retrieval",
                "gen_ai.data_source.id": "kb",
                "gen_ai.retrieval.documents": json.dumps(HITS),
            },
            end_time=3,
        ),
    ]


def test_a_document_index_is_no_position_into_the_retrieval() -> None:
    """Without the request (hidden ``input.value``), a document citation is known by its ``document_title``
    only: index 0 is not the first retrieved document, so a human title leaves the source unmatched."""
    output = json.loads(document_message(cite_style_guide=False).model_dump_json())
    signals = extract_signals([*_retrieval(), _span(output)])
    # kb-paris is named by its title; "Rivers of France" matches no id and its text is unknown.
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_UNMATCHED_SOURCES] == 1
    assert "citationCount" not in signals.inputs
    assert signals.inputs["invalidCitationCount"] == 0


def test_a_document_whose_title_disagrees_with_the_citation_is_not_trusted() -> None:
    """The request's document at ``document_index`` has another title than the citation names: the index
    counts blocks the reader does not (say, a newer block type), so only the citation's own title names it."""
    output = json.loads(document_message(cite_style_guide=False).model_dump_json())
    shifted = [
        {"type": "document", "source": {"type": "text", "data": BERLIN}, "title": "kb-berlin"},
        *documents(),
    ]
    request = {"messages": [{"role": "user", "content": shifted}]}
    signals = extract_signals([*_retrieval(), _span(output, request)])
    # Index 0 is kb-berlin by position, but the citation says kb-paris: read as kb-paris. Index 1 says
    # "Rivers of France" and holds kb-paris: only the title is left, which matches nothing.
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_UNMATCHED_SOURCES] == 1


def test_web_search_citations_and_plain_messages_are_not_read() -> None:
    output = {
        "type": "message",
        "content": [
            {
                "type": "text",
                "text": PARIS,
                "citations": [
                    {
                        "type": "web_search_result_location",
                        "url": "https://example.org",
                        "title": "x",
                        "cited_text": PARIS,
                        "encrypted_index": "e",
                    }
                ],
            }
        ],
    }
    signals = extract_signals([*_retrieval(), _span(output)])
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 0
    assert "citationCoverageScore" not in signals.inputs


def test_another_models_answer_quoting_a_citations_list_is_no_skipped_value() -> None:
    """Any LLM span's ``output.value`` may hold ``"citations": [{`` in text that is no JSON (an OpenAI answer
    showing a JSON shape): the Anthropic reader finds no Message there, and that is no bad value to count."""
    text = 'Reply as {"answer": "...", "citations": [{"id": "kb-paris"}]}, citing [1]. Paris is the capital.'
    span = SpanRecord(
        1,
        3,
        1,
        "ChatCompletion",
        {
            semconv.OPENINFERENCE_SPAN_KIND: "LLM",
            semconv.OI_OUTPUT_VALUE: text,
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": text,
        },
        end_time=5,
    )
    signals = extract_signals([*_retrieval(), span])
    assert semconv.RAG_CONFIDENCE_SIGNALS_SKIPPED not in signals.diagnostics
    assert signals.inputs["citationCount"] == 1


def test_one_long_document_cited_thousands_of_times_is_hashed_once() -> None:
    """A request with one document of most of the JSON limit and a response citing it in every citation it can
    hold (span data a sender shaped): each citation names the document by its text, whose key is worked out
    once, not once per citation (12 s per span before)."""
    request = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "document", "source": {"type": "text", "data": "x" * 900_000}},
                    {
                        "type": "document",
                        "source": {
                            "type": "content",
                            "content": [{"type": "text", "text": "y" * 40_000}] * 2,
                        },
                    },
                ],
            }
        ]
    }
    citations = [{"type": "char_location", "document_index": 0}] * 5_000 + [
        {"type": "content_block_location", "document_index": 1, "start_block_index": 0, "end_block_index": 1}
    ] * 5_000
    output = {"type": "message", "content": [{"type": "text", "text": PARIS, "citations": citations}]}
    span = _span(output, request)
    started = time.process_time()
    signals = extract_signals([*_retrieval(), span])
    assert time.process_time() - started < 2.0
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_UNMATCHED_SOURCES] == 10_000
