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


class GatewayRequestError(RagConfidenceError):
    """A request ``rag-confidence gateway`` refuses, with the HTTP status and the gRPC status code (an int of
    ``google.rpc.Code``) to answer with. ``retryable`` requests (the downstream failed) are answered 503 /
    UNAVAILABLE so the client's retry keeps the data. The message goes back to the client: it names what is
    wrong, never the payload's content."""

    def __init__(self, message: str, *, http_status: int, grpc_code: int, retryable: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.http_status = http_status
        self.grpc_code = grpc_code
        self.retryable = retryable


class GatewayOverloadedError(RagConfidenceError):
    """No processing slot of the gateway came free within its bounds (``--max-concurrent-requests``,
    ``--max-queued-requests``, ``--queue-timeout``): answered 503 / UNAVAILABLE, for the client to retry."""


__all__ = [
    "CalibrationValidationError",
    "ConfigValidationError",
    "GatewayOverloadedError",
    "GatewayRequestError",
    "InputValidationError",
    "RagConfidenceError",
    "TelemetrySetupError",
    "UsageError",
]
