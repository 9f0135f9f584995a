"""Weights, the total and the scorecard: the part of the algorithm that ties the dimensions together.

Each active dimension contributes ``raw / its native max x its weight``; the total is that sum over the sum of
the active weights, x 100, rounded half-up and clamped to 0..100. Default weights equal the native maxima:
grounding 30, retrieval 25, consistency 10, relevance 15, authority 20, corpus 15, freshness 15, index
integrity 15. Everything here works on validated plain data; ``api`` turns the result into models.
"""

from __future__ import annotations

from typing import Any

from ._js import clamp, js_round
from .dimensions import (
    score_authority,
    score_consistency,
    score_corpus,
    score_freshness,
    score_grounding,
    score_index_integrity,
    score_relevance,
    score_retrieval,
)
from .dimensions.retrieval import resolve_retrieval_config
from .labels import label_for, tier1, tier2
from .policy import recommend_action, resolve_action_policy, signal_policy_warnings
from .validation import enforce_strict, input_warnings
from .warnings import missing_signals, unique_warnings

ALGORITHM_VERSION = "0.3.0"
SCORECARD_SCHEMA_VERSION = "0.3"

DIMENSION_ORDER = (
    "grounding",
    "retrieval",
    "consistency",
    "relevance",
    "authority",
    "corpus",
    "freshness",
    "indexIntegrity",
)
TIER1_DIMENSIONS = ("grounding", "retrieval", "consistency", "relevance", "authority")
TIER2_DIMENSIONS = ("corpus", "freshness", "indexIntegrity")
DEFAULT_WEIGHTS: dict[str, float] = {
    "grounding": 30,
    "retrieval": 25,
    "consistency": 10,
    "relevance": 15,
    "authority": 20,
    "corpus": 15,
    "freshness": 15,
    "indexIntegrity": 15,
}


def score_plain(inputs: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """The scorecard, in the reference's JSON shape, of validated plain inputs and config.

    The config must already have passed :func:`validation.validate_config`.
    """
    early = input_warnings(inputs, config)
    enforce_strict(early, config)

    relevance = config.get("relevance")
    active = {
        "relevance": inputs.get("answerRelevanceScore") is not None
        or (relevance is not None and relevance.get("required") is True),
        "authority": "authority" in config,
        "corpus": "corpus" in config,
        "freshness": "freshness" in config,
        "indexIntegrity": "indexIntegrity" in config,
    }
    dimensions: dict[str, dict[str, Any]] = {
        "grounding": score_grounding(inputs),
        "retrieval": score_retrieval(inputs, resolve_retrieval_config(config)),
        "consistency": score_consistency(inputs),
    }
    if active["relevance"]:
        dimensions["relevance"] = score_relevance(inputs, config)
    if active["authority"]:
        dimensions["authority"] = score_authority(inputs, config)
    if active["corpus"]:
        dimensions["corpus"] = score_corpus(inputs, config)
    if active["freshness"]:
        dimensions["freshness"] = score_freshness(inputs, config)
    if active["indexIntegrity"]:
        dimensions["indexIntegrity"] = score_index_integrity(inputs, config)
    policy_warnings, review_missing, abstain_missing = signal_policy_warnings(inputs, config)

    given = config.get("weights") or {}
    weights: dict[str, float] = {}
    weighted: dict[str, float] = {}
    for name, result in dimensions.items():
        weight = given.get(name)
        weight = DEFAULT_WEIGHTS[name] if weight is None else weight
        weights[name] = weight
        weighted[name] = result["raw"] / result["max"] * weight

    # Sums run in the fixed dimension order, as the reference adds them, so floats agree to the last bit.
    raw_total: float = 0
    max_possible: float = 0
    tier1_raw: float = 0
    tier1_max: float = 0
    tier2_raw: float = 0
    tier2_max: float = 0
    for name in DIMENSION_ORDER:
        if name not in weights:
            continue
        raw_total += weighted[name]
        max_possible += weights[name]
        if name in TIER1_DIMENSIONS:
            tier1_raw += weighted[name]
            tier1_max += weights[name]
        else:
            tier2_raw += weighted[name]
            tier2_max += weights[name]

    total = 0 if max_possible <= 0 else js_round(clamp(raw_total / max_possible * 100, 0, 100))
    label, color = label_for(total)

    collected = list(early)
    for result in dimensions.values():
        collected.extend(result["warnings"])
    collected.extend(policy_warnings)
    warnings = unique_warnings(collected)

    silent = inputs.get("documentsSilent") is True
    tier_one = tier1(tier1_raw, tier1_max, silent)
    action, reason = recommend_action(
        total=total,
        documents_silent=silent,
        tier1_score=0 if tier_one is None else tier_one["score"],
        warning_codes=[item["code"] for item in warnings],
        review_missing=review_missing,
        abstain_missing=abstain_missing,
        policy=resolve_action_policy(config),
    )
    return {
        "total": total,
        "label": label,
        "labelColor": color,
        "recommendedAction": action,
        "actionReason": reason,
        "tier1": tier_one,
        "tier2": tier2(tier2_raw, tier2_max),
        "dimensions": dimensions,
        "meta": {
            "algorithmVersion": ALGORITHM_VERSION,
            "schemaVersion": SCORECARD_SCHEMA_VERSION,
            "rawTotal": raw_total,
            "maxPossible": max_possible,
            "activeExtensions": [name for name in DIMENSION_ORDER[3:] if name in dimensions],
            "activeDimensions": list(dimensions),
            "missingSignals": missing_signals(warnings),
            "warnings": warnings,
            "weights": weights,
        },
    }
