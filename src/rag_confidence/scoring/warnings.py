"""Structured warnings: creation, de-duplication, and the missing-signal names they imply."""

from __future__ import annotations

from typing import Any

Warning_ = dict[str, Any]  # {"code", "severity", "message", "path"?}: the reference's JSON shape

# Codes whose presence means an input the scorer wanted was not supplied, and the signal name it stands for.
MISSING_SIGNAL_BY_CODE: dict[str, str] = {
    "missing-candidates": "candidates",
    "missing-answer-relevance": "answerRelevanceScore",
    "missing-faithfulness": "faithfulnessScore",
    "missing-conflict-signal": "conflictSignal",
    "missing-freshness-dates": "freshnessDates",
    "missing-corpus-count": "corpusTypes",
    "authority-unclassified": "authorityRanks",
    "index-integrity-incomplete": "indexIntegrity",
}


def warning(code: str, message: str, path: str | None = None, severity: str = "warn") -> Warning_:
    """One warning in the reference's shape; ``path`` is left out when unknown."""
    if path is None:
        return {"code": code, "severity": severity, "message": message}
    return {"code": code, "severity": severity, "message": message, "path": path}


def unique_warnings(warnings: list[Warning_]) -> list[Warning_]:
    """Drop exact repeats (same code, path and message), keeping the first."""
    seen: set[tuple[str, str, str]] = set()
    unique: list[Warning_] = []
    for item in warnings:
        key = (item["code"], item.get("path", ""), item["message"])
        if key not in seen:
            seen.add(key)
            unique.append(item)
    return unique


def missing_signals(warnings: list[Warning_]) -> list[str]:
    """Signal names implied by the warnings, in first-seen order."""
    names: dict[str, None] = {}
    for item in warnings:
        code = item["code"]
        name = MISSING_SIGNAL_BY_CODE.get(code)
        if name is not None:
            names[name] = None
        elif code == "required-signal-missing" and "path" in item:
            names[item["path"]] = None
    return list(names)
