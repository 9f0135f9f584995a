"""RAG answer confidence inside OpenTelemetry: a span processor, a decorator, metrics and evaluation events.

>>> from rag_confidence.otel import ConfidenceSpanProcessor, scored_answer, record_signals, last_scorecard

Modules by job: ``processor`` (the span processor's span path: answer detection, scoring, forwarding),
``trace_buffers`` (its per-trace state: buffered spans, late work, running roots), ``worker`` (its background
scoring thread), ``limits`` (its numeric options), ``enriched_span`` (the scored copy it forwards),
``registry`` (live processors, for the decorator), ``held_evaluations`` (evaluation results held for spans
until their answer is scored), ``decorator`` (``@scored_answer``), ``recording`` (``record_signals``,
``mark_answer``), ``answer_scoring`` (spans -> signals -> scorecard -> attributes, shared with the gateway),
``attributes`` (scorecard -> span attributes), ``metrics`` (the confidence instruments), ``pipeline`` (the
processor's own health metrics), ``events`` (the ``gen_ai.evaluation.result`` log record we emit),
``evaluations`` (the log record processor that reads evaluators' ``gen_ai.evaluation.result`` records),
``setup`` (``OTEL_*`` environment setup and the ``opentelemetry-instrument`` configurator), ``demo``
(``rag-confidence demo``).
"""

from __future__ import annotations

from .attributes import scorecard_attributes
from .decorator import last_scorecard, scored_answer
from .evaluations import EvaluationLogProcessor
from .events import EvaluationEmitter, evaluation_event_attributes
from .metrics import ConfidenceInstruments, span_context_as_parent
from .processor import ConfidenceSpanProcessor, ProcessorStats
from .recording import mark_answer, record_signals
from .setup import RagConfidenceConfigurator, Telemetry, configure_from_env

__all__ = [
    "ConfidenceInstruments",
    "ConfidenceSpanProcessor",
    "EvaluationEmitter",
    "EvaluationLogProcessor",
    "ProcessorStats",
    "RagConfidenceConfigurator",
    "Telemetry",
    "configure_from_env",
    "evaluation_event_attributes",
    "last_scorecard",
    "mark_answer",
    "record_signals",
    "scorecard_attributes",
    "scored_answer",
    "span_context_as_parent",
]
