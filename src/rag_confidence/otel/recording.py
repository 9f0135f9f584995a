"""``record_signals`` and ``mark_answer``: what application code tells the scorer about an answer.

Both write ordinary span attributes (``rag.signal.*``, ``rag.answer``) with the public API, so they work with
or without this package's processor and show up in any backend as plain attributes.
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any, SupportsFloat, SupportsIndex

from opentelemetry import trace
from opentelemetry.util.types import AttributeValue

# Imported for real, not only for type checkers (typing.get_type_hints and pydantic read the annotation), and from
# typing_extensions, whose TypedDict pydantic reads on every Python version.
from typing_extensions import TypedDict, Unpack

from .. import semconv
from ..errors import UsageError
from ..scoring.models import QueryComplexity, SupportLevel
from ..signals.native import ATTRIBUTE_BY_KEYWORD, refused

__all__ = ["mark_answer", "record_signals", "signal_attributes"]

_logger = logging.getLogger(__name__)

# Nested ScoringInputs objects accepted as one keyword: their keys (snake_case or camelCase) map to the flat
# keywords of ``ATTRIBUTE_BY_KEYWORD``.
_NESTED_KEYWORDS: Mapping[str, Mapping[str, str]] = {
    "claim_support": {
        "total_claims": "claims_total",
        "supported_claims": "claims_supported",
        "unsupported_claims": "claims_unsupported",
        "contradicted_claims": "claims_contradicted",
    },
    "index_integrity": {
        keyword.removeprefix("index_"): keyword
        for keyword in ATTRIBUTE_BY_KEYWORD
        if keyword.startswith("index_")
    },
}
_UNPREFIXED_CORPUS = {
    "present_types": "corpus_present_types",
    "missing_types": "corpus_missing_types",
    "missing_relevant_type": "corpus_missing_relevant_type",
}


_Count = int | SupportsIndex | None  # numpy integers too
_Unit = SupportsFloat | None  # a 0-1 score; numpy floats, Decimal and Fraction too
_Flag = bool | None
_Text = str | None
_Notes = str | Sequence[str] | None
_Types = Sequence[str] | None


class SignalKeywords(TypedDict, total=False):
    """The keywords of :func:`record_signals`, for type checkers (a misspelt one is an error before it runs).
    ``None`` leaves a signal out."""

    support_level: SupportLevel | None
    has_conflict: _Flag
    conflicting_candidate_count: _Count
    faithfulness_score: _Unit
    answer_relevance_score: _Unit
    citation_count: _Count
    citation_coverage_score: _Unit
    invalid_citation_count: _Count
    query_complexity: QueryComplexity | None
    documents_silent: _Flag
    requires_expert_review: _Flag
    ambiguity_notes: _Notes
    external_constraint_note: _Text
    claim_support: Mapping[str, Any] | None
    claims_total: _Count
    claims_supported: _Count
    claims_unsupported: _Count
    claims_contradicted: _Count
    corpus_type_count: _Count
    corpus_present_types: _Types
    corpus_missing_relevant_type: _Flag
    corpus_missing_types: _Types
    present_types: _Types
    missing_relevant_type: _Flag
    missing_types: _Types
    index_integrity: Mapping[str, Any] | None
    index_expected_embedding_model_version: _Text
    index_actual_embedding_model_version: _Text
    index_source_version_match_ratio: _Unit
    index_stale_indexed_document_ratio: _Unit
    index_failed_ingestion_count: _Count
    index_acl_filter_confirmed: _Flag
    index_deleted_source_leakage_count: _Count


class SignalSink:
    """Collects ``record_signals`` values for the ``@scored_answer`` call they happen in (a context-local),
    with the recording span each went to (None: no recording span took it)."""

    __slots__ = ("entries",)

    def __init__(self) -> None:
        self.entries: list[tuple[trace.Span | None, dict[str, AttributeValue]]] = []

    def add(self, span: trace.Span | None, attributes: dict[str, AttributeValue]) -> None:
        if attributes:
            self.entries.append((span, attributes))

    def unread(self, read_elsewhere: Callable[[trace.Span], bool]) -> dict[str, AttributeValue]:
        """The values that went to no span the scorer reads through a processor, latest last.

        Values on such a span are left to it: it sits where it belongs in the trace (inside a nested answer,
        say, whose values must not count for the outer one).
        """
        merged: dict[str, AttributeValue] = {}
        for span, attributes in self.entries:
            if span is None or not read_elsewhere(span):
                merged.update(attributes)
        return merged


SIGNAL_SINK: ContextVar[SignalSink | None] = ContextVar("rag_confidence_signal_sink", default=None)


def signal_attributes(**signals: Any) -> dict[str, AttributeValue]:
    """The ``rag.signal.*`` attributes for ``record_signals`` keywords (None values are left out).

    Raises :class:`~rag_confidence.errors.UsageError` (a ``TypeError``) for a keyword that is no signal, like
    any function given an unexpected keyword.

    >>> signal_attributes(support_level="high", claim_support={"total_claims": 4, "supported_claims": 3})
    ... # doctest: +NORMALIZE_WHITESPACE
    {'rag.signal.support_level': 'high', 'rag.signal.claims.total': 4, 'rag.signal.claims.supported': 3}
    """
    attributes: dict[str, AttributeValue] = {}
    for keyword, value in signals.items():
        if value is None:
            continue
        nested = _NESTED_KEYWORDS.get(keyword)
        if nested is not None:
            if not isinstance(value, Mapping):
                raise UsageError(f"record_signals: {keyword} must be a mapping, not {type(value).__name__}")
            for key, item in value.items():
                flat = nested.get(_snake(str(key)))
                if flat is None:
                    raise UsageError(f"record_signals: {keyword} has no field {key!r}")
                if item is not None:
                    attributes[ATTRIBUTE_BY_KEYWORD[flat]] = _attribute_value(item)
            continue
        flat_keyword = _UNPREFIXED_CORPUS.get(keyword, keyword)
        attribute = ATTRIBUTE_BY_KEYWORD.get(flat_keyword)
        if attribute is None:
            raise UsageError(
                f"record_signals got an unexpected keyword {keyword!r}; "
                f"known: {', '.join(sorted([*ATTRIBUTE_BY_KEYWORD, *_NESTED_KEYWORDS, *_UNPREFIXED_CORPUS]))}"
            )
        if flat_keyword in _LIST_KEYWORDS and isinstance(value, str) and not value.lstrip().startswith("["):
            # A str is a Sequence[str] to type checkers; one document type is what such a call means (a JSON
            # array in a string is read as the list it holds, as extraction reads every rag.signal value).
            value = [value]
        attributes[attribute] = _attribute_value(value)
    return attributes


def record_signals(**signals: Unpack[SignalKeywords]) -> bool:
    """Set scoring inputs as ``rag.signal.*`` attributes on the current span; return whether they count for an
    answer (a recording span took them, or a ``@scored_answer`` call around this one keeps them).

    Keywords are the snake_case ScoringInputs fields: ``support_level``, ``has_conflict``,
    ``faithfulness_score``, ``answer_relevance_score``, ``citation_count``, ``query_complexity``, ... plus
    ``claim_support={...}`` and ``index_integrity={...}`` (or their flat forms ``claims_total``,
    ``index_failed_ingestion_count``, ...). An explicit signal always wins over one derived from spans.

    Call it where your code knows the value, inside the answer (the ``@scored_answer`` function, or any span
    beneath the answer span)::

        @scored_answer()
        def answer(question: str) -> str:
            docs = retrieve(question)
            record_signals(support_level="high", faithfulness_score=0.92)
            return generate(question, docs)

    Without a recording current span and outside a ``@scored_answer`` call this is a logged no-op (returns
    False). That is the case inside LangChain
    runnables traced by the OpenInference tracer, which does not make its spans current: call it in your own
    span around the chain, or in the decorated function. Inside a ``@scored_answer`` call the values are also
    kept for that answer, so they count even when the current span is not the answer's.
    """
    attributes = signal_attributes(**signals)
    _warn_refused(attributes)
    sink = SIGNAL_SINK.get()
    span = trace.get_current_span()
    recording = span.is_recording()
    if sink is not None:
        sink.add(span if recording else None, attributes)
    if not recording:
        if sink is None:
            _log_unrecorded(
                "record_signals: no recording span is current; %d signal(s) not recorded (see the "
                "record_signals docstring for where to call it)",
                len(attributes),
            )
        return sink is not None
    span.set_attributes(attributes)
    return True


def mark_answer(span: trace.Span | None = None) -> bool:
    """Mark ``span`` (default: the current span) as an answer: it gets its own scorecard when it ends.

    For answers the decorator does not wrap, with ``ConfidenceSpanProcessor`` installed::

        with tracer.start_as_current_span("answer"):
            mark_answer()
            ...

    Returns False (and logs) when the span is not recording.
    """
    target = span if span is not None else trace.get_current_span()
    if not target.is_recording():
        _log_unrecorded("mark_answer: the span is not recording; nothing marked")
        return False
    target.set_attribute(semconv.RAG_ANSWER, True)
    return True


# Keywords whose value is a list of strings, never one string (ambiguity_notes takes either).
_LIST_KEYWORDS = frozenset({"corpus_present_types", "corpus_missing_types"})


def _attribute_value(value: Any) -> AttributeValue:
    if isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
        return [str(item) for item in value]
    # Evaluators hand out numpy (or torch) scalars: np.float32(0.91), np.bool_(True). Their item() is the
    # Python value; an array of several items refuses, and gets the error below.
    item = getattr(value, "item", None)
    if callable(item):
        try:
            plain = item()
        except (TypeError, ValueError):
            plain = None
        if isinstance(plain, (str, bool, int, float)):
            return plain
    # What the keyword types promise beyond that: SupportsIndex counts and SupportsFloat scores (Decimal,
    # Fraction). Strings and bytes have neither method.
    kind = type(value)
    try:
        if hasattr(kind, "__index__"):
            return operator.index(value)
        if hasattr(kind, "__float__"):
            return float(value)
    except (TypeError, ValueError, OverflowError):  # an array of several numbers has both, and refuses
        pass
    raise UsageError(
        f"record_signals: {type(value).__name__} is no attribute value (str, bool, number, list of str)"
    )


_warned_once = False
# The keywords whose refused value was logged as a warning; later ones go to debug (a value refused once is
# likely refused at every call).
_warned_refused: set[str] = set()
_KEYWORD_BY_ATTRIBUTE = {attribute: keyword for keyword, attribute in ATTRIBUTE_BY_KEYWORD.items()}


def _warn_refused(attributes: Mapping[str, AttributeValue]) -> None:
    """Say at the call site what extraction would skip silently (counted only in
    ``rag.confidence.signals.skipped``): the answer would be scored as if the signal were never sent."""
    for attribute, takes in refused(attributes):
        keyword = _KEYWORD_BY_ATTRIBUTE[attribute]
        log = _logger.debug if keyword in _warned_refused else _logger.warning
        _warned_refused.add(keyword)
        # The value's type, never the value: signals may quote the question or the documents.
        log(
            "record_signals: %s (a %s) is not %s; it is recorded on the span but not scored",
            keyword,
            type(attributes[attribute]).__name__,
            takes,
        )


def _log_unrecorded(message: str, *args: Any) -> None:
    """The first no-op of the process as a warning (a misplaced call shows in default logging), the rest at
    debug (an unsampled request makes every call a no-op; a warning each would flood the log)."""
    global _warned_once
    if _warned_once:
        _logger.debug(message, *args)
    else:
        _warned_once = True
        _logger.warning(message + "; later ones are logged at debug level", *args)


def _snake(name: str) -> str:
    return "".join(f"_{char.lower()}" if char.isupper() else char for char in name)
