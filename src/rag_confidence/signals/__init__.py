"""Span data to scoring inputs: which span is the answer, and what its spans say.

Written once against the neutral :class:`SpanRecord` view, so the in-process span processor and the OTLP
gateway read spans the same way::

    from rag_confidence.signals import find_answers, extract_signals, records_from_readable_spans

    records = records_from_readable_spans(exporter.get_finished_spans())
    for group in find_answers(records):
        signals = extract_signals(group.spans)
        scorecard = compute_confidence(signals.inputs)

One module per convention: :mod:`.openinference`, :mod:`.genai`, :mod:`.openllmetry`, :mod:`.native`
(``rag.signal.*``); the mapping tables are in ``docs/signals.md``.
"""

from .answers import (
    ANSWER_HINT_KEYS,
    RESULT_EVENT_KEYS,
    AnswerGroup,
    find_answers,
    is_local_root,
    is_marked_answer,
    is_retrieval_span,
    may_hold_answer,
    may_produce_answer,
)
from .extract import ExtractedSignals, extract_signals
from .native import ATTRIBUTE_BY_KEYWORD
from .options import (
    DEFAULT_ANSWER_KEYS,
    DEFAULT_CITATION_PATTERNS,
    DEFAULT_DOCUMENT_KEYS,
    DEFAULT_EVALUATION_NAMES,
    SignalOptions,
)
from .records import EventRecord, SpanRecord, records_from_readable_spans

__all__ = [
    "ANSWER_HINT_KEYS",
    "ATTRIBUTE_BY_KEYWORD",
    "DEFAULT_ANSWER_KEYS",
    "DEFAULT_CITATION_PATTERNS",
    "DEFAULT_DOCUMENT_KEYS",
    "DEFAULT_EVALUATION_NAMES",
    "RESULT_EVENT_KEYS",
    "AnswerGroup",
    "EventRecord",
    "ExtractedSignals",
    "SignalOptions",
    "SpanRecord",
    "extract_signals",
    "find_answers",
    "is_local_root",
    "is_marked_answer",
    "is_retrieval_span",
    "may_hold_answer",
    "may_produce_answer",
    "records_from_readable_spans",
]
