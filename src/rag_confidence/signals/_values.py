"""Tolerant readers for span attribute values: a bad value is skipped and counted, never raised.

Also home of the plain records the convention readers hand on (documented in :mod:`._model`, which re-exports
them): this module is compiled with mypyc, so they are native classes, cheap to build and to read.
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, Final

from .. import semconv
from .records import SpanRecord

# Bound once: a classmethod looked up on each call costs more than the parse of a short date.
_FROM_ISO_FORMAT: Final = datetime.fromisoformat
_TRUE = frozenset({"true", "yes", "1"})
_FALSE = frozenset({"false", "no", "0"})
# Cap on JSON text we parse: a megabyte of metadata on one attribute is someone's bug, not a signal.
MAX_JSON_CHARS = 1_000_000
# Cap on Python literal text we evaluate: ``ast.literal_eval`` builds a syntax tree first, about ten times dearer
# than JSON (40 µs for 2 KB, 60 ms for a Milvus entity holding a 1536-dimension vector). Metadata this long is
# no signal (ids and scores have attributes of their own): skipped and counted.
MAX_LITERAL_CHARS = 16_384
# ``str(None)``: how an instrumentor that stringifies metadata writes a result that has none.
_NONE_LITERAL = "None"
# The C scanner ``json.loads`` ends in. ``loads`` adds a regex for surrounding whitespace and two Python-level
# calls, which cost more than scanning a short metadata object: text without surrounding whitespace goes
# straight to the scanner, anything else through ``json.loads`` (same result, same errors).
# (An instance attribute the stubs do not declare.)
_SCAN: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def loads_json(text: str) -> Any:
    """``json.loads(text)``, faster for the short, compact JSON instrumentors write. Raises ``ValueError``
    (``JSONDecodeError``) or ``RecursionError`` as ``json.loads`` does."""
    try:
        value, end = _SCAN(text, 0)
    except StopIteration:  # not a value at position 0 (leading whitespace, or not JSON)
        return json.loads(text)
    if end != len(text):  # trailing whitespace is fine, anything else is "Extra data": json.loads decides
        return json.loads(text)
    return value


class Reader:
    """Reads typed values out of attribute values, counting every value it had to skip."""

    __slots__ = (
        "_literals",
        "_mappings",
        "dropped_documents",
        "dropped_result_events",
        "found_nothing",
        "skipped",
        "unreadable_retrievals",
    )

    def __init__(self) -> None:
        self.skipped = 0
        # Leading documents of retrieval spans that the span's attribute limit evicted.
        self.dropped_documents = 0
        # Result events (hits) of vector-DB retrieval spans that the span's event limit evicted: the best ones.
        self.dropped_result_events = 0
        # Retrieval spans that reported documents in a value that could not be read at all (JSON cut short by
        # the SDK's attribute value length limit): what they retrieved is unknown, not empty.
        self.unreadable_retrievals = 0
        # Retrieval readers that found their document list present and empty: the span says it found nothing,
        # which is not the same as a span that does not record what it found (the list absent).
        self.found_nothing = 0
        # Python literal text -> parsed mapping (:meth:`literal_mapping`), apart from the JSON cache, which must
        # keep skipping what is no JSON. Nothing mutates a parsed mapping.
        self._literals: dict[str, Mapping[str, Any]] = {}
        # JSON object text -> parsed mapping, for this extraction. A reranker reports the documents the
        # retrievers did, metadata strings included: each distinct string is parsed once. Only successes are
        # kept, so a bad value is still skipped (and counted) wherever it appears. Nothing mutates a parsed
        # mapping (readers copy out of it).
        self._mappings: dict[str, Mapping[str, Any]] = {}

    def skip(self) -> None:
        self.skipped += 1

    def number(self, value: Any) -> float | None:
        """A finite float from an int, float or numeric string; None (counted) otherwise."""
        if value is None:
            return None
        if isinstance(value, float):  # the usual case first (a bool is no float)
            number = float(value)
        elif isinstance(value, bool):
            self.skipped += 1
            return None
        elif isinstance(value, int):
            try:
                number = float(value)
            except OverflowError:  # an int beyond any float (OTLP ints are 64-bit; Python's are not)
                self.skipped += 1
                return None
        elif isinstance(value, str):
            try:
                number = float(value.strip())
            except ValueError:
                self.skipped += 1
                return None
        else:
            try:  # numpy scalars and Decimals arrive through JSON encoders and user metadata
                number = float(value)
            except (TypeError, ValueError, OverflowError):
                self.skipped += 1
                return None
        if not math.isfinite(number):
            self.skipped += 1
            return None
        return number

    def unit(self, value: Any) -> float | None:
        """A number in [0, 1]; out-of-range values are skipped and counted."""
        number = self.number(value)
        if number is None:
            return None
        if not 0.0 <= number <= 1.0:
            self.skipped += 1
            return None
        return number

    def count(self, value: Any) -> int | None:
        """A non-negative integer (an integral float counts)."""
        number = self.number(value)
        if number is None:
            return None
        if number < 0 or number != int(number):
            self.skipped += 1
            return None
        return int(number)

    def boolean(self, value: Any) -> bool | None:
        if value is None:
            return None
        if isinstance(value, bool):
            return value
        if isinstance(value, str):
            lowered = value.strip().lower()
            if lowered in _TRUE:
                return True
            if lowered in _FALSE:
                return False
        self.skipped += 1
        return None

    def string(self, value: Any) -> str | None:
        """A non-empty string (numbers are accepted as ids: ``7`` reads as ``"7"``)."""
        if value is None:
            return None
        if isinstance(value, str):
            return value if value else None
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        self.skipped += 1
        return None

    def strings(self, value: Any) -> list[str] | None:
        """A list of strings from a sequence attribute or a JSON array string."""
        if value is None:
            return None
        if isinstance(value, str):
            parsed = self.json(value)
            if parsed is None:
                return None
            value = parsed
        if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
            items = [item for item in value if isinstance(item, str)]
            if len(items) != len(value):
                self.skipped += 1
            return items
        self.skipped += 1
        return None

    def timestamp(self, value: Any) -> str | None:
        """An ISO-8601 timestamp string (validated, passed on as given) from a string or epoch seconds."""
        if value is None:
            return None
        if isinstance(value, str):
            text = value.strip()
            try:
                _FROM_ISO_FORMAT(text.replace("Z", "+00:00") if "Z" in text else text)
            except ValueError:
                self.skipped += 1
                return None
            return text
        number = self.number(value)
        if number is None:
            return None
        try:
            # Epoch values this large are milliseconds; the threshold is the year 5138 in seconds.
            seconds = number / 1000.0 if number > 1e11 else number
            return datetime.fromtimestamp(seconds, tz=timezone.utc).isoformat()
        except (OverflowError, OSError, ValueError):
            self.skipped += 1
            return None

    def json(self, value: Any) -> Any:
        """Parse a JSON string; None (counted) when it is not one."""
        if not isinstance(value, str) or len(value) > MAX_JSON_CHARS:
            self.skipped += 1
            return None
        try:
            return loads_json(value)
        except (ValueError, RecursionError):
            self.skipped += 1
            return None

    def mapping(self, value: Any) -> Mapping[str, Any] | None:
        """A mapping from a dict value or a JSON object string."""
        if value is None:
            return None
        # Concrete types first (cheap checks, compiled); an exact str is never a Mapping.
        if type(value) is str:
            return self._parsed_mapping(value)
        if isinstance(value, (dict, Mapping)):
            return value
        if isinstance(value, str):
            return self._parsed_mapping(value)
        self.skipped += 1
        return None

    def maybe_mapping(self, value: str) -> Mapping[str, Any] | None:
        """The mapping a JSON object string holds, or None, *not* counted: for text read on the chance that it
        is some provider's response (any model's answer may quote the key that was looked for), where what is
        no JSON object is nothing to skip, only nothing to read."""
        return self._json_mapping(value)

    def literal_mapping(self, value: Any) -> Mapping[str, Any] | None:
        """:meth:`mapping`, also reading the ``str()`` of a dict: Python literal syntax (single quotes, ``True``,
        ``None``), as the Pinecone and Milvus instrumentors write result metadata. Only text that is no JSON,
        starts with ``{`` and is at most :data:`MAX_LITERAL_CHARS` long goes to ``ast.literal_eval``, which
        evaluates literals only (never ``eval``). ``"None"`` is no metadata, not a bad value."""
        if type(value) is not str:
            return self.mapping(value)
        if value == _NONE_LITERAL:
            return None
        found = self._json_mapping(value)
        if found is not None:
            return found
        if value.startswith("{") and len(value) <= MAX_LITERAL_CHARS:
            literal = self._literals.get(value)
            if literal is not None:
                return literal
            try:
                parsed: Any = ast.literal_eval(value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                parsed = None
            if isinstance(parsed, dict):
                self._literals[value] = parsed
                return parsed
        self.skipped += 1
        return None

    def _parsed_mapping(self, value: str) -> Mapping[str, Any] | None:
        found = self._json_mapping(value)
        if found is None:
            self.skipped += 1
        return found

    def _json_mapping(self, value: str) -> Mapping[str, Any] | None:
        """The mapping a JSON object string holds (cached), or None, not counted: the callers count."""
        known = self._mappings.get(value)
        if known is not None:
            return known
        if len(value) > MAX_JSON_CHARS:
            return None
        try:
            parsed = loads_json(value)
        except (ValueError, RecursionError):
            return None
        if isinstance(parsed, (dict, Mapping)):
            self._mappings[value] = parsed
            return parsed
        return None


def unredacted(value: Any) -> Any:
    """``value``, or None when it is the placeholder an OpenInference ``TraceConfig`` writes for a hidden value:
    read as data, it would be one document text shared by every document, or the answer's text."""
    if type(value) is str and value == semconv.OI_REDACTED_VALUE:
        return None
    return value


def first_key(mapping: Mapping[str, Any], keys: Sequence[str]) -> Any:
    """The value of the first of ``keys`` present (and not None) in ``mapping``."""
    for key in keys:
        value = mapping.get(key)
        if value is not None:
            return value
    return None


def indexed(attributes: Mapping[str, Any], prefix: str, reader: Reader) -> list[dict[str, Any]]:
    """Flattened ``<prefix>.{i}.<rest>`` attributes as a list of ``{rest: value}`` in index order.

    Also accepts the structured form OTel SDK 1.45 allows (``<prefix>`` holding a list of mappings). A key
    whose index is not a number is skipped and counted.
    """
    structured = attributes.get(prefix)
    if isinstance(structured, Sequence) and not isinstance(structured, (str, bytes)):
        items = [dict(item) for item in structured if isinstance(item, Mapping)]
        if len(items) != len(structured):
            reader.skip()
        return items
    dotted = prefix + "."
    found: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        if not key.startswith(dotted):
            continue
        index_text, _, rest = key[len(dotted) :].partition(".")
        if not index_text.isdigit() or not rest:
            reader.skip()
            continue
        found.setdefault(int(index_text), {})[rest] = value
    return [found[index] for index in sorted(found)]


def is_answer_role(role: Any, reader: Reader) -> bool:
    """Whether an output message under ``role`` is the model's answer: no role, or any role but those that speak
    to a model (:data:`~rag_confidence.semconv.GEN_AI_INPUT_ROLES`, any case). A role that is not a string is
    skipped and counted."""
    if role is None:
        return True
    if not isinstance(role, str):
        reader.skip()
        return False
    return role.lower() not in semconv.GEN_AI_INPUT_ROLES


# Roles some tracers give a model's thinking when they write it as a message of its own before the answer's
# (older OpenLLMetry Anthropic completions, a ``thinking`` message role): the model's, but no choice to answer
# with, so the first-choice rule passes over them.
THINKING_ROLES = frozenset({"thinking", "reasoning"})


def is_thinking_role(role: Any) -> bool:
    return isinstance(role, str) and role.lower() in THINKING_ROLES


# The records below are described in ``_model.py``. They are plain classes with their own ``__init__``: mypyc
# compiles that, where a dataclass's generated ``__init__`` stays Python.


class RawDocument:
    """One reported document as a convention states it, before key maps and score rules."""

    __slots__ = ("id", "score", "distance", "content", "metadata", "aliases", "redacted")

    def __init__(
        self,
        id: Any = None,
        score: Any = None,
        distance: Any = None,
        content: Any = None,
        metadata: Mapping[str, Any] | None = None,
        aliases: tuple[str, ...] = (),
        redacted: bool = False,
    ) -> None:
        self.id = id
        self.score = score
        self.distance = distance
        self.content = content
        self.metadata = metadata
        # Further ids the document is known by (a LangChain ``Document.id`` next to a metadata id): citations
        # match them.
        self.aliases = aliases
        # The producer hid its metadata (read as absent): the ids and scores it held are unknown.
        self.redacted = redacted


class RawRetrieval:
    """The documents one span reports. ``rerank`` marks reranker output (scores and order are final)."""

    __slots__ = ("span", "documents", "rerank", "method_hint")

    def __init__(
        self,
        span: SpanRecord,
        documents: list[RawDocument],
        rerank: bool = False,
        method_hint: str | None = None,
    ) -> None:
        self.span = span
        self.documents = documents
        self.rerank = rerank
        # A convention-level method hint (GenAI data source id, vector DB system), after our own attribute.
        self.method_hint = method_hint


class Document:
    """A document after the key map: ``score`` in [0, 1] or None; ``fields`` holds candidate fields."""

    __slots__ = ("key", "id", "content", "score", "fields", "aliases", "metadata")

    def __init__(
        self,
        key: str,
        id: str | None,
        content: str | None,
        score: float | None,
        fields: dict[str, Any] | None = None,
        aliases: tuple[str, ...] = (),
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        self.key = key
        self.id = id
        self.content = content
        self.score = score
        self.fields: dict[str, Any] = {} if fields is None else fields
        self.aliases = aliases
        # The metadata as reported: evidence against pairing a wrapper's documents with the wrapped ones by
        # position (see ``candidates.link_by_position``).
        self.metadata = metadata


class Retrieval:
    """One span's documents under its method name (``rescaled``: its scores were brought into [0, 1])."""

    __slots__ = ("span", "method", "documents", "rerank", "rescaled")

    def __init__(
        self, span: SpanRecord, method: str, documents: list[Document], rerank: bool, rescaled: bool = False
    ) -> None:
        self.span = span
        self.method = method
        self.documents = documents
        self.rerank = rerank
        self.rescaled = rescaled


class Evaluation:
    """An evaluation result (OpenInference ``evaluations.*`` or a GenAI ``gen_ai.evaluation.result``)."""

    __slots__ = ("name", "score", "label")

    def __init__(self, name: str, score: float | None, label: str | None) -> None:
        self.name = name
        self.score = score
        self.label = label


class Generation:
    """The text a generation span produced, its finish reasons (lower-cased), the references the response
    cites outside its text (OpenAI ``file_citation`` annotations: file ids; Gemini grounding supports: chunk
    ids) and the pieces of its text the response says its sources back (Gemini grounding support segments,
    Anthropic cited text blocks), and the sources a response's citations name by what the request gave
    (Anthropic's: each the names it may be known by, see :func:`.citations.summarize`)."""

    __slots__ = ("span", "text", "finish_reasons", "citations", "segments", "sources")

    def __init__(
        self,
        span: SpanRecord,
        text: str | None,
        finish_reasons: tuple[str, ...] = (),
        citations: tuple[str, ...] = (),
        segments: tuple[str, ...] = (),
        sources: tuple[tuple[str, ...], ...] = (),
    ) -> None:
        self.span = span
        self.text = text
        self.finish_reasons = finish_reasons
        self.citations = citations
        self.segments = segments
        self.sources = sources
