"""``EvaluationLogProcessor``: evaluation results an evaluator logs count for the answer they evaluate.

The GenAI semantic conventions define ``gen_ai.evaluation.result`` as an event, and since the SDK's Events API
is gone (1.44) an event is a log record with ``event_name`` set, emitted in the context of the evaluated span.
A span processor never sees log records, so this log record processor hands them to the
:class:`~rag_confidence.otel.ConfidenceSpanProcessor`, which reads them as events of the evaluated span (a
``faithfulness`` evaluation becomes ``faithfulnessScore``, see docs/signals.md).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk._logs import LogRecordProcessor, ReadWriteLogRecord

from .. import semconv
from ..signals.records import EventRecord
from .failures import describe_failure
from .processor import ConfidenceSpanProcessor

__all__ = ["EvaluationLogProcessor"]

_logger = logging.getLogger(__name__)


class EvaluationLogProcessor(LogRecordProcessor):
    """Passes ``gen_ai.evaluation.result`` log records to a ``ConfidenceSpanProcessor``.

    Register it on the logger provider your evaluator logs through, next to your exporting processor (it
    exports nothing and changes nothing)::

        from opentelemetry.sdk._logs import LoggerProvider
        from rag_confidence.otel import ConfidenceSpanProcessor, EvaluationLogProcessor

        confidence = ConfidenceSpanProcessor(BatchSpanProcessor(span_exporter))
        tracer_provider.add_span_processor(confidence)
        logger_provider.add_log_record_processor(EvaluationLogProcessor(confidence))

    ``configure_from_env`` and the ``rag_confidence`` configurator register it on the logger provider they
    set up.

    Beware:

    - An evaluation counts only if it is logged *before its answer is scored* (before the answer span ends, or
      the local root with rule (c)), in the context of a span of the answer, as evaluations run inline in the
      pipeline usually are. One logged later (an offline judge) is ignored: the scorecard is already out.
    - Evaluations are held with the trace's buffered spans and released with them. One logged before any span
      of its trace ended here is held apart (while a span of the trace is recording in the log record's
      context; at most 1,024 such traces, aged by ``pending_ttl_s``) until one does; it takes no span buffer.
    - Our own ``rag.confidence`` evaluation is never read back.
    - ``on_emit`` never raises into the application.
    """

    def __init__(self, span_processor: ConfidenceSpanProcessor) -> None:
        self._span_processor = span_processor

    def on_emit(self, log_record: ReadWriteLogRecord) -> None:
        try:
            self._hold(log_record)
        except Exception as error:  # a log record must never fail the code that logs it
            _logger.debug(
                "rag-confidence: reading an evaluation log record failed\n%s", describe_failure(error)
            )

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True

    def _hold(self, log_record: ReadWriteLogRecord) -> None:
        record = log_record.log_record
        attributes: Mapping[str, Any] = record.attributes or {}
        name = getattr(record, "event_name", None) or attributes.get(semconv.EVENT_NAME)
        if name != semconv.GEN_AI_EVALUATION_RESULT:
            return
        if attributes.get(semconv.GEN_AI_EVALUATION_NAME) == semconv.RAG_CONFIDENCE_EVALUATION_NAME:
            return  # our own scorecard event
        trace_id, span_id = record.trace_id, record.span_id
        if not trace_id or not span_id:
            return  # not emitted in a span's context: nothing to attach it to
        current = trace.get_current_span(getattr(record, "context", None))
        trace_open = current.is_recording() and current.get_span_context().trace_id == trace_id
        event = EventRecord(
            name=semconv.GEN_AI_EVALUATION_RESULT,
            attributes=dict(attributes),
            timestamp=record.timestamp or record.observed_timestamp,
        )
        self._span_processor.add_evaluation(trace_id, span_id, event, trace_open=trace_open)
