"""rag-confidence: deterministic, explainable confidence scorecards for RAG answers, inside OpenTelemetry."""

from . import errors
from .errors import CalibrationValidationError, ConfigValidationError, InputValidationError, RagConfidenceError
from .scoring import ALGORITHM_VERSION, SCORECARD_SCHEMA_VERSION, Scorer, compute_confidence, create_scorer
from .scoring import models

__all__ = [
    "ALGORITHM_VERSION",
    "SCORECARD_SCHEMA_VERSION",
    "CalibrationValidationError",
    "ConfigValidationError",
    "InputValidationError",
    "RagConfidenceError",
    "Scorer",
    "compute_confidence",
    "create_scorer",
    "errors",
    "models",
]
