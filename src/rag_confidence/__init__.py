"""rag-confidence: deterministic, explainable confidence scorecards for RAG answers, inside OpenTelemetry.

>>> from rag_confidence import compute_confidence
>>> compute_confidence({"supportLevel": "medium", "hasConflict": False, "candidates": []}).label
'Insufficient'

The scoring API is imported eagerly; the OpenTelemetry API (``ConfidenceSpanProcessor``, ``scored_answer``,
``record_signals``, ``mark_answer``, ``last_scorecard``, ``configure_from_env``) is re-exported from
:mod:`rag_confidence.otel` on first use, so scoring alone does not pay for importing the SDK wiring.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from . import errors, models
from .errors import (
    CalibrationValidationError,
    ConfigValidationError,
    InputValidationError,
    RagConfidenceError,
    TelemetrySetupError,
    UsageError,
)
from .scoring import (
    ALGORITHM_VERSION,
    SCORECARD_SCHEMA_VERSION,
    Scorer,
    compute_confidence,
    create_scorer,
)
from .scoring.calibration import analyze_calibration
from .scoring.evaluators import (
    from_custom_judge,
    from_deepeval_like,
    from_ragas_like,
    from_trulens_like,
    merge_evaluation_signals,
)

if TYPE_CHECKING:  # type checkers see the real signatures; at run time __getattr__ imports them on first use
    from .otel import (
        ConfidenceSpanProcessor,
        configure_from_env,
        last_scorecard,
        mark_answer,
        record_signals,
        scored_answer,
    )

_OTEL_EXPORTS = frozenset(
    {
        "ConfidenceSpanProcessor",
        "configure_from_env",
        "last_scorecard",
        "mark_answer",
        "record_signals",
        "scored_answer",
    }
)


if not TYPE_CHECKING:  # a module __getattr__ seen by type checkers would make every misspelt name Any

    def __getattr__(name: str) -> Any:
        if name in _OTEL_EXPORTS:
            # import_module, not an import statement, so importing the package never imports OpenTelemetry.
            return getattr(importlib.import_module("rag_confidence.otel"), name)
        raise AttributeError(f"module 'rag_confidence' has no attribute {name!r}")


__all__ = [
    "ALGORITHM_VERSION",
    "SCORECARD_SCHEMA_VERSION",
    "CalibrationValidationError",
    "ConfidenceSpanProcessor",
    "ConfigValidationError",
    "InputValidationError",
    "RagConfidenceError",
    "Scorer",
    "TelemetrySetupError",
    "UsageError",
    "analyze_calibration",
    "compute_confidence",
    "configure_from_env",
    "create_scorer",
    "errors",
    "from_custom_judge",
    "from_deepeval_like",
    "from_ragas_like",
    "from_trulens_like",
    "last_scorecard",
    "mark_answer",
    "merge_evaluation_signals",
    "models",
    "record_signals",
    "scored_answer",
]
