"""OpenLLMetry (traceloop): LangChain and LlamaIndex retriever task spans, vector-DB result events, legacy
completions.

- ``opentelemetry-instrumentation-langchain`` retriever spans: ``gen_ai.operation.name = vector_db_retrieve``
  with ``traceloop.entity.output`` (or ``gen_ai.task.output``) JSON ``{"documents": [{"page_content",
  "metadata"}], "count"}``, present only when content tracing is on. Ids and scores come from the metadata.
- ``opentelemetry-instrumentation-llamaindex`` names each span after the class whose method ran
  (``traceloop.entity.name = VectorIndexRetriever.task``) and says nothing else of its kind, so a retriever is
  told by its class name (``...Retriever``, LlamaIndex's own naming) and a reranking postprocessor by
  ``Rerank`` in it, always with the ``.task``/``.workflow`` suffix this instrumentor adds (its LangChain
  sibling names a span after the runnable alone, ``retrieve`` for a tutorial's step). The output of
  ``retrieve`` and ``postprocess_nodes`` is a JSON list of ``NodeWithScore`` (each a JSON string or an
  object): ``{"node": {"id_", "text", "metadata"}, "score"}``; other methods of such a class (an auto
  retriever's ``generate_retrieval_spec``) return something else and report no documents.
- Vector-DB instrumentors: one ``db.query.result`` or ``db.search.result`` event per result, or (OpenLLMetry
  JS) ``db.vector.query.result.{i}.*`` span attributes, read by :mod:`.vector_db`; ``db.system`` names the
  method.
- Legacy completion attributes ``gen_ai.completion.{i}.{content,finish_reason,role}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from .. import semconv
from ._values import Generation, RawDocument, RawRetrieval, Reader, indexed, is_answer_role, is_thinking_role
from .records import SpanRecord
from .vector_db import attribute_documents, chroma_found_nothing, event_documents

_RETRIEVER_SUFFIX = "Retriever"
_RERANK_WORD = "Rerank"
_TASK_SUFFIXES = (".task", ".workflow")

LlamaIndexStep = Literal["retrieve", "rerank"]


def llamaindex_step(entity_name: Any) -> LlamaIndexStep | None:
    """``retrieve`` or ``rerank`` for a LlamaIndex retriever or reranker span as OpenLLMetry names it, else None.

    >>> llamaindex_step("VectorIndexRetriever.task"), llamaindex_step("SentenceTransformerRerank.task")
    ('retrieve', 'rerank')
    >>> llamaindex_step("RetrieverQueryEngine.workflow") is None, llamaindex_step("retrieve") is None
    (True, True)
    """
    if type(entity_name) is not str:
        return None
    for suffix in _TASK_SUFFIXES:
        if entity_name.endswith(suffix):
            class_name = entity_name[: -len(suffix)]
            if class_name.endswith(_RETRIEVER_SUFFIX):
                return "retrieve"
            if _RERANK_WORD in class_name:
                return "rerank"
            return None
    return None


def read_retrievals(span: SpanRecord, reader: Reader) -> list[RawRetrieval]:
    retrievals = []
    attributes = span.attributes
    if attributes.get(semconv.GEN_AI_OPERATION_NAME) == semconv.GEN_AI_OPERATION_VECTOR_DB_RETRIEVE:
        documents = _task_documents(attributes, reader)
        if documents:
            retrievals.append(RawRetrieval(span=span, documents=documents))
    else:
        step = llamaindex_step(attributes.get(semconv.TRACELOOP_ENTITY_NAME))
        if step is not None:
            documents = _node_documents(attributes, reader)
            if documents:
                retrievals.append(RawRetrieval(span=span, documents=documents, rerank=step == "rerank"))
    events = event_documents(span, reader) or attribute_documents(span, reader)
    if events:
        system = attributes.get(semconv.DB_SYSTEM)
        retrievals.append(
            RawRetrieval(span=span, documents=events, method_hint=system if isinstance(system, str) else None)
        )
    elif not retrievals and chroma_found_nothing(span):
        reader.found_nothing += 1
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
    if not listed:
        reader.found_nothing += 1
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


def _node_documents(attributes: Mapping[str, Any], reader: Reader) -> list[RawDocument]:
    output = attributes.get(semconv.TRACELOOP_ENTITY_OUTPUT)
    if output is None:
        return []  # content tracing off: a retrieval whose documents are not reported
    listed = reader.json(output) if isinstance(output, str) else None
    if listed is None:
        reader.unreadable_retrievals += 1  # cut short (an attribute length limit) or no JSON: documents lost
        return []
    if not isinstance(listed, list):
        return []  # another method of a retriever class (a spec, a query bundle): no documents, none lost
    if not listed:
        reader.found_nothing += 1
        return []
    documents = []
    for item in listed:
        entry = reader.mapping(item) if isinstance(item, str) else item
        node = entry.get("node") if isinstance(entry, Mapping) else None
        if not isinstance(entry, Mapping) or not isinstance(node, Mapping):
            reader.skip()  # not a NodeWithScore: nothing to read a document from
            continue
        metadata = node.get("metadata")
        documents.append(
            RawDocument(
                id=node.get("id_"),
                score=entry.get("score"),
                content=node.get("text"),
                metadata=metadata if isinstance(metadata, Mapping) else None,
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
    # One completion per choice (``n`` > 1 gives alternatives): the first of the model's is the answer, as
    # ``choices[0]`` is in an application.
    # OpenLLMetry Anthropic (0.52 and earlier) writes the reply's stop reason on completion 0, then relabels
    # it ``thinking`` when the reply opens with a thinking block: the answer's completion after it has none.
    thinking_reason: Any = None
    for completion in indexed(attributes, semconv.GEN_AI_COMPLETION_PREFIX.rstrip("."), reader):
        role = completion.get("role")
        if is_thinking_role(role):
            thinking_reason = thinking_reason or completion.get("finish_reason")
            continue
        if not is_answer_role(role, reader):
            continue
        content = completion.get("content")
        reason = completion.get("finish_reason") or thinking_reason
        return Generation(
            span=span,
            text=content if isinstance(content, str) else None,
            finish_reasons=(reason.lower(),) if isinstance(reason, str) and reason else (),
        )
    # A reply cut short while the model was still thinking: no answer text, but truncated all the same.
    return Generation(
        span=span,
        text=None,
        finish_reasons=(thinking_reason.lower(),)
        if isinstance(thinking_reason, str) and thinking_reason
        else (),
    )
