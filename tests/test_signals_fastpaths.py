"""The fast paths of signal extraction give what the plain way gives.

Each shortcut taken for speed (the C JSON scanner, the metadata key map looked up from the metadata side, the
per-extraction parse cache, C-level attribute copies) is checked against the straightforward computation it
replaces, on fuzzed input.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence.signals import DEFAULT_DOCUMENT_KEYS, SignalOptions, SpanRecord, extract_signals
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
