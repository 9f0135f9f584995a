"""Evaluator bridges on the values evaluation frameworks really hand out (numpy scalars, NaN for a failed metric)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from rag_confidence import (
    compute_confidence,
    from_custom_judge,
    from_deepeval_like,
    from_ragas_like,
    from_trulens_like,
    merge_evaluation_signals,
)
from rag_confidence.errors import InputValidationError


@pytest.mark.parametrize(
    "value", [np.float64(0.75), np.float32(0.75), np.float16(0.75), Fraction(3, 4)], ids=type
)
def test_the_bridges_keep_real_numbers_of_any_type_as_python_floats(value: Any) -> None:
    cases = [
        from_ragas_like({"faithfulness": value, "answer_relevancy": value}),
        from_deepeval_like({"faithfulnessScore": value, "answerRelevancyScore": value}),
        from_deepeval_like({"metric": "Faithfulness", "score": value, "answerRelevancyScore": value}),
        from_trulens_like({"groundedness": value, "answer_relevance": value}),
        from_custom_judge({"faithfulnessScore": value, "answerRelevanceScore": value}),
    ]
    for signals in cases:
        assert signals.faithfulness_score == 0.75 and type(signals.faithfulness_score) is float
        assert signals.answer_relevance_score == 0.75 and type(signals.answer_relevance_score) is float


def test_custom_judge_counts_from_a_dataframe_row_are_kept() -> None:
    signals = from_custom_judge(
        {
            "totalClaims": np.int64(5),
            "supportedClaims": np.int64(4),
            "contradictedClaims": np.uint8(1),
            "citationCount": np.int32(3),
            "invalidCitationCount": np.int64(0),
            "conflictingCandidateCount": np.int16(0),
            "hasConflict": False,
        }
    )
    assert signals.claim_support is not None
    claims = signals.claim_support.model_dump(exclude_none=True)
    assert claims == {"total_claims": 5, "supported_claims": 4, "contradicted_claims": 1}
    assert (signals.citation_count, signals.invalid_citation_count, signals.conflicting_candidate_count) == (
        3,
        0,
        0,
    )


@pytest.mark.parametrize("value", [True, False, np.bool_(True), "0.9", None, [0.9]], ids=repr)
def test_the_bridges_still_drop_booleans_and_non_numbers(value: Any) -> None:
    assert from_ragas_like({"faithfulness": value}).faithfulness_score is None
    assert from_custom_judge({"citationCount": value}).citation_count is None


def test_a_nan_metric_passes_through_a_bridge_as_the_reference_does() -> None:
    # Ragas writes NaN for a metric that failed. The reference keeps it (golden cases pin this): it counts as
    # measured, so it is not a missing signal and a policy requiring it is satisfied. The README and the module
    # docstring say so; this pins the behaviour and the documented way to have it count as missing.
    candidates = [
        {"retrievalScores": {"a": 0.9, "b": 0.9}, "combinedScore": 0.9, "documentId": d} for d in "xyz"
    ]
    base = {
        "supportLevel": "high",
        "hasConflict": False,
        "answerRelevanceScore": 0.9,
        "candidates": candidates,
    }
    row = {"faithfulness": np.float64("nan"), "answer_relevancy": np.float64(0.9)}
    signals = from_ragas_like(row)
    assert signals.faithfulness_score is not None and math.isnan(signals.faithfulness_score)
    card = compute_confidence(merge_evaluation_signals(base, signals).inputs, {"preset": "production-v0.3"})
    assert card.meta.missing_signals == []
    assert "input-out-of-range" in [w.code for w in card.meta.warnings]

    measured = {k: v for k, v in row.items() if not math.isnan(v)}
    card = compute_confidence(
        merge_evaluation_signals(base, from_ragas_like(measured)).inputs, {"preset": "production-v0.3"}
    )
    assert card.meta.missing_signals == ["faithfulnessScore"] and card.recommended_action == "review"


BASE = {
    "supportLevel": "high",
    "hasConflict": False,
    "candidates": [{"retrievalScores": {"a": 0.9}, "combinedScore": 0.9, "documentId": d} for d in "xyz"],
}


def test_a_nan_answer_relevance_raises_no_warning_as_the_readme_says() -> None:
    # The algorithm range-checks faithfulness, not answer relevance: a failed answer_relevancy scores 0 of 15
    # with no warning, so reviewOnWarnings cannot catch it (the README says to drop NaN values instead).
    row = {"faithfulness": np.float64(0.95), "answer_relevancy": np.float64("nan")}
    inputs = merge_evaluation_signals(BASE, from_ragas_like(row)).inputs
    config = {"preset": "production-v0.3", "actionPolicy": {"reviewOnWarnings": ["input-out-of-range"]}}
    card = compute_confidence(inputs, config)
    assert card.dimensions.relevance is not None and card.dimensions.relevance.raw == 0
    assert "input-out-of-range" not in [w.code for w in card.meta.warnings]
    dropped = {k: v for k, v in row.items() if not math.isnan(v)}
    inputs = merge_evaluation_signals(BASE, from_ragas_like(dropped)).inputs
    assert "answerRelevanceScore" in (compute_confidence(inputs, config).meta.missing_signals or [])


@pytest.mark.parametrize(
    "bridge", [from_ragas_like, from_deepeval_like, from_trulens_like, from_custom_judge]
)
@pytest.mark.parametrize("result", [[{"name": "Faithfulness", "score": 0.8}], 0.8, None], ids=repr)
def test_a_bridge_given_no_mapping_raises_a_typed_error(bridge: Any, result: Any) -> None:
    # DeepEval hands out a list of per-metric results: it failed on its first lookup with an AttributeError.
    with pytest.raises(
        InputValidationError, match=rf"{bridge.__name__} takes one mapping of scores"
    ) as raised:
        bridge(result)
    assert isinstance(raised.value, ValueError)


def test_a_bridge_reads_any_row_with_get_like_a_pandas_series() -> None:
    # ``for _, row in results.to_pandas().iterrows(): from_ragas_like(row)``: a Series is no Mapping but has
    # get(). pandas is not a test dependency; this class has the one method the bridges use.
    class Row:
        def __init__(self, **values: Any) -> None:
            self._values = values

        def get(self, key: str, default: Any = None) -> Any:
            return self._values.get(key, default)

    signals = from_ragas_like(Row(faithfulness=np.float64(0.91), answer_relevancy=np.float64(0.8)))
    assert (signals.faithfulness_score, signals.answer_relevance_score) == (0.91, 0.8)


def test_compute_confidence_takes_numpy_scores_as_numbers() -> None:
    # FAISS and most vector stores hand back np.float32 scores (no float subclass), ids as np.int64.
    plain = {
        "supportLevel": "high",
        "hasConflict": False,
        "citationCount": 3,
        "candidates": [
            {
                "retrievalScores": {"semantic": 0.875, "keyword": 0.5},
                "combinedScore": 0.875,
                "documentId": "a",
            },
            {"retrievalScores": {"semantic": 0.75}, "combinedScore": 0.75, "documentId": "b"},
        ],
    }
    numpy_typed = {
        **plain,
        "citationCount": np.int64(3),
        "candidates": [
            {
                "retrievalScores": {"semantic": np.float32(0.875), "keyword": np.float16(0.5)},
                "combinedScore": np.float32(0.875),
                "documentId": "a",
            },
            {
                "retrievalScores": {"semantic": np.float64(0.75)},
                "combinedScore": np.float64(0.75),
                "documentId": "b",
            },
        ],
    }
    assert compute_confidence(numpy_typed).model_dump() == compute_confidence(plain).model_dump()


def test_a_numpy_bool_is_named_as_such_when_refused() -> None:
    with pytest.raises(InputValidationError, match=r"hasConflict: expected a boolean, got a numpy\.bool"):
        compute_confidence({"supportLevel": "high", "hasConflict": np.bool_(False)})
