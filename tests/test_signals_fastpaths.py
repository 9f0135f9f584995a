"""The fast paths of signal extraction give what the plain way gives.

Each shortcut taken for speed (the C JSON scanner, the metadata key map looked up from the metadata side, the
per-extraction parse cache, C-level attribute copies) is checked against the straightforward computation it
replaces, on fuzzed input.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence.signals import (
    DEFAULT_DOCUMENT_KEYS,
    SignalOptions,
    SpanRecord,
    extract_signals,
    find_answers,
)
from rag_confidence.signals._values import Reader, first_key, loads_json
from rag_confidence.signals.documents import _metadata_values
from rag_confidence.signals.records import records_from_readable_spans

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8)),
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=8,
)
texts = st.one_of(
    json_values.map(json.dumps),
    st.tuples(
        st.sampled_from(["", " ", "\n\t"]), json_values.map(json.dumps), st.sampled_from(["", " ", "x", "}"])
    ).map("".join),
    st.text(max_size=12),
    st.sampled_from(["", "{", '{"a": 1}{', "NaN", "[1,]", "\ufeff{}", '{"a": 1} ']),
)


def _outcome(parse: Any, text: str) -> tuple[str, Any]:
    try:
        return "value", parse(text)
    except Exception as error:  # the error type is part of the contract
        return "error", type(error)


@settings(max_examples=500, deadline=None)
@given(texts)
def test_loads_json_is_json_loads(text: str) -> None:
    assert _outcome(loads_json, text) == _outcome(json.loads, text)


def _plain_lookup(
    metadata: Mapping[str, Any], keys: Mapping[str, tuple[str, ...]]
) -> tuple[dict[str, Any], list[Any]]:
    # What the key map means, written the slow way: each field's keys in turn.
    found = {name: first_key(metadata, field_keys) for name, field_keys in keys.items()}
    ids = [metadata.get(key) for key in keys.get("id", ())]
    return {name: value for name, value in found.items() if value is not None}, [
        v for v in ids if v is not None
    ]


metadata_keys = st.sampled_from(["id", "doc_id", "score", "type", "rank", "x", "hash", "updated_at"])
key_maps = st.one_of(
    st.just(dict(DEFAULT_DOCUMENT_KEYS)),
    # Keys shared between fields and repeated within one: the collision paths.
    st.dictionaries(
        st.sampled_from(["id", "score", "documentType", "rank"]),
        st.lists(metadata_keys, min_size=1, max_size=4).map(tuple),
        min_size=1,
    ),
)


@settings(max_examples=500, deadline=None)
@given(
    st.dictionaries(metadata_keys, st.one_of(st.none(), st.integers(), st.text(max_size=3)), max_size=8),
    key_maps,
)
def test_metadata_lookup_from_either_side_is_the_key_map(
    metadata: dict[str, Any], keys: dict[str, tuple[str, ...]]
) -> None:
    index = SignalOptions(document_keys=keys).document_key_index
    assert _metadata_values(metadata, index) == _plain_lookup(metadata, keys)
    # A metadata object larger than the key index is looked up from the key map's side.
    padded = {**{f"pad{n}": n for n in range(len(index) + 1)}, **metadata}
    assert _metadata_values(padded, index) == _plain_lookup(padded, keys)


def test_the_parse_cache_returns_the_same_mapping_and_still_counts_every_bad_value() -> None:
    reader = Reader()
    first = reader.mapping('{"id": "a"}')
    assert first == {"id": "a"} and reader.mapping('{"id": "a"}') is first
    assert reader.mapping("{broken") is None and reader.mapping("{broken") is None
    assert reader.mapping("[1]") is None
    assert reader.skipped == 3


def test_reranked_documents_that_repeat_retrieved_metadata_read_the_same() -> None:
    metadata = json.dumps({"id": "d1", "document_type": "policy", "last_updated": "2024-01-02"})
    retriever = SpanRecord(
        1,
        2,
        1,
        "retrieve",
        {
            "openinference.span.kind": "RETRIEVER",
            "retrieval.documents.0.document.score": 0.7,
            "retrieval.documents.0.document.metadata": metadata,
        },
        end_time=1,
    )
    reranker = SpanRecord(
        1,
        3,
        1,
        "rerank",
        {
            "openinference.span.kind": "RERANKER",
            "reranker.output_documents.0.document.score": 0.9,
            "reranker.output_documents.0.document.metadata": metadata,
        },
        end_time=2,
    )
    root = SpanRecord(1, 1, None, "rag", {}, end_time=3)
    (candidate,) = extract_signals([retriever, reranker, root]).inputs["candidates"]
    assert candidate == {
        "retrievalScores": {"retrieve": 0.7, "rerank": 0.9},
        "combinedScore": 0.9,
        "documentId": "d1",
        "documentType": "policy",
        "lastUpdated": "2024-01-02",
        "rank": 1,
    }


class _OddCopy(Mapping[str, Any]):
    """A mapping whose copy() is not a dict (records must fall back to dict())."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def copy(self) -> _OddCopy:
        return self


@pytest.mark.parametrize("odd", [False, True])
def test_records_copy_sdk_attributes_into_plain_dicts(odd: bool) -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("t").start_as_current_span("s", attributes={"a": 1, "b": ("x",)}) as span:
        span.add_event("e", {"k": "v"})
    (finished,) = memory.get_finished_spans()
    if odd:
        finished._attributes = _OddCopy({"a": 1, "b": ("x",)})  # type: ignore[assignment]
    (record,) = records_from_readable_spans([finished])
    assert type(record.attributes) is dict and record.attributes == {"a": 1, "b": ("x",)}
    assert type(record.events[0].attributes) is dict and record.events[0].attributes == {"k": "v"}
    assert record.attributes is not finished.attributes


def test_records_of_ended_sdk_spans_share_the_frozen_attribute_dict_and_equal_built_records() -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("s", attributes={"a": 1}) as recording:
        recording.add_event("e", {"k": "v"})
        # A span still recording may change: its attributes are copied.
        live = SpanRecord.from_readable_span(recording)  # type: ignore[arg-type]
        recording.set_attribute("b", 2)
    assert live.attributes == {"a": 1}
    (finished,) = memory.get_finished_spans()
    (record,) = records_from_readable_spans([finished])
    assert record.attributes == {"a": 1, "b": 2} and type(record.attributes) is dict
    assert record.events[0].attributes == {"k": "v"}
    context, parent = finished.context, finished.parent
    assert context is not None
    # The slots set directly give the record __init__ gives, field for field.
    assert record == SpanRecord(
        trace_id=context.trace_id,
        span_id=context.span_id,
        parent_span_id=parent.span_id if parent is not None else None,
        name="s",
        attributes={"a": 1, "b": 2},
        events=record.events,
        start_time=finished.start_time,
        end_time=finished.end_time,
        parent_is_remote=False,
        kind="INTERNAL",
        status_code="UNSET",
    )
    with pytest.raises(AttributeError):
        record.name = "changed"  # type: ignore[misc]

    class Sub(SpanRecord):
        __slots__ = ()

    assert type(Sub.from_readable_span(finished)) is Sub


def test_answers_of_interleaved_traces_are_those_of_each_trace_in_input_order() -> None:
    def trace(trace_id: int, marked: bool) -> list[SpanRecord]:
        return [
            SpanRecord(trace_id, 1, None, "root", {}),
            SpanRecord(trace_id, 2, 1, "retrieve", {"openinference.span.kind": "RETRIEVER"}),
            # Unmarked: no rag.answer at all (rag.answer = false would decline the subtree).
            SpanRecord(trace_id, 3, 1, "answer", {"rag.answer": True} if marked else {}),
            SpanRecord(trace_id, 4, 3, "retrieve", {"openinference.span.kind": "RETRIEVER"}),
        ]

    first, second = trace(1, marked=True), trace(2, marked=False)
    # Traces interleaved, a span listed twice.
    mixed = [second[3], first[0], second[0], first[3], first[1], second[2], first[2], second[1], first[1]]
    assert [
        (group.answer.trace_id, group.answer.span_id, group.rule, [span.span_id for span in group.spans])
        for group in find_answers(mixed)
    ] == [(2, 1, "root", [4, 1, 3, 2]), (1, 3, "marked", [4, 3])]
    assert [(group.answer.trace_id, group.answer.span_id) for group in find_answers(first + second)] == [
        (1, 3),
        (2, 1),
    ]


def test_attributes_in_any_mapping_read_as_in_a_dict() -> None:
    documents = {
        "openinference.span.kind": "RETRIEVER",
        "rag.signal.faithfulness_score": 0.9,
        **{
            f"retrieval.documents.{index}.document.{name}": value
            for index in range(3)
            for name, value in (
                ("id", f"d{index}"),
                ("score", 0.5 + index / 10),
                ("metadata", json.dumps({"document_type": "faq", "last_updated": "2024-01-02Z"})),
            )
        },
    }
    answer = {"rag.answer": True, "output.value": "See [d1] and [3]. Also [zz]."}

    def run(wrap: Any) -> tuple[Any, ...]:
        spans = [
            SpanRecord(1, 2, 1, "retrieve", wrap(documents), end_time=1),
            SpanRecord(1, 1, None, "answer", wrap(answer), end_time=2),
        ]
        signals = extract_signals(spans)
        return signals.inputs, signals.derived, signals.skipped, signals.diagnostics

    assert run(MappingProxyType) == run(dict)
    assert run(dict)[0]["citationCount"] == 2


def test_answers_without_brackets_hold_no_default_markers_but_custom_patterns_still_apply() -> None:
    retriever = SpanRecord(
        1,
        2,
        1,
        "retrieve",
        {"openinference.span.kind": "RETRIEVER", "retrieval.documents.0.document.id": "a"},
        end_time=1,
    )

    def markers(text: str, options: SignalOptions | None = None) -> Any:
        answer = SpanRecord(1, 1, None, "answer", {"rag.answer": True, "output.value": text}, end_time=2)
        return extract_signals([retriever, answer], options).diagnostics["rag.confidence.citation.markers"]

    assert markers("Plain prose (a) 1.") == 0
    assert markers("Cited [a].") == 1
    assert markers("Cited <a>.", SignalOptions(citation_patterns=(r"<(\w+)>",))) == 1


def test_the_processor_reads_ended_spans_as_their_public_properties_say() -> None:
    from types import SimpleNamespace

    from rag_confidence.signals.records import ended_span_attributes, ended_span_has_events

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("plain", attributes={"http.route": "/items", "n": 3}):
        pass
    with tracer.start_as_current_span("with events") as span:
        span.add_event("db.query.result", {"db.query.result.id": "doc-1"})
    with tracer.start_as_current_span("recording") as recording:
        recording.set_attribute("rag.answer", True)
        # A span still recording: its attributes may change, so the public mapping is read.
        assert ended_span_attributes(recording) == {"rag.answer": True}
        assert ended_span_has_events(recording) is False
    for ended in exporter.get_finished_spans():
        assert ended_span_attributes(ended) == dict(ended.attributes or {})
        assert ended_span_has_events(ended) == bool(ended.events)
    # Anything without the SDK's private fields falls back to the public properties.
    other = SimpleNamespace(attributes=MappingProxyType({"a": 1}), events=("e",))
    assert ended_span_attributes(other) == {"a": 1}  # type: ignore[arg-type]
    assert ended_span_has_events(other) is True  # type: ignore[arg-type]
