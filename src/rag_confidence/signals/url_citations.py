"""OpenAI ``url_citation`` annotations: the web pages an answer from OpenAI's hosted web search cites.

The OpenInference OpenAI instrumentor (openinference-instrumentation-openai 0.1.66) records a Chat Completion or
a Response whole as the LLM span's ``output.value``, annotations included (see
:data:`~rag_confidence.semconv.OPENAI_URL_CITATION`); OpenLLMetry's (opentelemetry-instrumentation-openai 0.62)
keeps only the text, so there nothing is read. Of a Chat Completion only the first choice's annotations are
read (the others are alternatives, see :mod:`.openinference`); of a Response, every ``output_text`` part's of
its ``message`` items (the answer is all of them). A stream is read as the instrumentor accumulated it.

**A citation is a source, never an invalid one.** OpenAI cites only pages its search returned, so a
``url_citation`` names a source the model was given, as an Anthropic citation does
(:mod:`.anthropic_citations`): it cites a retrieved document whose id is the URL, or whose ``url``, ``source``
or ``link`` metadata is (compared without a fragment, a trailing ``/``, case in the scheme and host, and the
``utm_*`` parameters OpenAI appends, ``?utm_source=openai``). One matching no retrieved document is an
*unmatched source* (``rag.confidence.citation.unmatched_sources``), not an invalid citation: nothing says the
page does not back the text; and with one of those ``citationCount`` is not derived. The span of the text each
citation bounds (the Markdown link OpenAI writes after the claim) is a segment its source backs, so the
sentence holding it counts as covered in ``citationCoverageScore``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .. import semconv
from ._values import Reader

_URL_CITATION_TEXT = '"' + semconv.OPENAI_URL_CITATION + '"'
#: The prefix of a source name that is a normalized URL (see :func:`url_key`), matched against the documents'
#: ids and URL metadata normalized alike.
URL_KEY_PREFIX = "url:"
_TRACKING_PREFIX = "utm_"


def read_url_citations(
    attributes: Mapping[str, Any], reader: Reader
) -> tuple[tuple[tuple[str, ...], ...], tuple[str, ...]]:
    """``(sources, segments)`` of the ``url_citation`` annotations of the response in ``output.value`` (one
    source per annotation, repeats kept: each is a marker; each named by its URL and :func:`url_key` of it), and
    the text each one bounds. Empty for any span whose ``output.value`` holds none."""
    output = attributes.get(semconv.OI_OUTPUT_VALUE)
    # The quick ``in`` test spares every other LLM span the parse.
    if type(output) is not str or _URL_CITATION_TEXT not in output:
        return (), ()
    response = reader.maybe_mapping(output)
    if response is None:
        return (), ()
    sources: list[tuple[str, ...]] = []
    segments: list[str] = []
    choices = response.get(semconv.OPENAI_CHAT_CHOICES)
    if isinstance(choices, Sequence) and not isinstance(choices, str):
        first = _mappings(choices)[:1]
        message = first[0].get(semconv.OPENAI_CHAT_MESSAGE) if first else None
        if isinstance(message, Mapping):
            _read_part(message.get(semconv.OPENAI_CHAT_CONTENT), message, sources, segments, reader)
        return tuple(sources), tuple(segments)
    for item in _mappings(response.get(semconv.OPENAI_RESPONSE_OUTPUT)):
        if item.get(semconv.OPENAI_ITEM_TYPE) != semconv.OPENAI_MESSAGE_ITEM:
            continue
        for part in _mappings(item.get(semconv.OPENAI_CHAT_CONTENT)):
            if part.get(semconv.OPENAI_ITEM_TYPE) == semconv.OPENAI_OUTPUT_TEXT:
                _read_part(part.get(semconv.OPENAI_OUTPUT_TEXT_TEXT), part, sources, segments, reader)
    return tuple(sources), tuple(segments)


def _read_part(
    text: Any,
    holder: Mapping[str, Any],
    sources: list[tuple[str, ...]],
    segments: list[str],
    reader: Reader,
) -> None:
    for annotation in _mappings(holder.get(semconv.OPENAI_ANNOTATIONS)):
        if annotation.get(semconv.OPENAI_ITEM_TYPE) != semconv.OPENAI_URL_CITATION:
            continue
        # Chat Completions nest the citation under its type's key; the Responses API writes it flat.
        nested = annotation.get(semconv.OPENAI_URL_CITATION)
        citation = nested if isinstance(nested, Mapping) else annotation
        url = reader.string(citation.get(semconv.OPENAI_URL))
        if url is None or not url.strip():
            continue
        key = url_key(url)
        sources.append((url, key) if key is not None else (url,))
        start = citation.get(semconv.OPENAI_START_INDEX)
        end = citation.get(semconv.OPENAI_END_INDEX)
        if (
            isinstance(text, str)
            and type(start) is int
            and type(end) is int
            and 0 <= start < end <= len(text)
            and text[start:end].strip()
        ):
            segments.append(text[start:end])


def url_key(url: str) -> str | None:
    """A URL as compared with a document's: scheme and host lower-cased, no fragment, no trailing ``/``, no
    ``utm_*`` parameters, prefixed :data:`URL_KEY_PREFIX`; None for text that is no absolute URL.

    >>> url_key("HTTPS://Atlas.example/paris/?utm_source=openai#top")
    'url:https://atlas.example/paris'
    >>> url_key("doc-1") is None
    True
    """
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return None
    if not parts.scheme or not parts.netloc:
        return None
    query = parse_qsl(parts.query, keep_blank_values=True)
    kept = urlencode(
        [(name, value) for name, value in query if not name.lower().startswith(_TRACKING_PREFIX)]
    )
    path = parts.path.rstrip("/")
    return URL_KEY_PREFIX + urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, kept, ""))


def _mappings(value: Any) -> list[Mapping[str, Any]]:
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
        return []
    return [entry for entry in value if isinstance(entry, Mapping)]
