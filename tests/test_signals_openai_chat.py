"""The commonest RAG shape: the application retrieves with its own code and answers with OpenAI's Chat
Completions API (``client.chat.completions.create``), under the real OpenAI tracers.

The client is the real ``openai`` package (sync and async, plain and ``stream=True``); only its HTTP server is
faked (``httpx.MockTransport``), because no network is available here. The server's JSON is validated by the
openai package's own ``ChatCompletion`` / ``ChatCompletionChunk`` types, so the client parses it as it would
parse OpenAI's answer. The tracers are the real ``openinference-instrumentation-openai`` and
``opentelemetry-instrumentation-openai`` (OpenLLMetry); the third, ``opentelemetry-instrumentation-openai-v2``,
cannot be installed beside the other test packages (docs/signals.md, *OpenAI Chat Completions*). The
retrieval is the application's own OpenInference ``RETRIEVER`` span. Expected inputs are written from the
documents and the answer text the fake server returns, never from the code under test.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import openai
import pytest
from openinference.instrumentation.openai import OpenAIInstrumentor as OpenInferenceOpenAIInstrumentor
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.openai import OpenAIInstrumentor as OpenLLMetryOpenAIInstrumentor
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence import compute_confidence, semconv
from rag_confidence.otel import last_scorecard, record_signals, scored_answer
from rag_confidence.signals import extract_signals, find_answers
from tests.fake_openai import chat_completion, chat_completion_events, mock_async_openai, mock_openai
from tests.instrumented import (
    assert_scored_as,
    candidates,
    confidence_processor,
    openinference_retrieval,
    records,
    scored,
    traced,
)
from tests.test_gateway_support import DownstreamReceiver, attributes_of, by_name, downstream, running_gateway

__all__ = ["downstream"]  # the fixture, imported for pytest

QUESTION = "What is the capital of France, and which river is the longest there?"
ANSWER = "Paris is the capital of France [1]. The Loire is the longest river in France [2]."
# What the application's retriever finds: (id, score, text).
DOCUMENTS = [
    ("doc-atlas", 0.91, "Paris is the capital of France."),
    ("doc-rivers", 0.74, "The Loire is the longest river in France."),
    ("doc-berlin", 0.52, "Berlin is the capital of Germany."),
]
MODEL = "gpt-4o-mini"
TOOLS: Any = [
    {
        "type": "function",
        "function": {
            "name": "search_docs",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
        },
    }
]
TOOL_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "search_docs", "arguments": json.dumps({"query": "capital of France"})},
}


def expected_inputs(text: str | None = ANSWER) -> dict[str, Any]:
    """The retrieval's candidates, written out, and what ``[1]``/``[2]`` in ``text`` cite: both documents the
    markers name (positions 1 and 2 of the retrieval), every sentence cited."""
    inputs: dict[str, Any] = {
        "candidates": candidates(DOCUMENTS, "app"),
        "supportLevel": "medium",  # the default: nothing on these spans says more
    }
    if text is not None:
        inputs.update(citationCount=2, invalidCitationCount=0, citationCoverageScore=1.0)
    return inputs


def retrieve(tracer: trace.Tracer) -> str:
    """The application's own retrieval, reported on an OpenInference RETRIEVER span; the context it returns
    numbers the documents as the model is asked to cite them."""
    openinference_retrieval(tracer, DOCUMENTS)
    return "\n".join(f"[{index}] {text}" for index, (_, _, text) in enumerate(DOCUMENTS, start=1))


# -- the fake server -------------------------------------------------------------------------------------------


Responder = Callable[[dict[str, Any]], Any]


def _handler(respond: Responder, requests: list[dict[str, Any]]) -> Callable[[httpx.Request], httpx.Response]:
    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        requests.append(body)
        if body.get("stream"):
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            answer = respond(body)
            text, finish = answer if isinstance(answer, tuple) else (answer, "stop")
            return httpx.Response(
                200,
                text=chat_completion_events(text, finish=finish, usage=usage),
                headers={"content-type": "text/event-stream"},
            )
        return httpx.Response(200, json=respond(body))

    return handle


def fake_openai(respond: Responder, requests: list[dict[str, Any]] | None = None) -> openai.OpenAI:
    """The real client over a fake server (no network here)."""
    return mock_openai(_handler(respond, [] if requests is None else requests))


def fake_async_openai(respond: Responder) -> openai.AsyncOpenAI:
    return mock_async_openai(_handler(respond, []))


def messages(context: str) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": f"Answer from these sources and cite them as [n]:\n{context}"},
        {"role": "user", "content": QUESTION},
    ]


# -- the tracers ------------------------------------------------------------------------------------------------


TRACERS = {
    "openinference": OpenInferenceOpenAIInstrumentor,
    "openllmetry": OpenLLMetryOpenAIInstrumentor,
}


@pytest.fixture(scope="module", params=sorted(TRACERS))
def instrumented(request: pytest.FixtureRequest) -> Iterator[tuple[InMemorySpanExporter, TracerProvider]]:
    """Each real tracer on a provider that exports through ConfidenceSpanProcessor, as an application would.

    Module-scoped, so every OpenInference test runs before OpenLLMetry is instrumented: OpenLLMetry 0.62's
    ``uninstrument()`` leaves its wrapper around ``Completions.create`` in place (still exporting to the
    provider it was given), and OpenInference spans made later start beneath its leftover span, outside the
    request's trace.
    """
    yield from traced(TRACERS[request.param](), confidence_processor)


@pytest.fixture()
def traced_app(
    instrumented: tuple[InMemorySpanExporter, TracerProvider],
) -> Iterator[tuple[InMemorySpanExporter, TracerProvider]]:
    instrumented[0].clear()
    yield instrumented
    # A stream a test left open ends its span when collected: here, not in the next test.
    gc.collect()


def ask(client: openai.OpenAI, tracer: trace.Tracer, mode: str) -> str:
    """The application: retrieve, then answer with Chat Completions, plainly or consuming a stream chunk by
    chunk."""
    context = retrieve(tracer)
    if mode == "sync":
        return (
            client.chat.completions.create(model=MODEL, messages=messages(context)).choices[0].message.content
            or ""
        )
    options: Any = {"include_usage": True} if mode == "stream_usage" else openai.omit
    stream = client.chat.completions.create(
        model=MODEL, messages=messages(context), stream=True, stream_options=options
    )
    text = ""
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
    return text


def answer_with(traced_app: tuple[InMemorySpanExporter, TracerProvider], text: str) -> InMemorySpanExporter:
    """The application's request ``POST /ask`` answered by the fake model with ``text``; its exporter."""
    exporter, provider = traced_app
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("POST /ask"):
        ask(fake_openai(lambda body: chat_completion(text)), tracer, "sync")
    return exporter


# -- sync, async, streamed ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sync", "stream", "stream_usage"])
def test_a_chat_completion_answer_is_scored_on_the_apps_retrieval(
    traced_app: tuple[InMemorySpanExporter, TracerProvider], mode: str
) -> None:
    """The request span around retrieval and completion is the answer (rule 2): candidates from the app's
    retriever span, citations from the completion's text, finish reason ``stop`` (with and without the usage
    chunk that ``include_usage`` adds after the finish reason)."""
    exporter, provider = traced_app
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("POST /ask"):
        assert (
            ask(
                fake_openai(lambda body: chat_completion(ANSWER) if not body.get("stream") else ANSWER),
                tracer,
                mode,
            )
            == ANSWER
        )

    diagnostics = assert_scored_as(exporter, expected_inputs(), "POST /ask").diagnostics
    assert diagnostics[semconv.RAG_CONFIDENCE_GENERATION_FINISH_REASON] == "stop"
    assert diagnostics[semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED] is False


def test_an_async_chat_completion_is_scored_alike(
    traced_app: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    exporter, provider = traced_app
    tracer = provider.get_tracer("app")

    async def answer() -> str:
        with tracer.start_as_current_span("POST /ask"):
            context = retrieve(tracer)
            client = fake_async_openai(lambda body: chat_completion(ANSWER))
            response = await client.chat.completions.create(model=MODEL, messages=messages(context))
            return response.choices[0].message.content or ""

    # In a copy of the context: OpenLLMetry's async wrapper (0.62) leaves a span current in the context it ran
    # in, under which a later test's OpenInference spans would start.
    assert contextvars.copy_context().run(asyncio.run, answer()) == ANSWER
    assert_scored_as(exporter, expected_inputs(), "POST /ask")


@pytest.mark.parametrize("mode", ["sync", "stream"])
def test_a_completion_cut_at_max_tokens_is_truncated(
    traced_app: tuple[InMemorySpanExporter, TracerProvider], mode: str
) -> None:
    """``finish_reason = length`` (``max_tokens`` reached) reaches the truncation diagnostic under both
    tracers, streamed or not."""
    exporter, provider = traced_app
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("POST /ask"):
        ask(
            fake_openai(
                lambda body: (
                    (ANSWER, "length") if body.get("stream") else chat_completion(ANSWER, finish="length")
                )
            ),
            tracer,
            mode,
        )

    (group,) = find_answers(records(exporter))
    signals = extract_signals(group.spans)
    assert signals.inputs == expected_inputs()
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED] is True
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_FINISH_REASON] == "length"
    (answer,) = scored(exporter)
    assert answer.attributes is not None
    assert answer.attributes[semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED] is True


# -- a stream left early ----------------------------------------------------------------------------------------


def test_a_stream_left_early_and_closed(
    traced_app: tuple[InMemorySpanExporter, TracerProvider], request: pytest.FixtureRequest
) -> None:
    """The application stops reading once it has its first sentence and closes the stream. OpenInference ends
    the completion's span on ``close()`` with the text streamed so far and no finish reason; OpenLLMetry (0.62)
    does not end it at all while the stream object lives, so the request span is scored without the
    completion: no answer text, no citation input (pinned here; see docs/signals.md)."""
    exporter, provider = traced_app
    tracer = provider.get_tracer("app")
    streamed = ANSWER.split("[1].")[0] + "[1]. "
    with tracer.start_as_current_span("POST /ask"):
        context = retrieve(tracer)
        stream = fake_openai(lambda body: ANSWER).chat.completions.create(
            model=MODEL, messages=messages(context), stream=True
        )
        text = ""
        for chunk in stream:
            text += (chunk.choices[0].delta.content or "") if chunk.choices else ""
            if "[1]." in text:
                break
        stream.close()
    assert text == streamed

    (group,) = find_answers(records(exporter))
    signals = extract_signals(group.spans)
    if "openinference" in request.node.callspec.id:
        expected = expected_inputs()
        expected.update(citationCount=1, citationCoverageScore=1.0)  # one sentence, citing [1]
        assert signals.inputs == expected
        assert semconv.RAG_CONFIDENCE_GENERATION_FINISH_REASON not in signals.diagnostics
    else:
        assert [span.name for span in group.spans] == ["retrieve", "POST /ask"]
        assert signals.inputs == expected_inputs(None)
        assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 0
    del stream


# -- the decorator and record_signals --------------------------------------------------------------------------


def test_scored_answer_around_the_function_sync_and_streamed(
    traced_app: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """``@scored_answer`` around the answer function (a plain one, and a generator the web layer streams
    from): its span is the answer, ``record_signals`` values join what the spans say."""
    exporter, provider = traced_app
    tracer = provider.get_tracer("app")
    client = fake_openai(lambda body: chat_completion(ANSWER) if not body.get("stream") else ANSWER)
    expected = {**expected_inputs(), "hasConflict": False}

    @scored_answer(tracer_provider=provider)
    def answer(question: str) -> str:
        record_signals(has_conflict=False)
        return ask(client, tracer, "sync")

    @scored_answer(tracer_provider=provider)
    def answer_stream(question: str) -> Iterator[str]:
        record_signals(has_conflict=False)
        context = retrieve(tracer)
        for chunk in client.chat.completions.create(model=MODEL, messages=messages(context), stream=True):
            if chunk.choices and chunk.choices[0].delta.content:
                yield chunk.choices[0].delta.content

    for run in (lambda: answer(QUESTION), lambda: "".join(answer_stream(QUESTION))):
        exporter.clear()
        assert run() == ANSWER
        card = last_scorecard()
        assert card is not None and card.total == compute_confidence(expected).total
        (answer_span,) = scored(exporter)
        assert answer_span.attributes is not None
        assert answer_span.attributes[semconv.RAG_CONFIDENCE_TOTAL] == card.total
        (group,) = find_answers(records(exporter))
        assert group.rule == "marked"
        assert extract_signals(group.spans).inputs == expected


# -- tool calling -----------------------------------------------------------------------------------------------


def tool_calling_answer(client: openai.OpenAI, tracer: trace.Tracer) -> str:
    """The model asks for ``search_docs``; the application runs its retrieval, sends the result back as the tool
    message, and the second completion answers."""
    conversation: list[Any] = [{"role": "user", "content": QUESTION}]
    first = client.chat.completions.create(model=MODEL, messages=conversation, tools=TOOLS)
    message = first.choices[0].message
    assert first.choices[0].finish_reason == "tool_calls" and message.tool_calls and not message.content
    conversation.append(message.model_dump(exclude_none=True))
    for call in message.tool_calls:
        conversation.append({"role": "tool", "tool_call_id": call.id, "content": retrieve(tracer)})
    second = client.chat.completions.create(model=MODEL, messages=conversation, tools=TOOLS)
    return second.choices[0].message.content or ""


def tool_server(body: dict[str, Any]) -> dict[str, Any]:
    if any(message.get("role") == "tool" for message in body["messages"]):
        return chat_completion(ANSWER)
    return chat_completion(None, finish="tool_calls", tool_calls=[TOOL_CALL])


def test_tool_calling_rag_the_second_completion_answers_on_the_tools_documents(
    traced_app: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """Two completions in the request: the first only asks for the tool (no text, finish reason
    ``tool_calls``), the second answers. The request span is the answer, its candidates are the documents the
    tool's retrieval returned, the answer text and finish reason are the second completion's."""
    exporter, provider = traced_app
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("POST /ask"):
        assert tool_calling_answer(fake_openai(tool_server), tracer) == ANSWER

    diagnostics = assert_scored_as(exporter, expected_inputs(), "POST /ask").diagnostics
    assert diagnostics[semconv.RAG_CONFIDENCE_GENERATION_FINISH_REASON] == "stop"
    assert diagnostics[semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED] is False


def test_a_tool_call_completion_is_no_answer_text(
    traced_app: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """The answering completion is streamed and the application stops reading after its first sentence without
    closing the stream: that completion's span is still open when the request span ends, so the tool-call
    completion is the only generation. Its OpenInference span has an output message without content (tool
    calls only) and the whole ChatCompletion JSON in ``output.value``; that JSON was read as the answer text (a
    structured answer without an answer field: no markers) and hid the answer the application recorded on its
    own span. Now a completion of tool calls only is a generation without text, and the request span's
    ``output.value`` is the answer text."""
    exporter, provider = traced_app
    tracer = provider.get_tracer("app")
    client = fake_openai(lambda body: ANSWER if body.get("stream") else tool_server(body))
    with tracer.start_as_current_span(
        "POST /ask", attributes={"openinference.span.kind": "CHAIN"}
    ) as request_span:
        conversation: list[Any] = [{"role": "user", "content": QUESTION}]
        first = client.chat.completions.create(model=MODEL, messages=conversation, tools=TOOLS)
        conversation.append(first.choices[0].message.model_dump(exclude_none=True))
        conversation.append({"role": "tool", "tool_call_id": "call_1", "content": retrieve(tracer)})
        stream = client.chat.completions.create(model=MODEL, messages=conversation, stream=True)
        text = ""
        for chunk in stream:
            text += (chunk.choices[0].delta.content or "") if chunk.choices else ""
            if "[1]." in text:
                break
        request_span.set_attribute(semconv.OI_OUTPUT_VALUE, text)

    (group,) = find_answers(records(exporter))
    assert len(group.spans) == 3  # the tool-call completion, the retrieval, the request: no second completion
    signals = extract_signals(group.spans)
    expected = expected_inputs()
    expected.update(citationCount=1, citationCoverageScore=1.0)  # "Paris is the capital of France [1]. "
    assert signals.inputs == expected
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 1
    # The tool-call completion's finish reason is the last one known: no truncation.
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED] is False
    stream.close()


# -- n > 1 and structured answers -------------------------------------------------------------------------------


def two_choices(body: dict[str, Any]) -> dict[str, Any]:
    """``n=2``: the answer, then an unsure choice citing a source it was not given, cut at max tokens."""
    return chat_completion(ANSWER, alternatives=(("I am not sure about this [7].", "length"),))


def test_with_n_choices_the_first_is_the_answer(
    traced_app: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """``n=2``: the tracers record every choice (OpenInference one output message each, OpenLLMetry one
    ``gen_ai.output.messages`` entry each and a finish reason each). The application answers with
    ``choices[0]``; the second choice (here unsure, citing a source it was not given, and cut at max tokens)
    is an alternative nobody was shown. It was joined to the answer: an invalid citation, a sentence without
    a valid marker, and (OpenLLMetry) the answer marked truncated."""
    exporter, provider = traced_app
    tracer = provider.get_tracer("app")
    client = fake_openai(two_choices)
    with tracer.start_as_current_span("POST /ask"):
        context = retrieve(tracer)
        response = client.chat.completions.create(model=MODEL, messages=messages(context), n=2)
    assert response.choices[0].message.content == ANSWER and len(response.choices) == 2

    diagnostics = assert_scored_as(exporter, expected_inputs(), "POST /ask").diagnostics
    assert diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
    assert diagnostics[semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED] is False
    assert diagnostics[semconv.RAG_CONFIDENCE_GENERATION_FINISH_REASON] == "stop"


STRUCTURED_FORMAT: Any = {
    "type": "json_schema",
    "json_schema": {
        "name": "cited_answer",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {
                "answer": {"type": "string"},
                "citations": {"type": "array", "items": {"type": "string"}},
                "support_level": {"type": "string", "enum": ["high", "medium", "low"]},
            },
            "required": ["answer", "citations", "support_level"],
            "additionalProperties": False,
        },
    },
}


def test_a_json_schema_answer_is_read_as_a_structured_answer(
    traced_app: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """``response_format`` with a JSON schema: the message content is the JSON object, read through the key map
    (docs/signals.md, *structured answers*): the answer field searched for markers, the citations list by id,
    the stated support level."""
    exporter, provider = traced_app
    tracer = provider.get_tracer("app")
    structured = {
        "answer": "Paris is the capital of France [1].",
        "citations": ["doc-atlas", "doc-made-up"],
        "support_level": "high",
    }
    client = fake_openai(lambda body: chat_completion(json.dumps(structured)))
    with tracer.start_as_current_span("POST /ask"):
        context = retrieve(tracer)
        client.chat.completions.create(
            model=MODEL, messages=messages(context), response_format=STRUCTURED_FORMAT
        )

    expected = expected_inputs(None)
    # [1] and "doc-atlas" name one document; "doc-made-up" was not retrieved.
    expected.update(supportLevel="high", citationCount=1, invalidCitationCount=1, citationCoverageScore=1.0)
    assert_scored_as(exporter, expected, "POST /ask")


CODE_ANSWER = (
    "Take the first row with `rows[0]` [1].\n"
    "\n"
    "```python\n"
    "rows = load_rows()\n"
    "print(rows[2])\n"
    "```\n"
    "\n"
    "The Loire is the longest river in France [2]."
)


def test_code_in_an_answer_holds_no_citation_markers_and_no_sentences(
    traced_app: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """An answer about code quotes code: ``rows[0]`` (inline) and ``rows[2]`` (in a fenced block) index lists,
    they cite nothing (``[0]`` would count as an invalid citation), and the block's lines are program text, not
    sentences of the answer left uncited. Only the two prose sentences count, each citing its document."""
    exporter, provider = traced_app
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("POST /ask"):
        ask(fake_openai(lambda body: chat_completion(CODE_ANSWER)), tracer, "sync")

    signals = assert_scored_as(exporter, expected_inputs(), "POST /ask")
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2


@pytest.mark.parametrize(
    "text",
    [
        # Abbreviations and initials end no sentence.
        "Mr. Dupont says Paris is the capital of France [1]. The Loire is the longest river in France [2]. "
        "Nothing else is known.",
        "According to the U.S. atlas Paris is the capital of France [1]. The Loire, e.g. at Tours, is the "
        "longest river in France [2]. Nothing else is known.",
        # A numbered list's enumerators are no sentences of their own.
        "1. Paris is the capital of France [1].\n2. The Loire is the longest river in France [2].\n"
        "3. Nothing else is known.",
        # Markers right after the full stop (as Wikipedia places them) end the sentence they cite.
        "Paris is the capital of France.[1] The Loire is the longest river in France.[2] Nothing else is "
        "known.",
        "Paris is the capital of France.[1] Nothing else is known. The Loire is the longest river in "
        "France.[2]",
    ],
)
def test_coverage_counts_the_sentences_a_reader_sees(
    traced_app: tuple[InMemorySpanExporter, TracerProvider], text: str
) -> None:
    """Three sentences, two of them cited: coverage two thirds, however the sentences are written."""
    exporter = answer_with(traced_app, text)

    expected = expected_inputs()
    expected["citationCoverageScore"] = 2 / 3
    assert_scored_as(exporter, expected, "POST /ask")


@pytest.mark.parametrize(
    "text",
    [
        "Paris is the capital of France [1]. The Loire is the longest river in France. Nothing else is known."
        "\n\n**Sources:**\n[1] Atlas of France",
        "Paris is the capital of France.[^1] The Loire is the longest river in France. Nothing else is known."
        "\n\n[^1]: Atlas of France. Second edition.",
        "Paris is the capital of France [1]. The Loire is the longest river in France. Nothing else is known."
        "\n\nSources: [1]",
    ],
)
def test_a_list_of_sources_after_the_answer_is_no_sentences_of_it(
    traced_app: tuple[InMemorySpanExporter, TracerProvider], text: str
) -> None:
    """The entries of a sources list under its heading, and Markdown footnote definitions, name sources: they
    are no claims of the answer, cited or not. Three sentences, the first cited: coverage one third."""
    exporter = answer_with(traced_app, text)

    expected = expected_inputs()
    expected.update(citationCount=1, citationCoverageScore=1 / 3)
    assert_scored_as(exporter, expected, "POST /ask")


@pytest.mark.parametrize(
    "text",
    [
        "Paris is the capital of France [Source 1, Source 2]. The Loire is the longest river in France [doc-2].",
        "Paris is the capital of France [Doc 1; Doc 2]. The Loire is the longest river in France [Doc 2].",
        "Paris is the capital of France [doc-atlas, doc-rivers]. The Loire is the longest river in France "
        "[doc-rivers].",
    ],
)
def test_a_list_of_prefixed_references_in_one_marker_cites_each(
    traced_app: tuple[InMemorySpanExporter, TracerProvider], text: str
) -> None:
    """``[Source 1, Source 2]`` lists references as ``[1, 2]`` does: both documents cited, every sentence."""
    exporter = answer_with(traced_app, text)

    assert_scored_as(exporter, expected_inputs(), "POST /ask")


def test_a_prefixed_reference_naming_a_document_id_cites_it(
    traced_app: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """A prompt that labels each document ``Source: <id>`` gets ``[Source: doc-atlas]`` back: the id after
    the prefix names the document, as ``[doc-atlas]`` would."""
    exporter = answer_with(
        traced_app,
        "Paris is the capital of France [Source: doc-atlas]. "
        "The Loire is the longest river in France [source: DOC-RIVERS].",
    )

    assert_scored_as(exporter, expected_inputs(), "POST /ask")


def test_bracketed_ids_listed_together_or_holding_spaces_cite_their_documents(
    traced_app: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """Ids of no prefixed shape (a hash, a file name with spaces) are markers when bracketed as they are, alone
    or several in one bracket: ``[8f3c2a, Rivers of France.pdf]`` cites both documents."""
    exporter, provider = traced_app
    tracer = provider.get_tracer("app")
    documents = [
        ("8f3c2a", 0.91, "Paris is the capital of France."),
        ("Rivers of France.pdf", 0.74, "The Loire is the longest river in France."),
    ]
    text = (
        "Paris is the capital of France [8f3c2a, Rivers of France.pdf]. "
        "The Loire is the longest river in France [Rivers of France.pdf]."
    )
    client = fake_openai(lambda body: chat_completion(text))
    with tracer.start_as_current_span("POST /ask"):
        openinference_retrieval(tracer, documents)
        client.chat.completions.create(model=MODEL, messages=messages("..."))

    expected = {
        "candidates": candidates(documents, "app"),
        "supportLevel": "medium",
        "citationCount": 2,
        "invalidCitationCount": 0,
        "citationCoverageScore": 1.0,
    }
    assert_scored_as(exporter, expected, "POST /ask")


@pytest.mark.parametrize("fence", ["```json", "```JSON", "```Json "])
def test_a_json_answer_in_a_fenced_block_is_read_as_a_structured_answer(
    traced_app: tuple[InMemorySpanExporter, TracerProvider], fence: str
) -> None:
    """Without ``response_format`` a model asked for JSON often fences it, with the info string in any case."""
    exporter, provider = traced_app
    tracer = provider.get_tracer("app")
    structured = {"answer": "Paris is the capital of France [1].", "support_level": "high"}
    client = fake_openai(lambda body: chat_completion(f"{fence}\n{json.dumps(structured)}\n```"))
    with tracer.start_as_current_span("POST /ask"):
        client.chat.completions.create(model=MODEL, messages=messages(retrieve(tracer)))

    expected = expected_inputs(None)
    expected.update(supportLevel="high", citationCount=1, invalidCitationCount=0, citationCoverageScore=1.0)
    assert_scored_as(exporter, expected, "POST /ask")


def test_a_fenced_json_answer_after_a_line_of_prose_is_read_as_a_structured_answer(
    traced_app: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """A model asked for JSON without ``response_format`` may lead in with a line before the fence."""
    exporter, provider = traced_app
    tracer = provider.get_tracer("app")
    structured = {"answer": "Paris is the capital of France [1].", "support_level": "high"}
    text = f"Here is the answer:\n```json\n{json.dumps(structured, indent=2)}\n```"
    client = fake_openai(lambda body: chat_completion(text))
    with tracer.start_as_current_span("POST /ask"):
        client.chat.completions.create(model=MODEL, messages=messages(retrieve(tracer)))

    expected = expected_inputs(None)
    expected.update(supportLevel="high", citationCount=1, invalidCitationCount=0, citationCoverageScore=1.0)
    assert_scored_as(exporter, expected, "POST /ask")


@pytest.mark.parametrize(
    "text",
    [
        "## Capital\nParis is the capital of France [1].\n\n## Rivers\nThe Loire is the longest river in France [2].",
        "**Capital**\nParis is the capital of France [1].\n\n**Rivers of France**\n"
        "The Loire is the longest river in France [2].",
    ],
)
def test_markdown_headings_are_no_sentences_of_the_answer(
    traced_app: tuple[InMemorySpanExporter, TracerProvider], text: str
) -> None:
    """A heading (``## Rivers``, or a line that is only bold text) titles a section and claims nothing: both
    claims cited is full coverage."""
    exporter = answer_with(traced_app, text)

    assert_scored_as(exporter, expected_inputs(), "POST /ask")


@pytest.mark.parametrize("fence", ["```markdown", "```text", "```plaintext"])
def test_an_answer_fenced_as_prose_is_read_as_prose(
    traced_app: tuple[InMemorySpanExporter, TracerProvider], fence: str
) -> None:
    """Some models wrap a whole answer in a fence marked as text or Markdown: it is prose, its markers cite and
    its fence lines are no sentences."""
    exporter = answer_with(traced_app, f"{fence}\n{ANSWER}\n```")

    assert_scored_as(exporter, expected_inputs(), "POST /ask")


# -- the gateway's path -----------------------------------------------------------------------------------------


class _Tap(SpanProcessor):
    """Keeps the spans as the SDK recorded them (the processor's scored copies go to the test's exporter)."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


def test_the_gateway_scores_the_exported_spans_as_the_processor_did(
    traced_app: tuple[InMemorySpanExporter, TracerProvider], downstream: DownstreamReceiver
) -> None:
    """The tool-calling and ``n=2`` requests, the spans as recorded exported with the real OTLP/gRPC exporter to
    a real gateway: the request spans it forwards carry the scorecard the in-process processor gave them."""
    exporter, provider = traced_app
    tap = _Tap()
    provider.add_span_processor(tap)
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("POST /ask tool"):
        tool_calling_answer(fake_openai(tool_server), tracer)
    client = fake_openai(two_choices)
    with tracer.start_as_current_span("POST /ask n2"):
        client.chat.completions.create(model=MODEL, messages=messages(retrieve(tracer)), n=2)
    spans, tap.spans = tap.spans, []  # the tap stays on the module's provider: it keeps nothing more
    cards = {span.name: dict(span.attributes or {}) for span in scored(exporter)}
    assert sorted(cards) == ["POST /ask n2", "POST /ask tool"]
    assert len(spans) == 7 and not any(
        semconv.RAG_CONFIDENCE_TOTAL in (span.attributes or {}) for span in spans
    )

    with running_gateway() as running:
        otlp = OTLPSpanExporter(endpoint=f"127.0.0.1:{running.grpc_port}", insecure=True)
        assert otlp.export(spans) == SpanExportResult.SUCCESS
        otlp.shutdown()
        forwarded = by_name(downstream.wait_for_spans(len(spans)))
    expected = compute_confidence(expected_inputs()).total
    for name, card in cards.items():
        attributes = attributes_of(forwarded[name])
        assert attributes[semconv.RAG_CONFIDENCE_TOTAL] == card[semconv.RAG_CONFIDENCE_TOTAL] == expected
        for key in (
            semconv.RAG_CONFIDENCE_LABEL,
            semconv.RAG_CONFIDENCE_ACTION,
            semconv.RAG_CONFIDENCE_CANDIDATES,
            semconv.RAG_CONFIDENCE_GENERATION_FINISH_REASON,
            semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED,
            semconv.RAG_CONFIDENCE_CITATION_MARKERS,
        ):
            assert attributes[key] == card[key], (name, key)
