"""LiteLLM's Responses API bridge and Anthropic Messages pass-through, and its newer ``LITELLM_OTEL_V2`` callback.

The client is the real ``litellm`` package (``litellm.responses`` / ``aresponses``,
``litellm.anthropic.messages.acreate``, ``acompletion`` / ``completion``); only the model's HTTP server is faked,
on loopback (no network here; LiteLLM makes its own HTTP client, so a real server its ``api_base`` points at):
``POST /v1/responses`` answers as OpenAI's Responses API, ``POST /v1/messages`` as Anthropic's Messages API,
``POST /v1/chat/completions`` as OpenAI's Chat Completions API. The tracers are the real
``openinference-instrumentation-litellm``, ``opentelemetry-instrumentation-litellm`` (OpenLLMetry) and LiteLLM's
own callbacks (the legacy ``litellm/integrations/opentelemetry.py`` and the ``OpenTelemetryV2`` logger of
``litellm/integrations/otel``). The retrieval is the application's own OpenInference ``RETRIEVER`` span. Expected
inputs come from the retrieval and the fake server (tests/test_signals_litellm.py ``expected_inputs``).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import tests.test_signals_litellm  # noqa: F401  (sets LITELLM_LOCAL_MODEL_COST_MAP before litellm loads)
import litellm
from openinference.instrumentation.litellm import LiteLLMInstrumentor as OpenInferenceInstrumentor
from opentelemetry import trace
from opentelemetry.instrumentation.litellm import LiteLLMInstrumentor as OpenLLMetryInstrumentor
from opentelemetry.sdk.trace import TracerProvider

from rag_confidence import compute_confidence, semconv
from rag_confidence.signals import extract_signals, find_answers
from tests.fake_openai import chat_completion, openai_response, output_message
from tests.instrumented import LoopbackFake, LoopbackService, assert_scored_as, records, scored, traced_fixture
from tests.test_signals_litellm import (
    ANSWER,
    OtelCallback,
    _logged,
    expected_inputs,
    messages,
    otel_callback,
    retrieve,
)

__all__ = ["otel_callback"]  # the fixture, imported for pytest

BRIDGES = ("responses", "aresponses", "aanthropic_messages")


class FakeProviders(LoopbackFake):
    """OpenAI's Responses and Chat Completions APIs and Anthropic's Messages API on one loopback server, each
    answering ``ANSWER`` (a completed ``Response`` built with the openai package's own types; an Anthropic
    ``message`` whose ``stop_reason`` is ``stop_reason``; a ``chat.completion`` ending with ``finish_reason``)."""

    def __init__(self) -> None:
        self.stop_reason = "end_turn"
        self.finish_reason = "stop"
        self.paths: list[str] = []
        self.service = LoopbackService(self._respond)

    def _respond(self, path: str, body: bytes) -> tuple[str, bytes]:
        self.paths.append(path)
        if path.endswith("/responses"):
            return "application/json", openai_response([output_message(ANSWER)]).model_dump_json().encode()
        if path.endswith("/messages"):
            message = {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-3-5-haiku-20241022",
                "content": [{"type": "text", "text": ANSWER}],
                "stop_reason": self.stop_reason,
                "stop_sequence": None,
                "usage": {"input_tokens": 120, "output_tokens": 24},
            }
            return "application/json", json.dumps(message).encode()
        return "application/json", json.dumps(chat_completion(ANSWER, finish=self.finish_reason)).encode()


@pytest.fixture()
def model() -> Iterator[FakeProviders]:
    with FakeProviders() as fake:
        yield fake


openinference = traced_fixture(OpenInferenceInstrumentor)
openllmetry = traced_fixture(OpenLLMetryInstrumentor)


def _prompt_text(prompt: list[dict[str, str]]) -> str:
    return "\n\n".join(message["content"] for message in prompt)


async def _abridge(fake: FakeProviders, prompt: list[dict[str, str]], how: str) -> str:
    if how == "aresponses":
        response: Any = await litellm.aresponses(
            model="openai/gpt-4.1-mini",
            input=_prompt_text(prompt),
            api_base=f"{fake.service.url}/v1",
            api_key="test-key",
        )
        return str(response.output[0].content[0].text)
    message: Any = await litellm.anthropic.messages.acreate(
        model="anthropic/claude-3-5-haiku-20241022",
        system=prompt[0]["content"],
        messages=prompt[1:],
        max_tokens=256,
        api_base=fake.service.url,
        api_key="test-key",
    )
    return str(message["content"][0]["text"])


async def _abridge_until(
    fake: FakeProviders, prompt: list[dict[str, str]], how: str, until: Callable[[], bool] | None
) -> str:
    text = await _abridge(fake, prompt, how)
    deadline = time.monotonic() + 10
    while until is not None and not until():  # LiteLLM's callbacks run as tasks of this loop
        assert time.monotonic() < deadline, "LiteLLM's callback wrote nothing in time"
        await asyncio.sleep(0.01)
    return text


def bridge(
    fake: FakeProviders, prompt: list[dict[str, str]], how: str, until: Callable[[], bool] | None = None
) -> str:
    """The model call through one of LiteLLM's bridges (``responses`` is synchronous, the others async; the
    synchronous Anthropic Messages call is not implemented for ``anthropic/`` models in litellm 1.110.2). An
    async call's loop runs until ``until()`` holds, for the callback's logging task."""
    if how == "responses":
        response: Any = litellm.responses(
            model="openai/gpt-4.1-mini",
            input=_prompt_text(prompt),
            api_base=f"{fake.service.url}/v1",
            api_key="test-key",
        )
        return str(response.output[0].content[0].text)
    return asyncio.run(_abridge_until(fake, prompt, how, until))


# -- LiteLLM's legacy callback: operation names of the bridges -------------------------------------------------


@pytest.mark.parametrize(
    ("how", "operation"),
    [("responses", "responses"), ("aresponses", "aresponses"), ("aanthropic_messages", "anthropic_messages")],
)
def test_otel_callback_bridge_under_a_tool_root_makes_it_an_answer(
    model: FakeProviders, otel_callback: OtelCallback, how: str, operation: str
) -> None:
    """A tool an untraced agent loop ran (an OpenInference ``TOOL`` span, the trace's root) retrieves and answers
    through a LiteLLM bridge. The callback writes the bridge's call type as ``gen_ai.operation.name``
    (``anthropic_messages`` for ``acreate``: no ``a`` prefix) and the answer's text as ``gen_ai.output.messages``
    onto the tool span: a model's generation, so the step root answers (rule 2)."""
    provider = otel_callback.provider
    with provider.get_tracer("app").start_as_current_span("search_and_answer") as tool:
        tool.set_attribute(semconv.OPENINFERENCE_SPAN_KIND, semconv.OPENINFERENCE_KIND_TOOL)
        assert bridge(model, messages(retrieve(provider)), how, lambda: _logged(otel_callback)) == ANSWER
        otel_callback.wait_for(lambda: _logged(otel_callback))

    (answer_span,) = scored(otel_callback.exporter)
    assert answer_span.name == "search_and_answer"
    attributes = answer_span.attributes or {}
    assert attributes[semconv.GEN_AI_OPERATION_NAME] == operation
    (output,) = json.loads(attributes[semconv.GEN_AI_OUTPUT_MESSAGES])
    assert output["parts"] == [{"type": "text", "content": ANSWER}]
    # The Responses bridge reports the Response's status as its finish reason.
    assert attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == (
        '["stop"]' if how == "aanthropic_messages" else '["completed"]'
    )
    assert attributes[semconv.RAG_CONFIDENCE_TOTAL] == compute_confidence(expected_inputs()).total
    assert attributes[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
    signals = assert_scored_as(otel_callback.exporter, expected_inputs(), "search_and_answer")
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2


def test_otel_callback_anthropic_messages_cut_short_is_truncated(
    model: FakeProviders, otel_callback: OtelCallback
) -> None:
    """Anthropic's ``max_tokens`` stop reason, mapped by the callback to ``length``, on the caller's span."""
    model.stop_reason = "max_tokens"
    provider = otel_callback.provider
    with provider.get_tracer("app").start_as_current_span("POST /ask"):
        bridge(model, messages(retrieve(provider)), "aanthropic_messages", lambda: _logged(otel_callback))
        otel_callback.wait_for(lambda: _logged(otel_callback))

    (answer_span,) = scored(otel_callback.exporter)
    attributes = answer_span.attributes or {}
    assert attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == '["length"]'
    assert attributes[semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED] is True
    signals = assert_scored_as(otel_callback.exporter, expected_inputs(), "POST /ask")
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_FINISH_REASON] == "length"


# -- the two tracers -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("how", "name"), [("aresponses", "aresponses"), ("aanthropic_messages", "messages.create")])
def test_openinference_bridge_is_an_llm_span(model: FakeProviders, openinference: Any, how: str, name: str) -> None:
    """openinference-instrumentation-litellm wraps both bridges: an ``LLM`` span under the current span with the
    answer in ``llm.output_messages.0.message.contents.0.message_content.text`` (and ``llm.finish_reason`` =
    ``max_tokens`` for a cut Anthropic message)."""
    exporter, provider = openinference
    if how == "aanthropic_messages":
        model.stop_reason = "max_tokens"
    with provider.get_tracer("app").start_as_current_span("POST /ask"):
        assert bridge(model, messages(retrieve(provider)), how) == ANSWER

    (llm,) = [span for span in exporter.get_finished_spans() if span.name == name]
    attributes = llm.attributes or {}
    assert attributes[semconv.OPENINFERENCE_SPAN_KIND] == semconv.OPENINFERENCE_KIND_LLM
    assert attributes["llm.output_messages.0.message.contents.0.message_content.text"] == ANSWER
    signals = assert_scored_as(exporter, expected_inputs(), "POST /ask")
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
    if how == "aanthropic_messages":
        assert attributes["llm.finish_reason"] == "max_tokens"
        assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED] is True


@pytest.mark.parametrize("how", ["aresponses", "aanthropic_messages"])
def test_openllmetry_does_not_trace_the_bridges(model: FakeProviders, openllmetry: Any, how: str) -> None:
    """opentelemetry-instrumentation-litellm 0.62 wraps ``completion`` / ``acompletion`` only: no span for the
    bridges, so the request is scored without the answer's text (no citation input)."""
    exporter, provider = openllmetry
    with provider.get_tracer("app").start_as_current_span("POST /ask"):
        assert bridge(model, messages(retrieve(provider)), how) == ANSWER

    assert sorted(span.name for span in exporter.get_finished_spans()) == ["POST /ask", "retrieve kb"]
    (group,) = find_answers(records(exporter))
    signals = extract_signals(group.spans)
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 0
    assert "citationCount" not in signals.inputs
