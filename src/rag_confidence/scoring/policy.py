"""Presets, the signal policy and the action policy: from a scored answer to answer / review / abstain.

Action rules, first match wins:

1. documents silent -> abstain
2. a required signal (``require``, the caller's or the preset's) is missing and in ``abstainWhenMissing`` -> abstain
3. the first warning (in list order) listed in ``abstainOnWarnings`` -> abstain
4. total < ``abstainBelow`` -> abstain
5. Tier 1 < ``requireTier1AtLeast`` -> review
6. a required signal is missing and in ``reviewWhenMissing``, or the production preset's support evaluator is
   missing -> review
7. a warning listed in ``reviewOnWarnings`` -> review
8. total >= ``answerAt`` -> answer
9. total >= ``reviewAt`` -> review
10. otherwise -> abstain

Only the ``production-v0.3`` preset changes anything: it requires ``answerRelevanceScore`` and a conflict
signal (review when missing) and a support evaluator (``faithfulnessScore`` or ``claimSupport``). As in the
reference, ``abstainWhenMissing`` and ``reviewWhenMissing`` name signals that are also required: one that is
not required changes nothing.
"""

from __future__ import annotations

from typing import Any

from .warnings import Warning_, warning

PRODUCTION_PRESET = "production-v0.3"
DEFAULT_ACTION_POLICY: dict[str, Any] = {
    "answerAt": 65,
    "reviewAt": 40,
    "abstainBelow": 40,
    "requireTier1AtLeast": 40,
    "reviewOnWarnings": ["missing-answer-relevance", "missing-conflict-signal"],
    "abstainOnWarnings": ["documents-silent"],
}


def resolve_action_policy(config: dict[str, Any]) -> dict[str, Any]:
    given = config.get("actionPolicy")
    if not given:
        return DEFAULT_ACTION_POLICY
    return {key: given.get(key, default) for key, default in DEFAULT_ACTION_POLICY.items()}


def _unique(names: list[str]) -> list[str]:
    return list(dict.fromkeys(names))


def resolve_signal_policy(config: dict[str, Any]) -> dict[str, Any]:
    production = config.get("preset") == PRODUCTION_PRESET
    caller = config.get("signalPolicy") or {}
    preset_required = ["answerRelevanceScore", "conflictSignal"] if production else []
    return {
        "require": _unique(preset_required + (caller.get("require") or [])),
        "reviewWhenMissing": _unique(preset_required + (caller.get("reviewWhenMissing") or [])),
        "abstainWhenMissing": _unique(list(caller.get("abstainWhenMissing") or [])),
        "minCitationCoverageScore": caller.get("minCitationCoverageScore"),
        "maxInvalidCitationCount": caller.get("maxInvalidCitationCount"),
        "requireSupportEvaluator": production,
    }


def signal_missing(signal: str, inputs: dict[str, Any]) -> bool:
    """Whether a named signal is absent from the inputs. Unknown names are read as ``indexIntegrity``."""
    if signal == "conflictSignal":
        return inputs.get("hasConflict") is None and inputs.get("conflictingCandidateCount") is None
    if signal in _DIRECT_FIELDS:
        return inputs.get(signal) is None
    candidates = inputs["candidates"]
    if signal == "freshnessDates":
        return not any(c.get("lastUpdated") for c in candidates)
    if signal == "corpusTypes":
        return inputs.get("corpusTypeCount") is None and inputs.get("presentTypes") is None
    if signal == "authorityRanks":
        return not any(
            c.get("authorityRank") is not None or c.get("documentType") is not None for c in candidates
        )
    if signal == "contentHashes":
        return not any(c.get("contentHash") is not None for c in candidates)
    if signal == "candidateRanks":
        return not any(c.get("rank") is not None for c in candidates)
    return inputs.get("indexIntegrity") is None


_DIRECT_FIELDS = frozenset(
    {
        "answerRelevanceScore",
        "faithfulnessScore",
        "claimSupport",
        "citationCoverageScore",
        "invalidCitationCount",
        "citationCount",
    }
)


def signal_policy_warnings(
    inputs: dict[str, Any], policy: dict[str, Any]
) -> tuple[list[Warning_], list[str], list[str]]:
    """Warnings of the signal policy (as :func:`resolve_signal_policy` gives it), and the missing signals that
    force review or abstention."""
    found: list[Warning_] = []
    review: list[str] = []
    abstain: list[str] = []
    for signal in policy["require"]:
        if not signal_missing(signal, inputs):
            continue
        found.append(
            warning("required-signal-missing", f"The required signal '{signal}' is missing.", signal)
        )
        if signal in policy["reviewWhenMissing"]:
            review.append(signal)
        if signal in policy["abstainWhenMissing"]:
            abstain.append(signal)
    if (
        policy["requireSupportEvaluator"]
        and inputs.get("faithfulnessScore") is None
        and inputs.get("claimSupport") is None
    ):
        found.append(
            warning(
                "required-signal-missing",
                "The production preset needs faithfulnessScore or claimSupport.",
                "faithfulnessScore",
            )
        )
        review.append("faithfulnessScore")
    floor = policy["minCitationCoverageScore"]
    coverage = inputs.get("citationCoverageScore")
    if floor is not None and coverage is not None and coverage < floor:
        found.append(
            warning(
                "citation-quality-floor",
                f"citationCoverageScore is under the configured floor ({_num(floor)}).",
                "citationCoverageScore",
            )
        )
    ceiling = policy["maxInvalidCitationCount"]
    invalid = inputs.get("invalidCitationCount")
    if ceiling is not None and (0 if invalid is None else invalid) > ceiling:
        found.append(
            warning(
                "citation-quality-floor",
                f"invalidCitationCount is over the configured maximum ({_num(ceiling)}).",
                "invalidCitationCount",
            )
        )
    return found, _unique(review), _unique(abstain)


def _num(value: float) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def recommend_action(
    *,
    total: float,
    documents_silent: bool,
    tier1_score: float,
    warning_codes: list[str],
    review_missing: list[str],
    abstain_missing: list[str],
    policy: dict[str, Any],
) -> tuple[str, str]:
    """The recommended action and a one-sentence reason."""
    if documents_silent:
        return "abstain", "The documents do not address the question (documentsSilent)."
    if abstain_missing:
        return "abstain", f"Missing signal(s) listed in abstainWhenMissing: {', '.join(abstain_missing)}."
    abstain_on = policy["abstainOnWarnings"]
    for code in warning_codes:
        if code in abstain_on:
            return "abstain", f"Warning '{code}' is listed in abstainOnWarnings."
    if total < policy["abstainBelow"]:
        return "abstain", f"Score {_num(total)} is under abstainBelow ({_num(policy['abstainBelow'])})."
    if tier1_score < policy["requireTier1AtLeast"]:
        return "review", (
            f"Tier 1 score {_num(tier1_score)} is under requireTier1AtLeast ({_num(policy['requireTier1AtLeast'])})."
        )
    if review_missing:
        return "review", f"Missing signal(s) listed in reviewWhenMissing: {', '.join(review_missing)}."
    review_on = policy["reviewOnWarnings"]
    for code in warning_codes:
        if code in review_on:
            return "review", f"Warning '{code}' is listed in reviewOnWarnings."
    if total >= policy["answerAt"]:
        return "answer", f"Score {_num(total)} reaches answerAt ({_num(policy['answerAt'])})."
    if total >= policy["reviewAt"]:
        return (
            "review",
            f"Score {_num(total)} reaches reviewAt ({_num(policy['reviewAt'])}) but not answerAt.",
        )
    return "abstain", f"Score {_num(total)} is under reviewAt ({_num(policy['reviewAt'])})."
