"""The ``rag-confidence`` command line, run as a user runs it (a subprocess of the installed script)."""

from __future__ import annotations

import json
import math
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
        "line": 3,
    }
    assert out[3]["error"]["type"] == "ConfigValidationError" and out[3]["error"]["path"] == "retrieval.topK"
    assert out[4]["error"]["type"] == "InputValidationError"
    assert out[5]["recommendedAction"] == "abstain"
    # Every error names its line, in the message too.
    assert [o["error"]["line"] for o in out if "error" in o] == [2, 3, 4, 5]
    assert all(o["error"]["message"].startswith(f"line {o['error']['line']}: ") for o in out if "error" in o)
    assert result.returncode == 1  # some lines failed


def test_jsonl_lines_json_cannot_read_become_error_lines_and_the_batch_goes_on(tmp_path: Path) -> None:
    good = json.dumps({"supportLevel": "high", "candidates": []}).encode()
    lines = [
        good,
        b"",  # blank: skipped
        b'{"supportLevel": "high\xff", "candidates": []}',  # not UTF-8
        b"[" * 100_000,  # nested too deeply
        b'{"citationCount": '
        + b"9" * 5000
        + b', "supportLevel": "high", "candidates": []}',  # a double: Infinity
        b"\xef\xbb\xbf" + good,  # a byte order mark
        good,
    ]
    path = tmp_path / "requests.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    from_file = run("score", "--jsonl", str(path))
    from_stdin = subprocess.run(
        [sys.executable, "-m", "rag_confidence.cli", "score", "--jsonl", "-"],
        input=path.read_bytes(),
        capture_output=True,
        timeout=60,
    )
    for stdout, stderr, code in (
        (from_file.stdout, from_file.stderr, from_file.returncode),
        (from_stdin.stdout.decode(), from_stdin.stderr.decode(), from_stdin.returncode),
    ):
        assert "Traceback" not in stderr
        out = [json.loads(line) for line in stdout.splitlines()]
        assert [o["error"]["line"] if "error" in o else "ok" for o in out] == ["ok", 3, 4, "ok", "ok", "ok"]
        assert code == 1


def test_score_reports_json_nested_too_deeply_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "request.json"
    path.write_text("[" * 100_000)
    result = run("score", str(path))
    assert result.returncode == 2
    assert "is not valid JSON" in result.stderr and "Traceback" not in result.stderr


def test_integers_beyond_a_double_read_as_the_reference_reads_them(tmp_path: Path) -> None:
    # JavaScript reads every JSON number as a double: 400 digits are Infinity, out of range, not a crash.
    path = tmp_path / "request.json"
    huge = "9" * 400
    path.write_text(
        f'{{"supportLevel": "high", "candidates": [{{"retrievalScores": {{}}, "combinedScore": {huge}}}]}}'
    )
    result = run("score", "--json", str(path))
    assert result.returncode == 0, result.stderr
    warnings = json.loads(result.stdout)["meta"]["warnings"]
    assert any(w["path"] == "candidates[0].combinedScore" for w in warnings)


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


def test_schema_declares_its_dialect() -> None:
    import jsonschema  # the test extra installs it

    # The README promises JSON Schema 2020-12: a tool given one schema must not read it in its own default dialect.
    for which in ("inputs", "config", "scorecard"):
        schema = json.loads(run("schema", which).stdout)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert jsonschema.validators.validator_for(schema) is jsonschema.Draft202012Validator
        jsonschema.Draft202012Validator.check_schema(schema)


def test_jsonl_scorecards_of_non_finite_inputs_read_back() -> None:
    from rag_confidence.models import ConfidenceScorecard

    line = (
        '{"supportLevel": "high", "candidates": [{"retrievalScores": {"s": NaN}, "combinedScore": Infinity}]}'
    )
    result = run("score", "--jsonl", stdin=line + "\n")
    assert result.returncode == 0, result.stderr
    (out,) = result.stdout.splitlines()
    back = ConfidenceScorecard.model_validate_json(out)  # its nulls read back as NaN
    diagnostics = back.dimensions.retrieval.breakdown.diagnostics
    assert diagnostics is not None and math.isnan(diagnostics["avgEffectiveScore"])  # type: ignore[arg-type]
