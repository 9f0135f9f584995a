"""Grounding (30 points): how well the retrieved text supports the answer.

| step | effect |
|---|---|
| support base | high without ambiguity 30, high with ambiguity 21, medium 13, low 5 |
| expert review recommended | -3 |
| external constraint noted | -2 |
| ``hasConflict`` | -5 |
| complexity ceiling | inferential 24, multi-hop 18, comparative 16 (direct: none) |
| effective support = min(faithfulness, claim ratio) | >= 0.9: 0, >= 0.7: -3, >= 0.5: -7, else -12 |
| contradicted claims >= 1 | -5 |
| invalid citations | exactly 1: -2, >= 2: -5; either suppresses the citation bonus |
| citation coverage | < 0.5: -3 (warns), < 0.8: -1 |
| citation bonus | 2 cited: +1, >= 3 cited: +2 |

The score is clamped to 0..30 at the end, so steps after the ceiling can lift it back over the ceiling.
``documentsSilent`` short-circuits everything to 0.
"""

from __future__ import annotations

from typing import Any

from .._js import Number, as_double, clamp, is_integer, js_min, js_str, round_to, to_fixed
from ..warnings import warning
from ._shared import DOCUMENTS_SILENT_TEXT, Dimension, breakdown, dimension, normalized

MAX = 30
COMPLEXITY_CEILINGS = {"direct": 30, "inferential": 24, "multi-hop": 18, "comparative": 16}


def score_grounding(inputs: dict[str, Any]) -> Dimension:
    if inputs.get("documentsSilent") is True:
        return dimension(
            0,
            MAX,
            0,
            "The source documents do not address this question; grounding is 0.",
            breakdown({"supportBase": 0}, {}, {"documentsSilent": True}, 0, 0),
            [warning("documents-silent", DOCUMENTS_SILENT_TEXT, "documentsSilent")],
        )

    notes: list[str] = []
    adjustments: dict[str, Any] = {}
    diagnostics: dict[str, Any] = {}
    warnings: list[dict[str, Any]] = []

    score: Number = _support_base(inputs, notes)
    components = {"supportBase": score}

    if inputs.get("requiresExpertReview") is True:
        adjustments["expertReviewPenalty"] = -3
        score -= 3
        notes.append("Expert review is recommended before relying on the answer (-3).")
    constraint = inputs.get("externalConstraintNote")
    if constraint:
        adjustments["externalConstraintPenalty"] = -2
        score -= 2
        diagnostics["externalConstraintPresent"] = True
        notes.append(f"An outside constraint may change the answer: {constraint} (-2).")
    if inputs.get("hasConflict") is True:
        adjustments["conflictPenalty"] = -5
        score -= 5
        notes.append("The retrieved sections conflict (-5).")

    complexity = inputs.get("queryComplexity")
    if complexity and complexity != "direct":
        ceiling = COMPLEXITY_CEILINGS[complexity]
        diagnostics["queryComplexity"] = complexity
        diagnostics["complexityCeiling"] = ceiling
        if score > ceiling:
            adjustments["complexityCeiling"] = ceiling - score
            score = ceiling
            notes.append(f"A {complexity} question caps grounding at {ceiling}.")

    claims = _resolve_claims(inputs.get("claimSupport"))
    claim_score = None
    if claims is not None:
        claim_score = claims["score"]
        diagnostics["totalClaims"] = claims["totalClaims"]
        diagnostics["supportedClaims"] = claims["supportedClaims"]
        diagnostics["unsupportedClaims"] = claims["unsupportedClaims"]
        diagnostics["contradictedClaims"] = claims["contradictedClaims"]
        diagnostics["claimSupportScore"] = round_to(claim_score, 4)
    faithfulness = inputs.get("faithfulnessScore")
    if faithfulness is not None:
        diagnostics["faithfulnessScore"] = faithfulness

    support: Number | None
    if faithfulness is not None and claim_score is not None:
        support = js_min(faithfulness, claim_score)
    else:
        support = faithfulness if faithfulness is not None else claim_score
    if support is None:
        warnings.append(
            warning(
                "missing-faithfulness",
                "Neither faithfulnessScore nor claimSupport was supplied.",
                "faithfulnessScore",
            )
        )
    else:
        diagnostics["effectiveSupportScore"] = round_to(support, 4)
        penalty = _support_penalty(support)
        if penalty != 0:
            adjustments["supportSignalPenalty"] = penalty
            score += penalty
            notes.append(f"Effective support {to_fixed(support, 2)} costs {penalty}.")

    contradicted = claims["contradictedClaims"] if claims is not None else 0
    if contradicted >= 1:
        adjustments["contradictionPenalty"] = -5
        score -= 5
        notes.append(f"{js_str(contradicted)} claim(s) are contradicted by the sources (-5).")

    invalid = inputs.get("invalidCitationCount")
    invalid = 0 if invalid is None else invalid
    diagnostics["invalidCitationCount"] = invalid
    bonus_allowed = True
    if invalid == 1:
        adjustments["invalidCitationPenalty"] = -2
        score -= 2
        bonus_allowed = False
        warnings.append(warning("invalid-citations", "One citation is invalid.", "invalidCitationCount"))
        notes.append("One invalid citation (-2); no citation bonus.")
    elif invalid >= 2:
        adjustments["invalidCitationPenalty"] = -5
        score -= 5
        bonus_allowed = False
        warnings.append(
            warning("invalid-citations", "Several citations are invalid.", "invalidCitationCount")
        )
        notes.append("Several invalid citations (-5); no citation bonus.")

    coverage = inputs.get("citationCoverageScore")
    if coverage is not None:
        diagnostics["citationCoverageScore"] = coverage
        if coverage < 0.5:
            adjustments["citationCoveragePenalty"] = -3
            score -= 3
            warnings.append(
                warning("low-citation-coverage", "Citation coverage is under 0.50.", "citationCoverageScore")
            )
            notes.append("Citations cover under half of the answer (-3).")
        elif coverage < 0.8:
            adjustments["citationCoveragePenalty"] = -1
            score -= 1
            notes.append("Citations cover under 80% of the answer (-1).")

    cited = inputs.get("citationCount")
    if cited is not None:
        diagnostics["citationCount"] = cited
        if bonus_allowed and cited > 0:
            bonus = 2 if cited >= 3 else 1 if cited == 2 else 0
            if bonus > 0:
                adjustments["citationBonus"] = bonus
                score += bonus
                notes.append(f"{js_str(cited)} retrieved sections are cited (+{bonus}).")

    uncapped = score
    raw = clamp(score, 0, MAX)
    if raw != uncapped:
        adjustments["clamp"] = raw - uncapped
    return dimension(
        raw,
        MAX,
        normalized(raw, MAX),
        " ".join(notes),
        breakdown(components, adjustments, diagnostics, uncapped, raw),
        warnings,
    )


def _support_base(inputs: dict[str, Any], notes: list[str]) -> int:
    level = inputs["supportLevel"]
    ambiguity = inputs.get("ambiguityNotes")
    if level == "high" and not ambiguity:
        notes.append("The sources answer the question directly.")
        return 30
    if level == "high":
        notes.append(f"The sources answer the question, with ambiguity: {ambiguity}")
        return 21
    if level == "medium":
        if ambiguity:
            notes.append(f"The answer is implied by the sources, not stated; ambiguity: {ambiguity}")
        else:
            notes.append("The answer is implied by the sources, not stated.")
        return 13
    notes.append("The sources are thin, conflicting or unclear; the answer is a best inference.")
    return 5


def claim_counts_valid(claims: dict[str, Any]) -> str | None:
    """Why the claim counts are inconsistent, or None when they are usable."""
    contradicted = claims.get("contradictedClaims")
    contradicted = 0 if contradicted is None else contradicted
    unsupported = claims.get("unsupportedClaims")
    total = claims["totalClaims"]
    supported = claims["supportedClaims"]
    counts = [total, supported, contradicted] + ([] if unsupported is None else [unsupported])
    if not all(is_integer(count) and count >= 0 for count in counts):
        return "Claim counts must be non-negative integers."
    if total <= 0:
        return "claimSupport.totalClaims must be above 0."
    if as_double(supported + contradicted) > total:
        return "supportedClaims + contradictedClaims exceed totalClaims."
    if unsupported is not None and as_double(as_double(supported + unsupported) + contradicted) > total:
        return "supportedClaims + unsupportedClaims + contradictedClaims exceed totalClaims."
    return None


def _resolve_claims(claims: dict[str, Any] | None) -> dict[str, Any] | None:
    # Inconsistent counts are not scored; validation reports them as input-out-of-range.
    if claims is None or claim_counts_valid(claims) is not None:
        return None
    contradicted = claims.get("contradictedClaims")
    contradicted = 0 if contradicted is None else contradicted
    unsupported = claims.get("unsupportedClaims")
    if unsupported is None:
        unsupported = as_double(as_double(claims["totalClaims"] - claims["supportedClaims"]) - contradicted)
    return {
        "totalClaims": claims["totalClaims"],
        "supportedClaims": claims["supportedClaims"],
        "unsupportedClaims": unsupported,
        "contradictedClaims": contradicted,
        "score": claims["supportedClaims"] / claims["totalClaims"],
    }


def _support_penalty(support: float) -> int:
    if support >= 0.9:
        return 0
    if support >= 0.7:
        return -3
    if support >= 0.5:
        return -7
    return -12
