"""Anthropic citations: Claude's answer citing the ``document`` and ``search_result`` blocks of its request.

With ``citations: {"enabled": true}`` on a request's ``document`` or ``search_result`` content blocks, Claude
splits its answer into text blocks and puts ``citations`` on the ones its sources back. The OpenInference
Anthropic instrumentor (openinference-instrumentation-anthropic 3.1.0) records the whole ``Message`` as JSON in
the LLM span's ``output.value`` (``model_dump_json(by_alias=True)``; for a stream the accumulated message), the
request's parameters as JSON in ``input.value`` (the messages with their document blocks), and the citations per
text block once more in ``metadata``. OpenLLMetry (``opentelemetry-instrumentation-anthropic`` 0.62) records the
document blocks in ``gen_ai.input.messages`` and the output text parts without their citations: nothing there
says what the answer cites (see docs/signals.md, *Known limits*).

**Not a retrieval.** The documents were retrieved by the application before the call (Claude searches nothing
here: it is handed the blocks), and no block carries a relevance score. Read as a retrieval, the call would add
unscored documents the application's own retrieval span already reports (or, without one, make an answer of
every Claude call with a document attached, such as a summary of an uploaded file). So the span stays a
generation, and its citations are matched against the documents the application's retrieval spans report, as
markers in the text are.

**What a citation names.**

- ``search_result_location``: its ``source``, which the application set on the ``search_result`` block: its own
  id or URL of the search result, the one its retriever span reports as the document id when both come from the
  same hit. It matches a retrieved document by id (exactly, then ignoring case), never as a position.
- ``char_location``, ``page_location``, ``content_block_location``: the request's document at
  ``document_index`` (counting the ``document`` blocks of the request's messages, those inside tool results
  included, in order). Such a document has no id of its own; it is known by its ``title`` and ``context`` (an
  application may put the document id in either), a Files API ``file_id``, and its text (a text source's
  ``data``; a content source's text blocks, and for a citation of one block, that block's text), which matches a
  retrieved document whose content is the same text (whitespace at either end aside). The position is not used:
  it counts the request's documents, not the retrieval's, and an application that adds one document of its own
  (instructions, a user's file) shifts every position. When ``input.value`` is absent (hidden), unreadable, or
  its document at that index disagrees with the citation's ``document_title``, the citation's own
  ``document_title`` and ``file_id`` are the only names.
- Other citations (``web_search_result_location`` of the hosted web search tool) are not read.

**Never invalid.** The API returns only citations of blocks the request holds: a citation matching no retrieved
document names a source the application gave Claude without reporting it (or reporting it under another name),
not one the model made up. It does not count in ``invalidCitationCount``; it is an *unmatched source*
(``rag.confidence.citation.unmatched_sources``), and with one or more of those ``citationCount`` is not derived:
the retrieved documents cited would be a lower bound reported as a count, and the cited sources, counted whole, a
count of documents nobody can say were retrieved. ``citationCoverageScore`` is derived in both cases: each text
block carrying a citation read here is a segment the response says its sources back (``segments``, found in the
answer text by their text, as Gemini grounding's are).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .. import semconv
from ._values import Reader, unredacted
from .documents import content_key

# A ``citations`` key opening a non-empty list of objects, as the Message JSON holds for a cited text block (a
# text block without citations has ``null``). In valid JSON a ``"`` inside a string is escaped, so this only
# matches the structure; the quick ``in`` test spares the regex on every other LLM span.
_CITATIONS_TEXT = '"' + semconv.ANTHROPIC_CITATIONS + '"'
_CITATIONS = re.compile(_CITATIONS_TEXT + r"\s*:\s*\[\s*\{")
_DOCUMENT_LOCATIONS = frozenset(
    {
        semconv.ANTHROPIC_CHAR_LOCATION,
        semconv.ANTHROPIC_PAGE_LOCATION,
        semconv.ANTHROPIC_CONTENT_BLOCK_LOCATION,
    }
)

#: A cited source: the names it may be known by among the retrieved documents, in order (ids, and
#: :func:`.documents.content_key` of its text).
Source = tuple[str, ...]


def read_citations(
    attributes: Mapping[str, Any], reader: Reader
) -> tuple[tuple[Source, ...], tuple[str, ...]]:
    """``(sources, segments)`` of a Claude response recorded by the OpenInference Anthropic instrumentor: one
    source per citation read (repeats kept: each is a marker), and the text of each text block carrying one.
    Empty for any span whose ``output.value`` is no Message with citations."""
    if attributes.get(semconv.OPENINFERENCE_SPAN_KIND) != semconv.OPENINFERENCE_KIND_LLM:
        return (), ()
    output = attributes.get(semconv.OI_OUTPUT_VALUE)
    if type(output) is not str or _CITATIONS_TEXT not in output or _CITATIONS.search(output) is None:
        return (), ()
    # Not counted when it is no JSON: any model's answer text (an OpenAI span's plain ``output.value``) may quote
    # a ``"citations": [{`` of its own, and is no bad value for that.
    message = reader.maybe_mapping(output)
    if message is None or message.get("type") != semconv.ANTHROPIC_MESSAGE:
        return (), ()
    documents: _Documents | None = None
    sources: list[Source] = []
    segments: list[str] = []
    for block in _mappings(message.get("content")):
        if block.get("type") != "text":
            continue
        read = 0
        for citation in _mappings(block.get(semconv.ANTHROPIC_CITATIONS)):
            kind = citation.get("type")
            if kind == semconv.ANTHROPIC_SEARCH_RESULT_LOCATION:
                source = reader.string(citation.get("source"))
                if source is None:
                    continue
                sources.append((source,))
            elif kind in _DOCUMENT_LOCATIONS:
                if documents is None:
                    documents = _Documents(_request_documents(attributes, reader))
                names = _document_names(citation, documents, reader)
                if not names:
                    continue
                sources.append(names)
            else:
                continue
            read += 1
        text = block.get("text")
        if read and isinstance(text, str) and text.strip():
            segments.append(text)
    return tuple(sources), tuple(segments)


def _request_documents(attributes: Mapping[str, Any], reader: Reader) -> list[Mapping[str, Any]]:
    """The request's ``document`` blocks in order (the messages' own, then within tool results where they
    stand), from ``input.value``; empty when it is absent, hidden or no request."""
    value = unredacted(attributes.get(semconv.OI_INPUT_VALUE))
    request = reader.mapping(value) if isinstance(value, str) else None
    if request is None:
        return []
    documents: list[Mapping[str, Any]] = []
    for message in _mappings(request.get("messages")):
        _collect_documents(message.get("content"), documents)
    return documents


def _collect_documents(blocks: Any, documents: list[Mapping[str, Any]]) -> None:
    for block in _mappings(blocks):
        kind = block.get("type")
        if kind == semconv.ANTHROPIC_DOCUMENT:
            documents.append(block)
        elif kind == "tool_result":
            _collect_documents(block.get("content"), documents)


class _Documents:
    """The request's document blocks, with the content keys of their texts worked out once per document (and
    cited block): a response citing one long document thousands of times (as a sender may shape span data)
    would otherwise hash the whole document once per citation, seconds per span."""

    __slots__ = ("blocks", "_keys", "_block_texts")

    def __init__(self, blocks: list[Mapping[str, Any]]) -> None:
        self.blocks = blocks
        # (document index, cited block index or -1 for the whole document) -> content keys.
        self._keys: dict[tuple[int, int], list[str]] = {}
        # Document index -> the texts of a content source's blocks (None for a block that is no text).
        self._block_texts: dict[int, list[str | None]] = {}

    def text_keys(self, index: int, citation: Mapping[str, Any]) -> list[str]:
        """Content keys of the cited text: a text source's data; a content source's cited block (one block
        cited), then all its text blocks joined."""
        source = self.blocks[index].get("source")
        if not isinstance(source, Mapping):
            return []
        if source.get("type") != "content" or isinstance(source.get("content"), str):
            return self._keys_of(index, -1, source)
        texts = self._block_texts.get(index)
        if texts is None:
            texts = self._block_texts[index] = [
                block.get("text")
                if block.get("type") == "text" and isinstance(block.get("text"), str)
                else None
                for block in _mappings(source.get("content"))
            ]
        keys: list[str] = []
        start, end = citation.get("start_block_index"), citation.get("end_block_index")
        if (
            citation.get("type") == semconv.ANTHROPIC_CONTENT_BLOCK_LOCATION
            and isinstance(start, int)
            and isinstance(end, int)
            and end == start + 1
            and 0 <= start < len(texts)
        ):
            keys.extend(self._keys_of(index, start, texts[start]))
        keys.extend(self._keys_of(index, -1, texts))
        return keys

    def _keys_of(self, index: int, block: int, text: Any) -> list[str]:
        known = self._keys.get((index, block))
        if known is None:
            known = self._keys[(index, block)] = _text_keys(text)
        return known


def _document_names(citation: Mapping[str, Any], documents: _Documents, reader: Reader) -> Source:
    title = citation.get("document_title")
    title = title if isinstance(title, str) and title else None
    names: list[str] = []
    index = citation.get("document_index")
    if not (isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(documents.blocks)):
        index = None
    document = documents.blocks[index] if index is not None else None
    if document is not None and title is not None and document.get("title") != title:
        document = None  # the index counts other blocks than read here: trust the citation's own title only
    if document is not None:
        for key in ("title", "context"):
            name = document.get(key)
            if isinstance(name, str) and name.strip():
                names.append(name.strip())
    elif title is not None:
        names.append(title.strip())
    file_id = reader.string(citation.get("file_id"))
    if file_id is not None:
        names.append(file_id)
    if document is not None and index is not None:
        names.extend(documents.text_keys(index, citation))
    return tuple(dict.fromkeys(name for name in names if name))


def _text_keys(text: Any) -> list[str]:
    """The content key of a cited text: a text source (its ``data``), a content source whose content is one
    string, a content source's text block (a string), or its text blocks (a list, joined by line breaks)."""
    if isinstance(text, Mapping):
        kind = text.get("type")
        if kind == "text":
            text = text.get("data")
        elif kind == "content" and isinstance(text.get("content"), str):
            text = text.get("content")
        else:
            return []
    elif isinstance(text, list):
        text = "\n".join(part for part in text if part)
    return [content_key(text.strip())] if isinstance(text, str) and text.strip() else []


def _mappings(value: Any) -> list[Mapping[str, Any]]:
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
        return []
    return [entry for entry in value if isinstance(entry, Mapping)]
