"""The span processor's numeric options, checked where they are given."""

from __future__ import annotations

from typing import Any

from ..errors import ConfigValidationError

__all__ = ["PROCESSOR_LIMITS", "check_processor_limits"]

#: The processor's numeric options, each of which must be positive.
PROCESSOR_LIMITS = ("max_pending_traces", "max_spans_per_trace", "pending_ttl_s", "max_scoring_queue")


def check_processor_limits(**limits: Any) -> None:
    """Raise :class:`~rag_confidence.errors.ConfigValidationError` unless each given limit is a positive number
    (an int where a count is meant)."""
    for name, value in limits.items():
        whole = name != "pending_ttl_s"
        number = isinstance(value, int) or (not whole and isinstance(value, float))
        if isinstance(value, bool) or not number or not value > 0:
            kind = "a positive integer" if whole else "a positive number of seconds"
            raise ConfigValidationError(f"{name} must be {kind}, not {value!r}", path=name)
