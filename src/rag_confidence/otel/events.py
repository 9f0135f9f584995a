"""The ``gen_ai.evaluation.result`` event: one log record per scorecard, parented to the answer span.

The Events API is gone from the SDK (1.44); a named event is a log record with ``event_name`` set, emitted in
the context of the evaluated span so backends attach it to that span.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from opentelemetry._logs import Logger, LoggerProvider, SeverityNumber, get_logger
from opentelemetry.context import Context
from opentelemetry.util.types import AttributeValue

from .. import semconv
from .attributes import score_int

if TYPE_CHECKING:
    from ..scoring.models import ConfidenceScorecard

__all__ = ["EvaluationEmitter", "evaluation_event_attributes"]


def evaluation_event_attributes(
    scorecard: ConfidenceScorecard, response_id: str | None = None
) -> dict[str, AttributeValue]:
    """The attributes of the ``gen_ai.evaluation.result`` event for one scorecard.

    ``gen_ai.evaluation.score.value`` is the total as a double; ``gen_ai.evaluation.score.label`` is the
    scorecard label (a closed set, as the convention asks for low cardinality); the action reason goes to
    ``gen_ai.evaluation.explanation``; ``gen_ai.response.id`` is the evaluated response's id when the answer's
    generation span reported one (the convention recommends it, to correlate the two).
    """
    attributes: dict[str, AttributeValue] = {
        semconv.GEN_AI_EVALUATION_NAME: semconv.RAG_CONFIDENCE_EVALUATION_NAME
    }
    total = score_int(scorecard.total)
    if total is not None:
        # A double, as the convention types it: evaluators' scores share the attribute in a backend's index.
        attributes[semconv.GEN_AI_EVALUATION_SCORE_VALUE] = float(total)
    attributes[semconv.GEN_AI_EVALUATION_SCORE_LABEL] = str(scorecard.label)
    attributes[semconv.GEN_AI_EVALUATION_EXPLANATION] = str(scorecard.action_reason)
    attributes[semconv.RAG_CONFIDENCE_ACTION] = str(scorecard.recommended_action)
    if response_id:
        attributes[semconv.GEN_AI_RESPONSE_ID] = response_id
    return attributes


class EvaluationEmitter:
    """Emits the evaluation event through one logger provider (the global one when None)."""

    def __init__(self, logger_provider: LoggerProvider | None = None) -> None:
        self._logger: Logger = get_logger(semconv.INSTRUMENTATION_SCOPE, logger_provider=logger_provider)

    def emit(
        self, scorecard: ConfidenceScorecard, context: Context | None, response_id: str | None = None
    ) -> None:
        """Emit the event for ``scorecard`` in ``context`` (the answer span's); ``response_id`` the evaluated
        response's ``gen_ai.response.id`` (``ExtractedSignals.response_id``), when known."""
        self._logger.emit(
            event_name=semconv.GEN_AI_EVALUATION_RESULT,
            context=context,
            severity_number=SeverityNumber.INFO,
            attributes=evaluation_event_attributes(scorecard, response_id),
        )
