"""RAG traces from instrumentations in other languages, replayed through a real gateway over loopback.

Node, Java and .NET cannot run here, so each trace is rebuilt by hand as that SDK puts it on the wire: the
attribute keys, value types and span/event layout its instrumentation writes (each test cites the upstream
file it was taken from), encoded as OTLP protobuf (gRPC, HTTP) or OTLP/JSON with hex ids. Two encodings matter
for JavaScript: the JS SDK's OTLP transformer sends a whole number (a score of exactly 1, a Qdrant integer
point id) as ``intValue``, not ``doubleValue``, and its JSON serializer writes that int64 as a JSON number where
protobuf's JSON mapping writes a string; both are sent here.

Expected scorecards come from ``compute_confidence`` on the inputs the spans state, written out by hand.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

from rag_confidence import compute_confidence, semconv
from rag_confidence.otel.attributes import scorecard_attributes
from tests.test_gateway_e2e import _otlp_json
from tests.test_gateway_support import (
    DownstreamReceiver,
    attributes_of,
    by_name,
    downstream,
    running_gateway,
)

__all__ = ["downstream"]  # the fixture, imported for pytest

_TRACE_ID = bytes.fromhex("5b8efff798038103d269b633813fc60c")
_START = 1_764_000_000_000_000_000  # ns


def _any(value: Any) -> AnyValue:
    """An attribute value as the JS OTLP transformer encodes it: a whole JS number is an ``intValue``."""
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, Sequence):
        return AnyValue(array_value=ArrayValue(values=[_any(item) for item in value]))
    raise TypeError(value)


def _attributes(values: Mapping[str, Any]) -> list[KeyValue]:
    return [KeyValue(key=key, value=_any(value)) for key, value in values.items()]


def _span(
    name: str,
    index: int,
    parent: int | None,
    attributes: Mapping[str, Any],
    *,
    kind: int = ProtoSpan.SPAN_KIND_INTERNAL,
    events: Sequence[tuple[str, Mapping[str, Any]]] = (),
    end: int,
) -> ProtoSpan:
    """Span ``index`` (its id is derived from it) ending ``end`` ms after the trace's start."""
    span = ProtoSpan(
        trace_id=_TRACE_ID,
        span_id=index.to_bytes(8, "big"),
        parent_span_id=parent.to_bytes(8, "big") if parent is not None else b"",
        name=name,
        kind=kind,  # type: ignore[arg-type]
        start_time_unix_nano=_START + index * 1_000_000,
        end_time_unix_nano=_START + end * 1_000_000,
        attributes=_attributes(attributes),
        flags=0x100,  # the JS SDK sets the "parent is remote" flags bits (0x100, and 0x200 when remote)
    )
    for offset, (event_name, event_attributes) in enumerate(events):
        span.events.add(
            time_unix_nano=_START + index * 1_000_000 + offset,
            name=event_name,
            attributes=_attributes(event_attributes),
        )
    return span


def _request(
    spans: Sequence[ProtoSpan], scope: str, service: str = "node-rag-app"
) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    resource = request.resource_spans.add()
    resource.resource.attributes.extend(
        _attributes({"service.name": service, "telemetry.sdk.language": "nodejs"})
    )
    scoped = resource.scope_spans.add()
    scoped.scope.name = scope
    scoped.spans.extend(spans)
    return request


def _js_json(request: ExportTraceServiceRequest) -> bytes:
    """OTLP/JSON as ``@opentelemetry/otlp-transformer``'s JSON serializer writes it: hex ids, and int64 values
    (``intValue``, times) as JSON numbers rather than the strings protobuf's JSON mapping uses."""
    document = _otlp_json(request)

    def numbers(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                key: int(value)
                if key in ("intValue", "startTimeUnixNano", "endTimeUnixNano", "timeUnixNano")
                and isinstance(value, str)
                else numbers(value)
                for key, value in node.items()
            }
        if isinstance(node, list):
            return [numbers(item) for item in node]
        return node

    return json.dumps(numbers(document)).encode()


def _send_grpc(port: int, request: ExportTraceServiceRequest) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        trace_service_pb2_grpc.TraceServiceStub(channel).Export(request, timeout=10)


def _send_json(url: str, body: bytes) -> None:
    post = urllib.request.Request(
        f"{url}/v1/traces", data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(post, timeout=10) as response:
        assert response.status == 200


def _send_protobuf(url: str, request: ExportTraceServiceRequest) -> None:
    post = urllib.request.Request(
        f"{url}/v1/traces",
        data=request.SerializeToString(),
        headers={"Content-Type": "application/x-protobuf"},
        method="POST",
    )
    with urllib.request.urlopen(post, timeout=10) as response:
        assert response.status == 200


def _through_gateway(
    request: ExportTraceServiceRequest, downstream: DownstreamReceiver, via: str
) -> dict[str, Any]:
    """Send the request to a real gateway over ``via`` and return the forwarded spans' attributes by name."""
    count = sum(len(scope.spans) for resource in request.resource_spans for scope in resource.scope_spans)
    with running_gateway() as running:
        if via == "grpc":
            _send_grpc(running.grpc_port, request)
        elif via == "json":
            _send_json(running.http_url, _js_json(request))
        else:
            _send_protobuf(running.http_url, request)
        spans = downstream.wait_for_spans(count)
    assert len(spans) == count
    return {name: attributes_of(span) for name, span in by_name(spans).items()}


def _assert_scored(answer: Mapping[str, Any], expected_inputs: Mapping[str, Any]) -> None:
    """The answer span carries the scorecard of ``expected_inputs``: every scorecard attribute equal (the
    extraction diagnostics beside them are not compared)."""
    expected = scorecard_attributes(compute_confidence(dict(expected_inputs)), inputs=expected_inputs)
    assert semconv.RAG_CONFIDENCE_TOTAL in answer, "not scored"
    for key, value in expected.items():
        if key == semconv.RAG_CONFIDENCE_DERIVED_SIGNALS:
            continue  # what extraction derived: compared where a test cares
        got = answer.get(key)
        assert (list(got) if isinstance(got, tuple) else got) == (
            list(value) if isinstance(value, tuple) else value
        ), key


# ------------------------------------------------------------------------------------- OpenLLMetry JS vector DBs


def _pinecone_js_trace() -> ExportTraceServiceRequest:
    """A Node RAG handler: HTTP server span, a Pinecone query, an OpenAI chat completion.

    The Pinecone span as ``@traceloop/instrumentation-pinecone`` 0.27 writes it (openllmetry-js
    ``packages/instrumentation-pinecone/src/instrumentation.ts``, ``queryWrapper``): it calls
    ``span.addEvent(...).setAttribute(...)``, and the JS SDK's ``addEvent`` returns the span, so the
    ``db.vector.query.*`` "event attributes" land on the span; events ``pinecone.query.request``,
    ``pinecone.query.result``, one empty ``pinecone.query.result.{i}`` per hit and, for a hit with metadata,
    ``pinecone.query.result.{i}.metadata`` carrying the metadata as its attributes. Pinecone scores a cosine
    index's exact match as 1, which the JS transformer sends as ``intValue``. The chat span as
    ``@traceloop/instrumentation-openai`` writes it (``gen_ai.output.messages`` JSON).
    """
    pinecone = _span(
        "pinecone.query",
        2,
        1,
        {
            "db.system": "Pinecone",
            "db.vector.query.top_k": 3,
            "db.vector.query.include_values": False,
            "db.vector.query.include_metadata": True,
            "db.vector.query.metadata_filter": "{}",
            "db.vector.query.result.namespace": "",
            "db.vector.query.result.matches_length": 3,
            "db.vector.query.result.0.score": 1,
            "db.vector.query.result.0.id": "refund-policy",
            "db.vector.query.result.0.values": [],
            "db.vector.query.result.1.score": 0.8125,
            "db.vector.query.result.1.id": "shipping",
            "db.vector.query.result.1.values": [],
            "db.vector.query.result.2.score": 0.5,
            "db.vector.query.result.2.id": "warranty",
            "db.vector.query.result.2.values": [],
        },
        events=[
            ("pinecone.query.request", {}),
            ("pinecone.query.result", {}),
            ("pinecone.query.result.0", {}),
            ("pinecone.query.result.0.metadata", {"text": "Refunds within 30 days.", "source": "faq"}),
            ("pinecone.query.result.1", {}),
            ("pinecone.query.result.1.metadata", {"text": "Ships in 2 days.", "source": "faq"}),
            ("pinecone.query.result.2", {}),
            ("pinecone.query.result.2.metadata", {"text": "Two-year warranty.", "source": "faq"}),
        ],
        end=30,
    )
    chat = _span(
        "chat gpt-4o-mini",
        3,
        1,
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.response.finish_reasons": ["stop"],
            "gen_ai.usage.input_tokens": 412,
            "gen_ai.output.messages": json.dumps(
                [
                    {
                        "role": "assistant",
                        "parts": [{"type": "text", "content": "You can get a refund within 30 days [1]."}],
                        "finish_reason": "stop",
                    }
                ]
            ),
        },
        kind=ProtoSpan.SPAN_KIND_CLIENT,
        end=80,
    )
    server = _span(
        "POST /api/ask",
        1,
        None,
        {"http.request.method": "POST", "http.route": "/api/ask", "http.response.status_code": 200},
        kind=ProtoSpan.SPAN_KIND_SERVER,
        end=90,
    )
    return _request([pinecone, chat, server], "@traceloop/instrumentation-pinecone")


def _candidate(document_id: str, method: str, score: float, rank: int, **extra: Any) -> dict[str, Any]:
    return {
        "documentId": document_id,
        "retrievalScores": {method: score},
        "combinedScore": score,
        "rank": rank,
        **extra,
    }


def test_openllmetry_js_pinecone_hits_on_the_span_are_scored(downstream: DownstreamReceiver) -> None:
    for via in ("grpc", "json"):
        downstream.requests.clear()
        spans = _through_gateway(_pinecone_js_trace(), downstream, via)
        answer = spans["POST /api/ask"]
        _assert_scored(
            answer,
            {
                "candidates": [
                    _candidate("refund-policy", "pinecone", 1.0, 1),
                    _candidate("shipping", "pinecone", 0.8125, 2),
                    _candidate("warranty", "pinecone", 0.5, 3),
                ],
                "supportLevel": "medium",
                "citationCount": 1,
                "invalidCitationCount": 0,
                "citationCoverageScore": 1.0,
            },
        )
        assert answer[semconv.RAG_CONFIDENCE_RETRIEVAL_SPANS] == 1
        assert semconv.RAG_CONFIDENCE_TOTAL not in spans["pinecone.query"]


def _qdrant_js_trace() -> ExportTraceServiceRequest:
    """``@traceloop/instrumentation-qdrant`` (openllmetry-js ``packages/instrumentation-qdrant/src/
    instrumentation.ts``, ``_setSearchResultAttributes``): span ``qdrant.search`` of kind CLIENT, each hit's
    score, id (an unsigned integer point id here: a JS number, so ``intValue``) and payload as JSON, all on the
    span for the same reason as Pinecone's. The answer is marked by the application (``rag.answer``)."""
    qdrant = _span(
        "qdrant.search",
        2,
        1,
        {
            "db.system": "Qdrant",
            "db.vector.table_name": "kb",
            "db.vector.query.top_k": 2,
            "db.vector.query.include_values": False,
            "db.vector.query.include_metadata": True,
            "db.vector.query.embeddings.vector": "[0.1,0.2]",
            "db.vector.query.metadata_filter": "{}",
            "db.vector.query.result.matches_length": 2,
            "db.vector.query.result.0.score": 0.92,
            "db.vector.query.result.0.id": 17,
            "db.vector.query.result.0.values": "null",
            "db.vector.query.result.0.metadata": json.dumps(
                {
                    "content": "Refunds within 30 days.",
                    "metadata": {"source": "faq"},
                    "last_updated": "2026-10-01",
                }
            ),
            "db.vector.query.result.1.score": 0,
            "db.vector.query.result.1.id": 4,
            "db.vector.query.result.1.values": "null",
            "db.vector.query.result.1.metadata": json.dumps({"content": "Unrelated.", "metadata": {}}),
        },
        kind=ProtoSpan.SPAN_KIND_CLIENT,
        events=[
            ("qdrant.search.request", {}),
            ("qdrant.search.result", {}),
            ("qdrant.search.result.0", {}),
            ("qdrant.search.result.1", {}),
        ],
        end=20,
    )
    answer = _span("answer", 1, None, {semconv.RAG_ANSWER: True}, end=50)
    return _request([qdrant, answer], "@traceloop/instrumentation-qdrant")


def test_openllmetry_js_qdrant_integer_ids_and_scores(downstream: DownstreamReceiver) -> None:
    spans = _through_gateway(_qdrant_js_trace(), downstream, "protobuf")
    _assert_scored(
        spans["answer"],
        {
            "candidates": [
                _candidate("17", "qdrant", 0.92, 1, lastUpdated="2026-10-01T00:00:00"),
                _candidate("4", "qdrant", 0.0, 2),
            ],
            "supportLevel": "medium",
        },
    )


# ----------------------------------------------------------------------------------------- Vercel AI SDK


def _retrieval_span(index: int, parent: int, end: int) -> ProtoSpan:
    """What docs/signals.md asks of an application whose framework records no retrieval: a GenAI retrieval span
    of its own (the JS SDK sends ``gen_ai.retrieval.documents`` as a JSON string; a whole score is an int)."""
    documents = [{"id": "kb-1", "score": 1}, {"id": "kb-2", "score": 0.75}]
    return _span(
        "retrieval kb",
        index,
        parent,
        {
            "gen_ai.operation.name": "retrieval",
            "gen_ai.data_source.id": "kb",
            "gen_ai.retrieval.documents": json.dumps(documents),
        },
        kind=ProtoSpan.SPAN_KIND_CLIENT,
        end=end,
    )


_AI_SDK_EXPECTED = {
    "candidates": [_candidate("kb-1", "kb", 1.0, 1), _candidate("kb-2", "kb", 0.75, 2)],
    "supportLevel": "medium",
    "citationCount": 1,
    "invalidCitationCount": 1,
    "citationCoverageScore": 0.5,
}
_AI_SDK_TEXT = "Refunds take 30 days [kb-1]. Shipping is free [3]."


def _ai_sdk_legacy_trace(finish_reason: str) -> ExportTraceServiceRequest:
    """``generateText`` with ``experimental_telemetry: {isEnabled: true, functionId: "answer"}`` as ``ai`` 3-6
    traces it (vercel/ai ``packages/otel/src/legacy-open-telemetry.ts``, ``onStepStart``/``onStepEnd``): an
    ``ai.generateText`` span over an ``ai.generateText.doGenerate`` span holding ``ai.response.text``,
    ``ai.response.finishReason`` and ``gen_ai.response.finish_reasons``, no ``gen_ai.operation.name``. The
    AI SDK records no retrieval: the application adds a GenAI retrieval span, as docs/signals.md shows."""
    step = _span(
        "ai.generateText.doGenerate",
        4,
        3,
        {
            "operation.name": "ai.generateText.doGenerate answer",
            "resource.name": "answer",
            "ai.operationId": "ai.generateText.doGenerate",
            "ai.telemetry.functionId": "answer",
            "ai.model.provider": "openai.chat",
            "ai.model.id": "gpt-4o-mini",
            "ai.prompt.messages": json.dumps([{"role": "user", "content": [{"type": "text", "text": "?"}]}]),
            "gen_ai.system": "openai.chat",
            "gen_ai.request.model": "gpt-4o-mini",
            "ai.response.finishReason": finish_reason,
            "ai.response.text": _AI_SDK_TEXT,
            "ai.response.id": "chatcmpl-1",
            "ai.response.model": "gpt-4o-mini-2024-07-18",
            "ai.usage.inputTokens": 210,
            "ai.usage.outputTokens": 17,
            "gen_ai.response.finish_reasons": [finish_reason],
            "gen_ai.response.id": "chatcmpl-1",
            "gen_ai.usage.input_tokens": 210,
        },
        end=70,
    )
    generate = _span(
        "ai.generateText",
        3,
        1,
        {
            "operation.name": "ai.generateText answer",
            "ai.operationId": "ai.generateText",
            "ai.telemetry.functionId": "answer",
            "ai.model.provider": "openai.chat",
            "ai.model.id": "gpt-4o-mini",
            "ai.response.finishReason": finish_reason,
            "ai.response.text": _AI_SDK_TEXT,
        },
        end=75,
    )
    server = _span(
        "POST /api/chat", 1, None, {"http.route": "/api/chat"}, kind=ProtoSpan.SPAN_KIND_SERVER, end=80
    )
    return _request([_retrieval_span(2, 1, 20), step, generate, server], "ai")


def test_vercel_ai_sdk_legacy_telemetry_answer_text_is_read(downstream: DownstreamReceiver) -> None:
    spans = _through_gateway(_ai_sdk_legacy_trace("stop"), downstream, "json")
    answer = spans["POST /api/chat"]
    _assert_scored(answer, _AI_SDK_EXPECTED)
    assert answer[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
    assert answer[semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED] is False


def test_vercel_ai_sdk_legacy_length_finish_is_truncation(downstream: DownstreamReceiver) -> None:
    spans = _through_gateway(_ai_sdk_legacy_trace("length"), downstream, "grpc")
    answer = spans["POST /api/chat"]
    assert answer[semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED] is True
    assert answer[semconv.RAG_CONFIDENCE_GENERATION_FINISH_REASON] == "length"


def test_vercel_ai_sdk_genai_telemetry_is_read(downstream: DownstreamReceiver) -> None:
    """``@ai-sdk/otel``'s ``OpenTelemetry`` integration (``ai`` 7; vercel/ai ``packages/otel/src/
    open-telemetry.ts`` and ``gen-ai-format-messages.ts``): GenAI conventions, an ``invoke_agent``-style
    operation span over a ``chat {model}`` CLIENT span with ``gen_ai.output.messages`` as a JSON string of
    ``{role, parts: [{type: "text", content}], finish_reason}``. Nothing needed changing; this pins it."""
    chat = _span(
        "chat gpt-4o-mini",
        4,
        3,
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.response.finish_reasons": ["stop"],
            "gen_ai.usage.input_tokens": 210,
            "gen_ai.output.messages": json.dumps(
                [
                    {
                        "role": "assistant",
                        "parts": [{"type": "text", "content": _AI_SDK_TEXT}],
                        "finish_reason": "stop",
                    }
                ]
            ),
        },
        kind=ProtoSpan.SPAN_KIND_CLIENT,
        end=70,
    )
    operation = _span(
        "invoke_agent gpt-4o-mini",
        3,
        1,
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "answer",
            "ai.operationId": "ai.generateText",
        },
        end=75,
    )
    server = _span(
        "POST /api/chat", 1, None, {"http.route": "/api/chat"}, kind=ProtoSpan.SPAN_KIND_SERVER, end=80
    )
    spans = _through_gateway(
        _request([_retrieval_span(2, 1, 20), chat, operation, server], "gen_ai"), downstream, "json"
    )
    _assert_scored(spans["POST /api/chat"], _AI_SDK_EXPECTED)


# ------------------------------------------------------------------------------ Spring AI, Semantic Kernel


def _marked_chat_trace(
    chat_attributes: Mapping[str, Any], scope: str, events: Sequence[Any] = ()
) -> ExportTraceServiceRequest:
    chat = _span("chat gpt-4o", 3, 1, chat_attributes, kind=ProtoSpan.SPAN_KIND_CLIENT, events=events, end=60)
    # The answer text, which these chat spans do not carry, set by the application (docs/signals.md).
    answer = _span(
        "answer", 1, None, {semconv.RAG_ANSWER: True, "output.value": "Refunds take 30 days [kb-1]."}, end=70
    )
    return _request([_retrieval_span(2, 1, 20), chat, answer], scope, service="jvm-or-dotnet-app")


def test_spring_ai_finish_reasons_json_string(downstream: DownstreamReceiver) -> None:
    """Spring AI's chat model observation (spring-ai ``DefaultChatModelObservationConvention.
    responseFinishReasons``) writes ``gen_ai.response.finish_reasons`` as the string ``["LENGTH"]``: Micrometer
    key values are strings. The completion text is logged, not put on the span, since Spring AI 1.0."""
    request = _marked_chat_trace(
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": "openai",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.response.finish_reasons": '["LENGTH"]',
            "gen_ai.usage.input_tokens": "120",
            "spring.ai.kind": "chat_model",
        },
        "org.springframework.ai",
    )
    answer = _through_gateway(request, downstream, "protobuf")["answer"]
    assert answer[semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED] is True
    assert answer[semconv.RAG_CONFIDENCE_GENERATION_FINISH_REASON] == "length"
    assert answer[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 1  # the answer span's output.value


def test_semantic_kernel_dotnet_singular_finish_reason(downstream: DownstreamReceiver) -> None:
    """Semantic Kernel .NET (semantic-kernel ``dotnet/src/InternalUtilities/src/Diagnostics/ModelDiagnostics.cs``):
    ``gen_ai.response.finish_reason`` (singular) holding ``["Length"]``, the completion in a ``gen_ai.choice``
    span event (sensitive diagnostics on)."""
    request = _marked_chat_trace(
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": "openai",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.response.finish_reason": '["Length"]',
            "gen_ai.usage.output_tokens": 256,
        },
        "Microsoft.SemanticKernel.Diagnostics",
        events=[
            (
                "gen_ai.choice",
                {
                    "gen_ai.event.content": json.dumps(
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "Refunds [kb-1]"},
                            "finish_reason": "Length",
                        }
                    )
                },
            )
        ],
    )
    answer = _through_gateway(request, downstream, "grpc")["answer"]
    assert answer[semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED] is True
    assert answer[semconv.RAG_CONFIDENCE_GENERATION_FINISH_REASON] == "length"


def test_semantic_kernel_dotnet_choice_event_is_the_answer_text(downstream: DownstreamReceiver) -> None:
    """The ``gen_ai.choice`` span event Semantic Kernel .NET writes with sensitive diagnostics on
    (``ModelDiagnostics.cs``, ``SetCompletionResponse`` / ``ToGenAIConventionsChoiceFormat``: the body as JSON
    in ``gen_ai.event.content``, the role as ``AuthorRole`` prints it) is the chat span's answer text: with no
    text set by the application, its markers are the citations."""
    chat = _span(
        "chat.completions gpt-4o",
        3,
        1,
        {
            "gen_ai.operation.name": "chat.completions",
            "gen_ai.system": "openai",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.response.finish_reason": '["Stop"]',
        },
        kind=ProtoSpan.SPAN_KIND_CLIENT,
        events=[
            (
                "gen_ai.user.message",
                {"gen_ai.event.content": json.dumps({"role": "user", "content": "Refunds?"})},
            ),
            (
                "gen_ai.choice",
                {
                    "gen_ai.event.content": json.dumps(
                        {
                            "index": 0,
                            "message": {
                                "role": "assistant",
                                "name": None,
                                "content": _AI_SDK_TEXT,
                                "tool_calls": [],
                            },
                            "tool_calls": [],
                            "finish_reason": "Stop",
                        }
                    )
                },
            ),
        ],
        end=60,
    )
    answer = _span("answer", 1, None, {semconv.RAG_ANSWER: True}, end=70)
    request = _request(
        [_retrieval_span(2, 1, 20), chat, answer],
        "Microsoft.SemanticKernel.Diagnostics",
        service="dotnet-app",
    )
    scored = _through_gateway(request, downstream, "protobuf")["answer"]
    _assert_scored(scored, _AI_SDK_EXPECTED)
    assert scored[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
    assert scored[semconv.RAG_CONFIDENCE_GENERATION_FINISH_REASON] == "stop"


# ------------------------------------------------------------------------------ OpenInference JS (LangChain.js)


def test_openinference_js_langchain_trace(downstream: DownstreamReceiver) -> None:
    """``@arizeai/openinference-instrumentation-langchain`` (openinference ``js/packages/openinference-
    instrumentation-langchain/src/utils.ts``): the same flattened keys as Python, ``retrieval.documents.{i}.
    document.{content,metadata}`` with metadata as JSON; the retriever's ``output.value`` is the JSON of
    LangChain.js ``Document``s (``pageContent``, ``metadata``, ``id``). LangChain.js retrievers put no score on
    a document: the application's retriever puts one in the metadata (an exact match's 1 is a JSON integer).
    Chat output: ``llm.output_messages.{i}.message.{role,content}``. Sent as JS-style OTLP/JSON."""
    metadata = [{"score": 1, "source": "faq"}, {"score": 0.5, "source": "faq"}]
    contents = ["Refunds within 30 days.", "Ships in 2 days."]
    documents = [
        {"pageContent": content, "metadata": meta, "id": f"doc-{index}"}
        for index, (content, meta) in enumerate(zip(contents, metadata, strict=True))
    ]
    retriever = {
        "openinference.span.kind": "RETRIEVER",
        "input.value": "refund window?",
        "input.mime_type": "text/plain",
        "output.value": json.dumps({"documents": documents}),
        "output.mime_type": "application/json",
        "metadata": json.dumps(
            {"ls_retriever_name": "vectorstore", "ls_vector_store_provider": "MemoryVectorStore"}
        ),
    }
    for index, (content, meta) in enumerate(zip(contents, metadata, strict=True)):
        retriever[f"retrieval.documents.{index}.document.content"] = content
        retriever[f"retrieval.documents.{index}.document.metadata"] = json.dumps(meta)
    llm = {
        "openinference.span.kind": "LLM",
        "llm.model_name": "gpt-4o-mini",
        "llm.provider": "openai",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "Within 30 days [doc-0].",
        "llm.token_count.prompt": 95,
    }
    chain = {
        "openinference.span.kind": "CHAIN",
        "input.value": "refund window?",
        "output.value": "Within 30 days [doc-0].",
    }
    request = _request(
        [
            _span("VectorStoreRetriever", 2, 1, retriever, end=20),
            _span("ChatOpenAI", 3, 1, llm, end=60),
            _span("RunnableSequence", 1, None, chain, end=70),
        ],
        "@arizeai/openinference-instrumentation-langchain",
    )
    answer = _through_gateway(request, downstream, "json")["RunnableSequence"]
    _assert_scored(
        answer,
        {
            "candidates": [
                _candidate("doc-0", "vectorstore", 1.0, 1),
                _candidate("doc-1", "vectorstore", 0.5, 2),
            ],
            "supportLevel": "medium",
            "citationCount": 1,
            "invalidCitationCount": 0,
            "citationCoverageScore": 1.0,
        },
    )
