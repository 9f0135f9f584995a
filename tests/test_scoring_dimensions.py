"""Each dimension against its table in the spec (seeds/000, "Dimension 1 ..." onwards).

Expected numbers here are read off the spec's tables, not produced by the code under test.
"""

from __future__ import annotations

import datetime
import math
from pathlib import Path
from typing import Any

import pytest

from rag_confidence import compute_confidence
from rag_confidence.errors import ConfigValidationError
from rag_confidence.models import Weights


def cand(score: float, methods: dict[str, float] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "retrievalScores": methods or {"semantic": score, "keyword": score},
        "combinedScore": score,
        **extra,
    }


def grounding(**inputs: Any) -> Any:
    base = {"supportLevel": "high", "candidates": [cand(0.9)], "hasConflict": False}
    return compute_confidence({**base, **inputs}).dimensions.grounding


# --- Dimension 1: grounding (max 30) ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("support", "ambiguity", "base"),
    [
        ("low", None, 5),
        ("medium", None, 13),
        ("medium", "unclear", 13),
        ("high", "unclear", 21),
        ("high", None, 30),
    ],
)
def test_grounding_support_base(support: str, ambiguity: str | None, base: int) -> None:
    dim = grounding(supportLevel=support, ambiguityNotes=ambiguity)
    assert dim.breakdown.components["supportBase"] == base
    assert dim.raw == base


def test_grounding_documents_silent_skips_everything() -> None:
    dim = grounding(documentsSilent=True, citationCount=5, faithfulnessScore=1.0)
    assert (dim.raw, dim.normalized) == (0, 0)
    assert [w.code for w in dim.warnings] == ["documents-silent"]


@pytest.mark.parametrize(
    ("extra", "penalty"),
    [
        ({"requiresExpertReview": True}, -3),
        ({"externalConstraintNote": "GDPR"}, -2),
        ({"hasConflict": True}, -5),
    ],
)
def test_grounding_penalties(extra: dict[str, Any], penalty: int) -> None:
    assert grounding(**extra).raw == 30 + penalty


@pytest.mark.parametrize(
    ("complexity", "ceiling"), [("direct", 30), ("inferential", 24), ("multi-hop", 18), ("comparative", 16)]
)
def test_grounding_complexity_ceiling(complexity: str, ceiling: int) -> None:
    assert grounding(queryComplexity=complexity).raw == ceiling


@pytest.mark.parametrize(
    ("score", "modifier"), [(0.95, 0), (0.9, 0), (0.8, -3), (0.7, -3), (0.6, -7), (0.5, -7), (0.3, -12)]
)
def test_grounding_faithfulness_modifier(score: float, modifier: int) -> None:
    assert grounding(faithfulnessScore=score).raw == 30 + modifier


def test_grounding_uses_the_lower_of_faithfulness_and_claim_support() -> None:
    dim = grounding(faithfulnessScore=0.95, claimSupport={"totalClaims": 10, "supportedClaims": 6})
    assert dim.breakdown.adjustments["supportSignalPenalty"] == -7
    assert dim.breakdown.diagnostics is not None
    assert dim.breakdown.diagnostics["effectiveSupportScore"] == 0.6


def test_grounding_contradicted_claims() -> None:
    dim = grounding(claimSupport={"totalClaims": 4, "supportedClaims": 4 - 1, "contradictedClaims": 1})
    # 3/4 = 0.75 -> -3, plus -5 for the contradiction.
    assert dim.raw == 30 - 3 - 5


def test_claim_counts_past_a_doubles_range_score_without_raising() -> None:
    # Integer sums past 2**53 become doubles as in JavaScript; past the largest double that is Infinity, not
    # Python's OverflowError out of compute_confidence (such counts scored before the rounding was added).
    # A count past the largest double is Infinity from the start, as JSON text 1e400 is there: out of range.
    for supported in (5, 10**400):
        huge = grounding(claimSupport={"totalClaims": 10**400, "supportedClaims": supported})
        infinite = grounding(claimSupport={"totalClaims": math.inf, "supportedClaims": math.inf})
        assert huge.model_dump() == infinite.model_dump()
    # Sums of counts a double holds exactly still become doubles past 2**53 (x-010 to x-013 in the fixtures).
    dim = grounding(claimSupport={"totalClaims": 2**53, "supportedClaims": 2**53, "contradictedClaims": 1})
    assert dim.breakdown.diagnostics is not None


def test_a_rank_past_a_doubles_range_scores_without_raising() -> None:
    # Such a rank is Infinity to the reference (as JSON text 1e400 parses there): no rank, not an OverflowError.
    config = {"retrieval": {"rankPenalty": {"mode": "penalize", "afterRank": 1, "penaltyPerRank": 1}}}

    def scored(rank: float) -> Any:
        candidates = [cand(0.9, rank=rank)]
        return compute_confidence(
            {"supportLevel": "high", "hasConflict": False, "candidates": candidates}, config
        )

    assert scored(10**400).model_dump() == scored(math.inf).model_dump()
    assert "rank-signal-missing" in [warning.code for warning in scored(10**400).meta.warnings]


@pytest.mark.parametrize(
    ("given", "as_javascript_holds_it"), [(10**400, math.inf), (2**53 + 1, float(2**53))]
)
def test_a_number_field_given_an_int_past_2_53_holds_the_double_javascript_would(
    given: int, as_javascript_holds_it: float
) -> None:
    # combinedScore = 10**400 raised OverflowError out of compute_confidence (a typed error or a warning is the
    # contract for bad input); the reference, given 1e400 in JSON, scores Infinity with input-out-of-range.
    def scored(score: float) -> Any:
        candidate = cand(0.9, combinedScore=score)
        return compute_confidence({"supportLevel": "high", "hasConflict": False, "candidates": [candidate]})

    assert scored(given).model_dump() == scored(as_javascript_holds_it).model_dump()


@pytest.mark.parametrize(
    ("invalid", "cited", "expected"),
    [(0, 3, 30), (1, 3, 28), (2, 3, 25), (0, 2, 30), (0, 1, 30)],
)
def test_grounding_citations_capped_at_30(invalid: int, cited: int, expected: int) -> None:
    dim = grounding(invalidCitationCount=invalid, citationCount=cited, faithfulnessScore=1.0)
    assert dim.raw == expected


def test_grounding_citation_bonus_applies_after_penalties() -> None:
    # medium 13, +2 for three citations, +1 for two
    assert grounding(supportLevel="medium", citationCount=3).raw == 15
    assert grounding(supportLevel="medium", citationCount=2).raw == 14
    assert grounding(supportLevel="medium", citationCount=3, invalidCitationCount=1).raw == 11


@pytest.mark.parametrize(("coverage", "expected"), [(0.4, 27), (0.6, 29), (0.8, 30)])
def test_grounding_citation_coverage(coverage: float, expected: int) -> None:
    assert grounding(citationCoverageScore=coverage).raw == expected


# --- Dimension 2: retrieval (max 25) ------------------------------------------------------------------------
def retrieval(candidates: list[dict[str, Any]], config: dict[str, Any] | None = None) -> Any:
    return compute_confidence({"supportLevel": "high", "candidates": candidates}, config).dimensions.retrieval


@pytest.mark.parametrize(("confirmed", "points"), [(0, 3), (1, 8), (2, 12), (3, 15), (4, 15)])
def test_retrieval_method_agreement(confirmed: int, points: int) -> None:
    candidates = [cand(0.9, {"a": 0.9, "b": 0.8}) for _ in range(confirmed)]
    candidates += [cand(0.9, {"a": 0.9}) for _ in range(4 - confirmed)]
    assert retrieval(candidates).breakdown.components["agreement"] == points


def test_retrieval_single_method_pipelines_use_min_confirmed_methods_1() -> None:
    candidates = [cand(0.9, {"vector": 0.9}) for _ in range(3)]
    assert retrieval(candidates).breakdown.components["agreement"] == 3
    tuned = retrieval(candidates, {"retrieval": {"minConfirmedMethods": 1}})
    assert tuned.breakdown.components["agreement"] == 15


@pytest.mark.parametrize(
    ("average", "points"), [(0.85, 8), (0.8, 8), (0.7, 6), (0.55, 4), (0.4, 2), (0.2, 0)]
)
def test_retrieval_magnitude(average: float, points: int) -> None:
    assert retrieval([cand(average)]).breakdown.components["magnitude"] == points


def test_retrieval_magnitude_uses_top_k_and_extraction_quality() -> None:
    # top 3 of 4 by combinedScore: 0.9, 0.9, 0.9 -> 8; the 0.1 is outside top-K.
    assert retrieval([cand(0.9), cand(0.1), cand(0.9), cand(0.9)]).breakdown.components["magnitude"] == 8
    # 0.9 x 0.5 = 0.45 -> 2 points
    assert retrieval([cand(0.9, extractionQuality=0.5)]).breakdown.components["magnitude"] == 2


@pytest.mark.parametrize(
    ("documents", "points"), [(["a", "b", "c"], 3), (["a", "b", "b"], 1), (["a", "a", "a"], 0)]
)
def test_retrieval_source_diversity(documents: list[str], points: int) -> None:
    candidates = [cand(0.9, documentId=d) for d in documents]
    assert retrieval(candidates).breakdown.components["diversity"] == points


@pytest.mark.parametrize(("count", "points"), [(1, 0), (2, 0), (3, 1), (4, 1), (5, 2), (9, 2)])
def test_retrieval_breadth(count: int, points: int) -> None:
    assert retrieval([cand(0.9) for _ in range(count)]).breakdown.components["breadth"] == points


def test_retrieval_is_capped_at_25_and_duplicates_penalized_only_on_request() -> None:
    candidates = [cand(0.9, documentId=f"d{i}", contentHash="same") for i in range(5)]
    plain = retrieval(candidates)
    assert plain.raw == 25  # 15 + 8 + 3 + 2 = 28, capped
    assert plain.breakdown.adjustments["cap"] == -3
    assert [(w.code, w.severity) for w in plain.warnings if w.code == "duplicate-content"] == [
        ("duplicate-content", "info")
    ]
    penalized = retrieval(candidates, {"retrieval": {"duplicateContent": {"mode": "penalize"}}})
    assert penalized.breakdown.adjustments["duplicateContentPenalty"] == -4  # 4 repeats x 1, max 4
    assert penalized.raw == 24


def test_retrieval_without_candidates() -> None:
    card = compute_confidence({"supportLevel": "high", "candidates": []})
    assert card.dimensions.retrieval.raw == 0
    assert "missing-candidates" in [w.code for w in card.meta.warnings]


# --- Dimension 3: consistency (max 10) ----------------------------------------------------------------------
def consistency(scores: list[float], **inputs: Any) -> Any:
    data = {"supportLevel": "high", "candidates": [cand(s) for s in scores], **inputs}
    return compute_confidence(data).dimensions.consistency


@pytest.mark.parametrize(
    ("scores", "points"),
    [([0.9], 3), ([0.9, 0.88, 0.86], 6), ([0.9, 0.6], 5), ([0.9, 0.4], 3), ([0.95, 0.2], 1)],
)
def test_consistency_score_stability(scores: list[float], points: int) -> None:
    assert consistency(scores, hasConflict=False).breakdown.components["scoreStability"] == points


@pytest.mark.parametrize(
    ("signal", "points"),
    [
        ({"conflictingCandidateCount": 0}, 4),
        ({"hasConflict": False}, 4),
        ({}, 2),
        ({"conflictingCandidateCount": 1}, 1),
        ({"conflictingCandidateCount": 3}, 0),
        ({"hasConflict": True}, 0),
        ({"hasConflict": True, "conflictingCandidateCount": 0}, 4),  # the count wins
    ],
)
def test_consistency_conflict_signal(signal: dict[str, Any], points: int) -> None:
    dim = consistency([0.9, 0.9], **signal)
    assert dim.breakdown.components["conflictStatus"] == points
    assert ("missing-conflict-signal" in [w.code for w in dim.warnings]) == (signal == {})


def test_consistency_without_candidates_is_zero() -> None:
    assert consistency([], hasConflict=False).raw == 0


# --- Optional dimensions --------------------------------------------------------------------------------------
@pytest.mark.parametrize(("score", "points"), [(0.95, 15), (0.8, 12), (0.65, 8), (0.45, 4), (0.1, 0)])
def test_relevance_bands(score: float, points: int) -> None:
    card = compute_confidence(
        {"supportLevel": "high", "candidates": [cand(0.9)], "answerRelevanceScore": score}
    )
    assert card.dimensions.relevance is not None
    assert card.dimensions.relevance.raw == points
    assert "relevance" in card.meta.active_dimensions


def test_relevance_required_but_missing() -> None:
    card = compute_confidence(
        {"supportLevel": "high", "candidates": [cand(0.9)]}, {"relevance": {"required": True}}
    )
    assert card.dimensions.relevance is not None
    assert card.dimensions.relevance.raw == 0
    assert card.dimensions.relevance.breakdown.adjustments == {"missingRequired": -15}


@pytest.mark.parametrize(("rank", "points"), [(10, 18), (20, 13), (30, 7), (40, 2)])
def test_authority_rank_points(rank: int, points: int) -> None:
    card = compute_confidence(
        {"supportLevel": "high", "candidates": [cand(0.9, authorityRank=rank)]}, {"authority": {}}
    )
    assert card.dimensions.authority is not None
    assert card.dimensions.authority.breakdown.components["weightedAuthority"] == points


def test_authority_keywords_and_bonuses() -> None:
    tiers = [
        {"name": "Law", "rank": 10, "keywords": ["statute"]},
        {"name": "Guide", "rank": 20, "keywords": ["guide"]},
    ]
    candidates = [
        cand(0.9, documentType="State Statute"),
        cand(0.9, documentType="User guide", isAmendment=True),
    ]
    card = compute_confidence(
        {"supportLevel": "high", "candidates": candidates}, {"authority": {"tiers": tiers}}
    )
    dim = card.dimensions.authority
    assert dim is not None
    # equal weights: (18 + 13) / 2 = 15.5 rounds half up to 16; +1 amendment, +1 two tiers
    assert dim.breakdown.components == {"weightedAuthority": 16, "bonuses": 2}
    assert dim.raw == 18


@pytest.mark.parametrize(("present", "points"), [(5, 15), (4, 12), (3, 9), (2, 5), (1, 2), (0, 0)])
def test_corpus_completeness(present: int, points: int) -> None:
    card = compute_confidence(
        {"supportLevel": "high", "candidates": [cand(0.9)], "corpusTypeCount": present},
        {"corpus": {"expectedTypeCount": 5}},
    )
    assert card.dimensions.corpus is not None
    assert card.dimensions.corpus.raw == points


NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)


@pytest.mark.parametrize(("days", "raw"), [(10, 15), (90, 15), (100, 15), (120, 14), (390, 0), (800, 0)])
def test_freshness_decay(days: int, raw: int) -> None:
    # 15 - (age - 90) / 30 x 1.5, rounded half up: 100 days -> 14.5 -> 15; 120 -> 13.5 -> 14; >= 730 -> 0
    updated = NOW - datetime.timedelta(days=days)
    card = compute_confidence(
        {"supportLevel": "high", "candidates": [cand(0.9, lastUpdated=updated.isoformat())]},
        {"freshness": {"now": NOW}},
    )
    assert card.dimensions.freshness is not None
    assert card.dimensions.freshness.raw == raw


def test_index_integrity_full_and_leakage() -> None:
    healthy = {
        "expectedEmbeddingModelVersion": "v3",
        "actualEmbeddingModelVersion": "v3",
        "sourceVersionMatchRatio": 1.0,
        "staleIndexedDocumentRatio": 0.0,
        "failedIngestionCount": 0,
        "aclFilterConfirmed": True,
        "deletedSourceLeakageCount": 0,
    }
    base = {"supportLevel": "high", "candidates": [cand(0.9)]}
    card = compute_confidence({**base, "indexIntegrity": healthy}, {"indexIntegrity": {}})
    assert card.dimensions.index_integrity is not None
    assert card.dimensions.index_integrity.raw == 15
    leaking = compute_confidence(
        {
            **base,
            "indexIntegrity": {
                **healthy,
                "deletedSourceLeakageCount": 2,
                "actualEmbeddingModelVersion": "v2",
            },
        },
        {"indexIntegrity": {}},
    )
    assert leaking.dimensions.index_integrity is not None
    assert leaking.dimensions.index_integrity.raw == 15 - 1 - 4
    assert [(w.code, w.severity) for w in leaking.dimensions.index_integrity.warnings] == [
        ("embedding-version-mismatch", "warn"),
        ("deleted-source-leakage", "error"),
    ]


# --- Total, tiers, labels, actions ------------------------------------------------------------------------------
def test_total_is_weighted_and_normalized() -> None:
    # grounding 30/30, retrieval 0/25, consistency 0/10 -> 30/65 = 46.15 -> 46, "Limited"
    card = compute_confidence({"supportLevel": "high", "candidates": []})
    assert (card.total, card.label, card.label_color) == (46, "Limited", "orange")
    assert card.meta.max_possible == 65
    assert card.tier2 is None


@pytest.mark.parametrize(
    ("total_inputs", "action"),
    [
        ({"documentsSilent": True}, "abstain"),
        ({}, "review"),  # no conflict signal: the default review list holds missing-conflict-signal
        ({"hasConflict": False}, "answer"),
    ],
)
def test_default_action_policy(total_inputs: dict[str, Any], action: str) -> None:
    candidates = [cand(0.9, documentId=f"d{i}") for i in range(5)]
    inputs = {"supportLevel": "high", "candidates": candidates, "faithfulnessScore": 0.95, **total_inputs}
    assert compute_confidence(inputs).recommended_action == action


def test_production_preset_requires_evaluator_signals() -> None:
    card = compute_confidence(
        {"supportLevel": "high", "hasConflict": False, "candidates": [cand(0.9, documentId="a")]},
        {"preset": "production-v0.3"},
    )
    assert card.recommended_action == "review"
    assert card.meta.missing_signals == ["faithfulnessScore", "answerRelevanceScore"]


@pytest.mark.parametrize(
    ("config", "action"),
    [
        (
            {"signalPolicy": {"abstainWhenMissing": ["faithfulnessScore"]}},
            "answer",
        ),  # not required: no effect
        ({"signalPolicy": {"require": ["faithfulnessScore"]}}, "answer"),  # required alone: a warning only
        (
            {"signalPolicy": {"require": ["faithfulnessScore"], "abstainWhenMissing": ["faithfulnessScore"]}},
            "abstain",
        ),
        (
            {"signalPolicy": {"require": ["faithfulnessScore"], "reviewWhenMissing": ["faithfulnessScore"]}},
            "review",
        ),
        # the production preset's support evaluator is not in ``require``: it forces review, never abstain
        (
            {"preset": "production-v0.3", "signalPolicy": {"abstainWhenMissing": ["faithfulnessScore"]}},
            "review",
        ),
    ],
)
def test_missing_signal_gates_act_only_on_required_signals(config: dict[str, Any], action: str) -> None:
    inputs = {
        "supportLevel": "high",
        "hasConflict": False,
        "answerRelevanceScore": 0.95,
        "candidates": [cand(0.9, documentId=d) for d in "xyz"],
    }
    assert compute_confidence(inputs, config).recommended_action == action


def test_the_readme_states_the_missing_signal_gates_as_they_work() -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    policy = " ".join(readme[readme.index("The action policy, first match") :].split("\n\n")[0].split())
    assert "a signal listed in `abstainWhenMissing` missing" not in policy
    assert "`signalPolicy.require`" in policy and "only choose the action for required signals" in policy


def test_a_config_dict_changed_in_place_is_not_served_from_the_cache() -> None:
    inputs = {
        "supportLevel": "high",
        "hasConflict": False,
        "candidates": [cand(0.9, documentId=f"d{i}") for i in range(3)],
    }
    config: dict[str, Any] = {"actionPolicy": {"answerAt": 65}}
    assert compute_confidence(inputs, config).recommended_action == "answer"
    config["actionPolicy"]["answerAt"] = 101  # same dict object, new content
    assert compute_confidence(inputs, config).recommended_action == "review"
    config["retrieval"] = {"topK": 0}
    with pytest.raises(ConfigValidationError):
        compute_confidence(inputs, config)


@pytest.mark.parametrize(
    ("path", "valid", "invalid"),
    [
        (("relevance", "required"), True, 1),  # 1 == True, but a number is not a boolean
        (("weights", "grounding"), 1.0, True),  # True == 1.0, but a boolean is not a number
        (("weights", "grounding"), 1, True),
        (("indexIntegrity", "requireAclFilterConfirmation"), False, 0.0),
    ],
)
def test_a_config_changed_in_place_to_an_equal_value_of_another_type_is_validated_again(
    path: tuple[str, str], valid: Any, invalid: Any
) -> None:
    inputs = {"supportLevel": "high", "hasConflict": False, "candidates": []}
    section, key = path
    config: dict[str, Any] = {section: {key: valid}}
    compute_confidence(inputs, config)
    config[section][key] = invalid
    assert config == {section: {key: valid}}  # equal by Python's ==, and still refused
    with pytest.raises(ConfigValidationError, match=key):
        compute_confidence(inputs, config)


def test_an_unchanged_config_dict_is_prepared_once_and_int_and_float_are_told_apart() -> None:
    from rag_confidence.scoring.api import _prepared

    config: dict[str, Any] = {"weights": {"grounding": 1}, "actionPolicy": {"reviewOnWarnings": []}}
    first = _prepared(config)
    assert _prepared(config) is first
    config["weights"]["grounding"] = 1.0
    assert _prepared(config) is not first
    nested_model: dict[str, Any] = {"weights": Weights(grounding=1)}
    assert _prepared(nested_model) is not _prepared(nested_model)  # could change unseen: never cached
