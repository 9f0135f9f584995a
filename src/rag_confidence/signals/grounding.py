"""Grounding hosted by the model provider, inside one model call: Gemini (``google-genai``) with Google Search,
Vertex AI Search, the Vertex RAG Engine or a Gemini file search store as a tool.

No retriever span exists for it: the model retrieves and answers in one request. The OpenInference Google GenAI
instrumentor records the whole ``GenerateContentResponse`` as JSON (by field name, ``model_dump_json``) in the
LLM span's ``output.value`` (openinference-instrumentation-google-genai ``_utils._io_value_and_type``), so that
span reports the retrieval and the answer both. Of its first candidate (the one whose text the span's output
messages start with), ``grounding_metadata`` gives:

- ``grounding_chunks``: what was retrieved. Each chunk is one source: ``retrieved_context`` (id the Vertex AI
  Search ``document_name``, else the ``uri``, else the ``title``; content its ``text`` or its RAG chunk's;
  a file search store's ``custom_metadata`` as metadata, read through the key map), ``web`` (Google Search: the
  ``uri``), ``maps`` (the ``place_id``, else the ``uri``) or ``image`` (the ``source_uri``). Chunks of one source
  merge into one candidate under its id, the granularity the citations have. **No chunk carries a relevance
  score**: the documents count for citations and are no scored candidates (``unscored_documents``). A support's
  ``confidence_scores`` are not used as one: they rate how well one answer segment is backed by the chunks it
  names, exist only for chunks that back some segment (a chunk retrieved and not used has none), and say nothing
  of how relevant a chunk was to the question; reading them as retrieval scores would rate the retrieval by the
  answer it fed.
- ``grounding_supports``: which answer segments which chunks back. Each index in a support's
  ``grounding_chunk_indices`` is a citation of that chunk's source (an index past the chunk list is an invalid
  one), and each segment a support backs with a known chunk is *covered* text, for ``citationCoverageScore``
  (see :func:`read_supports`).

For a stream, the OpenInference instrumentor records the chunks merged (text joined, the grounding metadata of
the last chunk, where Gemini sends it). The OpenTelemetry contrib instrumentor
(``opentelemetry-instrumentation-google-genai``) records the text and the finish reasons only: nothing says what
was retrieved (see docs/signals.md, *Known limits*).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .. import semconv
from ._partial_json import UNREAD, member, space, whole
from ._values import RawDocument, RawRetrieval, Reader
from .records import SpanRecord

# The ``grounding_chunks`` key opening a non-empty list of objects. In valid JSON a ``"`` inside a string value is
# escaped, so this can only match the object structure, never an answer that quotes it; the quick ``in`` test
# spares the regex on every other LLM span.
_CHUNKS_TEXT = '"' + semconv.GEMINI_GROUNDING_CHUNKS + '"'
_CHUNKS = re.compile(_CHUNKS_TEXT + r"\s*:\s*\[\s*\{")


class _Grounding:
    """The grounding metadata of one response's first candidate, or ``None`` fields when ``output.value`` held
    grounding that could not be read (cut short by a length limit, or too long to parse)."""

    __slots__ = ("chunks", "supports")

    def __init__(self, chunks: Sequence[Any] | None, supports: Sequence[Any] | None) -> None:
        self.chunks = chunks
        self.supports = supports


# The last value :func:`_grounding` parsed and what it found: the answer rules and the readers ask of one span
# several times per extraction, and parsing a response with its chunks is worth doing once. (A tuple is replaced
# whole, so a thread reads either the old pair or the new one.)
_last: tuple[str | None, _Grounding | None] = (None, None)
_UNREADABLE = _Grounding(None, None)


def holds_grounding(attributes: Mapping[str, Any]) -> bool:
    """True for an OpenInference LLM span whose recorded Gemini response was grounded: it retrieved.

    Reads ``openinference.span.kind`` and ``output.value`` only (both in ``answers.ANSWER_HINT_KEYS``). The
    chunks must be the response's own (``candidates[0].grounding_metadata.grounding_chunks``, non-empty): other
    JSON may hold such objects deeper down (a framework's result wrapping a Gemini message). A value cut short by
    a length limit (no JSON) still says that the model retrieved when it opens the chunks at that path (what it
    found is then unreadable).

    >>> holds_grounding({"openinference.span.kind": "LLM", "output.value":
    ...     '{"candidates": [{"grounding_metadata": {"grounding_chunks": [{"web": {"uri": "https://a"}}]}}]}'})
    True
    >>> holds_grounding({"openinference.span.kind": "LLM",
    ...                  "output.value": '{"generations": [{"grounding_chunks": [{"web": {}}]}]}'})
    False
    """
    return _grounding(attributes) is not None


def _grounding(attributes: Mapping[str, Any]) -> _Grounding | None:
    if attributes.get(semconv.OPENINFERENCE_SPAN_KIND) != semconv.OPENINFERENCE_KIND_LLM:
        return None
    output = attributes.get(semconv.OI_OUTPUT_VALUE)
    if type(output) is not str or _CHUNKS_TEXT not in output or _CHUNKS.search(output) is None:
        return None
    global _last
    last_output, last_found = _last
    if last_output is output:
        return last_found
    parsed = whole(output)
    if parsed is UNREAD:  # cut short, or too long to read: followed as far as the text goes
        found = _UNREADABLE if _opens_grounding(output) else None
    else:
        found = _first_candidate_grounding(parsed)
    _last = (output, found)
    return found


def _opens_grounding(output: str) -> bool:
    """Whether JSON that cannot be read (cut short by a length limit, or too long) opens the response's own
    non-empty chunk list: ``grounding_chunks`` at ``candidates[0].grounding_metadata``, the path followed as far
    as the text goes. A value cut short there is a grounded call whose chunks are unreadable; a framework's result
    holding a Gemini message deeper down (the OpenInference LangChain tracer's ``LLMResult`` of
    ``langchain-google-genai``, ``grounding_metadata`` in ``generation_info``) is no retrieval, cut short or not:
    counted as one, its unreadable chunks withheld the citation inputs of the application's own retrieval, and
    made a chat call without any retrieval an answer."""
    start = space(output, 0)
    if output[start : start + 1] != "{":
        return False
    candidates = member(output, start, semconv.GEMINI_CANDIDATES)
    if candidates is None or output[candidates : candidates + 1] != "[":
        return False
    first = space(output, candidates + 1)
    if output[first : first + 1] != "{":
        return False
    metadata = member(output, first, semconv.GEMINI_GROUNDING_METADATA)
    if metadata is None or output[metadata : metadata + 1] != "{":
        return False
    chunks = member(output, metadata, semconv.GEMINI_GROUNDING_CHUNKS)
    return chunks is not None and _NON_EMPTY_LIST.match(output, chunks) is not None


_NON_EMPTY_LIST = re.compile(r"\[\s*\{")


def _first_candidate_grounding(parsed: Any) -> _Grounding | None:
    if not isinstance(parsed, Mapping):
        return None
    candidates = _sequence(parsed.get(semconv.GEMINI_CANDIDATES))
    first = candidates[0] if candidates else None
    metadata = first.get(semconv.GEMINI_GROUNDING_METADATA) if isinstance(first, Mapping) else None
    if not isinstance(metadata, Mapping):
        return None
    chunks = _sequence(metadata.get(semconv.GEMINI_GROUNDING_CHUNKS))
    if not chunks:
        return None
    return _Grounding(chunks, _sequence(metadata.get(semconv.GEMINI_GROUNDING_SUPPORTS)) or ())


def _sequence(value: Any) -> Sequence[Any] | None:
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return value
    return None


def read_retrievals(span: SpanRecord, reader: Reader) -> list[RawRetrieval]:
    """The grounding chunks of one generate-content call as one retrieval (method ``grounding``)."""
    grounding = _grounding(span.attributes)
    if grounding is None:
        return []
    if grounding.chunks is None:
        reader.unreadable_retrievals += 1
        return []
    documents: list[RawDocument] = []
    for chunk in grounding.chunks:
        document = _document(chunk, reader)
        if document is None:
            reader.skip()
        else:
            documents.append(document)
    if not documents:
        return []
    return [RawRetrieval(span=span, documents=documents, method_hint=semconv.GEMINI_GROUNDING_METHOD)]


def _document(chunk: Any, reader: Reader) -> RawDocument | None:
    """One grounding chunk as a document, by its kind (a chunk holds one of them)."""
    if not isinstance(chunk, Mapping):
        return None
    context = chunk.get(semconv.GEMINI_RETRIEVED_CONTEXT)
    if isinstance(context, Mapping):
        content = context.get("text")
        rag_chunk = context.get(semconv.GEMINI_RAG_CHUNK)
        if content is None and isinstance(rag_chunk, Mapping):
            content = rag_chunk.get("text")
        return RawDocument(
            id=_chunk_id(context, reader, "document_name", "uri", "title"),
            content=content,
            metadata=_custom_metadata(context.get(semconv.GEMINI_CUSTOM_METADATA)),
        )
    web = chunk.get(semconv.GEMINI_WEB)
    if isinstance(web, Mapping):
        return RawDocument(id=_chunk_id(web, reader, "uri", "title"))
    maps = chunk.get(semconv.GEMINI_MAPS)
    if isinstance(maps, Mapping):
        return RawDocument(id=_chunk_id(maps, reader, "place_id", "uri", "title"), content=maps.get("text"))
    image = chunk.get(semconv.GEMINI_IMAGE)
    if isinstance(image, Mapping):
        return RawDocument(id=_chunk_id(image, reader, "source_uri", "image_uri"))
    return None


def _chunk_id(source: Mapping[str, Any], reader: Reader, *keys: str) -> str | None:
    for key in keys:
        value = source.get(key)
        if value is not None:
            found = reader.string(value)
            if found is not None:
                return found
    return None


def _custom_metadata(entries: Any) -> dict[str, Any] | None:
    """A file search store document's ``custom_metadata`` (``[{key, string_value | numeric_value |
    string_list_value}]``) as a mapping for the key map."""
    metadata: dict[str, Any] = {}
    for entry in _sequence(entries) or ():
        if not isinstance(entry, Mapping) or not isinstance(entry.get("key"), str):
            continue
        for field in ("string_value", "numeric_value"):
            if entry.get(field) is not None:
                metadata[entry["key"]] = entry[field]
                break
        else:
            values = entry.get("string_list_value")
            if isinstance(values, Mapping) and _sequence(values.get("values")) is not None:
                metadata[entry["key"]] = list(values["values"])
    return metadata or None


def read_supports(attributes: Mapping[str, Any], reader: Reader) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(citations, segments)`` of a grounded response: the id of the chunk each support index names, in order
    (repeats kept: each is a marker; an index past the chunk list gives a reference no document matches, an
    invalid citation), and the text of each segment a support backs with a chunk of known id.

    The segments are matched in the answer text by their text (:func:`.citations.summarize`), not by their
    offsets: ``start_index``/``end_index`` count UTF-8 bytes within one part of the candidate's content, and the
    answer text is read from the span's output messages, whose parts the instrumentor may have joined.
    Empty for any span whose ``output.value`` holds no grounding.
    """
    grounding = _grounding(attributes)
    if grounding is None or grounding.chunks is None or not grounding.supports:
        return (), ()
    chunks = grounding.chunks
    ids: list[str | None] = []
    for chunk in chunks:
        document = _document(chunk, reader) if isinstance(chunk, Mapping) else None
        ids.append(document.id if document is not None else None)
    cited: list[str] = []
    segments: list[str] = []
    for support in grounding.supports:
        if not isinstance(support, Mapping):
            reader.skip()
            continue
        backed = False
        for index in _sequence(support.get(semconv.GEMINI_GROUNDING_CHUNK_INDICES)) or ():
            if isinstance(index, bool) or not isinstance(index, int):
                reader.skip()
                continue
            if 0 <= index < len(ids):
                chunk_id = ids[index]
                if chunk_id is not None:
                    cited.append(chunk_id)
                    backed = True
            else:
                # Names no chunk: an invalid citation. Shaped like no id nor position (``citations._POSITION``).
                cited.append(f"{semconv.GEMINI_GROUNDING_CHUNKS}[{index}]")
        segment = support.get(semconv.GEMINI_SEGMENT)
        text = segment.get("text") if isinstance(segment, Mapping) else None
        if backed and isinstance(text, str) and text.strip():
            segments.append(text)
    return tuple(cited), tuple(segments)
