"""A scorecard as plain text for people: total, action and why, tiers, one line per dimension, warnings."""

from __future__ import annotations

from .models import ConfidenceScorecard


def _number(value: float) -> str:
    if value != value:
        return "NaN"
    return str(int(value)) if float(value).is_integer() else f"{value:.2f}"


def render_scorecard(card: ConfidenceScorecard) -> str:
    """The scorecard as text, one line per dimension.

    >>> from rag_confidence import compute_confidence
    >>> card = compute_confidence({"supportLevel": "low", "candidates": [], "hasConflict": False})
    >>> print(render_scorecard(card).splitlines()[0])
    scorecard: 8/100  Insufficient  ->  abstain
    """
    lines = [
        f"scorecard: {_number(card.total)}/100  {card.label}  ->  {card.recommended_action}",
        f"  why: {card.action_reason}",
    ]
    if card.tier1 is not None:
        lines.append(f"  tier 1, answer confidence: {_number(card.tier1.score)} {card.tier1.label}")
    if card.tier2 is not None:
        lines.append(f"  tier 2, system readiness:  {_number(card.tier2.score)} {card.tier2.label}")
    lines.append(f"  {'dimension':<16}{'score':>6}{'raw/max':>10}  explanation")
    for field, info in type(card.dimensions).model_fields.items():
        dimension = getattr(card.dimensions, field)
        if dimension is None:
            continue
        name = info.alias or field
        raw = f"{_number(dimension.raw)}/{_number(dimension.max)}"
        lines.append(f"  {name:<16}{_number(dimension.normalized):>6}{raw:>10}  {dimension.explanation}")
    for item in card.meta.warnings:
        where = f" ({item.path})" if item.path else ""
        lines.append(f"  {item.severity:<5} {item.code}{where}: {item.message}")
    if card.meta.missing_signals:
        lines.append(f"  missing signals: {', '.join(card.meta.missing_signals)}")
    return "\n".join(lines) + "\n"
