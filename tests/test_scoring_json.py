"""Scorecards as JSON: what the models write must read back, and the printed JSON Schema must describe it."""

from __future__ import annotations

import math
from typing import Any

import pytest

from rag_confidence import compute_confidence
from rag_confidence.cli import schemas
from rag_confidence.models import ConfidenceScorecard
from rag_confidence.scoring.serialize import to_reference_json

NAN = float("nan")
INF = float("inf")


def same(left: Any, right: Any) -> bool:
    """Deep equality in which NaN equals NaN (and an int equals the float of the same value)."""
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(same(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(same(a, b) for a, b in zip(left, right, strict=True))
    if isinstance(left, float) and isinstance(right, float) and math.isnan(left) and math.isnan(right):
        return True
    return bool(left == right) and isinstance(left, bool) == isinstance(right, bool)


def non_finite_card(value: float) -> ConfidenceScorecard:
    return compute_confidence(
        {
            "supportLevel": "high",
            "hasConflict": False,
            "faithfulnessScore": value,
            "answerRelevanceScore": value,
            "candidates": [
                {
                    "retrievalScores": {"semantic": value},
                    "combinedScore": value,
                    "documentId": "a",
                    "authorityRank": 5,
                }
            ],
        },
        {"authority": {}},
    )


def null_paths(value: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in null_paths(item, (*path, key))]
    if isinstance(value, list):
        return [p for index, item in enumerate(value) for p in null_paths(item, (*path, str(index)))]
    return [path] if value is None else []


@pytest.mark.parametrize("value", [NAN, INF], ids=["nan", "inf"])
def test_a_scorecard_with_non_finite_numbers_reads_back_from_its_json(value: float) -> None:
    card = non_finite_card(value)
    assert not math.isfinite(card.dimensions.retrieval.breakdown.diagnostics["avgEffectiveScore"])  # type: ignore[index,arg-type]
    # In Python the numbers stay floats; only JSON writes them as null.
    dumped = card.model_dump(by_alias=True)
    assert all(v is not None for v in dumped["dimensions"]["grounding"]["breakdown"]["diagnostics"].values())
    for text in (card.model_dump_json(by_alias=True), card.model_dump_json()):
        back = ConfidenceScorecard.model_validate_json(text)
        assert back.model_dump_json(by_alias=True) == card.model_dump_json(by_alias=True)
        if value != value:  # NaN reads back as NaN: the card is equal, NaN compared as NaN
            assert same(back.model_dump(by_alias=True), dumped)
    # The reference's JSON writes integral floats as integers, so compare in that form.
    back = ConfidenceScorecard.model_validate_json(to_reference_json(card))
    assert to_reference_json(back) == to_reference_json(card)


def test_a_nan_total_reads_back_as_nan() -> None:
    card = non_finite_card(INF)
    assert math.isnan(card.total)
    back = ConfidenceScorecard.model_validate_json(to_reference_json(card))
    assert math.isnan(back.total) and back.tier1 is not None and math.isnan(back.tier1.score)


def test_null_is_read_as_nan_only_where_a_number_is_expected() -> None:
    card = non_finite_card(NAN)
    data = card.model_dump(by_alias=True, mode="json")
    data["label"] = None
    with pytest.raises(ValueError, match="label"):
        ConfidenceScorecard.model_validate(data)


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = root["$defs"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def _accepts_null_at(schema: dict[str, Any], path: tuple[str, ...], root: dict[str, Any]) -> bool:
    """Whether some branch of ``schema`` allows ``null`` at ``path`` (only the keywords pydantic writes)."""
    schema = _resolve(schema, root)
    if "anyOf" in schema:
        return any(_accepts_null_at(branch, path, root) for branch in schema["anyOf"])
    if not path:
        return schema.get("type") == "null"
    head, rest = path[0], path[1:]
    if head in schema.get("properties", {}):
        return _accepts_null_at(schema["properties"][head], rest, root)
    if isinstance(schema.get("additionalProperties"), dict):
        return _accepts_null_at(schema["additionalProperties"], rest, root)
    if "items" in schema:
        return _accepts_null_at(schema["items"], rest, root)
    return False


def test_the_scorecard_schema_allows_null_wherever_a_non_finite_number_is_written_as_null() -> None:
    scorecard = schemas()["scorecard"]
    for value in (NAN, INF):
        card = non_finite_card(value)
        paths = null_paths(card.model_dump(by_alias=True, mode="json"))
        assert ("dimensions", "retrieval", "breakdown", "diagnostics", "avgEffectiveScore") in paths
        for path in paths:
            assert _accepts_null_at(scorecard, path, scorecard), path
    # and not where the models would refuse it
    assert not _accepts_null_at(scorecard, ("label",), scorecard)
    assert not _accepts_null_at(scorecard, ("meta", "algorithmVersion"), scorecard)
