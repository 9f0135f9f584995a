"""OpenLLMetry vector-DB result events: one ``db.query.result`` or ``db.search.result`` event per hit.

- ``db.query.result.{id,score,distance,metadata,document}`` (Chroma, Pinecone) and ``db.search.result.{id,score,
  distance,entity}`` (Milvus). Metadata is JSON (Chroma) or the ``str()`` of a dict (Pinecone's ``metadata``,
  Milvus's ``entity``), read as a Python literal.
- Milvus writes each hit's raw ``distance`` field as ``db.search.result.distance``, and what that field holds
  depends on the metric: a distance for ``L2``/``HAMMING``/``JACCARD`` (smaller is closer), a similarity for
  ``COSINE``/``IP``/``BM25`` and for a hybrid search's ranker score (larger is closer; ``MilvusClient`` creates
  ``COSINE`` collections by default). The metric in ``db.milvus.search.search_params`` decides when the span
  records one; otherwise the order does: Milvus returns each query's hits best first, so values that fall
  down one query's list (and never rise) are similarities, and values that rise somewhere are distances. With
  no order to read (one hit, ties), a value beyond [-1, 1] is a distance, and values within it are read as
  ``COSINE`` similarities: an ``L2`` search returning one close hit should record its metric.
- Milvus also writes each row a scalar lookup by filter returns (``MilvusClient.query``) as a
  ``db.query.result`` event of the row's own fields: those are no hits, and are not read.
- A span keeps at most ``OTEL_SPAN_EVENT_COUNT_LIMIT`` events (128) and drops the oldest, that is the best
  hits: the number dropped (``SpanRecord.dropped_events``) is counted for a diagnostic.
- Marqo writes each hit as it is (``_id``, ``_score`` and the document's own fields), without the
  ``db.query.result.*`` keys: for ``db.system = marqo`` those keys are read, the other fields as metadata.
- The Chroma instrumentor writes no event for a query that found nothing (``ids = [[]]``): its ``chroma.query``
  span, told by ``db.chroma.query.{embeddings,texts}_count`` (one of them is set whenever the query vectors or
  texts are passed by keyword), is then a retrieval that found nothing, unless the query raised (``error.type``,
  status ERROR: nothing was found out). Its other spans (``add``, ``get``, ``peek``, the ``SegmentAPI._query``
  beneath a query) carry neither key, and neither does a query given its vectors positionally.
- OpenLLMetry JS (Pinecone, Qdrant) writes no result events: it sets ``db.vector.query.result.{i}.{id,score}``
  (Qdrant also ``.metadata``, the payload as JSON) on what ``span.addEvent()`` returns, which in the JS SDK is
  the span, so the hits are span attributes beside ``db.vector.query.result.matches_length``; Pinecone adds
  each hit's metadata as the attributes of a ``pinecone.query.result.{i}.metadata`` event. JS numbers travel
  as OTLP ``intValue`` when they are whole (a score of exactly 1, a Qdrant integer point id), which the
  readers take like any number or id. The JS SDK drops the *newest* attributes at its count limit (128), so a
  long result list loses its last, worst hits, not its best.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from .. import semconv
from ._values import RawDocument, Reader
from .records import SpanRecord

_RESULT_EVENTS: Mapping[str, tuple[str, str, str, str, str | None]] = {
    # event -> (id, score, distance, metadata, content) attribute names
    semconv.DB_QUERY_RESULT: (
        semconv.DB_QUERY_RESULT_ID,
        semconv.DB_QUERY_RESULT_SCORE,
        semconv.DB_QUERY_RESULT_DISTANCE,
        semconv.DB_QUERY_RESULT_METADATA,
        semconv.DB_QUERY_RESULT_DOCUMENT,
    ),
    semconv.DB_SEARCH_RESULT: (
        semconv.DB_SEARCH_RESULT_ID,
        semconv.DB_SEARCH_RESULT_SCORE,
        semconv.DB_SEARCH_RESULT_DISTANCE,
        semconv.DB_SEARCH_RESULT_ENTITY,
        None,
    ),
}
_MARQO_OWN_KEYS = frozenset({semconv.MARQO_HIT_ID, semconv.MARQO_HIT_SCORE})
# The status code name SpanRecord carries for a span that failed.
_FAILED = "ERROR"


def is_hit_event(event_name: str, system: Any) -> bool:
    """True for a result event that reports a retrieved document: ``db.query.result`` or ``db.search.result``,
    except Milvus's ``db.query.result``, which its instrumentor writes for each row of a scalar lookup by filter
    (``MilvusClient.query``: no similarity, no hit; only its searches retrieve)."""
    if event_name == semconv.DB_SEARCH_RESULT:
        return True
    return event_name == semconv.DB_QUERY_RESULT and system != semconv.DB_SYSTEM_MILVUS


def event_documents(span: SpanRecord, reader: Reader) -> list[RawDocument]:
    """The documents a span's result events report, in event order."""
    documents: list[RawDocument] = []
    # db.search.result documents per query (``db.search.query.id``), whose distances may be similarities.
    searches: dict[Any, list[RawDocument]] = {}
    system = span.attributes.get(semconv.DB_SYSTEM)
    marqo = system == semconv.DB_SYSTEM_MARQO
    for event in span.events:
        if not is_hit_event(event.name, system):
            continue
        names = _RESULT_EVENTS[event.name]
        id_key, score_key, distance_key, metadata_key, content_key = names
        attributes = event.attributes
        if marqo and event.name == semconv.DB_QUERY_RESULT and id_key not in attributes:
            documents.append(_marqo_hit(attributes))
            continue
        metadata = attributes.get(metadata_key)
        document = RawDocument(
            id=attributes.get(id_key),
            score=attributes.get(score_key),
            distance=attributes.get(distance_key),
            content=attributes.get(content_key) if content_key else None,
            metadata=reader.literal_mapping(metadata) if metadata is not None else None,
        )
        documents.append(document)
        if event.name == semconv.DB_SEARCH_RESULT:
            searches.setdefault(attributes.get(semconv.DB_SEARCH_QUERY_ID), []).append(document)
    if documents and span.dropped_events:
        # The SDK keeps a span's newest events: what it dropped were the first hits, the best ones. They are
        # gone, but the scorecard must say so.
        reader.dropped_result_events += span.dropped_events
    if searches:
        similar = _metric_is_similarity(span.attributes, reader)
        for hits in searches.values():
            if similar is False or (similar is None and not _reads_as_similarity(hits)):
                continue
            for hit in hits:
                if hit.score is None and hit.distance is not None:
                    hit.score, hit.distance = hit.distance, None
    return documents


def chroma_found_nothing(span: SpanRecord) -> bool:
    """True for an OpenLLMetry Chroma query span that ran and found nothing (see the module docstring), asked of
    a span whose events :func:`event_documents` found no hit in."""
    attributes = span.attributes
    return (
        (
            semconv.CHROMA_QUERY_EMBEDDINGS_COUNT in attributes
            or semconv.CHROMA_QUERY_TEXTS_COUNT in attributes
        )
        and semconv.ERROR_TYPE not in attributes
        and span.status_code != _FAILED
    )


def _marqo_hit(attributes: Mapping[str, Any]) -> RawDocument:
    metadata = {key: value for key, value in attributes.items() if key not in _MARQO_OWN_KEYS}
    return RawDocument(
        id=attributes.get(semconv.MARQO_HIT_ID),
        score=attributes.get(semconv.MARQO_HIT_SCORE),
        metadata=metadata or None,
    )


def _metric_is_similarity(attributes: Mapping[str, Any], reader: Reader) -> bool | None:
    """Whether the search's metric makes larger values closer; None when the span does not name one."""
    params = attributes.get(semconv.MILVUS_SEARCH_SEARCH_PARAMS)
    if params is None:
        return None
    parsed = reader.literal_mapping(params)
    metric = parsed.get(semconv.MILVUS_METRIC_TYPE) if parsed is not None else None
    if not isinstance(metric, str):
        return None
    metric = metric.upper()
    if metric in semconv.MILVUS_SIMILARITY_METRICS:
        return True
    if metric in semconv.MILVUS_DISTANCE_METRICS:
        return False
    return None


def _reads_as_similarity(hits: list[RawDocument]) -> bool:
    """Whether one query's hits (best first) hold similarities: they fall somewhere and never rise. With no
    order to read (one hit, ties), a value beyond [-1, 1] is a distance (cosine and normalised inner products
    stay within it); within it, the similarity of ``MilvusClient``'s default ``COSINE`` metric."""
    # A scratch reader: the score rule reads these values again and counts any it has to skip, once.
    scratch = Reader()
    values = [value for value in (scratch.number(hit.distance) for hit in hits) if value is not None]
    falls = False
    for previous, value in itertools.pairwise(values):
        if value > previous:
            return False
        falls = falls or value < previous
    return falls or all(-1.0 <= value <= 1.0 for value in values)


# Keys of the first hits, built once (a search rarely returns more); later ones are formatted as read.
_KEYED_HITS = 64
_MAX_HITS = 10_000


def _hit_keys(index: int) -> tuple[str, str, str]:
    prefix = f"{semconv.VECTOR_DB_QUERY_RESULT_PREFIX}{index}."
    return (
        prefix + semconv.VECTOR_DB_RESULT_ID,
        prefix + semconv.VECTOR_DB_RESULT_SCORE,
        prefix + semconv.VECTOR_DB_RESULT_METADATA,
    )


_HIT_KEYS = tuple(_hit_keys(index) for index in range(_KEYED_HITS))


def attribute_documents(span: SpanRecord, reader: Reader) -> list[RawDocument]:
    """The hits an OpenLLMetry JS vector-DB span reports as ``db.vector.query.result.{i}.*`` span attributes
    (see the module docstring), in order; none for a span without ``db.vector.query.result.matches_length``."""
    attributes = span.attributes
    matches = attributes.get(semconv.VECTOR_DB_QUERY_RESULT_MATCHES_LENGTH)
    if matches is None:
        return []
    if isinstance(matches, (int, float)) and not isinstance(matches, bool) and matches == 0:
        reader.found_nothing += 1  # the query matched nothing (a JS number may arrive as a double)
        return []
    event_metadata: dict[str, Mapping[str, Any]] = {}
    for event in span.events:
        name = event.name
        if (
            name.startswith(semconv.PINECONE_JS_RESULT_EVENT_PREFIX)
            and name.endswith(semconv.PINECONE_JS_METADATA_EVENT_SUFFIX)
            and event.attributes
        ):
            event_metadata[name] = event.attributes
    documents: list[RawDocument] = []
    for index in range(_MAX_HITS):
        id_key, score_key, metadata_key = _HIT_KEYS[index] if index < _KEYED_HITS else _hit_keys(index)
        if id_key not in attributes and score_key not in attributes:
            break  # past the last hit (or the rest fell to the JS SDK's attribute count limit)
        raw_metadata = attributes.get(metadata_key)
        metadata = reader.mapping(raw_metadata) if raw_metadata is not None else None
        if metadata is None and event_metadata:
            metadata = event_metadata.get(
                f"{semconv.PINECONE_JS_RESULT_EVENT_PREFIX}{index}{semconv.PINECONE_JS_METADATA_EVENT_SUFFIX}"
            )
        documents.append(
            RawDocument(id=attributes.get(id_key), score=attributes.get(score_key), metadata=metadata)
        )
    return documents
