"""Reported documents to scored documents: the metadata key map, the score rule and the method name.

Score rule (``SignalOptions.score_scale``): a score in [0, 1] is kept. A distance (``*.distance`` or a
metadata ``distance`` key, used only when there is no score) becomes ``1 / (1 + d)``; when a distance of one
span is negative (an inner-product space's ``1 - dot``), each of the span's distances becomes ``1 - d``. When any
score of one span lies above 1 (BM25, inner products), that span's scores are rescaled: ``max`` divides by the
span's largest score (order and ratios kept, the best document gets 1.0), ``squash`` maps ``s`` to
``s / (1 + s)``, ``clamp`` cuts at 1. Negative scores (cosine below zero) become 0. A rescaled span is reported
in the diagnostics.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from .. import semconv
from ._values import Document, RawDocument, RawRetrieval, Reader, Retrieval
from .options import SignalOptions
from .records import SpanRecord

_RETRIEVER_WORD = "Retriever"
_OPENLLMETRY_PREFIX = semconv.GEN_AI_OPERATION_VECTOR_DB_RETRIEVE + " "


def build_retrieval(raw: RawRetrieval, options: SignalOptions, reader: Reader) -> Retrieval:
    key_index = options.document_key_index
    index_map = key_index if isinstance(key_index, dict) else dict(key_index)
    documents: list[Document] = []
    raw_scores: list[float | None] = []
    # Each document's distance when it has no score (None otherwise), turned into scores once all are read.
    distances: list[float | None] = []
    any_distance = False
    for index, item in enumerate(raw.documents):
        metadata = item.metadata
        if metadata:
            found, metadata_ids = _metadata_values(metadata, index_map)
        else:
            found = {}
            metadata_ids = []
        ids = _ids(item, metadata_ids, reader)
        raw_content = item.content
        content = raw_content if isinstance(raw_content, str) else None
        if raw_content is not None and content is None:
            reader.skip()
        if ids:
            key = ids[0]
        elif content:
            key = content_key(content)
        else:
            key = f"span:{raw.span.span_id:x}:{index}"
        documents.append(
            Document(
                key,
                ids[0] if ids else None,
                content,
                None,
                _fields(found, reader) if found else {},
                ids,
                metadata,
            )
        )
        score = _raw_score(item, found, reader)
        distance = _raw_distance(item, found, reader) if score is None else None
        raw_scores.append(score)
        distances.append(distance)
        any_distance = any_distance or distance is not None
    if any_distance:
        _score_distances(raw_scores, distances)
    scores, rescaled = _scale(raw_scores, options)
    for position in range(len(documents)):
        documents[position].score = scores[position]
    return Retrieval(
        raw.span,
        method_name(raw.span, options, rerank=raw.rerank, hint=raw.method_hint, reader=reader),
        documents,
        raw.rerank,
        rescaled,
    )


def _metadata_values(
    metadata: Mapping[str, Any], key_index: Mapping[str, tuple[tuple[str, int], ...]]
) -> tuple[dict[str, Any], list[Any]]:
    """Field -> the value of its first mapped key present (not None) in ``metadata``, and every id value in
    key-map order (a document is known by all its ids).

    The same as trying each field's keys in turn, from whichever side is shorter: metadata usually holds a few
    keys and the key map dozens, and each key usually fills one field, so the rare field two keys fill is
    sorted out afterwards.
    """
    found: dict[str, Any] = {}
    positions: dict[str, int] = {}
    several: dict[str, list[tuple[int, Any]]] | None = None
    index_map = key_index if isinstance(key_index, dict) else dict(key_index)
    if len(metadata) <= len(index_map):
        if isinstance(metadata, dict):  # parsed JSON: walk it with dict operations (compiled)
            for key, value in metadata.items():
                if value is not None:
                    spots = index_map.get(key)
                    if spots is not None:
                        several = _note(spots, value, found, positions, several)
        else:
            for key, value in metadata.items():
                if value is not None:
                    spots = index_map.get(key)
                    if spots is not None:
                        several = _note(spots, value, found, positions, several)
    else:
        for key, spots in index_map.items():
            value = metadata.get(key)
            if value is not None:
                several = _note(spots, value, found, positions, several)
    ids = [found["id"]] if "id" in found else []
    if several is not None:
        for name, entries in several.items():
            entries.sort(key=_position)
            found[name] = entries[0][1]
            if name == "id":
                ids = [value for _, value in entries]
    return found, ids


def _note(
    spots: tuple[tuple[str, int], ...],
    value: Any,
    found: dict[str, Any],
    positions: dict[str, int],
    several: dict[str, list[tuple[int, Any]]] | None,
) -> dict[str, list[tuple[int, Any]]] | None:
    """Record ``value`` for every field its key may fill; returns ``several`` (made on the first field two keys
    fill: those are sorted by key-map position afterwards)."""
    for name, position in spots:
        if name not in found:
            found[name] = value
            positions[name] = position
            continue
        if several is None:
            several = {}
        entries = several.get(name)
        if entries is None:
            entries = several[name] = [(positions[name], found[name])]
        entries.append((position, value))
    return several


def _position(entry: tuple[int, Any]) -> int:
    return entry[0]


def _ids(item: RawDocument, metadata_ids: list[Any], reader: Reader) -> tuple[str, ...]:
    # The convention's own id first, then metadata ids, then ids recorded elsewhere (LangChain Document.id).
    if not metadata_ids and not item.aliases:
        text = reader.string(item.id) if item.id is not None else None
        return (text,) if text is not None else ()
    ids: list[str] = []
    for value in (item.id, *metadata_ids, *item.aliases):
        text = reader.string(value) if value is not None else None
        if text is not None and text not in ids:
            ids.append(text)
    return tuple(ids)


#: Prefix of the key a document without an id is known by (its text's hash).
TEXT_KEY_PREFIX = "content:"


def content_key(content: str) -> str:
    # Documents without ids still merge across methods when their text is identical.
    return (
        TEXT_KEY_PREFIX
        + hashlib.sha1(content.encode("utf-8", "replace"), usedforsecurity=False).hexdigest()[:16]
    )


def _raw_score(item: RawDocument, found: Mapping[str, Any], reader: Reader) -> float | None:
    score = reader.number(item.score)
    if score is None:
        score = reader.number(found.get("score"))
    return score


def _raw_distance(item: RawDocument, found: Mapping[str, Any], reader: Reader) -> float | None:
    distance = reader.number(item.distance)
    if distance is None:
        distance = reader.number(found.get("distance"))
    return distance


# Float32 arithmetic puts an exact match of normalised vectors (cosine, a normalised inner product) a few 1e-7
# below 0: a distance this close to 0 is 0, and says nothing about the space.
_ROUNDING = 1e-4


def _score_distances(scores: list[float | None], distances: list[float | None]) -> None:
    """Set the score of each document that has a distance instead: ``1 / (1 + d)``.

    A negative distance comes only from an inner-product space, whose distance is ``1 - dot`` (Chroma ``ip``,
    LanceDB ``dot``; L2 and cosine distances are never below 0): the best hits of vectors that are not
    normalised go below 0, where ``1 / (1 + d)`` breaks down. Then every distance of the span is read as the
    inner product it encodes, ``1 - d``: the order is kept, and the products above 1 get the span rescaled like
    any scores above 1 (:func:`_scale`).
    """
    inner_products = False
    for distance in distances:
        if distance is not None and distance < -_ROUNDING:
            inner_products = True
            break
    for position, distance in enumerate(distances):
        if distance is not None:
            scores[position] = 1.0 - distance if inner_products else 1.0 / (1.0 + max(distance, 0.0))


def _scale(raw: list[float | None], options: SignalOptions) -> tuple[list[float | None], bool]:
    top = 0.0
    present = False
    in_range = True
    for score in raw:
        if score is not None:
            if not present or score > top:
                top = score
            present = True
            if not 0.0 <= score <= 1.0:
                in_range = False
    if in_range:  # also when no document has a score
        return raw, False
    scale = options.score_scale
    scaled: list[float | None] = []
    for score in raw:
        if score is None:
            scaled.append(None)
        elif score <= 0.0:
            scaled.append(0.0)
        elif top <= 1.0:
            scaled.append(score)  # only negatives were out of range
        elif scale == "max":
            scaled.append(score / top)
        elif scale == "squash":
            scaled.append(score / (1.0 + score))
        else:
            scaled.append(min(score, 1.0))
    return scaled, True


def _fields(found: dict[str, Any], reader: Reader) -> dict[str, Any]:
    """Candidate fields read from metadata, in the order they are set on the candidate."""
    # Written out field by field on purpose: mypyc turns these into direct native calls, where a loop over a
    # table of (name, reader method) pairs goes through generic Python calls for every field of every document.
    fields: dict[str, Any] = {}
    value = found.get("documentType")
    if value is not None:
        text = reader.string(value)
        if text is not None:
            fields["documentType"] = text
    value = found.get("lastUpdated")
    if value is not None:
        text = reader.timestamp(value)
        if text is not None:
            fields["lastUpdated"] = text
    value = found.get("contentHash")
    if value is not None:
        text = reader.string(value)
        if text is not None:
            fields["contentHash"] = text
    value = found.get("extractionQuality")
    if value is not None:
        number = reader.unit(value)
        if number is not None:
            fields["extractionQuality"] = number
    value = found.get("authorityRank")
    if value is not None:
        number = reader.number(value)
        if number is not None:
            fields["authorityRank"] = int(number) if number.is_integer() else number
    value = found.get("isAmendment")
    if value is not None:
        flag = reader.boolean(value)
        if flag is not None:
            fields["isAmendment"] = flag
    value = found.get("rank")
    if value is not None:
        rank = reader.count(value)
        if rank is not None:
            if rank == 0:
                reader.skip()  # ranks are 1-based
            else:
                fields["rank"] = rank
    return fields


def method_name(
    span: SpanRecord, options: SignalOptions, *, rerank: bool = False, hint: str | None = None, reader: Reader
) -> str:
    """The ``retrievalScores`` key for a retrieval span (see ``docs/signals.md`` for the rule)."""
    if rerank:
        return options.rerank_method
    if options.method_namer is not None:
        try:
            named = options.method_namer(span)
        except Exception:  # a user callback must not break extraction; fall back to the built-in rule
            reader.skip()
            named = None
        if isinstance(named, str) and named:
            return named
    attributes = span.attributes
    explicit = attributes.get(semconv.RAG_RETRIEVAL_METHOD)
    if isinstance(explicit, str) and explicit:
        return explicit
    run_metadata = _run_metadata(attributes, reader)
    explicit = run_metadata.get(semconv.RAG_RETRIEVAL_METHOD)
    if isinstance(explicit, str) and explicit:
        return explicit
    if hint:
        return hint
    langchain_name = run_metadata.get(semconv.LANGCHAIN_LS_RETRIEVER_NAME)
    if isinstance(langchain_name, str) and langchain_name:
        return langchain_name
    return _name_from_span(span)


def _run_metadata(attributes: Mapping[str, Any], reader: Reader) -> Mapping[str, Any]:
    """LangChain run metadata as either tracer records it (OpenInference ``metadata`` JSON, OpenLLMetry
    ``traceloop.association.properties.*``)."""
    found: dict[str, Any] = {}
    metadata = attributes.get(semconv.OI_METADATA)
    if metadata is not None:
        parsed = reader.mapping(metadata)
        if parsed is not None:
            found.update(parsed)
    prefix = semconv.TRACELOOP_ASSOCIATION_PROPERTIES_PREFIX
    for key in (semconv.RAG_RETRIEVAL_METHOD, semconv.LANGCHAIN_LS_RETRIEVER_NAME):
        value = attributes.get(prefix + key)
        if value is not None:
            found.setdefault(key, value)
    return found


def _name_from_span(span: SpanRecord) -> str:
    name = span.name
    operation = span.attributes.get(semconv.GEN_AI_OPERATION_NAME)
    if (
        isinstance(operation, str)
        and operation
        and operation != semconv.GEN_AI_OPERATION_VECTOR_DB_RETRIEVE
        and name.startswith(operation + " ")
    ):
        # GenAI spans are named ``{gen_ai.operation.name} {target}``, and a retrieval's target is its data
        # source: ``retrieval kb`` is the method the span would be with ``gen_ai.data_source.id = kb``.
        target = name[len(operation) + 1 :].strip()
        if target:
            return target
    # ``vector_db_retrieve BM25Retriever`` / ``VectorIndexRetriever.retrieve`` -> the class, named as
    # LangChain names retrievers (``bm25``, ``vectorindex``), so the same retriever gets one name under every
    # tracer.
    return class_method_name(name.removeprefix(_OPENLLMETRY_PREFIX).split(".", 1)[0])


def class_method_name(class_name: str) -> str:
    """A retriever class's method name, as LangChain names retrievers: ``BM25Retriever`` -> ``bm25``,
    ``InMemoryEmbeddingRetriever`` -> ``inmemoryembedding``."""
    base = class_name.strip()
    if base.startswith(_RETRIEVER_WORD) and len(base) > len(_RETRIEVER_WORD):
        base = base[len(_RETRIEVER_WORD) :]
    elif base.endswith(_RETRIEVER_WORD) and len(base) > len(_RETRIEVER_WORD):
        base = base[: -len(_RETRIEVER_WORD)]
    base = base.lower()
    return base or "retrieval"
