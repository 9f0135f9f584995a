"""Properties of the scoring core over generated inputs (hypothesis)."""

from __future__ import annotations

import copy
import datetime
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from rag_confidence import compute_confidence, create_scorer, merge_evaluation_signals
from rag_confidence.errors import InputValidationError
from rag_confidence.scoring.api import plain_inputs
from rag_confidence.scoring.models import ScoringInputs

unit = st.floats(min_value=0, max_value=1, allow_nan=False)
counts = st.integers(min_value=0, max_value=12)
methods = st.sampled_from(["semantic", "keyword", "rerank", "graph"])
dates = st.datetimes(
    min_value=datetime.datetime(2015, 1, 1),
    max_value=datetime.datetime(2027, 1, 1),
    timezones=st.just(datetime.timezone.utc),
)

candidate = st.fixed_dictionaries(
    {"retrievalScores": st.dictionaries(methods, unit, max_size=4), "combinedScore": unit},
    optional={
        "documentId": st.sampled_from(["a", "b", "c", "d", "e"]),
        "documentType": st.sampled_from(["Policy", "Bylaws", "FAQ", "Blog Post"]),
        "authorityRank": st.integers(min_value=1, max_value=50),
        "isAmendment": st.booleans(),
        "extractionQuality": unit,
        "lastUpdated": dates,
        "contentHash": st.sampled_from(["h1", "h2", "h3"]),
        "rank": st.integers(min_value=1, max_value=15),
    },
)
claims = st.integers(min_value=1, max_value=10).flatmap(
    lambda total: st.fixed_dictionaries(
        {"totalClaims": st.just(total), "supportedClaims": st.integers(min_value=0, max_value=total)},
        optional={"contradictedClaims": st.integers(min_value=0, max_value=1)},
    )
)
finite_inputs = st.fixed_dictionaries(
    {
        "supportLevel": st.sampled_from(["high", "medium", "low"]),
        "candidates": st.lists(candidate, max_size=8),
    },
    optional={
        "ambiguityNotes": st.one_of(st.none(), st.text(max_size=5)),
        "requiresExpertReview": st.booleans(),
        "externalConstraintNote": st.one_of(st.none(), st.text(max_size=5)),
        "documentsSilent": st.booleans(),
        "hasConflict": st.booleans(),
        "conflictingCandidateCount": counts,
        "queryComplexity": st.sampled_from(["direct", "inferential", "multi-hop", "comparative"]),
        "faithfulnessScore": unit,
        "claimSupport": claims,
        "citationCount": counts,
        "citationCoverageScore": unit,
        "invalidCitationCount": counts,
        "answerRelevanceScore": unit,
        "corpusTypeCount": counts,
        "missingRelevantType": st.booleans(),
        "indexIntegrity": st.fixed_dictionaries(
            {},
            optional={
                "expectedEmbeddingModelVersion": st.sampled_from(["v1", "v2"]),
                "actualEmbeddingModelVersion": st.sampled_from(["v1", "v2"]),
                "sourceVersionMatchRatio": unit,
                "staleIndexedDocumentRatio": unit,
                "failedIngestionCount": counts,
                "aclFilterConfirmed": st.booleans(),
                "deletedSourceLeakageCount": counts,
            },
        ),
    },
)
configs = st.fixed_dictionaries(
    {},
    optional={
        "preset": st.sampled_from(["legacy-v0.2", "balanced-v0.3", "production-v0.3"]),
        "relevance": st.fixed_dictionaries({}, optional={"required": st.booleans()}),
        "authority": st.fixed_dictionaries(
            {}, optional={"aggregation": st.sampled_from(["weighted", "best"])}
        ),
        "corpus": st.just({"expectedTypeCount": 5}),
        "freshness": st.just({"now": datetime.datetime(2026, 6, 1, tzinfo=datetime.timezone.utc)}),
        "indexIntegrity": st.just({}),
        "weights": st.fixed_dictionaries(
            {}, optional={"grounding": st.integers(1, 50), "authority": st.integers(1, 50)}
        ),
    },
)
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(finite_inputs, configs)
def test_finite_inputs_give_an_int_total_and_consistent_breakdowns(
    inputs: dict[str, Any], config: dict[str, Any]
) -> None:
    card = compute_confidence(inputs, config)
    assert isinstance(card.total, int)
    assert 0 <= card.total <= 100
    assert card.recommended_action in ("answer", "review", "abstain")
    active = card.meta.active_dimensions
    assert active[:3] == ["grounding", "retrieval", "consistency"]
    assert list(card.meta.weights) == active
    assert card.meta.max_possible == pytest.approx(sum(card.meta.weights.values()))
    dumped = card.model_dump(by_alias=True)["dimensions"]
    assert {name for name, value in dumped.items() if value is not None} == set(active)
    for name in active:
        dim = dumped[name]
        assert dim["breakdown"]["raw"] == dim["raw"]
        assert 0 <= dim["raw"] <= dim["max"]
        adjustments = dim["breakdown"]["adjustments"]
        if "clamp" in adjustments or "cap" in adjustments:
            correction = adjustments.get("clamp", 0) + adjustments.get("cap", 0)
            assert dim["breakdown"]["uncappedRaw"] + correction == pytest.approx(dim["raw"])
        if name != "freshness":  # freshness normalizes its unrounded value
            assert dim["normalized"] == math.floor(dim["raw"] / dim["max"] * 100 + 0.5)
    codes = [w.code for w in card.meta.warnings]
    keys = [(w.code, w.path, w.message) for w in card.meta.warnings]
    assert len(keys) == len(set(keys))
    if inputs.get("documentsSilent") is True:
        assert card.recommended_action == "abstain"
        assert card.tier1 is not None and card.tier1.label == "Not Addressed"
    if "missing-conflict-signal" in codes and not config.get("actionPolicy"):
        assert card.recommended_action != "answer"


@SETTINGS
@given(finite_inputs, configs)
def test_same_inputs_same_scorecard(inputs: dict[str, Any], config: dict[str, Any]) -> None:
    first = compute_confidence(inputs, config).model_dump(by_alias=True)
    again = compute_confidence(copy.deepcopy(inputs), copy.deepcopy(config)).model_dump(by_alias=True)
    via_scorer = create_scorer(config).compute(inputs).model_dump(by_alias=True)
    via_model = compute_confidence(ScoringInputs.model_validate(inputs), config).model_dump(by_alias=True)
    assert first == again == via_scorer == via_model


wild_number = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.integers(min_value=-(10**6), max_value=10**6)
)
wild_candidate = st.fixed_dictionaries(
    {"retrievalScores": st.dictionaries(methods, wild_number, max_size=3), "combinedScore": wild_number},
    optional={
        "extractionQuality": wild_number,
        "authorityRank": wild_number,
        "rank": wild_number,
        "lastUpdated": dates,
    },
)
wild_inputs = st.fixed_dictionaries(
    {
        "supportLevel": st.sampled_from(["high", "medium", "low"]),
        "candidates": st.lists(wild_candidate, max_size=3),
    },
    optional={
        "faithfulnessScore": wild_number,
        "citationCoverageScore": wild_number,
        "invalidCitationCount": wild_number,
        "citationCount": wild_number,
        "answerRelevanceScore": wild_number,
        "conflictingCandidateCount": wild_number,
        "corpusTypeCount": wild_number,
        "claimSupport": st.fixed_dictionaries({"totalClaims": wild_number, "supportedClaims": wild_number}),
        "indexIntegrity": st.fixed_dictionaries(
            {}, optional={"sourceVersionMatchRatio": wild_number, "failedIngestionCount": wild_number}
        ),
    },
)
wild_config = st.sampled_from(
    [
        None,
        {"authority": {}},
        {"corpus": {"expectedTypes": []}},
        {"indexIntegrity": {}, "preset": "production-v0.3"},
    ]
)


@SETTINGS
@given(wild_inputs, wild_config)
def test_warn_mode_never_raises_on_model_valid_inputs(
    inputs: dict[str, Any], config: dict[str, Any] | None
) -> None:
    ScoringInputs.model_validate(inputs)  # the precondition: the inputs are well-typed
    card = compute_confidence(inputs, config)
    assert card.label in ("Strong", "Moderate", "Limited", "Insufficient")
    card.model_dump_json()


@SETTINGS
@given(wild_inputs)
def test_strict_mode_raises_exactly_when_warn_mode_reports_input_problems(inputs: dict[str, Any]) -> None:
    warned = compute_confidence(inputs)
    early_codes = {"input-out-of-range", "documents-silent", "missing-candidates"}
    expect_raise = any(w.code in early_codes for w in warned.meta.warnings)
    try:
        compute_confidence(inputs, {"validation": "strict"})
    except InputValidationError as error:
        assert expect_raise, error
        assert error.path is not None and error.path in str(error)
    else:
        assert not expect_raise


json_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=False), st.text(max_size=4)
)
json_value = st.recursive(
    json_scalar,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)
field_names = st.sampled_from(
    [
        "supportLevel",
        "candidates",
        "hasConflict",
        "faithfulnessScore",
        "claimSupport",
        "presentTypes",
        "indexIntegrity",
        "citationCount",
        "support_level",
        "unknownField",
    ]
)
candidate_fields = st.sampled_from(
    ["retrievalScores", "combinedScore", "documentId", "isAmendment", "rank", "combined_score", "lastUpdated"]
)


@settings(max_examples=500, deadline=None)
@given(finite_inputs, st.data())
def test_fast_validation_agrees_with_the_models(inputs: dict[str, Any], data: st.DataObject) -> None:
    """The hot-path validator is compiled from the models' schema: both must accept and reject the same data."""
    mutated = copy.deepcopy(inputs)
    for key in mutated.get("candidates", []):
        key.pop(
            "lastUpdated", None
        )  # pydantic and fromisoformat disagree on exotic date strings; dates are tested apart
    if data.draw(st.booleans()):
        mutated[data.draw(field_names)] = data.draw(json_value)
    elif mutated["candidates"]:
        target = data.draw(st.sampled_from(mutated["candidates"]))
        target[data.draw(candidate_fields)] = data.draw(json_value)
    try:
        ScoringInputs.model_validate(mutated)
        model_ok = True
    except ValidationError:
        model_ok = False
    try:
        plain_inputs(mutated)
        fast_ok = True
    except InputValidationError:
        fast_ok = False
    assert fast_ok == model_ok, mutated


@pytest.mark.parametrize(
    ("inputs", "path"),
    [
        (
            {"supportLevel": "high", "candidates": [{"retrievalScores": {}, "combinedScore": "0.9"}]},
            "candidates[0].combinedScore",
        ),
        (
            {"supportLevel": "high", "candidates": [{"retrievalScores": {"a": True}, "combinedScore": 1}]},
            "candidates[0].retrievalScores.a",
        ),
        (
            {"supportLevel": "high", "candidates": [], "claimSupport": {"totalClaims": 2}},
            "claimSupport.supportedClaims",
        ),
        ({"supportLevel": "sure", "candidates": []}, "supportLevel"),
        ({"candidates": []}, "supportLevel"),
        ({"supportLevel": "high", "candidates": [], "faithfulness": 0.9}, "faithfulness"),
        (
            {
                "supportLevel": "high",
                "candidates": [{"retrievalScores": {}, "combinedScore": 1, "lastUpdated": "yesterday"}],
            },
            "candidates[0].lastUpdated",
        ),
    ],
)
def test_wrong_types_name_the_field_path(inputs: dict[str, Any], path: str) -> None:
    with pytest.raises(InputValidationError) as caught:
        compute_confidence(inputs)
    assert caught.value.path == path
    assert str(caught.value).startswith(path)
    # merge_evaluation_signals reads the same inputs and fails the same typed way (not with pydantic's error).
    with pytest.raises(InputValidationError) as merged:
        merge_evaluation_signals(inputs, {"faithfulnessScore": 0.9})
    assert merged.value.path == path


def test_snake_case_and_iso_dates_are_accepted() -> None:
    camel = compute_confidence(
        {
            "supportLevel": "high",
            "hasConflict": False,
            "candidates": [
                {"retrievalScores": {"a": 0.9}, "combinedScore": 0.9, "lastUpdated": "2025-12-01T00:00:00Z"}
            ],
        },
        {"freshness": {"now": "2026-01-01T00:00:00Z"}},
    )
    snake = compute_confidence(
        {
            "support_level": "high",
            "has_conflict": False,
            "candidates": [
                {
                    "retrieval_scores": {"a": 0.9},
                    "combined_score": 0.9,
                    "last_updated": datetime.datetime(2025, 12, 1, tzinfo=datetime.timezone.utc),
                }
            ],
        },
        {"freshness": {"now": datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)}},
    )
    assert camel.model_dump() == snake.model_dump()
    assert camel.dimensions.freshness is not None and camel.dimensions.freshness.raw == 15


def test_an_unknown_preset_or_validation_mode_scores_as_the_reference_and_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    inputs = {"supportLevel": "high", "hasConflict": False, "candidates": []}
    with caplog.at_level("WARNING", logger="rag_confidence.scoring.validation"):
        typo = compute_confidence(inputs, {"preset": "production-v03-typo", "validation": "Strict-typo"})
        compute_confidence(inputs, {"preset": "production-v03-typo", "validation": "Strict-typo"})
    assert typo.total == compute_confidence(inputs).total  # the reference's defaults: no error
    messages = [record.getMessage() for record in caplog.records]
    assert sum("production-v03-typo" in message for message in messages) == 1
    assert sum("Strict-typo" in message for message in messages) == 1


def test_unknown_codes_and_signal_names_in_policy_lists_score_as_the_reference_and_are_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    inputs = {
        "supportLevel": "high",
        "hasConflict": False,
        "answerRelevanceScore": 0.95,
        "candidates": [
            {"retrievalScores": {"a": 0.9, "b": 0.9}, "combinedScore": 0.9, "documentId": d} for d in "xyz"
        ],
    }
    config = {
        "actionPolicy": {
            "abstainOnWarnings": ["missing_faithfulness-typo"],
            "reviewOnWarnings": ["documents-silent"],
        },
        "signalPolicy": {"require": ["faithfulnessScore"], "abstainWhenMissing": ["faithfulnes-typo"]},
    }
    with caplog.at_level("WARNING", logger="rag_confidence.scoring.validation"):
        card = compute_confidence(inputs, config)
        create_scorer(copy.deepcopy(config))
    assert card.recommended_action == "answer"  # the typos match nothing, in the reference too
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 2, messages
    code, signal = sorted(messages, key=lambda m: "signal" in m)
    assert "'missing_faithfulness-typo' in actionPolicy.abstainOnWarnings" in code
    assert "did you mean 'missing-faithfulness'?" in code
    assert "'faithfulnes-typo' in signalPolicy.abstainWhenMissing" in signal
    assert "did you mean 'faithfulnessScore'?" in signal
    caplog.clear()
    with caplog.at_level("WARNING", logger="rag_confidence.scoring.validation"):
        compute_confidence(
            inputs, {"signalPolicy": {"require": ["zzzz-typo"]}, "preset": "production-v3-typo"}
        )
    messages = [record.getMessage() for record in caplog.records]
    assert any("'zzzz-typo' in signalPolicy.require:" in m and "'indexIntegrity'" in m for m in messages)
    assert any("did you mean 'production-v0.3'?" in m for m in messages)
