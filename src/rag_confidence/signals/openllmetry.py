"""OpenLLMetry (traceloop): LangChain retriever task spans, vector-DB result events, legacy completions.

- ``opentelemetry-instrumentation-langchain`` retriever spans: ``gen_ai.operation.name = vector_db_retrieve``
  with ``traceloop.entity.output`` (or ``gen_ai.task.output``) JSON ``{"documents": [{"page_content",
  "metadata"}], "count"}``, present only when content tracing is on. Ids and scores come from the metadata.
- Vector-DB instrumentors: one ``db.query.result`` or ``db.search.result`` event per result, read by
  :mod:`.vector_db`; ``db.system`` names the method.
- Legacy completion attributes ``gen_ai.completion.{i}.{content,finish_reason,role}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import semconv
from ._values import Generation, RawDocument, RawRetrieval, Reader, indexed, is_answer_role
from .records import SpanRecord
from .vector_db import event_documents


def read_retrievals(span: SpanRecord, reader: Reader) -> list[RawRetrieval]:
    retrievals = []
    attributes = span.attributes
    if attributes.get(semconv.GEN_AI_OPERATION_NAME) == semconv.GEN_AI_OPERATION_VECTOR_DB_RETRIEVE:
        documents = _task_documents(attributes, reader)
        if documents:
            retrievals.append(RawRetrieval(span=span, documents=documents))
    events = event_documents(span, reader)
    if events:
        system = attributes.get(semconv.DB_SYSTEM)
        retrievals.append(
            RawRetrieval(span=span, documents=events, method_hint=system if isinstance(system, str) else None)
        )
    return retrievals


def _task_documents(attributes: Mapping[str, Any], reader: Reader) -> list[RawDocument]:
    output = attributes.get(semconv.TRACELOOP_ENTITY_OUTPUT, attributes.get(semconv.GEN_AI_TASK_OUTPUT))
    if output is None:
        return []
    parsed = reader.mapping(output)
    if parsed is None:
        reader.unreadable_retrievals += 1
        return []
    listed = parsed.get("documents")
    if not isinstance(listed, list):
        if listed is not None:
            reader.skip()
            reader.unreadable_retrievals += 1
        return []
    documents = []
    for entry in listed:
        if not isinstance(entry, Mapping):
            reader.skip()  # a document the tracer could only stringify
            continue
        metadata = entry.get("metadata")
        documents.append(
            RawDocument(
                content=entry.get("page_content"),
                metadata=metadata if isinstance(metadata, Mapping) else None,
                aliases=(entry["id"],) if isinstance(entry.get("id"), str) and entry["id"] else (),
            )
        )
    return documents


_FIRST_COMPLETION_CONTENT = semconv.GEN_AI_COMPLETION_PREFIX + "0.content"
_FIRST_COMPLETION_ROLE = semconv.GEN_AI_COMPLETION_PREFIX + "0.role"
_FIRST_COMPLETION_FINISH_REASON = semconv.GEN_AI_COMPLETION_PREFIX + "0.finish_reason"


def read_generation(span: SpanRecord, reader: Reader) -> Generation | None:
    attributes = span.attributes
    # A finish reason alone is a generation too: without its text, still read for truncation.
    if (
        _FIRST_COMPLETION_CONTENT not in attributes
        and _FIRST_COMPLETION_ROLE not in attributes
        and _FIRST_COMPLETION_FINISH_REASON not in attributes
    ):
        return None
    texts = []
    finish_reasons = []
    for completion in indexed(attributes, semconv.GEN_AI_COMPLETION_PREFIX.rstrip("."), reader):
        if not is_answer_role(completion.get("role"), reader):
            continue
        content = completion.get("content")
        if isinstance(content, str):
            texts.append(content)
        reason = completion.get("finish_reason")
        if isinstance(reason, str) and reason:
            finish_reasons.append(reason.lower())
    return Generation(
        span=span, text="\n".join(texts) if texts else None, finish_reasons=tuple(finish_reasons)
    )
