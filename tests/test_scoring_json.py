"""Scorecards as JSON: what the models write must read back, and the printed JSON Schema must describe it."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from rag_confidence import compute_confidence
from rag_confidence.cli import schemas
from rag_confidence.models import ConfidenceScorecard
from rag_confidence.scoring._js import js_str
from rag_confidence.scoring.serialize import js_json, to_reference_json

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


# --- rag-confidence schema: the config and inputs schemas agree with what the API accepts ---------------------
def _property(schema: dict[str, Any], path: str) -> dict[str, Any]:
    """The schema of a dotted config/inputs path, in the published schema."""
    node = schema
    for key in path.split("."):
        node = _resolve(node, schema)
        if "anyOf" in node:
            node = next(b for b in node["anyOf"] if b.get("type") != "null")
            node = _resolve(node, schema)
        node = node["properties"][key]
    return node


def _keywords_accept(node: dict[str, Any], value: Any) -> bool:
    """The value keywords of one non-null branch (enum and numeric bounds; not types or formats)."""
    branch = next(b for b in node.get("anyOf", [node]) if b.get("type") != "null")
    checks = [
        "enum" not in branch or value in branch["enum"],
        "minimum" not in branch or value >= branch["minimum"],
        "maximum" not in branch or value <= branch["maximum"],
        "exclusiveMinimum" not in branch or value > branch["exclusiveMinimum"],
        "multipleOf" not in branch or value % branch["multipleOf"] == 0,
    ]
    return all(checks)


def _nested(path: str, value: Any) -> dict[str, Any]:
    result: dict[str, Any] = {}
    node = result
    keys = path.split(".")
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = value
    return result


def _api_accepts(config: dict[str, Any]) -> bool:
    try:
        compute_confidence({"supportLevel": "high", "candidates": []}, config)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize(
    ("path", "bad", "good"),
    [
        ("retrieval.topK", 0, 1),
        ("retrieval.topK", 2.5, 3.0),
        ("retrieval.minConfirmedMethods", 0, 2),
        ("retrieval.duplicateContent.mode", "penalise", "penalize"),
        ("retrieval.duplicateContent.penaltyPerDuplicate", -0.5, 0),
        ("retrieval.duplicateContent.maxPenalty", -1, 0),
        ("retrieval.rankPenalty.mode", "Diagnostic", "diagnostic"),
        ("retrieval.rankPenalty.afterRank", 0, 1),
        ("retrieval.rankPenalty.penaltyPerRank", -1, 0.5),
        ("retrieval.rankPenalty.maxPenalty", -1, 0),
        ("corpus.expectedTypeCount", 0, 1),
        ("freshness.penaltyPerMonth", -1, 0),
        ("indexIntegrity.maxFailedIngestionsForFullScore", -1, 0),
        ("indexIntegrity.maxFailedIngestionsForFullScore", 1.5, 2),
        ("indexIntegrity.staleRatioWarnAt", 1.5, 0),
        ("indexIntegrity.staleRatioZeroAt", -0.1, 1),
        *[(f"weights.{name}", bad, 0.5) for name in ("grounding", "indexIntegrity") for bad in (0, -1)],
    ],
)
def test_the_config_schema_states_the_value_rules_the_api_enforces(path: str, bad: Any, good: Any) -> None:
    schema = schemas()["config"]
    node = _property(schema, path)
    assert not _api_accepts(_nested(path, bad)) and not _keywords_accept(node, bad)
    assert _api_accepts(_nested(path, good)) and _keywords_accept(node, good)
    assert {"type": "null"} in node["anyOf"]  # null ("not given") stays valid


def test_the_published_schemas_read_every_date_time_form_the_api_reads() -> None:
    for schema, path in ((schemas()["inputs"], "candidates"), (schemas()["config"], "freshness.now")):
        if path == "candidates":
            node = _resolve(_property(schema, path)["items"], schema)["properties"]["lastUpdated"]
        else:
            node = _property(schema, path)
        forms = [b for b in node["anyOf"] if b.get("type") != "null"]
        flat = [f for b in forms for f in b.get("anyOf", [b])]
        assert {"type": "string", "format": "date-time"} in flat
        assert {"type": "string", "format": "date"} in flat
        pattern = next(f["pattern"] for f in flat if "pattern" in f)
        for text in ("2025-01-01T00:00:00", "2025-01-01 00:00", "2025-01-01T00:00:00.123456"):
            assert re.match(pattern, text), text
            assert _api_accepts({"freshness": {"now": text}})
        assert not re.match(pattern, "2025-01-01T00:00:00Z")  # with an offset: format date-time's part


def test_the_published_schemas_say_they_describe_the_camel_case_shape() -> None:
    text = json.dumps(schemas())
    assert "x-rag-confidence-wire" not in text
    for name in ("inputs", "config"):
        description = schemas()[name]["description"]
        assert "camelCase" in description and "snake_case" in description


def test_the_checker_compiled_from_the_models_keeps_the_validators_messages() -> None:
    # The value rules live in the published schema only: errors keep the reference's order and wording.
    with pytest.raises(ValueError, match=r"^retrieval\.topK must be an integer >= 1\.$"):
        compute_confidence(
            {"supportLevel": "high", "candidates": []},
            {"retrieval": {"topK": 0, "duplicateContent": {"mode": "penalise"}}},
        )


def test_the_published_schemas_validate_the_api_examples() -> None:
    import jsonschema  # the test extra installs it

    published = schemas()
    validator = jsonschema.Draft202012Validator(published["config"])
    assert validator.is_valid({"retrieval": {"topK": 3, "duplicateContent": {"mode": "penalize"}}})
    assert not validator.is_valid({"retrieval": {"duplicateContent": {"mode": "penalise"}}})
    assert not validator.is_valid({"weights": {"grounding": -1}})
    inputs = jsonschema.Draft202012Validator(published["inputs"])
    candidate = {"retrievalScores": {"s": 0.9}, "combinedScore": 0.9, "lastUpdated": "2025-01-01"}
    assert inputs.is_valid({"supportLevel": "high", "candidates": [candidate]})


# What node's JSON.stringify wrote, recorded by tests/fixtures/js_json/record.py (see its docstring).
NODE = json.loads((Path(__file__).parent / "fixtures" / "js_json" / "node_json.json").read_text())


@pytest.mark.parametrize(("number", "expected"), NODE["numbers"], ids=[row[0] for row in NODE["numbers"]])
def test_numbers_are_written_as_javascript_writes_them(number: str, expected: str) -> None:
    assert js_json(float(number)) == expected
    assert js_json([float(number)], indent=2) == f"[\n  {expected}\n]"
    # String(x), which explanations quote, writes a finite number as JSON.stringify does.
    if expected != "null":
        assert js_str(float(number)) == expected


def test_large_ints_are_written_as_the_double_javascript_holds() -> None:
    recorded = dict(NODE["numbers"])
    assert js_json(2**60) == recorded[repr(2.0**60)]
    assert js_json(2**53 + 1) == recorded[repr(2.0**53)]


def test_ints_past_a_doubles_range_are_written_as_javascript_writes_infinity() -> None:
    # JavaScript holds such a number as Infinity, which JSON.stringify writes as null; a scorecard echoes input
    # counts of any size in its diagnostics, and writing one must not raise.
    assert js_json([10**400, -(10**400)]) == "[null,null]"
    assert js_json(2**1023) == js_json(2.0**1023) == "8.98846567431158e+307"

    # An input count that large is the reference's Infinity from the start (scoring/_plain.py), so the card is
    # the one Infinity gives, and it is written without raising.
    def card(total_claims: float) -> Any:
        return compute_confidence(
            {
                "supportLevel": "high",
                "hasConflict": False,
                "candidates": [{"retrievalScores": {"s": 0.9}, "combinedScore": 0.9}],
                "claimSupport": {"totalClaims": total_claims, "supportedClaims": 5},
            }
        )

    assert to_reference_json(card(10**400)) == to_reference_json(card(math.inf))


@pytest.mark.parametrize("row", NODE["strings"], ids=[str(index) for index in range(len(NODE["strings"]))])
def test_strings_are_escaped_as_javascript_escapes_them(row: list[Any]) -> None:
    code_units, expected = row
    text = b"".join(unit.to_bytes(2, "little") for unit in code_units).decode("utf-16-le", "surrogatepass")
    assert js_json(text) == expected
    assert js_json({text: text}) == "{" + expected + ":" + expected + "}"


@pytest.mark.parametrize("case", NODE["cards"], ids=[str(index) for index in range(len(NODE["cards"]))])
def test_scorecard_json_is_what_json_stringify_writes(case: dict[str, Any]) -> None:
    card = compute_confidence(case["inputs"], case["config"])
    compact, indented = case["json"]
    assert to_reference_json(card) == compact
    assert to_reference_json(card, indent=2) == indented


def test_a_surrogate_pair_held_as_two_code_points_is_one_character() -> None:
    # JavaScript strings are UTF-16: two such code points are the pair JSON.stringify writes as the character.
    recorded = {tuple(units): text for units, text in NODE["strings"]}
    assert js_json("\ud83d\ude00") == recorded[(0xD83D, 0xDE00)]
