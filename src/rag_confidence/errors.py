"""Every exception rag-confidence raises, in one place.

All of them derive from :class:`RagConfidenceError`, which is also a :class:`ValueError`, so callers that
already catch ``ValueError`` for bad input keep working.
"""

from __future__ import annotations


class RagConfidenceError(ValueError):
    """Base class of every error raised by rag-confidence.

    ``path`` names the offending field (``retrieval.topK``, ``candidates[2].combinedScore``) when known.
    """

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class ConfigValidationError(RagConfidenceError):
    """A :class:`ScoringConfig` is invalid. Raised in every validation mode."""


class InputValidationError(RagConfidenceError):
    """Inputs failed validation: wrong types (always) or any input warning in ``validation="strict"`` mode."""


class CalibrationValidationError(RagConfidenceError):
    """Samples or bands passed to :func:`analyze_calibration` are invalid."""


class TelemetrySetupError(RagConfidenceError):
    """:func:`~rag_confidence.otel.configure_from_env` cannot install its providers (another global tracer
    provider is set already)."""


class UsageError(RagConfidenceError, TypeError):
    """An API was used the wrong way: ``@scored_answer`` on a class or a non-callable, an option of the wrong
    type, a misspelt keyword. Also a :class:`TypeError`, which is what Python raises for such mistakes."""


__all__ = [
    "CalibrationValidationError",
    "ConfigValidationError",
    "InputValidationError",
    "RagConfidenceError",
    "TelemetrySetupError",
    "UsageError",
]
