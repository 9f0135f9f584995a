"""Several output messages that are parts of one answer, not alternatives.

The generation readers take the first output message as the answer when a call's messages are choices
(Chat Completions ``n`` > 1, Gemini candidates). Some tracers write other things as several messages:

- ``openinference-instrumentation-openai`` writes a Responses API call's output items as
  ``llm.output_messages.{i}``, one per item (``_attributes/_responses_api.py``
  ``_get_attributes_from_response``). A Response may hold more than one ``message`` item (a model that writes
  before and after a hosted tool call, or a ``commentary`` message before its ``final_answer``), and the
  application shows ``response.output_text``, which the openai package builds by concatenating the
  ``output_text`` of every ``message`` item. Taking the first item dropped the rest of the answer (and its
  citation markers).
- Older OpenLLMetry Anthropic releases (``opentelemetry-instrumentation-anthropic`` 0.52 and earlier, which
  write ``gen_ai.completion.{i}``) set the response's ``stop_reason`` on ``gen_ai.completion.0.finish_reason``
  and then relabel that completion ``thinking`` when the reply starts with a thinking block, writing the
  answer's text at ``gen_ai.completion.1`` without a finish reason (``span_utils.py``
  ``_set_span_completions``). Passing over the thinking completion lost the reply's finish reason, so a reply
  cut at ``max_tokens`` was not flagged truncated.

The OpenAI test runs the real ``openai`` client and the real OpenInference OpenAI instrumentor; only OpenAI's
HTTP server is faked (``httpx.MockTransport``, no network here), its JSON built from the openai package's own
Response types. The legacy OpenLLMetry Anthropic span is written by hand from that release's source (the
release is older than the ``test`` extra's lower bound and needs an older Anthropic SDK). Expected inputs are
written from the documents and the answer text, never from the code under test.
"""

from __future__ import annotations

import sys
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import Response
from openinference.instrumentation.openai import OpenAIInstrumentor as OpenInferenceOpenAIInstrumentor
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence import compute_confidence, semconv
from rag_confidence.signals import SpanRecord, extract_signals, find_answers
from tests.fake_openai import mock_openai, openai_response, output_message
from tests.instrumented import candidates, openinference_retrieval, records, traced, traced_fixture

QUESTION = "What is the capital of France, and which river is the longest there?"
FIRST = "Paris is the capital of France [1]."
SECOND = " The Loire is the longest river in France [2]."
DOCUMENTS = [
    ("doc-atlas", 0.91, "Paris is the capital of France."),
    ("doc-rivers", 0.74, "The Loire is the longest river in France."),
    ("doc-berlin", 0.52, "Berlin is the capital of Germany."),
]


def expected_inputs() -> dict[str, Any]:
    """The retrieval's candidates, and what ``[1]``/``[2]`` in FIRST + SECOND cite: both documents, every
    sentence cited."""
    return {
        "candidates": candidates(DOCUMENTS, "app"),
        "supportLevel": "medium",
        "citationCount": 2,
        "invalidCitationCount": 0,
        "citationCoverageScore": 1.0,
    }


def retrieve(tracer: trace.Tracer) -> None:
    openinference_retrieval(tracer, DOCUMENTS)


def two_message_response() -> Response:
    return openai_response([output_message(FIRST), output_message(SECOND, item_id="msg_2")])


def fake_openai(response: Response) -> openai.OpenAI:
    """The real client over a fake OpenAI answering every request with ``response`` (no network here)."""
    return mock_openai(lambda request: httpx.Response(200, json=response.model_dump(mode="json")))


openinference = traced_fixture(OpenInferenceOpenAIInstrumentor, SimpleSpanProcessor)


def test_a_response_with_two_message_items_is_read_whole(
    openinference: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """The application's answer is ``output_text``, both message items; the tracer writes one output message
    per item, and the answer read must be both, with both markers."""
    exporter, provider = openinference
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("POST /ask"):
        retrieve(tracer)
        answer = fake_openai(two_message_response()).responses.create(model="gpt-4.1-mini", input=QUESTION)
    assert answer.output_text == FIRST + SECOND

    llm = next(span for span in exporter.get_finished_spans() if span.name == "Response")
    attributes = dict(llm.attributes or {})
    # What the tracer writes: one output message per output item, no request for several choices.
    assert attributes["llm.output_messages.0.message.contents.0.message_content.text"] == FIRST
    assert attributes["llm.output_messages.1.message.contents.0.message_content.text"] == SECOND
    assert '"n"' not in str(attributes.get(semconv.OI_LLM_INVOCATION_PARAMETERS, ""))

    (group,) = find_answers(records(exporter))
    signals = extract_signals(group.spans)
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
    assert signals.inputs == expected_inputs()
    assert compute_confidence(signals.inputs).total == compute_confidence(expected_inputs()).total


def rag_with_retrieval() -> list[SpanRecord]:
    """A ``rag`` root (ending last) over a RETRIEVER span that found ``doc-atlas``, for the generation spans
    written by hand below to be read beneath."""
    return [
        SpanRecord(1, 1, None, "rag", {}, end_time=3),
        SpanRecord(
            1,
            2,
            1,
            "retrieve",
            {
                semconv.OPENINFERENCE_SPAN_KIND: "RETRIEVER",
                "retrieval.documents.0.document.id": "doc-atlas",
                "retrieval.documents.0.document.score": 0.9,
            },
            end_time=1,
        ),
    ]


def test_legacy_openllmetry_anthropic_thinking_keeps_the_reply_finish_reason() -> None:
    """``opentelemetry-instrumentation-anthropic`` 0.52 on a reply [thinking, text] cut at ``max_tokens``: the
    stop reason is on completion 0, which it relabels ``thinking``; the answer's text is completion 1."""
    chat = SpanRecord(
        1,
        3,
        1,
        "anthropic.chat",
        {
            "llm.request.type": "chat",
            "gen_ai.system": "Anthropic",
            "gen_ai.completion.0.finish_reason": "max_tokens",
            "gen_ai.completion.0.role": "thinking",
            "gen_ai.completion.0.content": "The atlas says Paris.",
            "gen_ai.completion.1.role": "assistant",
            "gen_ai.completion.1.content": "Paris is the capital of France [1]. The Loire is",
        },
        end_time=2,
    )
    signals = extract_signals([*rag_with_retrieval(), chat])
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED] is True
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_FINISH_REASON] == "max_tokens"


def test_a_tool_result_among_the_output_messages_is_no_answer_text() -> None:
    """Gemini's Interactions API under the OpenInference tracer records the function results it ran as ``tool``
    output messages before the model's: the model read them, so their text (here a stray ``[3]``) is no part
    of the answer. Attributes written as the tracer writes them (``llm.output_messages.{i}.message.role`` and
    ``.content``)."""
    llm = SpanRecord(
        1,
        3,
        1,
        "interactions.create",
        {
            semconv.OPENINFERENCE_SPAN_KIND: "LLM",
            "llm.output_messages.0.message.role": "tool",
            "llm.output_messages.0.message.content": "lookup result: see [3] in the index",
            "llm.output_messages.1.message.role": "model",
            "llm.output_messages.1.message.content": "Paris is the capital of France [1].",
        },
        end_time=2,
    )
    signals = extract_signals([*rag_with_retrieval(), llm])
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 1
    assert signals.inputs["invalidCitationCount"] == 0
    assert signals.inputs["citationCoverageScore"] == 1.0


def test_gemini_candidates_asked_for_are_still_alternatives() -> None:
    """The guard on the rule above: with ``candidate_count=2`` the OpenInference Google GenAI tracer writes one
    output message per candidate and records ``{"candidate_count": 2}`` as the invocation parameters; the
    application's ``response.text`` is the first candidate's, and so is the answer read. The Gemini API is the
    loopback fake of tests/test_signals_gemini_grounding.py."""
    if sys.version_info < (3, 11):
        pytest.skip("google-genai 3 requires Python 3.11 (the test extra leaves it out on 3.10)")
    from google.genai import types
    from openinference.instrumentation.google_genai import GoogleGenAIInstrumentor

    from tests.test_signals_gemini_grounding import MODEL, FakeGemini

    def candidate(index: int, text: str) -> types.Candidate:
        return types.Candidate(
            index=index,
            content=types.Content(role="model", parts=[types.Part(text=text)]),
            finish_reason=types.FinishReason.STOP,
        )

    fake = FakeGemini()
    fake.response = types.GenerateContentResponse(
        candidates=[candidate(0, FIRST + SECOND), candidate(1, "Berlin, I think [7].")],
        model_version=MODEL,
        response_id="resp-1",
    )
    tracing = traced(GoogleGenAIInstrumentor(), SimpleSpanProcessor)
    exporter, provider = next(tracing)
    try:
        tracer = provider.get_tracer("app")
        with tracer.start_as_current_span("POST /ask"):
            retrieve(tracer)
            client = fake.client()
            response = client.models.generate_content(
                model=MODEL, contents=QUESTION, config=types.GenerateContentConfig(candidate_count=2)
            )
        assert response.text == FIRST + SECOND
        (group,) = find_answers(records(exporter))
        signals = extract_signals(group.spans)
        assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
        assert signals.inputs == expected_inputs()
    finally:
        fake.service.close()
        tracing.close()
