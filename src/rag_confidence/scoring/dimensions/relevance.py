"""Answer relevance (15 points, optional): does the answer address the question?

| ``answerRelevanceScore`` | points |
|---|---|
| >= full (0.90) | 15 |
| >= high (0.75) | 12 |
| >= medium (0.60) | 8 |
| >= low (0.40) | 4 |
| lower, or NaN | 0 |
| required but missing | 0, with a ``missingRequired`` adjustment of -15 |

Active when a score is supplied or ``config.relevance.required`` is true.
"""

from __future__ import annotations

from typing import Any

from .._js import round_to, to_fixed
from ..warnings import warning
from ._shared import MISSING_RELEVANCE_TEXT, Dimension, breakdown, dimension, normalized

MAX = 15
DEFAULT_BANDS = {"full": 0.9, "high": 0.75, "medium": 0.6, "low": 0.4}


def resolve_relevance_bands(config: dict[str, Any]) -> dict[str, float]:
    return {**DEFAULT_BANDS, **((config.get("relevance") or {}).get("scoreBands") or {})}


def score_relevance(inputs: dict[str, Any], bands: dict[str, float]) -> Dimension:
    score = inputs.get("answerRelevanceScore")
    if score is None:
        return dimension(
            0,
            MAX,
            0,
            "Answer relevance is required but no score was supplied.",
            breakdown(
                {"relevanceScore": 0},
                {"missingRequired": -MAX},
                {"required": True, "scoreProvided": False},
                0,
                0,
            ),
            [warning("missing-answer-relevance", MISSING_RELEVANCE_TEXT, "answerRelevanceScore")],
        )
    if score >= bands["full"]:
        raw, grade = 15, "full"
    elif score >= bands["high"]:
        raw, grade = 12, "high"
    elif score >= bands["medium"]:
        raw, grade = 8, "moderate"
    elif score >= bands["low"]:
        raw, grade = 4, "low"
    else:
        raw, grade = 0, "below the lowest band"
    return dimension(
        raw,
        MAX,
        normalized(raw, MAX),
        f"Answer relevance {to_fixed(score, 2)}: {grade} ({raw}/{MAX}).",
        breakdown(
            {"relevanceScore": raw},
            {},
            {
                "answerRelevanceScore": round_to(score, 4),
                "bandFull": bands["full"],
                "bandHigh": bands["high"],
                "bandMedium": bands["medium"],
                "bandLow": bands["low"],
            },
            raw,
            raw,
        ),
        [],
    )
