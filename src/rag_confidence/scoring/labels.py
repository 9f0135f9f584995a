"""Labels and colours of the total and of the two tiers.

| score | total / Tier 1 | Tier 2 |
|---|---|---|
| >= 85 | Strong, green | Complete, green |
| >= 65 | Moderate, amber | Good, amber |
| >= 40 | Limited, orange | Partial, orange |
| lower (or NaN) | Insufficient, red | Thin, red |

Tier 1 (answer confidence: grounding, retrieval, consistency, relevance, authority) is "Not Addressed" / gray
with score 0 when the documents are silent. Tier 2 (system readiness: corpus, freshness, index integrity) is
absent unless one of its extensions is active.
"""

from __future__ import annotations

from typing import Any

from ._js import js_round


def label_for(score: float) -> tuple[str, str]:
    if score >= 85:
        return "Strong", "green"
    if score >= 65:
        return "Moderate", "amber"
    if score >= 40:
        return "Limited", "orange"
    return "Insufficient", "red"


def tier1(raw: float, max_points: float, not_addressed: bool) -> dict[str, Any] | None:
    if not_addressed:
        return {"score": 0, "label": "Not Addressed", "color": "gray"}
    if max_points <= 0:
        return None
    score = js_round(raw / max_points * 100)
    label, color = label_for(score)
    return {"score": score, "label": label, "color": color}


def tier2(raw: float, max_points: float) -> dict[str, Any] | None:
    if max_points <= 0:
        return None
    score = js_round(raw / max_points * 100)
    if score >= 85:
        return {"score": score, "label": "Complete", "color": "green"}
    if score >= 65:
        return {"score": score, "label": "Good", "color": "amber"}
    if score >= 40:
        return {"score": score, "label": "Partial", "color": "orange"}
    return {"score": score, "label": "Thin", "color": "red"}
