"""The gateway's screen: traces that cannot hold an answer are forwarded without records or scoring.

The screen (``gateway.spans.may_hold_answer``, ``signals.may_hold_answer``) must agree exactly with the answer
rules (``is_marked_answer``/``is_retrieval_span`` per span, ``find_answers`` per trace), or answers would go
unscored. Fuzzed protobuf spans cover every AnyValue kind, empty values, repeated keys and event names.
"""

from __future__ import annotations

from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

from rag_confidence import semconv
from rag_confidence.gateway import pipeline as pipeline_module
from rag_confidence.gateway import screen as screen_module
from rag_confidence.gateway import spans as spans_module
from rag_confidence.gateway.pipeline import TracePipeline
from rag_confidence.gateway.screen import Screen, may_hold_answer
from rag_confidence.gateway.spans import (
    attributes_to_dict,
    iter_spans,
    python_to_any_value,
    set_attributes,
    to_record,
)
from rag_confidence.otel.answer_scoring import AnswerScorer
from rag_confidence.signals import (
    ANSWER_HINT_KEYS,
    RESULT_EVENT_KEYS,
    find_answers,
    is_marked_answer,
    is_retrieval_span,
)
from rag_confidence.signals import may_hold_answer as signals_may_hold_answer
from rag_confidence.signals.answers import _is_step
from rag_confidence.signals.records import SpanRecord

# An OpenAI Response that ran file_search, as the OpenInference OpenAI instrumentor writes ``output.value``.
FILE_SEARCH_OUTPUT = (
    '{"id":"resp_1","output":[{"id":"fs_1","type":"file_search_call","status":"completed",'
    '"results":[{"file_id":"file-a","score":0.9,"text":"Paris."}]}]}'
)
# A grounded Gemini response, as the OpenInference Google GenAI instrumentor writes ``output.value``.
GROUNDED_OUTPUT = (
    '{"candidates":[{"content":{"parts":[{"text":"Paris."}]},"grounding_metadata":{"grounding_chunks":'
    '[{"web":{"uri":"https://a.example"}}],"grounding_supports":[{"grounding_chunk_indices":[0],'
    '"segment":{"text":"Paris."}}]}}]}'
)
# A Bedrock Knowledge Base reference and retrieve_and_generate's request, as openinference-instrumentation-bedrock
# writes them (document metadata, llm.invocation_parameters).
BEDROCK_REFERENCE = (
    '{"location": {"type": "S3", "s3Location": {"uri": "s3://kb/a.md"}}, "metadata": '
    '{"x-amz-bedrock-kb-chunk-id": "chunk-1", "document_type": "atlas"}, "type": "TEXT"}'
)
BEDROCK_RAG_PARAMETERS = (
    '{"retrieveAndGenerateConfiguration": {"type": "KNOWLEDGE_BASE", '
    '"knowledgeBaseConfiguration": {"knowledgeBaseId": "KB1", "modelArn": "m"}}}'
)
KEYS = [
    *sorted(ANSWER_HINT_KEYS),
    *sorted(RESULT_EVENT_KEYS),
    semconv.RAG_SIGNAL_SUPPORT_LEVEL,
    semconv.OI_OUTPUT_VALUE,  # read of LLM spans (an OpenAI Responses call that ran file_search)
    "retrieval.documents.0.document.id",
    "retrieval.documents.0.document.score",
    "retrieval.documents.0.document.metadata",
    semconv.OI_LLM_INVOCATION_PARAMETERS,  # a Bedrock retrieve_and_generate span's request: it generated too
    "http.route",
]
STRINGS = [
    "RETRIEVER",
    "RERANKER",
    "LLM",
    "retrieval",
    "vector_db_retrieve",
    "VectorIndexRetriever.task",  # OpenLLMetry LlamaIndex spans (traceloop.entity.name)
    "CohereRerank.task",
    "RetrieverQueryEngine.workflow",
    "retrieve",
    "chat",
    semconv.DB_SYSTEM_MILVUS,
    "true",
    "doc-1",
    "",
    FILE_SEARCH_OUTPUT,
    FILE_SEARCH_OUTPUT[:60],  # cut short by a value length limit: the search ran, its results are unreadable
    # A framework's JSON holding the item deeper down (LangChain's LLMResult of a Responses call): no Response.
    '{"generations": [[{"tool_outputs": [{"type": "file_search_call", "results": null}]}]]}',
    '{"generations": [[{"tool_outputs": [{"type": "file_search_call", "results": [{"file_id": "f',  # cut short
    '{"output": [{"id": "m1", "type": "message"}, {"type": "file_search_call", "results": [{"file_id": "f',
    GROUNDED_OUTPUT,
    GROUNDED_OUTPUT[:70],  # cut short: grounded, what it found unreadable
    # Grounding deeper down than a response's first candidate (a framework's JSON), and an empty chunk list.
    '{"generations": [{"grounding_metadata": {"grounding_chunks": [{"web": {}}]}}]}',
    # The same cut short by a length limit: no JSON, and no response's grounding either.
    '{"generations": [{"grounding_metadata": {"grounding_chunks": [{"web": {}}]}}]}'[:60],
    '{"candidates": [{"grounding_metadata": {"grounding_chunks": []}}]}',
    "InMemoryBM25Retriever",  # Haystack component class names (haystack.component.type)
    "TransformersSimilarityRanker",
    "DocumentJoiner",
    BEDROCK_REFERENCE,
    BEDROCK_RAG_PARAMETERS,
    '{"knowledgeBaseId": "KB1"}',  # a Bedrock retrieve's request
]
EVENT_NAMES = [
    semconv.DB_QUERY_RESULT,
    semconv.DB_SEARCH_RESULT,
    semconv.GEN_AI_EVALUATION_RESULT,
    "exception",
]


def _any_value(kind: str, payload: Any) -> AnyValue:
    value = AnyValue()
    if kind == "string":
        value.string_value = payload
    elif kind == "bool":
        value.bool_value = payload
    elif kind == "int":
        value.int_value = payload
    elif kind == "double":
        value.double_value = payload
    elif kind == "bytes":
        value.bytes_value = payload.encode()
    elif kind == "array":
        value.array_value.values.add().string_value = payload
    elif kind == "kvlist":
        value.kvlist_value.values.add(key="k").value.string_value = payload
    elif kind == "strindex":
        value.string_value_strindex = 3
    # "empty": no value kind set at all
    return value


any_values = st.one_of(
    st.tuples(st.just("string"), st.sampled_from(STRINGS)),
    st.tuples(st.just("bool"), st.booleans()),
    st.tuples(st.just("int"), st.integers(-3, 3)),
    st.tuples(st.just("double"), st.floats(allow_nan=False)),
    st.tuples(st.sampled_from(["bytes", "array", "kvlist"]), st.sampled_from(STRINGS)),
    st.tuples(st.sampled_from(["strindex", "empty"]), st.none()),
).map(lambda pair: _any_value(*pair))
# Lists, not dicts: repeated keys (which OTLP forbids and producers still send) are part of the test.
attribute_lists = st.lists(st.tuples(st.sampled_from(KEYS), st.one_of(any_values, st.none())), max_size=6)


@st.composite
def proto_spans(draw: st.DrawFn, trace: int, span: int, parent: int | None) -> ProtoSpan:
    proto = ProtoSpan(
        trace_id=trace.to_bytes(16, "big"),
        span_id=span.to_bytes(8, "big"),
        parent_span_id=parent.to_bytes(8, "big") if parent else b"",
        # The name a Bedrock retrieve_and_generate span has (a retrieval that generated) now and then.
        name=draw(st.sampled_from([f"span {span}", f"span {span}", "bedrock.retrieve_and_generate"])),
        end_time_unix_nano=draw(st.integers(1, 100)),
    )
    for key, value in draw(attribute_lists):
        item = proto.attributes.add(key=key)
        if value is not None:  # None: a KeyValue without its value field
            item.value.CopyFrom(value)
    # A vector-DB client span often enough for the rule that depends on its system (Milvus's row lookups).
    system = draw(st.sampled_from([None, None, semconv.DB_SYSTEM_MILVUS, "chroma"]))
    if system is not None:
        proto.attributes.add(key=semconv.DB_SYSTEM).value.string_value = system
    for name in draw(st.lists(st.sampled_from(EVENT_NAMES), max_size=2)):
        proto.events.add(name=name)
    return proto


@st.composite
def proto_traces(draw: st.DrawFn) -> list[ProtoSpan]:
    spans = []
    for trace in (1, 2, 3):
        count = draw(st.integers(1, 5))
        for span in range(1, count + 1):
            parent = draw(st.one_of(st.none(), st.integers(1, count))) if span > 1 else None
            spans.append(draw(proto_spans(trace, span, parent)))
    return spans


def _roots(records: list[SpanRecord]) -> list[SpanRecord]:
    """The spans rule (c) may take for roots: where each span's parent chain ends, or every span of a cycle it
    runs into (broken data)."""
    by_id = {record.span_id: record for record in records}
    found: list[SpanRecord] = []
    for record in records:
        path: list[SpanRecord] = []
        current: SpanRecord | None = record
        while current is not None and current not in path:
            path.append(current)
            parent = current.parent_span_id
            current = None if parent is None or current.parent_is_remote else by_id.get(parent)
        found.extend(path[path.index(current) :] if current is not None else path[-1:])
    return found


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(proto_traces())
def test_screen_agrees_with_the_answer_rules_span_by_span_and_trace_by_trace(spans: list[ProtoSpan]) -> None:
    records = [to_record(span) for span in spans]
    for span, record in zip(spans, records, strict=True):
        assert may_hold_answer(span) == (is_marked_answer(record) or is_retrieval_span(record))
    for trace in (1, 2, 3):
        members = [
            (span, record) for span, record in zip(spans, records, strict=True) if record.trace_id == trace
        ]
        screened = any(may_hold_answer(span) for span, _ in members)
        answers = find_answers([record for _, record in members])
        if any(record.attributes.get("rag.answer") is False for _, record in members) or any(
            _is_step(root) for root in _roots([record for _, record in members])
        ):
            # A declined span (rag.answer = false), or a root that is a retriever or tool on its own, may hold
            # back answers the screen still lets through: the screen only has to be sound, passing every
            # trace that answers.
            assert screened or not answers
        else:
            assert screened == bool(answers)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(proto_traces(), st.booleans())
def test_the_body_check_only_skips_what_no_span_can_pass_on(spans: list[ProtoSpan], plain_keys: bool) -> None:
    if plain_keys:  # bodies without any hint key (or result event) are the case the body check is for
        for span in spans:
            kept = [item for item in span.attributes if item.key not in ANSWER_HINT_KEYS]
            del span.attributes[:]
            span.attributes.extend(kept)
    payload = _request(spans).SerializeToString()
    screen = Screen(payload)
    for span in spans:
        assert screen.may_hold_answer(span) == may_hold_answer(span)
    if not screen.needed:
        assert not any(may_hold_answer(span) for span in spans)


hint_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 2),
    st.sampled_from(STRINGS),
    st.lists(st.sampled_from(STRINGS), max_size=2).map(tuple),
)
other_keys = st.sampled_from(["http.route", "rag.signal.support_level", "retrieval.documents.0.document.id"])
READ_KEYS = ANSWER_HINT_KEYS | RESULT_EVENT_KEYS


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.one_of(st.sampled_from(sorted(READ_KEYS)), other_keys), hint_values, max_size=6),
    st.lists(st.one_of(st.sampled_from(EVENT_NAMES), st.integers()), max_size=3),
)
def test_only_the_hint_keys_decide(attributes: dict[str, Any], event_names: list[Any]) -> None:
    """The hint keys, and the result event keys for a span with result events."""
    hinted = {key: value for key, value in attributes.items() if key in READ_KEYS}
    assert signals_may_hold_answer(attributes, event_names) == signals_may_hold_answer(hinted, event_names)
    # A result event key alone makes no span pass: a screen that does not count them misses no answer.
    unhinted = {key: value for key, value in attributes.items() if key not in ANSWER_HINT_KEYS}
    assert not signals_may_hold_answer(
        unhinted, [name for name in event_names if name not in EVENT_NAMES[:2]]
    )


def test_repeated_keys_keep_the_last_value_and_empty_values_are_absent() -> None:
    items = [
        KeyValue(key="a", value=AnyValue(int_value=1)),
        KeyValue(key="b", value=AnyValue(int_value=1)),
        KeyValue(key="a", value=AnyValue(int_value=2)),
        KeyValue(key="b"),
        KeyValue(key="c", value=AnyValue(string_value_strindex=4)),
    ]
    assert attributes_to_dict(items) == {"a": 2}


def _request(spans: list[ProtoSpan]) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    request.resource_spans.add().scope_spans.add().spans.extend(spans)
    return request


def _plain_trace(trace: int) -> list[ProtoSpan]:
    root = ProtoSpan(trace_id=trace.to_bytes(16, "big"), span_id=(1).to_bytes(8, "big"), name="GET /items")
    child = ProtoSpan(
        trace_id=root.trace_id, span_id=(2).to_bytes(8, "big"), parent_span_id=root.span_id, name="db"
    )
    child.attributes.add(key="db.system").value.string_value = "postgresql"
    return [child, root]


def _rag_trace(trace: int) -> list[ProtoSpan]:
    child, root = _plain_trace(trace)
    child.attributes.add(key=semconv.OPENINFERENCE_SPAN_KIND).value.string_value = "RETRIEVER"
    child.attributes.add(key="retrieval.documents.0.document.id").value.string_value = "doc-1"
    child.attributes.add(key="retrieval.documents.0.document.score").value.double_value = 0.8
    return [child, root]


def _spy_on_records(monkeypatch: Any) -> list[int]:
    """The trace id of every record the gateway builds. A spy on the record constructor ``to_record`` calls
    (``gateway.spans`` and the pipeline may be compiled, which calls ``to_record`` directly, past any patch of
    its name; a call into the Python module ``signals.records`` still goes through the module's globals)."""
    built: list[int] = []
    real_new_span_record = spans_module.new_span_record

    def counting_new_span_record(trace_id: int, *args: Any, **kwargs: Any) -> Any:  # the real one, counted
        built.append(trace_id)
        return real_new_span_record(trace_id, *args, **kwargs)

    monkeypatch.setattr(spans_module, "new_span_record", counting_new_span_record)
    return built


@pytest.mark.parametrize("with_body", [True, False])
def test_only_traces_that_may_hold_an_answer_get_records(monkeypatch: Any, with_body: bool) -> None:
    built = _spy_on_records(monkeypatch)
    spans = [*_plain_trace(1), *_rag_trace(2), *_plain_trace(3)]
    request = _request(spans)
    payload = request.SerializeToString() if with_body else None
    before = {span.span_id + span.trace_id: span.SerializeToString() for span in iter_spans(request)}
    prepared = TracePipeline(AnswerScorer()).prepare(request, payload)

    assert sorted(set(built)) == [2]
    assert [(scored.trace_id, scored.span_id) for scored in prepared.scored] == [(2, 1)]
    after = list(iter_spans(prepared.request))
    assert len(after) == len(spans)
    for span in after:
        trace = int.from_bytes(span.trace_id, "big")
        if trace == 2 and not span.parent_span_id:
            assert semconv.RAG_CONFIDENCE_TOTAL in attributes_to_dict(span.attributes)
        else:  # every other span is forwarded byte for byte as received
            assert span.SerializeToString() == before[span.span_id + span.trace_id]


def test_a_body_without_hint_keys_or_result_events_is_forwarded_without_screening(monkeypatch: Any) -> None:
    built = _spy_on_records(monkeypatch)
    request = _request([*_plain_trace(1), *_plain_trace(2)])
    payload = request.SerializeToString()
    assert not Screen(payload).needed
    prepared = TracePipeline(AnswerScorer()).prepare(request, payload)
    assert built == [] and prepared.scored == [] and prepared.forwarded == 4
    assert prepared.request.SerializeToString() == payload


def _milvus_trace(trace: int, method: str) -> list[ProtoSpan]:
    """A Milvus client span under a plain root, with events as Milvus wrapper.py (opentelemetry-instrumentation-
    milvus 0.60.0) writes them: ``query`` each row as a ``db.query.result`` event of the row's own fields,
    ``search`` each hit as a ``db.search.result`` event."""
    child, root = _plain_trace(trace)
    child.name = f"milvus.{method}"
    child.attributes[0].value.string_value = semconv.DB_SYSTEM_MILVUS
    for row in (1, 3):
        if method == "query":
            event = child.events.add(name=semconv.DB_QUERY_RESULT)
            event.attributes.add(key="id").value.int_value = row
            event.attributes.add(key="doc_id").value.string_value = f"doc-{row}"
        else:
            event = child.events.add(name=semconv.DB_SEARCH_RESULT)
            event.attributes.add(key=semconv.DB_SEARCH_RESULT_ID).value.int_value = row
            event.attributes.add(key=semconv.DB_SEARCH_RESULT_DISTANCE).value.string_value = str(1 / row)
    return [child, root]


@pytest.mark.parametrize("with_body", [True, False])
def test_a_milvus_row_lookup_is_screened_out_and_a_milvus_search_is_scored(
    monkeypatch: Any, with_body: bool
) -> None:
    """``MilvusClient.query`` (a lookup by filter) writes ``db.query.result`` events, yet is no retrieval: the
    screen reads the span's ``db.system`` for it, also in a body holding no hint key at all."""
    built = _spy_on_records(monkeypatch)
    request = _request([*_milvus_trace(1, "query"), *_milvus_trace(2, "search")])
    payload = request.SerializeToString() if with_body else None
    lookup, _, search, _ = iter_spans(request)
    screen = Screen(payload)
    assert not screen.may_hold_answer(lookup) and not may_hold_answer(lookup)
    assert screen.may_hold_answer(search) and may_hold_answer(search)
    prepared = TracePipeline(AnswerScorer()).prepare(request, payload)
    assert sorted(set(built)) == [2]
    assert [(scored.trace_id, scored.span_id) for scored in prepared.scored] == [(2, 1)]


def _answers_scored(request: ExportTraceServiceRequest, payload: bytes | None) -> tuple[Any, ...]:
    prepared = TracePipeline(AnswerScorer()).prepare(request, payload)
    scored = sorted((scored.trace_id, scored.span_id) for scored in prepared.scored)
    return tuple(scored), prepared.failed_answers, prepared.already_scored


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(proto_traces(), st.lists(st.integers(0, 3), min_size=15, max_size=15))
def test_screening_scope_by_scope_scores_every_answer_the_rules_find(
    spans: list[ProtoSpan], placement: list[int]
) -> None:
    # The spans spread over two resources with two scopes each, as a Collector batch of several libraries.
    request = ExportTraceServiceRequest()
    scopes = [
        resource.scope_spans.add()
        for resource in (request.resource_spans.add(), request.resource_spans.add())
        for _ in range(2)
    ]
    for span, where in zip(spans, placement, strict=False):
        scopes[where].spans.append(span)
    # In the order the gateway reads them (broken parent links, cycles included, resolve by order).
    expected = find_answers([to_record(span) for span in iter_spans(request)])
    payload = request.SerializeToString()

    with_body = _answers_scored(_copy(request), payload)
    without_body = _answers_scored(_copy(request), None)
    assert with_body == without_body
    # Small scopes are screened span by span; with every scope narrowed by its bytes first, the same answers.
    with patch.object(screen_module, "SCREEN_DIRECTLY_UP_TO", 0):
        assert _answers_scored(_copy(request), payload) == with_body
        assert _answers_scored(_copy(request), None) == with_body
    scored, failed, already = with_body
    assert set(scored) <= {(group.answer.trace_id, group.answer.span_id) for group in expected}
    assert len(scored) + failed + already == len(expected)


# Strings a producer may send anywhere: the hint keys and result event names as values, event attribute keys,
# resource attribute keys and scope names. None of these is what the screen counts (exact attribute keys and
# event names of spans), so each must only cost the shortcut, never an answer.
NAMES = [*sorted(ANSWER_HINT_KEYS), semconv.DB_QUERY_RESULT, semconv.DB_SEARCH_RESULT]


@st.composite
def noisy_requests(draw: st.DrawFn) -> ExportTraceServiceRequest:
    spans = draw(proto_traces())
    noisy = draw(st.booleans())  # half the requests hold no stray name: screening can stop there

    def stray() -> bool:
        return noisy and draw(st.integers(0, 3)) == 0

    for span in spans:
        if stray():
            span.attributes.add(key="note").value.string_value = draw(st.sampled_from(NAMES))
        if span.events and stray():
            span.events[0].attributes.add(key=draw(st.sampled_from(NAMES))).value.bool_value = True
    request = ExportTraceServiceRequest()
    resources = [request.resource_spans.add() for _ in range(draw(st.integers(1, 2)))]
    for resource in resources:
        if stray():
            resource.resource.attributes.add(key=draw(st.sampled_from(NAMES))).value.bool_value = True
    scopes = [resource.scope_spans.add() for resource in resources for _ in range(draw(st.integers(1, 3)))]
    for scope in scopes:
        if stray():
            scope.scope.name = draw(st.sampled_from(NAMES))
    order = draw(st.permutations(range(len(spans))))
    for index in order:
        scopes[draw(st.integers(0, len(scopes) - 1))].spans.append(spans[index])
    return request


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(noisy_requests(), st.sampled_from([0, 2, 16]))
def test_counting_occurrences_stops_screening_only_when_no_unread_span_can_pass(
    otlp: ExportTraceServiceRequest, directly_up_to: int
) -> None:
    kept = list(iter_spans(otlp))
    trace_ids = [span.trace_id for span in kept]
    scopes = []
    for resource in otlp.resource_spans:
        for scope in resource.scope_spans:
            if scope.spans:
                first = kept.index(scope.spans[0])
                scopes.append((scope, first, first + len(scope.spans)))
    # The rule itself, span by span: the traces that have a span passing it.
    expected = {span.trace_id for span in kept if may_hold_answer(span)}
    with patch.object(screen_module, "SCREEN_DIRECTLY_UP_TO", directly_up_to):
        for by_scope in (False, True):
            screened = Screen(otlp.SerializeToString()).answering_traces(
                scopes, kept, trace_ids, by_scope=by_scope
            )
            assert screened == expected
            assert Screen(None).answering_traces(scopes, kept, trace_ids, by_scope=by_scope) == expected


def _large_plain_scope(request: ExportTraceServiceRequest, traces: range, note: str = "") -> None:
    scope = request.resource_spans.add().scope_spans.add()
    for trace in traces:
        for span in _plain_trace(trace):
            if note:
                span.attributes.add(key="note").value.string_value = note
            scope.spans.append(span)


def test_once_the_small_scopes_account_for_every_hint_the_large_ones_are_not_screened() -> None:
    request = ExportTraceServiceRequest()
    _large_plain_scope(request, range(10, 30))
    request.resource_spans.add().scope_spans.add().spans.extend(_rag_trace(2))  # small, read first
    payload = request.SerializeToString()
    with patch.object(Screen, "within", autospec=True, side_effect=Screen.within) as within:
        assert _answers_scored(_copy(request), payload) == (((2, 1),), 0, 0)
    assert within.call_count == 0
    # The same request with a hint key's name in a value of the large scope: that occurrence is never
    # accounted for, so the large scope is checked by its encoding (and read), and the answer is the same.
    noisy = ExportTraceServiceRequest()
    _large_plain_scope(noisy, range(10, 30), note=semconv.OPENINFERENCE_SPAN_KIND)
    noisy.resource_spans.add().scope_spans.add().spans.extend(_rag_trace(2))
    with patch.object(Screen, "within", autospec=True, side_effect=Screen.within) as within:
        assert _answers_scored(_copy(noisy), noisy.SerializeToString()) == (((2, 1),), 0, 0)
    assert within.call_count == 1


def _copy(request: ExportTraceServiceRequest) -> ExportTraceServiceRequest:
    copied = ExportTraceServiceRequest()
    copied.CopyFrom(request)
    return copied


def test_invalid_spans_are_removed_and_the_answer_beside_them_is_still_scored() -> None:
    # Invalid ids between and around the spans of an answer: deleting them from the repeated field must leave
    # the answer's spans (read before the deletion) intact and enriched in the forwarded request.
    bad_trace = ProtoSpan(trace_id=bytes(16), span_id=(7).to_bytes(8, "big"), name="zero trace id")
    bad_span = ProtoSpan(trace_id=(9).to_bytes(16, "big"), span_id=b"\x01", name="short span id")
    bad_parent = ProtoSpan(
        trace_id=(9).to_bytes(16, "big"), span_id=(3).to_bytes(8, "big"), parent_span_id=b"\x01\x02", name="p"
    )
    child, root = _rag_trace(2)
    request = _request([bad_trace, child, bad_span, *_plain_trace(1), root, bad_parent])
    prepared = TracePipeline(AnswerScorer()).prepare(request, request.SerializeToString())

    assert (prepared.received, prepared.rejected, prepared.forwarded) == (7, 3, 4)
    assert [(scored.trace_id, scored.span_id) for scored in prepared.scored] == [(2, 1)]
    names = [span.name for span in iter_spans(prepared.request)]
    assert names == ["db", "db", "GET /items", "GET /items"]
    (answer,) = [
        span
        for span in iter_spans(prepared.request)
        if semconv.RAG_CONFIDENCE_TOTAL in attributes_to_dict(span.attributes)
    ]
    assert int.from_bytes(answer.trace_id, "big") == 2 and not answer.parent_span_id


def test_written_attributes_read_back_as_written() -> None:
    span = ProtoSpan()
    span.attributes.add(key=semconv.RAG_CONFIDENCE_TOTAL).value.int_value = 1  # replaced, not repeated
    span.attributes.add(key="kept").value.string_value = "yes"
    written = {
        semconv.RAG_CONFIDENCE_TOTAL: 71,
        semconv.RAG_CONFIDENCE_LABEL: "Moderate",
        "rag.confidence.dimension.grounding.raw": 30.0,
        semconv.RAG_CONFIDENCE_WARNINGS: ["missing-conflict-signal", "single-retrieval-method"],
        semconv.RAG_CONFIDENCE_DERIVED_SIGNALS: [],
        "rag.confidence.generation.truncated": True,
        "numbers": (1, 2),
        "absent": None,
    }
    set_attributes(span, written)
    keys = [item.key for item in span.attributes]
    assert keys.count(semconv.RAG_CONFIDENCE_TOTAL) == 1 and "absent" not in keys
    read = attributes_to_dict(span.attributes)
    assert read == {
        "kept": "yes",
        **{
            key: tuple(value) if isinstance(value, list | tuple) else value
            for key, value in written.items()
            if value is not None
        },
    }
    # An empty list is an empty array value, as the SDK's OTLP encoder writes it, not a value left unset.
    (derived,) = [item for item in span.attributes if item.key == semconv.RAG_CONFIDENCE_DERIVED_SIGNALS]
    assert derived.value.WhichOneof("value") == "array_value"


attribute_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1.0, 1]),
    st.text(max_size=5),
    st.lists(st.text(max_size=3), max_size=3),
    st.lists(st.sampled_from([1, 1.0, True, "1"]), max_size=3),
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["a", "b", "rag.confidence.total"]), attribute_values, max_size=3))
def test_attributes_are_written_as_field_by_field_writing_would(attributes: dict[str, Any]) -> None:
    # The reference: each attribute appended and filled through the message API.
    expected = ProtoSpan(name="s")
    expected.attributes.add(key="kept").value.string_value = "yes"
    for key, value in attributes.items():
        if value is not None:
            python_to_any_value(value, expected.attributes.add(key=key).value)
    for _ in range(2):  # the second time from the encodings kept for repeated values
        span = ProtoSpan(name="s")
        span.attributes.add(key="kept").value.string_value = "yes"
        set_attributes(span, attributes)
        assert span.SerializeToString() == expected.SerializeToString()


@pytest.mark.parametrize(
    ("invalid_count", "shifts_per_copy"),
    [(3, 1000), (100, 1000), (100, 0)],
    ids=["a few deleted", "runs deleted", "valid spans put back"],
)
def test_invalid_spans_are_dropped_and_the_answer_among_them_is_still_enriched(
    monkeypatch: Any, invalid_count: int, shifts_per_copy: int
) -> None:
    # Where deleting would shift too many spans (a million invalid spans among 65,000 valid ones cost 12 s of
    # CPU deleted one by one), the valid spans are put back instead, and must still be the spans scored.
    monkeypatch.setattr(pipeline_module, "_SHIFTS_PER_COPY", shifts_per_copy)

    def bad(index: int) -> ProtoSpan:
        return ProtoSpan(trace_id=b"\x00" * 16, span_id=(9).to_bytes(8, "big"), name=f"bad {index}")

    valid = [*_plain_trace(1), *_rag_trace(2)]
    mixed: list[ProtoSpan] = []
    for index in range(max(invalid_count, len(valid))):
        if index < invalid_count:
            mixed.append(bad(index))
        if index < len(valid):
            mixed.append(valid[index])
    request = _request(mixed)
    prepared = TracePipeline(AnswerScorer()).prepare(request, request.SerializeToString())
    assert prepared.rejected == invalid_count
    after = list(iter_spans(prepared.request))
    assert [span.name for span in after] == ["db", "GET /items", "db", "GET /items"]
    assert semconv.RAG_CONFIDENCE_TOTAL in attributes_to_dict(after[-1].attributes)
    assert [(scored.trace_id, scored.span_id) for scored in prepared.scored] == [(2, 1)]


@pytest.mark.parametrize("with_body", [True, False])
def test_a_file_search_call_passes_the_screen_and_its_llm_span_is_scored(with_body: bool) -> None:
    """An OpenInference LLM span of a Responses call that ran file_search is a retrieval and the answer: the
    screen reads its ``output.value`` for it (a hint key), also in a body holding no other hint key."""
    plain = ProtoSpan(trace_id=(1).to_bytes(16, "big"), span_id=(1).to_bytes(8, "big"), name="Response")
    plain.attributes.add(key=semconv.OPENINFERENCE_SPAN_KIND).value.string_value = "LLM"
    plain.attributes.add(key=semconv.OI_OUTPUT_VALUE).value.string_value = '{"output": []}'
    hosted = ProtoSpan(trace_id=(2).to_bytes(16, "big"), span_id=(1).to_bytes(8, "big"), name="Response")
    hosted.attributes.add(key=semconv.OPENINFERENCE_SPAN_KIND).value.string_value = "LLM"
    hosted.attributes.add(key=semconv.OI_OUTPUT_VALUE).value.string_value = FILE_SEARCH_OUTPUT
    request = _request([plain, hosted])
    payload = request.SerializeToString() if with_body else None
    screen = Screen(payload)
    assert not screen.may_hold_answer(plain) and not may_hold_answer(plain)
    assert screen.may_hold_answer(hosted) and may_hold_answer(hosted)
    assert _answers_scored(request, payload)[0] == ((2, 1),)


@pytest.mark.parametrize("with_body", [True, False])
def test_a_grounded_gemini_call_passes_the_screen_and_its_llm_span_is_scored(with_body: bool) -> None:
    """An OpenInference LLM span of a grounded Gemini call is a retrieval and the answer, as a file_search call
    is: the screen reads its ``output.value``; an ungrounded response's span is screened out."""
    plain = ProtoSpan(
        trace_id=(1).to_bytes(16, "big"), span_id=(1).to_bytes(8, "big"), name="GenerateContent"
    )
    plain.attributes.add(key=semconv.OPENINFERENCE_SPAN_KIND).value.string_value = "LLM"
    plain.attributes.add(key=semconv.OI_OUTPUT_VALUE).value.string_value = '{"candidates": []}'
    grounded = ProtoSpan(
        trace_id=(2).to_bytes(16, "big"), span_id=(1).to_bytes(8, "big"), name="GenerateContent"
    )
    grounded.attributes.add(key=semconv.OPENINFERENCE_SPAN_KIND).value.string_value = "LLM"
    grounded.attributes.add(key=semconv.OI_OUTPUT_VALUE).value.string_value = GROUNDED_OUTPUT
    request = _request([plain, grounded])
    payload = request.SerializeToString() if with_body else None
    screen = Screen(payload)
    assert not screen.may_hold_answer(plain) and not may_hold_answer(plain)
    assert screen.may_hold_answer(grounded) and may_hold_answer(grounded)
    assert _answers_scored(request, payload)[0] == ((2, 1),)


@pytest.mark.parametrize("with_body", [True, False])
def test_a_bedrock_retrieve_and_generate_passes_the_screen_and_is_scored(with_body: bool) -> None:
    """openinference-instrumentation-bedrock makes retrieve_and_generate a RETRIEVER span holding the answer: a
    retrieval the screen passes on its kind alone, and, as a root, its own answer (it generated too)."""
    span = ProtoSpan(
        trace_id=(1).to_bytes(16, "big"), span_id=(1).to_bytes(8, "big"), name="bedrock.retrieve_and_generate"
    )
    for key, value in (
        (semconv.OPENINFERENCE_SPAN_KIND, "RETRIEVER"),
        (semconv.OI_LLM_INVOCATION_PARAMETERS, BEDROCK_RAG_PARAMETERS),
        ("retrieval.documents.0.document.id", "chunk-1"),
        ("retrieval.documents.0.document.metadata", BEDROCK_REFERENCE),
        (semconv.OI_OUTPUT_VALUE, "Paris is the capital of France."),
    ):
        span.attributes.add(key=key).value.string_value = value
    request = _request([span])
    payload = request.SerializeToString() if with_body else None
    assert Screen(payload).may_hold_answer(span) and may_hold_answer(span)
    assert _answers_scored(request, payload)[0] == ((1, 1),)
