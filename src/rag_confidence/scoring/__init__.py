"""The transparent-confidence 0.3 scoring algorithm, in pure Python (no OpenTelemetry here)."""

from .api import Scorer, compute_confidence, create_scorer
from .scorer import ALGORITHM_VERSION, SCORECARD_SCHEMA_VERSION

__all__ = ["ALGORITHM_VERSION", "SCORECARD_SCHEMA_VERSION", "Scorer", "compute_confidence", "create_scorer"]
