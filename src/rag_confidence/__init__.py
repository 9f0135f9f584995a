"""rag-confidence: deterministic, explainable confidence scorecards for RAG answers, inside OpenTelemetry."""

from . import errors
from .errors import (
    CalibrationValidationError,
    ConfigValidationError,
    InputValidationError,
    RagConfidenceError,
)
from .scoring import (
    ALGORITHM_VERSION,
    SCORECARD_SCHEMA_VERSION,
    Scorer,
    compute_confidence,
    create_scorer,
    models,
)
from .scoring.calibration import analyze_calibration
from .scoring.evaluators import (
    from_custom_judge,
    from_deepeval_like,
    from_ragas_like,
    from_trulens_like,
    merge_evaluation_signals,
)

__all__ = [
    "ALGORITHM_VERSION",
    "SCORECARD_SCHEMA_VERSION",
    "CalibrationValidationError",
    "ConfigValidationError",
    "InputValidationError",
    "RagConfidenceError",
    "Scorer",
    "analyze_calibration",
    "compute_confidence",
    "create_scorer",
    "errors",
    "from_custom_judge",
    "from_deepeval_like",
    "from_ragas_like",
    "from_trulens_like",
    "merge_evaluation_signals",
    "models",
]
