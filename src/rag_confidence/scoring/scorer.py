"""Weights, the total and the scorecard: the part of the algorithm that ties the dimensions together.

Each active dimension contributes ``raw / its native max x its weight``; the total is that sum over the sum of
the active weights, x 100, rounded half-up and clamped to 0..100. Default weights equal the native maxima:
grounding 30, retrieval 25, consistency 10, relevance 15, authority 20, corpus 15, freshness 15, index
integrity 15. Everything here works on validated plain data; ``api`` turns the result into models.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
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
from .dimensions.authority import resolve_authority_config
from .dimensions.index_integrity import resolve_index_config
from .dimensions.relevance import resolve_relevance_bands
from .dimensions.retrieval import resolve_retrieval_config
from .labels import label_for, tier1, tier2
from .policy import recommend_action, resolve_action_policy, resolve_signal_policy, signal_policy_warnings
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
CORE_DIMENSIONS = ("grounding", "retrieval", "consistency")
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


@dataclass(frozen=True, slots=True)
class PreparedConfig:
    """A validated config with every default resolved, so scoring many answers resolves it once."""

    config: dict[str, Any]
    retrieval: dict[str, Any]
    relevance_required: bool
    relevance_bands: dict[str, float]
    authority: dict[str, Any] | None
    corpus: dict[str, Any] | None
    freshness: dict[str, Any] | None
    index_integrity: dict[str, Any] | None
    weights: dict[str, float]
    action_policy: dict[str, Any]
    signal_policy: dict[str, Any]
    strict: bool


def prepare_config(config: dict[str, Any]) -> PreparedConfig:
    """Resolve a config that passed :func:`validation.validate_config`.

    The config is copied first: the caller may go on changing its dict, and the result may be cached.
    """
    config = copy.deepcopy(config)
    relevance = config.get("relevance")
    given_weights = config.get("weights") or {}
    return PreparedConfig(
        config=config,
        retrieval=resolve_retrieval_config(config),
        relevance_required=relevance is not None and relevance.get("required") is True,
        relevance_bands=resolve_relevance_bands(config),
        authority=resolve_authority_config(config) if "authority" in config else None,
        corpus=config.get("corpus"),
        freshness=config.get("freshness"),
        index_integrity=resolve_index_config(config) if "indexIntegrity" in config else None,
        weights={name: given_weights.get(name, default) for name, default in DEFAULT_WEIGHTS.items()},
        action_policy=resolve_action_policy(config),
        signal_policy=resolve_signal_policy(config),
        strict=config.get("validation") == "strict",
    )


DEFAULT_PREPARED = prepare_config({})


def score_plain(inputs: dict[str, Any], prepared: PreparedConfig) -> dict[str, Any]:
    """The scorecard, in the reference's JSON shape, of validated plain inputs."""
    config = prepared.config
    early = input_warnings(inputs, config)
    if prepared.strict:
        enforce_strict(early)

    dimensions: dict[str, dict[str, Any]] = {
        "grounding": score_grounding(inputs),
        "retrieval": score_retrieval(inputs, prepared.retrieval),
        "consistency": score_consistency(inputs),
    }
    if prepared.relevance_required or inputs.get("answerRelevanceScore") is not None:
        dimensions["relevance"] = score_relevance(inputs, prepared.relevance_bands)
    if prepared.authority is not None:
        dimensions["authority"] = score_authority(inputs, prepared.authority)
    if prepared.corpus is not None:
        dimensions["corpus"] = score_corpus(inputs, prepared.corpus)
    if prepared.freshness is not None:
        dimensions["freshness"] = score_freshness(inputs, prepared.freshness)
    if prepared.index_integrity is not None:
        dimensions["indexIntegrity"] = score_index_integrity(inputs, prepared.index_integrity)
    policy_warnings, review_missing, abstain_missing = signal_policy_warnings(inputs, prepared.signal_policy)

    # Sums run in the fixed dimension order (the order the dict was filled in), as the reference adds them,
    # so floats agree to the last bit.
    all_weights = prepared.weights
    weights: dict[str, float] = {}
    raw_total: float = 0.0
    max_possible: float = 0.0
    tier1_raw: float = 0.0
    tier1_max: float = 0.0
    tier2_raw: float = 0.0
    tier2_max: float = 0.0
    for name, result in dimensions.items():
        weight = all_weights[name]
        weights[name] = weight
        share = result["raw"] / result["max"] * weight
        raw_total += share
        max_possible += weight
        if name in TIER2_DIMENSIONS:
            tier2_raw += share
            tier2_max += weight
        else:
            tier1_raw += share
            tier1_max += weight

    total = 0 if max_possible <= 0 else js_round(clamp(raw_total / max_possible * 100, 0, 100))
    label, color = label_for(total)

    collected = early
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
        policy=prepared.action_policy,
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
            "activeExtensions": [name for name in dimensions if name not in CORE_DIMENSIONS],
            "activeDimensions": list(dimensions),
            "missingSignals": missing_signals(warnings),
            "warnings": warnings,
            "weights": weights,
        },
    }
