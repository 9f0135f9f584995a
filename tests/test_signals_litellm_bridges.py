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
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

# LiteLLM fetches its model cost map from the network at import unless told to use the copy it ships.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm  # noqa: E402
from openinference.instrumentation.litellm import LiteLLMInstrumentor as OpenInferenceInstrumentor  # noqa: E402
from opentelemetry import trace  # noqa: E402
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.instrumentation.litellm import LiteLLMInstrumentor as OpenLLMetryInstrumentor  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: E402

from rag_confidence import compute_confidence, semconv  # noqa: E402
from rag_confidence.gateway.config import AssemblySettings  # noqa: E402
from rag_confidence.signals import extract_signals, find_answers  # noqa: E402
from tests.fake_openai import chat_completion, openai_response, output_message  # noqa: E402
from tests.instrumented import (  # noqa: E402
    LoopbackFake,
    LoopbackService,
    assert_scored_as,
    records,
    scored,
    traced_fixture,
)
from tests.test_gateway_support import (  # noqa: E402
    DownstreamReceiver,
    attributes_of,
    by_name,
    downstream,
    running_gateway,
    test_config,
)
from tests.test_signals_litellm import (  # noqa: E402
    ANSWER,
    OtelCallback,
    _logged,
    expected_inputs,
    messages,
    otel_callback,
    retrieve,
)

__all__ = ["downstream", "otel_callback"]  # the fixtures, imported for pytest

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


@pytest.mark.parametrize(
    ("how", "name"), [("aresponses", "aresponses"), ("aanthropic_messages", "messages.create")]
)
def test_openinference_bridge_is_an_llm_span(
    model: FakeProviders, openinference: Any, how: str, name: str
) -> None:
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


# -- LiteLLM's newer callback, LITELLM_OTEL_V2 ------------------------------------------------------------------


class OtelV2:
    """``LITELLM_OTEL_V2=true`` with a global SDK provider holding ``ConfidenceSpanProcessor`` (as
    :class:`OtelCallback` sets up, whose fresh callback lists it reuses). ``OTEL_V2`` is read once and cached by
    LiteLLM: the cache is cleared on both sides of the test."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from litellm.integrations.otel.model.config import is_otel_v2_enabled
        from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER

        # Earlier tests' calls whose loop closed before their callbacks ran are still queued: log them now,
        # under the callbacks of their time, not into this test's logger.
        asyncio.run(GLOBAL_LOGGING_WORKER.flush())
        self.base = OtelCallback(monkeypatch)
        self.exporter = self.base.exporter
        self.provider = self.base.provider
        monkeypatch.setenv("LITELLM_OTEL_V2", "true")
        is_otel_v2_enabled.cache_clear()
        self._clear = is_otel_v2_enabled.cache_clear

    def names(self, trace_id: int) -> list[str]:
        """The spans of one trace: LiteLLM's logging worker is a queue that outlives an event loop, so the calls
        of earlier tests whose loop closed before their callbacks ran can be logged during this one."""
        return sorted(
            span.name for span in self.exporter.get_finished_spans() if span.context.trace_id == trace_id
        )


@pytest.fixture()
def otel_v2(monkeypatch: pytest.MonkeyPatch) -> Iterator[OtelV2]:
    v2 = OtelV2(monkeypatch)
    yield v2
    monkeypatch.undo()
    v2._clear()
    v2.provider.shutdown()


async def _acompletion(fake: FakeProviders, prompt: list[dict[str, str]], until: Callable[[], bool]) -> str:
    response: Any = await litellm.acompletion(
        model="openai/gpt-4o-mini", messages=prompt, api_base=f"{fake.service.url}/v1", api_key="test-key"
    )
    deadline = time.monotonic() + 10
    while not until():  # the span is closed by the async success callback, a task of this loop
        assert time.monotonic() < deadline, "LiteLLM's V2 callback ended no span in time"
        await asyncio.sleep(0.01)
    return str(response.choices[0].message.content)


def test_otel_v2_by_name_exports_through_a_provider_of_its_own(model: FakeProviders, otel_v2: OtelV2) -> None:
    """``litellm.callbacks = ["otel"]`` under ``LITELLM_OTEL_V2`` builds an ``OpenTelemetryV2`` logger on a
    ``TracerProvider`` of its own (console export unless ``OTEL_EXPORTER``/``OTEL_ENDPOINT`` say otherwise), not
    the global SDK provider the legacy callback adopts: its ``chat`` span never reaches the application's span
    processors, and the request is scored without the answer's text."""
    from litellm.integrations.otel.logger import OpenTelemetryV2
    from litellm.litellm_core_utils import litellm_logging

    model.finish_reason = "length"
    with otel_v2.provider.get_tracer("app").start_as_current_span("POST /ask") as request:
        text = asyncio.run(_acompletion(model, messages(retrieve(otel_v2.provider)), lambda: True))
        time.sleep(0.5)
    trace_id = request.get_span_context().trace_id
    assert text == ANSWER
    (logger,) = [cb for cb in litellm_logging._in_memory_loggers if isinstance(cb, OpenTelemetryV2)]
    try:
        assert logger.tracer_provider is not otel_v2.provider
        assert otel_v2.names(trace_id) == ["POST /ask", "retrieve kb"]
        (answer_span,) = scored(otel_v2.exporter)
        attributes = answer_span.attributes or {}
        assert attributes[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 0
        assert semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED not in attributes
    finally:
        logger.tracer_provider.shutdown()


@pytest.mark.parametrize("content", [None, "span_only"])
def test_otel_v2_on_the_applications_provider_writes_a_chat_span(
    model: FakeProviders, otel_v2: OtelV2, monkeypatch: pytest.MonkeyPatch, content: str | None
) -> None:
    """An ``OpenTelemetryV2`` logger given the application's provider (``litellm.callbacks =
    [OpenTelemetryV2(tracer_provider=provider)]``): a ``CLIENT`` span ``chat gpt-4o-mini``, a child of the
    current span, opened before the call and ended by the async success callback after it returned. It holds
    ``gen_ai.operation.name`` = ``chat`` (for ``acompletion`` too), ``gen_ai.response.finish_reasons`` as a string
    array, and, only when ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` allows it (the default is
    ``no_content``), ``gen_ai.output.messages`` as OpenAI chat messages (``content``, no ``parts``, no
    ``finish_reason``). No events, no log records. Read as the request's generation: its text (when captured)
    and finish reason, in process and from the exported spans."""
    from litellm.integrations.otel.logger import OpenTelemetryV2

    if content is not None:
        monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", content)
    monkeypatch.setattr(litellm, "callbacks", [OpenTelemetryV2(tracer_provider=otel_v2.provider)])
    model.finish_reason = "length"
    with otel_v2.provider.get_tracer("app").start_as_current_span("POST /ask") as request:
        trace_id = request.get_span_context().trace_id
        prompt = messages(retrieve(otel_v2.provider))
        logged = lambda: "chat gpt-4o-mini" in otel_v2.names(trace_id)  # noqa: E731
        assert asyncio.run(_acompletion(model, prompt, logged)) == ANSWER

    spans = {
        span.name: span for span in otel_v2.exporter.get_finished_spans() if span.context.trace_id == trace_id
    }
    assert set(spans) == {"POST /ask", "retrieve kb", "chat gpt-4o-mini"}
    chat = spans["chat gpt-4o-mini"]
    assert chat.kind == trace.SpanKind.CLIENT and not chat.events
    assert chat.parent is not None and chat.parent.span_id == request.get_span_context().span_id
    attributes = dict(chat.attributes or {})
    assert attributes[semconv.GEN_AI_OPERATION_NAME] == "chat"
    assert attributes["litellm.call_type"] == "acompletion"
    assert list(attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS]) == ["length"]
    if content is None:
        assert semconv.GEN_AI_OUTPUT_MESSAGES not in attributes
        signals = assert_scored_as(
            otel_v2.exporter, {k: v for k, v in expected_inputs().items() if "itation" not in k}, "POST /ask"
        )
        assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 0
    else:
        output = json.loads(attributes[semconv.GEN_AI_OUTPUT_MESSAGES])
        assert output == [
            {
                "content": ANSWER,
                "role": "assistant",
                "tool_calls": None,
                "function_call": None,
                "refusal": None,
            }
        ]
        signals = assert_scored_as(otel_v2.exporter, expected_inputs(), "POST /ask")
        assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_FINISH_REASON] == "length"
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED] is True


def test_otel_v2_writes_no_span_for_a_synchronous_completion(
    model: FakeProviders, otel_v2: OtelV2, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The V2 logger closes its span from the async success callback only (its synchronous one does nothing),
    which a synchronous ``litellm.completion`` in an application's own process does not run: no span at all."""
    from litellm.integrations.otel.logger import OpenTelemetryV2

    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_only")
    monkeypatch.setattr(litellm, "callbacks", [OpenTelemetryV2(tracer_provider=otel_v2.provider)])
    with otel_v2.provider.get_tracer("app").start_as_current_span("POST /ask") as request:
        response: Any = litellm.completion(
            model="openai/gpt-4o-mini",
            messages=messages(retrieve(otel_v2.provider)),
            api_base=f"{model.service.url}/v1",
            api_key="test-key",
        )
        assert response.choices[0].message.content == ANSWER
        time.sleep(1.0)  # LiteLLM's logging thread
    time.sleep(0.5)
    assert otel_v2.names(request.get_span_context().trace_id) == ["POST /ask", "retrieve kb"]


def test_otel_v2_span_of_a_call_whose_loop_ended_is_late(
    model: FakeProviders, otel_v2: OtelV2, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An application that does not wait for LiteLLM's logging: the loop of ``asyncio.run`` closes with the
    success callback still queued in LiteLLM's logging worker, so the ``chat`` span is written whenever a later
    event loop runs that worker (here a ``flush``), after the request span ended: late work, forwarded but not
    read, and the request is scored once without the answer's text."""
    from litellm.integrations.otel.logger import OpenTelemetryV2
    from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER

    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_only")
    monkeypatch.setattr(litellm, "callbacks", [OpenTelemetryV2(tracer_provider=otel_v2.provider)])
    with otel_v2.provider.get_tracer("app").start_as_current_span("POST /ask") as request:
        assert asyncio.run(_acompletion(model, messages(retrieve(otel_v2.provider)), lambda: True)) == ANSWER
    trace_id = request.get_span_context().trace_id
    assert otel_v2.names(trace_id) == ["POST /ask", "retrieve kb"]
    assert GLOBAL_LOGGING_WORKER.pending_count == 1

    asyncio.run(GLOBAL_LOGGING_WORKER.flush())
    assert otel_v2.names(trace_id) == ["POST /ask", "chat gpt-4o-mini", "retrieve kb"]
    (answer_span,) = scored(otel_v2.exporter)
    assert answer_span.name == "POST /ask"
    assert (answer_span.attributes or {})[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 0
    stats = otel_v2.base.processor.stats()
    assert stats.answers_scored == 1 and stats.pending_traces == 0


@pytest.mark.parametrize("window", [False, True], ids=["no assembly window", "assembly window"])
def test_otel_v2_by_name_through_the_gateway(
    downstream: DownstreamReceiver,
    model: FakeProviders,
    otel_v2: OtelV2,
    monkeypatch: pytest.MonkeyPatch,
    window: bool,
) -> None:
    """``callbacks = ["otel"]`` under ``LITELLM_OTEL_V2`` with ``OTEL_EXPORTER=otlp_grpc`` and content capture
    on: LiteLLM's ``chat`` span (a child of the request span, in its trace) reaches the real gateway through
    LiteLLM's own provider and exporter, the application's spans through the application's: two export
    requests, the ``chat`` span's first (the application waits for LiteLLM's logging here). Without the
    gateway's assembly window a request is all the gateway sees of a trace: the request span is scored without
    the answer's text. With it, the ``chat`` span kept from the first request is read as the generation."""
    from litellm.integrations.otel.logger import OpenTelemetryV2
    from litellm.litellm_core_utils import litellm_logging
    from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER

    model.finish_reason = "length"
    config = test_config(assembly=AssemblySettings(max_age=30.0)) if window else None
    with running_gateway(config) as running:
        monkeypatch.setenv("OTEL_EXPORTER", "otlp_grpc")
        monkeypatch.setenv("OTEL_ENDPOINT", f"http://127.0.0.1:{running.grpc_port}")
        monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_only")
        provider = TracerProvider()
        provider.add_span_processor(
            BatchSpanProcessor(
                OTLPSpanExporter(endpoint=f"http://127.0.0.1:{running.grpc_port}", insecure=True),
                schedule_delay_millis=60_000,
            )
        )
        monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
        loggers: list[OpenTelemetryV2] = []

        def logged() -> bool:
            """The logger is built and its span ended (removed from the calls it holds open)."""
            loggers[:] = [cb for cb in litellm_logging._in_memory_loggers if isinstance(cb, OpenTelemetryV2)]
            return (
                bool(loggers) and not loggers[0]._open_llm_calls and GLOBAL_LOGGING_WORKER.pending_count == 0
            )

        with provider.get_tracer("app").start_as_current_span("POST /ask"):
            assert asyncio.run(_acompletion(model, messages(retrieve(provider)), logged)) == ANSWER
            (logger,) = loggers
            assert logger.tracer_provider is not provider
            assert logger.tracer_provider.force_flush()
            (chat,) = downstream.wait_for_spans(1)
            assert chat.name == "chat gpt-4o-mini"
        provider.force_flush()
        forwarded = downstream.wait_for_spans(3)
        logger.tracer_provider.shutdown()
        provider.shutdown()
    spans = {name: attributes_of(span) for name, span in by_name(forwarded).items()}
    assert set(spans) == {"POST /ask", "retrieve kb", "chat gpt-4o-mini"}
    assert by_name(forwarded)["chat gpt-4o-mini"].parent_span_id == by_name(forwarded)["POST /ask"].span_id
    request = spans["POST /ask"]
    if window:
        assert request[semconv.RAG_CONFIDENCE_TOTAL] == compute_confidence(expected_inputs()).total
        assert request[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
        assert request[semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED] is True
    else:
        without_text = {key: value for key, value in expected_inputs().items() if "itation" not in key}
        assert request[semconv.RAG_CONFIDENCE_TOTAL] == compute_confidence(without_text).total
        assert request[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 0
        assert semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED not in request


@pytest.mark.parametrize(
    ("how", "name", "reason"),
    [
        ("aresponses", "chat gpt-4.1-mini", "stop"),
        ("aanthropic_messages", "chat claude-3-5-haiku-20241022", "length"),
    ],
)
def test_otel_v2_bridges_are_chat_spans(
    model: FakeProviders,
    otel_v2: OtelV2,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
    name: str,
    reason: str,
) -> None:
    """The V2 logger on the application's provider names both bridges' calls ``chat`` (the call type only in
    ``litellm.call_type``), with the text as an OpenAI chat message when content capture is on, and Anthropic's
    ``max_tokens`` as ``length``; read as the request's generation like a ``completion``."""
    from litellm.integrations.otel.logger import OpenTelemetryV2

    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_only")
    monkeypatch.setattr(litellm, "callbacks", [OpenTelemetryV2(tracer_provider=otel_v2.provider)])
    model.stop_reason = "max_tokens"
    with otel_v2.provider.get_tracer("app").start_as_current_span("POST /ask") as request:
        trace_id = request.get_span_context().trace_id
        prompt = messages(retrieve(otel_v2.provider))
        assert bridge(model, prompt, how, lambda: name in otel_v2.names(trace_id)) == ANSWER

    (chat,) = [span for span in otel_v2.exporter.get_finished_spans() if span.name == name]
    attributes = dict(chat.attributes or {})
    assert attributes[semconv.GEN_AI_OPERATION_NAME] == "chat"
    assert attributes["litellm.call_type"] == ("aresponses" if how == "aresponses" else "anthropic_messages")
    (output,) = json.loads(attributes[semconv.GEN_AI_OUTPUT_MESSAGES])
    assert (output["role"], output["content"]) == ("assistant", ANSWER)
    assert list(attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS]) == [reason]
    signals = assert_scored_as(otel_v2.exporter, expected_inputs(), "POST /ask")
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED] is (reason == "length")
