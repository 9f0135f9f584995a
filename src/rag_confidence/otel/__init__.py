"""RAG answer confidence inside OpenTelemetry: a span processor, a decorator, metrics and evaluation events.

>>> from rag_confidence.otel import ConfidenceSpanProcessor, scored_answer, record_signals, last_scorecard

Modules by job:

- the span processor: ``processor`` (its span path: answer detection, scoring, forwarding), ``trace_buffers``
  (its per-trace state: buffered spans, late work, running roots), ``worker`` (background scoring),
  ``limits`` (its numeric options), ``enriched_span`` (the scored copy it forwards), ``held_evaluations``
  (evaluation results held until their answer is scored), ``registry`` (live processors, for the decorator),
  ``pipeline`` (its own health metrics), ``evaluations`` (the log record processor that hands it evaluators'
  ``gen_ai.evaluation.result`` records);
- the decorator: ``decorator`` (``@scored_answer``), ``answer_state`` (``last_scorecard`` and what a call
  leaves in its context), ``callables`` (what it reads of a function and of a result), ``streaming``
  (generator answers), ``result_signals`` (``signals(result)`` as inputs), ``recording`` (``record_signals``,
  ``mark_answer``);
- shared: ``answer_scoring`` (spans -> signals -> scorecard -> attributes, also the gateway's),
  ``attributes`` (scorecard -> span attributes), ``metrics`` (the confidence instruments), ``events`` (the
  ``gen_ai.evaluation.result`` log record we emit), ``setup`` (``OTEL_*`` environment setup and the
  ``opentelemetry-instrument`` configurator), ``demo`` (``rag-confidence demo``).
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
