"""RAG answers whose model call goes through LiteLLM, under the three ways to trace LiteLLM.

The client is the real ``litellm`` package (``litellm.completion`` / ``acompletion``, with and without
``stream=True``) calling an ``openai/...`` model; only the model's HTTP server is faked (a loopback server
answering ``POST /v1/chat/completions`` as OpenAI's API does, JSON or server-sent events, reached through
``api_base``), because no network is available here. The tracers are the real
``openinference-instrumentation-litellm``, ``opentelemetry-instrumentation-litellm`` (OpenLLMetry) and LiteLLM's
own OpenTelemetry callback (``litellm.callbacks = ["otel"]``). The application's retrieval is its own
OpenInference ``RETRIEVER`` span, written here as an application reports its retriever. Expected inputs are
written from what the retrieval and the fake server say, never from the code under test.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
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
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from rag_confidence import compute_confidence, semconv  # noqa: E402
from rag_confidence.otel import ConfidenceSpanProcessor, last_scorecard, scored_answer  # noqa: E402
from rag_confidence.signals import extract_signals, find_answers  # noqa: E402
from tests.fake_openai import chat_completion, chat_completion_events  # noqa: E402
from tests.instrumented import (  # noqa: E402
    LoopbackFake,
    LoopbackService,
    assert_scored_as,
    candidates,
    openinference_retrieval,
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
)

__all__ = ["downstream"]  # the fixture, imported for pytest

MODEL = "openai/gpt-4o-mini"
QUESTION = "What is the capital of France, and which river is the longest there?"
HITS = [
    ("kb-paris", 0.9, "Paris is the capital of France."),
    ("kb-loire", 0.6, "The Loire is the longest river in France."),
    ("kb-berlin", 0.3, "Berlin is the capital of Germany."),
]
# Cites the first two documents of the prompt's numbering, one sentence each.
ANSWER = "Paris is the capital of France [1]. The Loire is the longest river in France [2]."
CALLS = ("completion", "acompletion", "stream", "astream")


class FakeOpenAI(LoopbackFake):
    """OpenAI's Chat Completions API on loopback (no network here; LiteLLM makes its own HTTP client, so the
    server is a real one its ``api_base`` points at), answering every ``POST /v1/chat/completions`` with
    ``text``: a ``chat.completion`` JSON body, or ``chat.completion.chunk`` server-sent events word by word when
    the request streams, the last chunk carrying ``finish_reason`` (the bodies of tests/fake_openai.py)."""

    def __init__(self) -> None:
        self.text = ANSWER
        self.finish_reason = "stop"
        self.requests: list[dict[str, Any]] = []
        self.service = LoopbackService(self._respond)

    def _respond(self, path: str, body: bytes) -> tuple[str, bytes]:
        request = json.loads(body)
        self.requests.append(request)
        if not request.get("stream"):
            return "application/json", json.dumps(
                chat_completion(self.text, finish=self.finish_reason)
            ).encode()
        return "text/event-stream", chat_completion_events(self.text, finish=self.finish_reason).encode()


@pytest.fixture()
def model() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


openinference = traced_fixture(OpenInferenceInstrumentor)
openllmetry = traced_fixture(OpenLLMetryInstrumentor)


def retrieve(provider: TracerProvider) -> list[tuple[str, float, str]]:
    """The application's retriever, reported on an OpenInference ``RETRIEVER`` span of its own."""
    openinference_retrieval(provider.get_tracer("app"), HITS, name="retrieve kb", method="kb")
    return HITS


def messages(hits: list[tuple[str, float, str]]) -> list[dict[str, str]]:
    context = "\n".join(f"[{number}] {text}" for number, (_, _, text) in enumerate(hits, start=1))
    return [
        {"role": "system", "content": f"Answer from the sources, citing them as [n].\n{context}"},
        {"role": "user", "content": QUESTION},
    ]


async def _acall(model: FakeOpenAI, prompt: list[dict[str, str]], stream: bool) -> str:
    response: Any = await litellm.acompletion(
        model=MODEL, messages=prompt, api_base=f"{model.service.url}/v1", api_key="test-key", stream=stream
    )
    if stream:
        return "".join([chunk.choices[0].delta.content or "" async for chunk in response])
    return str(response.choices[0].message.content)


def call(model: FakeOpenAI, prompt: list[dict[str, str]], how: str) -> str:
    """The model call the way ``how`` names: ``litellm.completion`` or ``acompletion``, streamed or not."""
    if how in ("acompletion", "astream"):
        return asyncio.run(_acall(model, prompt, stream=how == "astream"))
    stream = how == "stream"
    response: Any = litellm.completion(
        model=MODEL, messages=prompt, api_base=f"{model.service.url}/v1", api_key="test-key", stream=stream
    )
    if stream:
        return "".join(chunk.choices[0].delta.content or "" for chunk in response)
    return str(response.choices[0].message.content)


def answer(model: FakeOpenAI, provider: TracerProvider, how: str) -> str:
    """The application: a request span, its retrieval, then the model through LiteLLM."""
    with provider.get_tracer("app").start_as_current_span("POST /ask"):
        return call(model, messages(retrieve(provider)), how)


def expected_inputs(truncated: bool = False) -> dict[str, Any]:
    """What the spans state, written out: the retrieval as candidates (method ``kb``), two of the three documents
    cited by position, both sentences cited; no support signal, so the default level."""
    del truncated  # truncation is a diagnostic, no input
    return {
        "candidates": candidates(HITS, "kb"),
        "citationCount": 2,
        "invalidCitationCount": 0,
        "citationCoverageScore": 1.0,
        "supportLevel": "medium",
    }


def _generation(exporter: InMemorySpanExporter, scope: str) -> ReadableSpan:
    (span,) = [
        span
        for span in exporter.get_finished_spans()
        if span.instrumentation_scope is not None and span.instrumentation_scope.name == scope
    ]
    return span


def _assert_scored_answer(
    exporter: InMemorySpanExporter, name: str, finish_reason: str, truncated: bool
) -> None:
    """One scorecard, on ``name``, equal to the one of the expected inputs, with the finish reason read."""
    signals = assert_scored_as(exporter, expected_inputs(), name)
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_FINISH_REASON] == finish_reason
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED] is truncated
    (answer_span,) = scored(exporter)
    assert (answer_span.attributes or {})[semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED] is truncated


# -- openinference-instrumentation-litellm ---------------------------------------------------------------------


@pytest.mark.parametrize("how", CALLS)
def test_openinference_records_one_llm_span_per_call_under_the_current_span(
    model: FakeOpenAI, openinference: tuple[InMemorySpanExporter, TracerProvider], how: str
) -> None:
    exporter, provider = openinference
    model.finish_reason = "length"
    assert answer(model, provider, how) == ANSWER
    assert (
        model.requests[0]["stream"] is True
        if how in ("stream", "astream")
        else "stream" not in model.requests[0]
    )

    llm = _generation(exporter, "openinference.instrumentation.litellm")
    request = next(span for span in exporter.get_finished_spans() if span.name == "POST /ask")
    assert llm.parent is not None and llm.parent.span_id == request.context.span_id
    attributes = dict(llm.attributes or {})
    assert attributes[semconv.OPENINFERENCE_SPAN_KIND] == "LLM"
    assert attributes["llm.output_messages.0.message.content"] == ANSWER
    assert attributes["llm.output_messages.0.message.role"] == "assistant"
    assert attributes["llm.finish_reason"] == "length"
    assert attributes["llm.model_name"] == MODEL and attributes["llm.provider"] == "openai"
    assert attributes[semconv.OI_OUTPUT_VALUE] == ANSWER


@pytest.mark.parametrize("how", CALLS)
@pytest.mark.parametrize("finish_reason", ["stop", "length"])
def test_openinference_answer_under_the_local_root_rule(
    model: FakeOpenAI,
    openinference: tuple[InMemorySpanExporter, TracerProvider],
    how: str,
    finish_reason: str,
) -> None:
    """The request span is the answer (a local root over a retrieval); the LiteLLM span is its generation."""
    exporter, provider = openinference
    model.finish_reason = finish_reason
    answer(model, provider, how)
    _assert_scored_answer(exporter, "POST /ask", finish_reason, truncated=finish_reason == "length")


@pytest.mark.parametrize("how", CALLS)
def test_openinference_answer_under_the_decorator(
    model: FakeOpenAI, openinference: tuple[InMemorySpanExporter, TracerProvider], how: str
) -> None:
    exporter, provider = openinference
    model.finish_reason = "length"

    @scored_answer(name="ask", tracer_provider=provider)
    def ask(question: str) -> str:
        return call(model, messages(retrieve(provider)), how)

    assert ask(QUESTION) == ANSWER
    card = last_scorecard()
    assert card is not None and card.model_dump() == compute_confidence(expected_inputs()).model_dump()
    _assert_scored_answer(exporter, "ask", "length", truncated=True)


def test_openinference_answer_under_an_async_decorated_function(
    model: FakeOpenAI, openinference: tuple[InMemorySpanExporter, TracerProvider]
) -> None:
    exporter, provider = openinference

    @scored_answer(name="ask", tracer_provider=provider)
    async def ask(question: str) -> str:
        return await _acall(model, messages(retrieve(provider)), stream=True)

    assert asyncio.run(ask(QUESTION)) == ANSWER
    _assert_scored_answer(exporter, "ask", "stop", truncated=False)


# -- opentelemetry-instrumentation-litellm (OpenLLMetry) -------------------------------------------------------


@pytest.mark.parametrize("how", CALLS)
def test_openllmetry_answer_text_and_finish_reason(
    model: FakeOpenAI, openllmetry: tuple[InMemorySpanExporter, TracerProvider], how: str
) -> None:
    """A ``litellm.chat`` CLIENT span per call, GenAI attributes: ``gen_ai.output.messages`` (JSON) and
    ``gen_ai.response.finish_reasons``."""
    exporter, provider = openllmetry
    model.finish_reason = "length"
    answer(model, provider, how)

    attributes = dict(_generation(exporter, "opentelemetry.instrumentation.litellm").attributes or {})
    assert attributes[semconv.GEN_AI_OPERATION_NAME] == "chat"
    output = json.loads(attributes[semconv.GEN_AI_OUTPUT_MESSAGES])
    assert output == [
        {"role": "assistant", "parts": [{"type": "text", "content": ANSWER}], "finish_reason": "length"}
    ]
    assert list(attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS]) == ["length"]
    _assert_scored_answer(exporter, "POST /ask", "length", truncated=True)


# -- LiteLLM's own OpenTelemetry callback (litellm.callbacks = ["otel"]) ---------------------------------------


class OtelCallback:
    """``litellm.callbacks = ["otel"]`` on a global SDK provider, which the callback adopts (it creates and sets
    a provider of its own only when the global one is no SDK provider). Undone after the test."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.processor = ConfidenceSpanProcessor(SimpleSpanProcessor(self.exporter))
        self.provider.add_span_processor(self.processor)
        monkeypatch.setattr(trace, "_TRACER_PROVIDER", self.provider)
        # LiteLLM turns ``callbacks`` into logger objects kept in these lists and among its in-memory loggers:
        # fresh ones, so that the callback is built anew and adopts this provider.
        for name in ("input_callback", "success_callback", "failure_callback"):
            monkeypatch.setattr(litellm, name, [])
        for name in ("_async_success_callback", "_async_failure_callback"):
            monkeypatch.setattr(litellm, name, [])
        monkeypatch.setattr(litellm, "callbacks", ["otel"])
        from litellm.litellm_core_utils import litellm_logging

        monkeypatch.setattr(litellm_logging, "_in_memory_loggers", [])

    def wait_for(self, condition: Callable[[], bool], timeout: float = 10.0) -> None:
        """LiteLLM logs on a thread of its own after the call returned: wait for what it writes."""
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, "LiteLLM's callback wrote nothing in time"
            time.sleep(0.01)


@pytest.fixture()
def otel_callback(monkeypatch: pytest.MonkeyPatch) -> Iterator[OtelCallback]:
    callback = OtelCallback(monkeypatch)
    yield callback
    callback.provider.shutdown()


def _output_messages(span: Any) -> Any:
    return (span.attributes or {}).get(semconv.GEN_AI_OUTPUT_MESSAGES)


def _logged(callback: OtelCallback) -> bool:
    """The callback is done with the call: it opens ``raw_gen_ai_request`` once the caller's span (or its own
    ``litellm_request``) has every attribute."""
    return any(span.name == "raw_gen_ai_request" for span in callback.exporter.get_finished_spans())


async def _acall_and_wait(
    model: FakeOpenAI, prompt: list[dict[str, str]], how: str, callback: OtelCallback
) -> str:
    text = await _acall(model, prompt, stream=how == "astream")
    deadline = time.monotonic() + 10
    while not _logged(callback):  # the callback runs as a task of this loop
        assert time.monotonic() < deadline, "LiteLLM's callback wrote nothing in time"
        await asyncio.sleep(0.01)
    return text


@pytest.mark.parametrize("how", ["completion", "acompletion", "astream"])
@pytest.mark.parametrize("finish_reason", ["stop", "length"])
def test_otel_callback_writes_the_generation_onto_the_callers_span(
    model: FakeOpenAI, otel_callback: OtelCallback, how: str, finish_reason: str
) -> None:
    """With a span current, the callback makes no span of the call's own: it sets its GenAI attributes on the
    caller's span (here the request span), from LiteLLM's logging thread or task after the call returned, and a
    ``raw_gen_ai_request`` child holding the provider's response as Python ``repr`` strings (``llm.openai.*``).
    The request waits for the write here; an application that does not (the request span ending right after the
    call) loses it: the SDK drops attributes set on an ended span."""
    model.finish_reason = finish_reason
    provider = otel_callback.provider
    with provider.get_tracer("app").start_as_current_span("POST /ask"):
        prompt = messages(retrieve(provider))
        if how == "completion":
            assert call(model, prompt, how) == ANSWER
            otel_callback.wait_for(lambda: _logged(otel_callback))
        else:
            assert asyncio.run(_acall_and_wait(model, prompt, how, otel_callback)) == ANSWER

    spans = {span.name: span for span in otel_callback.exporter.get_finished_spans()}
    assert set(spans) == {"POST /ask", "retrieve kb", "raw_gen_ai_request"}
    attributes = dict(spans["POST /ask"].attributes or {})
    assert json.loads(attributes[semconv.GEN_AI_OUTPUT_MESSAGES]) == [
        {"role": "assistant", "parts": [{"type": "text", "content": ANSWER}], "finish_reason": finish_reason}
    ]
    # A JSON array in a string, not a string array.
    assert attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == json.dumps([finish_reason])
    # LiteLLM's call type, which is no GenAI operation name for ``acompletion``.
    assert attributes[semconv.GEN_AI_OPERATION_NAME] == ("chat" if how == "completion" else "acompletion")
    assert attributes["gen_ai.system"] == "openai"
    assert attributes["llm.request.type"] == ("completion" if how == "completion" else "acompletion")
    raw = dict(spans["raw_gen_ai_request"].attributes or {})
    assert raw and all(key.startswith("llm.openai.") for key in raw)
    # The request span is the answer and its own generation.
    _assert_scored_answer(otel_callback.exporter, "POST /ask", finish_reason, finish_reason == "length")


def test_otel_callback_puts_a_synchronous_stream_into_a_trace_of_its_own(
    model: FakeOpenAI, otel_callback: OtelCallback
) -> None:
    """``completion(stream=True)`` logs when the stream is exhausted, on a thread without the caller's context:
    a root ``litellm_request`` span in a new trace. The request's trace is scored without the answer text (no
    citation input), and the generation's trace holds no retrieval, so it is no answer."""
    provider = otel_callback.provider
    answer(model, provider, "stream")
    otel_callback.wait_for(
        lambda: any(span.name == "litellm_request" for span in otel_callback.exporter.get_finished_spans())
    )

    spans = otel_callback.exporter.get_finished_spans()
    (generation,) = [span for span in spans if span.name == "litellm_request"]
    (request,) = [span for span in spans if span.name == "POST /ask"]
    assert generation.parent is None and generation.context.trace_id != request.context.trace_id
    assert json.loads((generation.attributes or {})[semconv.GEN_AI_OUTPUT_MESSAGES])[0]["parts"] == [
        {"type": "text", "content": ANSWER}
    ]
    (group,) = find_answers(records(otel_callback.exporter))
    assert group.answer.name == "POST /ask"
    signals = extract_signals(group.spans)
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 0
    assert "citationCount" not in signals.inputs
    (scored_span,) = scored(otel_callback.exporter)
    assert scored_span.name == "POST /ask"


def test_otel_callback_request_span_is_a_child_generation(
    model: FakeOpenAI, otel_callback: OtelCallback, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``USE_OTEL_LITELLM_REQUEST_SPAN=true``: a ``litellm_request`` child of the current span carries the GenAI
    attributes instead of the caller's span. It is still written after the call returned, with the call's own
    start and end times."""
    monkeypatch.setenv("USE_OTEL_LITELLM_REQUEST_SPAN", "true")
    model.finish_reason = "length"
    provider = otel_callback.provider
    with provider.get_tracer("app").start_as_current_span("POST /ask") as request:
        call(model, messages(retrieve(provider)), "completion")
        otel_callback.wait_for(lambda: _logged(otel_callback))
        assert _output_messages(request) is None

    spans = {span.name: span for span in otel_callback.exporter.get_finished_spans()}
    generation = spans["litellm_request"]
    assert generation.parent is not None
    assert generation.parent.span_id == spans["POST /ask"].context.span_id
    assert (generation.attributes or {})[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == '["length"]'
    _assert_scored_answer(otel_callback.exporter, "POST /ask", "length", truncated=True)


def test_otel_callback_without_message_logging_writes_no_finish_reason(
    model: FakeOpenAI, otel_callback: OtelCallback, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``litellm.turn_off_message_logging``: the callback stops before the operation and the finish reasons, so
    nothing says a generation was cut short."""
    monkeypatch.setattr(litellm, "turn_off_message_logging", True)
    model.finish_reason = "length"
    provider = otel_callback.provider
    with provider.get_tracer("app").start_as_current_span("POST /ask") as request:
        call(model, messages(retrieve(provider)), "completion")
        otel_callback.wait_for(lambda: "gen_ai.usage.output_tokens" in (request.attributes or {}))
        time.sleep(0.2)  # what the callback writes after the usage, it writes at once

    (answer_span,) = scored(otel_callback.exporter)
    attributes = answer_span.attributes or {}
    assert attributes["gen_ai.usage.output_tokens"] == 24
    for key in (
        semconv.GEN_AI_OUTPUT_MESSAGES,
        semconv.GEN_AI_RESPONSE_FINISH_REASONS,
        semconv.GEN_AI_OPERATION_NAME,
        semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED,
    ):
        assert key not in attributes


@pytest.mark.parametrize("how", ["completion", "acompletion"])
def test_otel_callback_generation_under_a_tool_root_makes_it_an_answer(
    model: FakeOpenAI, otel_callback: OtelCallback, how: str
) -> None:
    """A tool an untraced agent loop ran (an OpenInference ``TOOL`` span, the trace's root) that retrieves and
    answers: a step root with a generation in it answers (rule 2). LiteLLM's callback marks the generation with
    its call type as ``gen_ai.operation.name``: ``chat`` for ``completion``, ``acompletion`` for
    ``acompletion``, both a model's generation."""
    provider = otel_callback.provider
    with provider.get_tracer("app").start_as_current_span("search_and_answer") as tool:
        tool.set_attribute(semconv.OPENINFERENCE_SPAN_KIND, semconv.OPENINFERENCE_KIND_TOOL)
        prompt = messages(retrieve(provider))
        if how == "completion":
            call(model, prompt, how)
            otel_callback.wait_for(lambda: _logged(otel_callback))
        else:
            asyncio.run(_acall_and_wait(model, prompt, how, otel_callback))

    (answer_span,) = scored(otel_callback.exporter)
    assert answer_span.name == "search_and_answer"
    attributes = answer_span.attributes or {}
    assert attributes[semconv.GEN_AI_OPERATION_NAME] == ("chat" if how == "completion" else "acompletion")
    assert attributes[semconv.RAG_CONFIDENCE_TOTAL] == compute_confidence(expected_inputs()).total
    assert attributes[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2


def _raw_requests(callback: OtelCallback) -> int:
    return [span.name for span in callback.exporter.get_finished_spans()].count("raw_gen_ai_request")


@pytest.mark.parametrize("request_span", [False, True], ids=["on the caller's span", "litellm_request span"])
def test_otel_callback_logging_after_the_request_ended(
    model: FakeOpenAI, otel_callback: OtelCallback, monkeypatch: pytest.MonkeyPatch, request_span: bool
) -> None:
    """LiteLLM's logging thread running once the request span has ended, as it does when the application does
    not wait for it (held here until then, so the test does not depend on the race): the request is scored
    once, without the answer text. The callback's attributes on it are dropped by the SDK (set on an ended
    span), or its ``litellm_request`` span, and the ``raw_gen_ai_request`` span it then opens beneath it, end
    after the request: forwarded as late work that leaves no buffer behind."""
    from litellm.integrations.opentelemetry import OpenTelemetry

    if request_span:
        monkeypatch.setenv("USE_OTEL_LITELLM_REQUEST_SPAN", "true")
    request_over = threading.Event()
    handle_success = OpenTelemetry._handle_success

    def after_the_request(self: Any, *args: Any, **kwargs: Any) -> Any:
        assert request_over.wait(10)
        return handle_success(self, *args, **kwargs)

    monkeypatch.setattr(OpenTelemetry, "_handle_success", after_the_request)
    provider = otel_callback.provider
    for count in range(1, 4):
        request_over.clear()
        answer(model, provider, "completion")
        request_over.set()
        otel_callback.wait_for(lambda expected=count: _raw_requests(otel_callback) == expected)

    spans = otel_callback.exporter.get_finished_spans()
    requests = scored(otel_callback.exporter)
    assert [span.name for span in requests] == ["POST /ask"] * 3
    for span in requests:
        attributes = span.attributes or {}
        assert semconv.GEN_AI_OUTPUT_MESSAGES not in attributes
        assert attributes[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 0
    assert [span.name for span in spans].count("litellm_request") == (3 if request_span else 0)
    stats = otel_callback.processor.stats()
    assert stats.answers_scored == 3
    assert stats.pending_traces == 0 and stats.traces_evicted == 0


# -- through the gateway ---------------------------------------------------------------------------------------


def test_openinference_litellm_trace_through_the_gateway(
    downstream: DownstreamReceiver, model: FakeOpenAI
) -> None:
    """The application exports with the SDK's OTLP/gRPC exporter to a real gateway, which scores the request
    span from the LiteLLM span and the retrieval and forwards every span downstream."""
    model.finish_reason = "length"
    with running_gateway() as running:
        provider = TracerProvider()
        provider.add_span_processor(
            BatchSpanProcessor(
                OTLPSpanExporter(endpoint=f"http://127.0.0.1:{running.grpc_port}", insecure=True),
                schedule_delay_millis=60_000,
            )
        )
        instrumentor = OpenInferenceInstrumentor()
        instrumentor.instrument(tracer_provider=provider)
        try:
            assert answer(model, provider, "stream") == ANSWER
        finally:
            instrumentor.uninstrument()
        provider.force_flush()
        forwarded = downstream.wait_for_spans(3)
        provider.shutdown()
    assert len(forwarded) == 3
    spans = {name: attributes_of(span) for name, span in by_name(forwarded).items()}
    request = spans["POST /ask"]
    card = compute_confidence(expected_inputs())
    assert request[semconv.RAG_CONFIDENCE_TOTAL] == card.total
    assert request[semconv.RAG_CONFIDENCE_ACTION] == card.recommended_action
    assert request[semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED] is True
    assert request[semconv.RAG_CONFIDENCE_GENERATION_FINISH_REASON] == "length"
    assert request[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
    assert list(request[semconv.RAG_CONFIDENCE_DERIVED_SIGNALS]) == [
        "supportLevel",
        "citationCount",
        "invalidCitationCount",
        "citationCoverageScore",
    ]
    assert [name for name, attributes in spans.items() if semconv.RAG_CONFIDENCE_TOTAL in attributes] == [
        "POST /ask"
    ]
