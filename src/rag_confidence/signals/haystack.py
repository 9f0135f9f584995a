"""Haystack's own tracer: ``haystack.component.run`` spans of a pipeline run.

Haystack (``haystack-ai``) traces a pipeline through its own tracing API; with the OpenTelemetry backend
(``haystack_integrations.tracing.opentelemetry.OpenTelemetryTracer`` from ``opentelemetry-haystack``, in
``haystack.tracing`` itself before 3.0, where it enabled itself whenever a global tracer provider was set) each
run is a ``haystack.pipeline.run`` span with one ``haystack.component.run`` span per component. A component span
says what ran (``haystack.component.type``, the class name) but nothing of its kind, so a retriever is told by
its class name as Haystack names them (``InMemoryBM25Retriever``, ``QdrantEmbeddingRetriever``; the web search
components, ``SerperDevWebSearch``, retrieve too) and a ranker by ``Ranker`` in it, the naming the OpenInference
Haystack instrumentor relies on as well. A ``DocumentJoiner`` is neither: it merges retrievals, it is no method.

What a component returned is ``haystack.component.output``, JSON, written only with content tracing on
(``HAYSTACK_CONTENT_TRACING_ENABLED=true``): a retriever's or ranker's ``{"documents": [...]}`` holds each
``Document.to_dict()`` (``id``, ``content``, ``score``, the embedding, and the metadata flattened beside them);
a generator's ``{"replies": [...]}`` holds strings (``OpenAIGenerator``) or ``ChatMessage`` dicts
(``{"role", "content": [{"text": ...}], "meta": {"finish_reason": ...}}``), with the finish reasons of string
replies in a ``meta`` list beside them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from .. import semconv
from ._values import Generation, RawDocument, RawRetrieval, Reader, is_answer_role
from .documents import class_method_name
from .records import SpanRecord

HaystackStep = Literal["retrieve", "rerank"]

_RETRIEVER_SUFFIX = "Retriever"
_WEB_SEARCH_WORD = "WebSearch"
_RANKER_WORD = "Ranker"
# ``Document.to_dict()`` keys that are the document's own fields; every other key is flattened metadata.
_OWN_FIELDS = frozenset(
    {"id", "content", "score", "embedding", "sparse_embedding", "blob", "dataframe", "meta", "id_hash_keys"}
)


def haystack_step(component_type: Any) -> HaystackStep | None:
    """``retrieve`` or ``rerank`` for the class name of a Haystack component that reports documents, else None.

    >>> haystack_step("InMemoryBM25Retriever"), haystack_step("TransformersSimilarityRanker")
    ('retrieve', 'rerank')
    >>> haystack_step("DocumentJoiner") is None, haystack_step("PromptBuilder") is None
    (True, True)
    """
    if type(component_type) is not str:
        return None
    if component_type.endswith(_RETRIEVER_SUFFIX) or _WEB_SEARCH_WORD in component_type:
        return "retrieve"
    if _RANKER_WORD in component_type:
        return "rerank"
    return None


def read_retrievals(span: SpanRecord, reader: Reader) -> list[RawRetrieval]:
    attributes = span.attributes
    component_type = attributes.get(semconv.HAYSTACK_COMPONENT_TYPE)
    step = haystack_step(component_type)
    if step is None:
        return []
    output = attributes.get(semconv.HAYSTACK_COMPONENT_OUTPUT)
    if output is None:
        return []  # content tracing off: a retrieval whose documents are not reported
    parsed = reader.mapping(output)
    if parsed is None:
        reader.unreadable_retrievals += 1  # cut short by a value length limit, or no JSON: documents lost
        return []
    listed = parsed.get("documents")
    if not isinstance(listed, list):
        if listed is not None:
            reader.skip()
            reader.unreadable_retrievals += 1
        return []
    if not listed:
        reader.found_nothing += 1
        return []
    documents = []
    for entry in listed:
        if not isinstance(entry, Mapping):
            reader.skip()
            continue
        nested = entry.get("meta")
        metadata = {key: value for key, value in entry.items() if key not in _OWN_FIELDS}
        if isinstance(nested, Mapping):  # ``to_dict(flatten=False)``: the metadata in a ``meta`` object
            metadata.update(nested)
        documents.append(
            RawDocument(
                id=entry.get("id"),
                score=entry.get("score"),
                content=entry.get("content"),
                metadata=metadata or None,
            )
        )
    if not documents:
        return []
    rerank = step == "rerank"
    # Named after the class as the other tracers name the same retriever (``inmemorybm25``).
    hint = None if rerank or not isinstance(component_type, str) else class_method_name(component_type)
    return [RawRetrieval(span=span, documents=documents, rerank=rerank, method_hint=hint)]


def read_generation(span: SpanRecord, reader: Reader) -> Generation | None:
    """The replies of a generator component (any component whose output holds ``replies``)."""
    attributes = span.attributes
    output = attributes.get(semconv.HAYSTACK_COMPONENT_OUTPUT)
    if output is None or semconv.HAYSTACK_COMPONENT_TYPE not in attributes:
        return None
    if isinstance(output, str) and '"replies"' not in output:
        return None  # most components return no replies: not worth parsing their output
    parsed = reader.mapping(output)
    replies = parsed.get("replies") if parsed is not None else None
    if not isinstance(replies, list):
        return None
    texts: list[str] = []
    finish_reasons: list[str] = []
    for reply in replies:
        if isinstance(reply, str):
            texts.append(reply)
        elif isinstance(reply, Mapping):
            _read_chat_message(reply, reader, texts, finish_reasons)
        else:
            reader.skip()
    meta = parsed.get("meta") if parsed is not None else None
    if isinstance(meta, Sequence) and not isinstance(meta, str):
        for item in meta:
            if isinstance(item, Mapping):
                _add_reason(item.get("finish_reason"), finish_reasons)
    return Generation(
        span=span, text="\n".join(texts) if texts else None, finish_reasons=tuple(finish_reasons)
    )


def _read_chat_message(
    message: Mapping[str, Any], reader: Reader, texts: list[str], finish_reasons: list[str]
) -> None:
    if not is_answer_role(message.get("role"), reader):
        return
    parts = message.get("content")
    if isinstance(parts, Sequence) and not isinstance(parts, str):
        # ``text`` parts only: tool calls, tool results and reasoning are parts of their own kinds.
        found = [
            part["text"] for part in parts if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        ]
        if found:
            texts.append("".join(found))
    meta = message.get("meta")
    if isinstance(meta, Mapping):
        _add_reason(meta.get("finish_reason"), finish_reasons)


def _add_reason(reason: Any, finish_reasons: list[str]) -> None:
    if isinstance(reason, str) and reason and reason.lower() not in finish_reasons:
        finish_reasons.append(reason.lower())
