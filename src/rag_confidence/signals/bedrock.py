"""AWS Bedrock Knowledge Bases (``bedrock-agent-runtime``) as openinference-instrumentation-bedrock records them.

The instrumentor (0.1.61, ``_rag_wrappers.py``) makes both Knowledge Base calls ``RETRIEVER`` spans:

- ``retrieve`` (``bedrock.retrieve``): one document per ``retrievalResults`` entry, its chunk id
  (``x-amz-bedrock-kb-chunk-id``) as ``document.id``, ``content.text``, ``score``, and as ``document.metadata``
  the JSON ``{"location": ..., "metadata": ..., "type": ...}``: the reference's location, the knowledge base's
  metadata map (Bedrock's own ``x-amz-bedrock-kb-*`` keys beside the attributes of the source's
  ``.metadata.json``) and the content type (``TEXT``). Read as it stands, the key map saw ``type`` and took the
  content type for a ``documentType``, and never saw the application's attributes one level down: the inner
  map is the document's metadata, and a document without a chunk id is known by its source URI or location.
  The knowledge base id (``llm.invocation_parameters``) names the method.
- ``retrieve_and_generate`` (``bedrock.retrieve_and_generate``; ``bedrock_agent.retrieve_and_generate_stream``
  for the stream): the retrieved references of every citation, in citation order, as documents of the same
  shape without a score (Bedrock returns none for them), and the generated ``output.text`` as ``output.value``.
  That span retrieved and answered: it is a generation (:func:`generates_answer`), its text the answer, and each
  reference it lists a cited document. Which part of the text each citation covers
  (``generatedResponsePart``) is not recorded, so no coverage is derived; and Bedrock lists only the references
  the answer cites, so nothing retrieved and left uncited is known.

``opentelemetry-instrumentation-bedrock`` (OpenLLMetry) wraps ``bedrock-runtime`` clients only, and
``opentelemetry-instrumentation-botocore`` records the AWS call (``rpc.*``), nothing of what it returned: see
docs/signals.md, *Known limits*.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import semconv
from ._values import RawDocument, Reader
from .records import SpanRecord

# Exactly the keys the instrumentor writes in each document's metadata JSON: a LangChain or LlamaIndex document
# whose own metadata happens to hold a ``location`` stays as it is.
_REFERENCE_KEYS = frozenset(
    {semconv.BEDROCK_DOCUMENT_LOCATION, semconv.BEDROCK_DOCUMENT_METADATA, semconv.BEDROCK_DOCUMENT_TYPE}
)


def generates_answer(span: SpanRecord) -> bool:
    """True for the ``RETRIEVER`` span of a ``retrieve_and_generate`` call: it retrieved and generated.

    Known by its name, or by the request's ``retrieveAndGenerateConfiguration`` in ``llm.invocation_parameters``
    (a span renamed on the way keeps its attributes). A follow-up in a session may omit the configuration; the
    name still says it.

    >>> generates_answer(SpanRecord(1, 1, None, "bedrock.retrieve_and_generate",
    ...                             {"openinference.span.kind": "RETRIEVER"}))
    True
    >>> generates_answer(SpanRecord(1, 1, None, "bedrock.retrieve", {"openinference.span.kind": "RETRIEVER",
    ...                             "llm.invocation_parameters": '{"knowledgeBaseId": "KB1"}'}))
    False
    """
    attributes = span.attributes
    if attributes.get(semconv.OPENINFERENCE_SPAN_KIND) != semconv.OPENINFERENCE_KIND_RETRIEVER:
        return False
    if span.name in semconv.BEDROCK_RETRIEVE_AND_GENERATE_SPANS:
        return True
    parameters = _invocation_parameters(attributes, semconv.BEDROCK_RAG_CONFIGURATION, None)
    return parameters is not None and isinstance(parameters.get(semconv.BEDROCK_RAG_CONFIGURATION), Mapping)


def knowledge_base_span(span: SpanRecord) -> bool:
    """True for the ``RETRIEVER`` span of a Knowledge Base call (``retrieve`` or ``retrieve_and_generate``): by
    the instrumentor's span names, or by the request in ``llm.invocation_parameters`` (``knowledgeBaseId``, or
    a ``retrieveAndGenerateConfiguration``).

    Only such a span's documents are read as references (:func:`adapt_documents`): a LangChain, LlamaIndex or
    Haystack retriever is free to give its documents metadata of exactly the keys ``location``, ``metadata``
    and ``type``, and its nested ``metadata`` is then the application's own, not a map to read scores and types
    from in place of the documents' metadata.

    >>> knowledge_base_span(SpanRecord(1, 1, None, "VectorStoreRetriever", {"openinference.span.kind": "RETRIEVER"}))
    False
    >>> knowledge_base_span(SpanRecord(1, 1, None, "retrieve", {"openinference.span.kind": "RETRIEVER",
    ...                                "llm.invocation_parameters": '{"knowledgeBaseId": "KB1"}'}))
    True
    """
    attributes = span.attributes
    if attributes.get(semconv.OPENINFERENCE_SPAN_KIND) != semconv.OPENINFERENCE_KIND_RETRIEVER:
        return False
    if span.name in semconv.BEDROCK_KNOWLEDGE_BASE_SPANS:
        return True
    return knowledge_base_id(attributes, None) is not None or generates_answer(span)


def knowledge_base_id(attributes: Mapping[str, Any], reader: Reader | None) -> str | None:
    """The knowledge base a ``retrieve`` (``knowledgeBaseId``) or a ``retrieve_and_generate`` (its
    ``knowledgeBaseConfiguration``) searched, from ``llm.invocation_parameters``: the retrieval's method.
    ``reader`` None: a bad value is not counted (a test, not the reading)."""
    parameters = _invocation_parameters(attributes, semconv.BEDROCK_KNOWLEDGE_BASE_ID, reader)
    if parameters is None:
        return None
    found = parameters.get(semconv.BEDROCK_KNOWLEDGE_BASE_ID)
    if found is None:
        configuration = parameters.get(semconv.BEDROCK_RAG_CONFIGURATION)
        if isinstance(configuration, Mapping):
            knowledge_base = configuration.get(semconv.BEDROCK_KB_CONFIGURATION)
            if isinstance(knowledge_base, Mapping):
                found = knowledge_base.get(semconv.BEDROCK_KNOWLEDGE_BASE_ID)
    return found if isinstance(found, str) and found else None


def _invocation_parameters(
    attributes: Mapping[str, Any], needed: str, reader: Reader | None
) -> Mapping[str, Any] | None:
    # Parsed only when the key is in the text: most spans carrying invocation parameters are model calls. The
    # tests run for every retriever span, so a throwaway reader is made only when there is something to parse.
    parameters = attributes.get(semconv.OI_LLM_INVOCATION_PARAMETERS)
    if type(parameters) is not str or needed not in parameters:
        return None
    return (reader if reader is not None else Reader()).mapping(parameters)


def adapt_documents(documents: list[RawDocument]) -> bool:
    """Read Knowledge Base references (the documents of a :func:`knowledge_base_span`) as documents: the inner
    metadata map is the metadata (the key map reads the application's attributes there, never the content type),
    and a document without a chunk id is known by its source URI or its location. True when any document was
    one."""
    adapted = False
    for document in documents:
        metadata = document.metadata
        if (
            metadata is None
            or len(metadata) != len(_REFERENCE_KEYS)
            or not _REFERENCE_KEYS.issubset(metadata)
        ):
            continue
        inner = metadata.get(semconv.BEDROCK_DOCUMENT_METADATA)
        location = metadata.get(semconv.BEDROCK_DOCUMENT_LOCATION)
        if not (inner is None or isinstance(inner, Mapping)) or not (
            location is None or isinstance(location, Mapping)
        ):
            continue
        adapted = True
        document.metadata = inner if inner else None
        if document.id is None:
            document.id = _reference_id(inner, location)
    return adapted


def _reference_id(inner: Mapping[str, Any] | None, location: Mapping[str, Any] | None) -> str | None:
    """The chunk id (the instrumentor records it as ``document.id`` when Bedrock gives it), else the source
    document's URI, else the name its location gives it."""
    if inner:
        for key in (semconv.BEDROCK_KB_CHUNK_ID, semconv.BEDROCK_KB_SOURCE_URI):
            value = inner.get(key)
            if isinstance(value, str) and value:
                return value
    if location:
        for value in location.values():
            if isinstance(value, Mapping):  # ``s3Location``, ``webLocation``, ...: the one of the source type
                for key in semconv.BEDROCK_LOCATION_NAME_KEYS:
                    name = value.get(key)
                    if isinstance(name, str) and name:
                        return name
    return None
