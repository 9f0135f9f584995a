"""Pieces several dimensions share: the result shape and the texts validation repeats verbatim."""

from __future__ import annotations

from typing import Any

from .._js import js_round

Dimension = dict[str, Any]

# Validation and the dimensions emit these warnings with the same text, so de-duplication keeps one copy.
DOCUMENTS_SILENT_TEXT = "The source documents do not address this question."
MISSING_CANDIDATES_TEXT = "No retrieved candidates were supplied."
MISSING_RELEVANCE_TEXT = "answerRelevanceScore is required by config.relevance.required but was not supplied."


def dimension(
    raw: float,
    max_points: float,
    normalized: float,
    explanation: str,
    breakdown: dict[str, Any],
    warnings: list[dict[str, Any]],
) -> Dimension:
    return {
        "raw": raw,
        "max": max_points,
        "normalized": normalized,
        "explanation": explanation,
        "breakdown": breakdown,
        "warnings": warnings,
    }


def breakdown(
    components: dict[str, Any],
    adjustments: dict[str, Any],
    diagnostics: dict[str, Any],
    uncapped_raw: float,
    raw: float,
) -> dict[str, Any]:
    return {
        "components": components,
        "adjustments": adjustments,
        "diagnostics": diagnostics,
        "uncappedRaw": uncapped_raw,
        "raw": raw,
    }


def normalized(raw: float, max_points: float) -> float:
    """A dimension's 0-100 view of its raw points (not clamped, as in the reference)."""
    return js_round(raw / max_points * 100)
