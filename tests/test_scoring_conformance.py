"""Every golden case recorded from transparent-confidence 0.3.1 must be reproduced, one test id per case."""

from __future__ import annotations

from typing import Any

import pytest

import rag_confidence
from rag_confidence import errors
from rag_confidence.scoring.serialize import to_reference_dict
from tests.conformance import EXTRA_CASES_PATH, diff, load_cases

CASES = load_cases() + load_cases(EXTRA_CASES_PATH)

_FUNCTIONS = {
    "computeConfidence": "compute_confidence",
    "analyzeCalibration": "analyze_calibration",
    "mergeEvaluationSignals": "merge_evaluation_signals",
    "fromRagasLike": "from_ragas_like",
    "fromDeepEvalLike": "from_deepeval_like",
    "fromTruLensLike": "from_trulens_like",
    "fromCustomJudge": "from_custom_judge",
}
_ERRORS = {
    "config-validation": errors.ConfigValidationError,
    "input-validation": errors.InputValidationError,
    "calibration-validation": errors.CalibrationValidationError,
}


def _dump(result: Any) -> Any:
    return to_reference_dict(result)


def _check_throw(expected: dict[str, Any], call: Any) -> None:
    with pytest.raises(_ERRORS[expected["kind"]]) as caught:
        call()
    assert expected["messageContains"] in str(caught.value)


def _check_scorecard(expected: Any, call: Any) -> None:
    if isinstance(expected, dict) and expected.get("throws"):
        _check_throw(expected, call)
        return
    problems = diff(expected, _dump(call()))
    assert not problems, "\n".join(problems[:20])


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_conformance(case: dict[str, Any]) -> None:
    fn, args, expected = case["fn"], case["args"], case["expected"]
    if fn == "constants":
        assert expected == {
            "ALGORITHM_VERSION": rag_confidence.ALGORITHM_VERSION,
            "SCORECARD_SCHEMA_VERSION": rag_confidence.SCORECARD_SCHEMA_VERSION,
        }
        return
    if fn == "createScorer":
        config, batch = args
        if isinstance(expected, dict) and expected.get("throws"):
            _check_throw(expected, lambda: rag_confidence.create_scorer(config))
            return
        scorer = rag_confidence.create_scorer(config)
        assert len(expected) == len(batch)
        for inputs, outcome in zip(batch, expected, strict=True):
            _check_scorecard(outcome, lambda inputs=inputs: scorer.compute(inputs))
        return
    function = getattr(rag_confidence, _FUNCTIONS[fn])
    if fn == "computeConfidence":
        _check_scorecard(expected, lambda: function(*args))
        return
    if isinstance(expected, dict) and expected.get("throws"):
        _check_throw(expected, lambda: function(*args))
        return
    result = function(*args)
    if fn == "mergeEvaluationSignals":
        actual = {
            "inputs": result.inputs.model_dump(by_alias=True, exclude_unset=True),
            "warnings": [w.model_dump(by_alias=True) for w in result.warnings],
        }
    elif fn.startswith("from"):
        actual = result.model_dump(by_alias=True, exclude_none=True)
    else:
        actual = _dump(result)
    problems = diff(expected, actual)
    assert not problems, "\n".join(problems[:20])
