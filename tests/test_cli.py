"""The ``rag-confidence`` command line, run as a user runs it (a subprocess of the installed script)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rag_confidence import compute_confidence

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "quickstart.json"


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rag_confidence.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_score_prints_a_readable_scorecard() -> None:
    request = json.loads(EXAMPLE.read_text())
    expected = compute_confidence(request["inputs"], request["config"])
    result = run("score", str(EXAMPLE))
    assert result.returncode == 0, result.stderr
    first = result.stdout.splitlines()[0]
    assert f"{expected.total}/100" in first and expected.recommended_action in first
    for name in expected.meta.active_dimensions:
        assert any(line.strip().startswith(name) for line in result.stdout.splitlines())


def test_score_json_is_the_reference_shape() -> None:
    result = run("score", "--json", "-", stdin=json.dumps({"supportLevel": "medium", "candidates": []}))
    assert result.returncode == 0, result.stderr
    card = json.loads(result.stdout)
    assert set(card) == {
        "total",
        "label",
        "labelColor",
        "recommendedAction",
        "actionReason",
        "tier1",
        "tier2",
        "dimensions",
        "meta",
    }
    assert set(card["dimensions"]) == {"grounding", "retrieval", "consistency"}
    assert card["total"] == compute_confidence({"supportLevel": "medium", "candidates": []}).total


def test_jsonl_keeps_going_after_bad_lines() -> None:
    lines = [
        json.dumps({"supportLevel": "high", "candidates": []}),
        "{not json",
        json.dumps({"supportLevel": "high", "candidates": [{"retrievalScores": {}, "combinedScore": "x"}]}),
        json.dumps(
            {"inputs": {"supportLevel": "low", "candidates": []}, "config": {"retrieval": {"topK": 0}}}
        ),
        json.dumps([1, 2]),
        json.dumps({"inputs": {"supportLevel": "low", "candidates": []}}),
    ]
    result = run("score", "--jsonl", stdin="\n".join(lines) + "\n")
    out = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(out) == 6
    assert out[0]["total"] == compute_confidence({"supportLevel": "high", "candidates": []}).total
    assert out[1]["error"]["type"] == "JSONDecodeError"
    assert out[2]["error"] == {
        "type": "InputValidationError",
        "message": out[2]["error"]["message"],
        "path": "candidates[0].combinedScore",
    }
    assert out[3]["error"]["type"] == "ConfigValidationError" and out[3]["error"]["path"] == "retrieval.topK"
    assert out[4]["error"]["type"] == "InputValidationError"
    assert out[5]["recommendedAction"] == "abstain"
    assert result.returncode == 1  # some lines failed


@pytest.mark.parametrize(
    ("args", "stdin"),
    [
        (("score", "/nonexistent/request.json"), None),
        (("score",), "{"),
        (("score",), "[]"),
        (("score",), '{"supportLevel": 3}'),
    ],
)
def test_unreadable_input_is_one_line_on_stderr_and_exit_2(args: tuple[str, ...], stdin: str | None) -> None:
    result = run(*args, stdin=stdin)
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_schema_describes_inputs_config_and_scorecard() -> None:
    result = run("schema")
    assert result.returncode == 0
    schemas = json.loads(result.stdout)
    assert set(schemas) == {"inputs", "config", "scorecard"}
    assert "supportLevel" in schemas["inputs"]["properties"]
    assert "recommendedAction" in schemas["scorecard"]["properties"]
