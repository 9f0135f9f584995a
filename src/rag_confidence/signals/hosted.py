"""Retrieval hosted by the model provider, inside one model call: OpenAI's Responses API with ``file_search``.

No retriever span exists for it: the model searches an OpenAI vector store and answers in one request. The
OpenInference OpenAI instrumentor records the whole Response object as JSON in the LLM span's ``output.value``
(openinference-instrumentation-openai ``_response_accumulator.py``; for a stream, the ``response.completed``
event's response), so that span reports the retrieval and the answer both:

- an output item ``{"type": "file_search_call", "results": [...]}`` is the search; each result's ``file_id``
  is the document id, ``score`` its relevance (0..1), ``text`` the chunk, ``attributes`` (the vector-store
  file's attributes) its metadata, read through the key map. Several chunks of one file merge into one
  candidate under the file's id (its best score), the granularity the citations have. OpenAI returns
  ``results`` only when the request asks ``include=["file_search_call.results"]``; without them (``null``) the
  search happened but what it found is unknown: the span counts as unreadable, so no citation input is
  derived, rather than every citation being called invalid.
- ``file_citation`` annotations on the message's ``output_text`` parts are the answer's citations, by
  ``file_id``. Their ``index`` is documented as "the index of the file in the list of files" while responses
  put character offsets there, so no coverage is derived from it.

OpenLLMetry (``opentelemetry-instrumentation-openai`` 0.62) records only the output text (and the finish
reason ``tool_call``), and ``opentelemetry-instrumentation-openai-v2`` 2.4b0 no span at all for the Responses
API: neither says what was retrieved (see docs/signals.md, *Known limits*).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from .. import semconv
from ._partial_json import UNREAD, array_items, member, space, string_at, whole
from ._values import RawDocument, RawRetrieval, Reader
from .records import SpanRecord

# A ``type`` key whose value is ``file_search_call``. In valid JSON a ``"`` inside a string value is escaped, so
# this can only match the object structure, never an answer that quotes it; the quick ``in`` test spares
# the regex on every other LLM span.
_FILE_SEARCH_CALL = re.compile(r'"type"\s*:\s*"' + semconv.OPENAI_FILE_SEARCH_CALL + '"')
_FILE_SEARCH_CALL_TEXT = '"' + semconv.OPENAI_FILE_SEARCH_CALL + '"'
_FILE_CITATION_TEXT = '"' + semconv.OPENAI_FILE_CITATION + '"'


def holds_file_search(attributes: Mapping[str, Any]) -> bool:
    """True for an OpenInference LLM span whose recorded Response ran ``file_search``: it retrieved.

    Reads ``openinference.span.kind`` and ``output.value`` only (both in ``answers.ANSWER_HINT_KEYS``). The
    ``file_search_call`` item must be one of the Response's own ``output`` items: other JSON holds such objects
    deeper down (the OpenInference LangChain tracer's ``LLMResult`` of a ``ChatOpenAI`` on the Responses API
    carries them in the message's ``tool_outputs``; that span is no Response, and the OpenAI instrumentor's span
    beneath it, when there is one, is). A value cut short by a length limit (no JSON) still says that the search
    ran (its results are then unreadable).

    >>> holds_file_search({"openinference.span.kind": "LLM",
    ...                    "output.value": '{"output": [{"type": "file_search_call", "results": null}]}'})
    True
    >>> holds_file_search({"openinference.span.kind": "LLM", "output.value": '"file_search_call"'})
    False
    >>> holds_file_search({"openinference.span.kind": "LLM",
    ...                    "output.value": '{"generations": [{"tool_outputs": [{"type": "file_search_call"}]}]}'})
    False
    """
    if attributes.get(semconv.OPENINFERENCE_SPAN_KIND) != semconv.OPENINFERENCE_KIND_LLM:
        return False
    output = attributes.get(semconv.OI_OUTPUT_VALUE)
    if (
        type(output) is not str
        or _FILE_SEARCH_CALL_TEXT not in output
        or _FILE_SEARCH_CALL.search(output) is None
    ):
        return False
    return _response_searched(output)


# The last value :func:`_response_searched` parsed and its verdict: the answer rules and the readers ask of one
# span several times per extraction, and parsing a Response with its results is worth doing once. (A tuple is
# replaced whole, so a thread reads either the old pair or the new one.)
_last_searched: tuple[str | None, bool] = (None, False)


def _response_searched(output: str) -> bool:
    """Whether ``output`` (which names ``file_search_call`` as a ``type``) is a Response with such an item."""
    global _last_searched
    last_output, last_verdict = _last_searched
    if last_output is output:
        return last_verdict
    parsed = whole(output)
    if parsed is UNREAD:  # cut short, or too long to read: followed as far as the text goes
        verdict = _opens_file_search(output)
    else:
        items = parsed.get(semconv.OPENAI_RESPONSE_OUTPUT) if isinstance(parsed, Mapping) else None
        verdict = (
            isinstance(items, Sequence)
            and not isinstance(items, (str, bytes))
            and any(
                isinstance(item, Mapping)
                and item.get(semconv.OPENAI_ITEM_TYPE) == semconv.OPENAI_FILE_SEARCH_CALL
                for item in items
            )
        )
    _last_searched = (output, verdict)
    return verdict


def _opens_file_search(output: str) -> bool:
    """Whether JSON that cannot be read names ``file_search_call`` as the ``type`` of one of the Response's own
    ``output`` items, as far as the text goes: a Response cut short there ran the search (what it found is
    unreadable). A framework's JSON holding such an item deeper down (LangChain's ``LLMResult`` of a Responses
    call, the item in a message's ``tool_outputs``) is no Response, cut short or not: read as one, its
    unreadable search withheld the citation inputs of the application's own retrieval."""
    start = space(output, 0)
    if output[start : start + 1] != "{":
        return False
    items = member(output, start, semconv.OPENAI_RESPONSE_OUTPUT)
    if items is None or output[items : items + 1] != "[":
        return False
    for item in array_items(output, items):
        kind = member(output, item, semconv.OPENAI_ITEM_TYPE)
        if kind is not None and string_at(output, kind) == semconv.OPENAI_FILE_SEARCH_CALL:
            return True
    return False


def _output_items(attributes: Mapping[str, Any], reader: Reader) -> Iterator[Mapping[str, Any]] | None:
    """The Response's ``output`` items, or None when ``output.value`` is no Response object (counted when it
    looked like one: unparsable, or an ``output`` that is no list)."""
    parsed = reader.mapping(attributes.get(semconv.OI_OUTPUT_VALUE))
    if parsed is None:
        return None
    items = parsed.get(semconv.OPENAI_RESPONSE_OUTPUT)
    if not isinstance(items, Sequence) or isinstance(items, (str, bytes)):
        if items is not None:
            reader.skip()
        return None
    return (item for item in items if isinstance(item, Mapping))


def read_retrievals(span: SpanRecord, reader: Reader) -> list[RawRetrieval]:
    """The file_search results of one Responses call, all its searches as one retrieval (one method: the model
    rewording its query is the multi-query case, best score per file kept)."""
    attributes = span.attributes
    if not holds_file_search(attributes):
        return []
    items = _output_items(attributes, reader)
    if items is None:
        reader.unreadable_retrievals += 1
        return []
    documents: list[RawDocument] = []
    unknown = False
    for item in items:
        if item.get(semconv.OPENAI_ITEM_TYPE) != semconv.OPENAI_FILE_SEARCH_CALL:
            continue
        results = item.get("results")
        if not isinstance(results, Sequence) or isinstance(results, (str, bytes)):
            # null without ``include=["file_search_call.results"]``: searched, found unknown.
            if results is not None:
                reader.skip()
            unknown = True
            continue
        for result in results:
            if not isinstance(result, Mapping):
                reader.skip()
                continue
            metadata = result.get("attributes")
            documents.append(
                RawDocument(
                    id=result.get("file_id"),
                    score=result.get("score"),
                    content=result.get("text"),
                    metadata=reader.mapping(metadata) if metadata is not None else None,
                )
            )
    if unknown:
        reader.unreadable_retrievals += 1
    if not documents:
        if not unknown:
            reader.found_nothing += 1  # ``results: []``: searched and found nothing
        return []
    return [RawRetrieval(span=span, documents=documents, method_hint=semconv.OPENAI_FILE_SEARCH_METHOD)]


def read_citations(attributes: Mapping[str, Any], reader: Reader) -> tuple[str, ...]:
    """The ``file_id`` of each ``file_citation`` annotation of the Response's messages, in order (repeats
    kept: each is a marker). Empty for any span whose ``output.value`` names no file citation."""
    output = attributes.get(semconv.OI_OUTPUT_VALUE)
    if type(output) is not str or _FILE_CITATION_TEXT not in output:
        return ()
    items = _output_items(attributes, reader)
    if items is None:
        return ()
    cited: list[str] = []
    for item in items:
        if item.get("type") != "message":
            continue
        for part in _mappings(item.get("content")):
            if part.get("type") != "output_text":
                continue
            for annotation in _mappings(part.get("annotations")):
                if annotation.get("type") == semconv.OPENAI_FILE_CITATION:
                    file_id = reader.string(annotation.get("file_id"))
                    if file_id is not None:
                        cited.append(file_id)
    return tuple(cited)


def _mappings(value: Any) -> list[Mapping[str, Any]]:
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
        return []
    return [entry for entry in value if isinstance(entry, Mapping)]
