"""Bridges from evaluation frameworks to scoring inputs.

Each ``from_*`` reads the result object of one framework family and keeps only well-typed values (numbers are
not range-checked here: validation of the merged inputs reports out-of-range values). Any real number counts,
numpy scalars included (they become Python ``float`` / ``int``); booleans are not numbers.
:func:`merge_evaluation_signals` then fills the inputs' gaps, never overriding a value that is present.

NaN is a number, so a bridge keeps it, as the reference does (its golden cases pin that). Ragas reports a metric
that failed as NaN: merged in, it counts as measured, scores as the worst value and is not listed in
``missingSignals``, so ``signalPolicy`` does not see it as missing. Validation warns (``input-out-of-range``) for
a NaN faithfulness only: answer relevance is not range-checked by the algorithm. Drop NaN values before calling
the bridge if a failed metric should count as not measured.

>>> signals = from_ragas_like({"faithfulness": 0.92, "answer_relevancy": 0.88})
>>> merged = merge_evaluation_signals({"supportLevel": "high", "candidates": []}, signals)
>>> merged.inputs.faithfulness_score
0.92
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any, cast

from ..errors import InputValidationError
from ._plain import compile_model
from .api import plain_inputs
from .models import ClaimSupport, EvaluationSignalMergeResult, ExternalEvaluationSignals, ScoringInputs

MERGED_FIELDS = (
    "faithfulness_score",
    "answer_relevance_score",
    "claim_support",
    "citation_coverage_score",
    "invalid_citation_count",
    "citation_count",
    "has_conflict",
    "conflicting_candidate_count",
)

_check_signals = compile_model(ExternalEvaluationSignals, InputValidationError)


def _result(result: Any, bridge: str, keys: str) -> Mapping[str, Any]:
    """``result`` when it can be read by key (a mapping, or a pandas row: a ``Series`` has ``get``); an
    :class:`InputValidationError` naming what the bridge reads otherwise (a list of per-metric results, say,
    which would fail on its first lookup with an untyped error)."""
    if isinstance(result, Mapping) or callable(getattr(result, "get", None)):
        return cast("Mapping[str, Any]", result)
    raise InputValidationError(
        f"{bridge} takes one mapping of scores ({keys}), not {type(result).__name__}", path="result"
    )


def _number(result: Mapping[str, Any], key: str) -> float | None:
    value = result.get(key)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    # Evaluation results often come out of numpy or pandas (np.float32, np.int64): numbers to the reference's
    # typeof check, but the strict models take only Python's own number types.
    return int(value) if isinstance(value, numbers.Integral) else float(value)


def _string(result: Mapping[str, Any], key: str) -> str | None:
    value = result.get(key)
    return value if isinstance(value, str) else None


def _boolean(result: Mapping[str, Any], key: str) -> bool | None:
    value = result.get(key)
    return value if isinstance(value, bool) else None


def _signals(**values: Any) -> ExternalEvaluationSignals:
    return ExternalEvaluationSignals.model_validate({k: v for k, v in values.items() if v is not None})


def from_ragas_like(result: Mapping[str, Any]) -> ExternalEvaluationSignals:
    """Ragas-style scores: ``faithfulness`` and ``answer_relevancy`` (or ``answerRelevance``).

    >>> from_ragas_like({"faithfulness": 0.92, "answer_relevancy": 0.81}).model_dump(by_alias=True, exclude_none=True)
    {'faithfulnessScore': 0.92, 'answerRelevanceScore': 0.81}

    A failed Ragas metric is NaN, which passes through as a measured value (as in the reference): drop NaN
    values first (``input-out-of-range`` in ``actionPolicy.reviewOnWarnings`` catches a NaN faithfulness, but
    a NaN answer relevance raises no warning).
    """
    result = _result(result, "from_ragas_like", "faithfulness, answer_relevancy")
    relevance = _number(result, "answer_relevancy")
    return _signals(
        faithfulness_score=_number(result, "faithfulness"),
        answer_relevance_score=relevance if relevance is not None else _number(result, "answerRelevance"),
    )


def from_deepeval_like(result: Mapping[str, Any]) -> ExternalEvaluationSignals:
    """DeepEval-style: ``faithfulnessScore``, ``answerRelevancyScore``, or ``metric="faithfulness"`` + ``score``.

    >>> signals = from_deepeval_like({"metric": "faithfulness", "score": 0.9, "answerRelevancyScore": 0.7})
    >>> signals.model_dump(by_alias=True, exclude_none=True)
    {'faithfulnessScore': 0.9, 'answerRelevanceScore': 0.7}
    """
    result = _result(
        result,
        "from_deepeval_like",
        "faithfulnessScore and answerRelevancyScore, or metric and score: one call per metric",
    )
    faithfulness = _number(result, "faithfulnessScore")
    metric = _string(result, "metric")
    if faithfulness is None and metric is not None and metric.lower() == "faithfulness":
        faithfulness = _number(result, "score")
    return _signals(
        faithfulness_score=faithfulness, answer_relevance_score=_number(result, "answerRelevancyScore")
    )


def from_trulens_like(result: Mapping[str, Any]) -> ExternalEvaluationSignals:
    """TruLens-style feedback: ``groundedness`` and ``answer_relevance``.

    >>> from_trulens_like({"groundedness": 0.85, "answer_relevance": 0.9}).faithfulness_score
    0.85
    """
    result = _result(result, "from_trulens_like", "groundedness, answer_relevance")
    return _signals(
        faithfulness_score=_number(result, "groundedness"),
        answer_relevance_score=_number(result, "answer_relevance"),
    )


def from_custom_judge(result: Mapping[str, Any]) -> ExternalEvaluationSignals:
    """A custom LLM judge that answers in our own field names (claim counts need total and supported).

    >>> judged = from_custom_judge({"totalClaims": 5, "supportedClaims": 4, "hasConflict": False})
    >>> judged.model_dump(by_alias=True, exclude_none=True)
    {'claimSupport': {'totalClaims': 5.0, 'supportedClaims': 4.0}, 'hasConflict': False}
    """
    result = _result(result, "from_custom_judge", "our own camelCase field names")
    total = _number(result, "totalClaims")
    supported = _number(result, "supportedClaims")
    claims = None
    if total is not None and supported is not None:
        claims = {"totalClaims": total, "supportedClaims": supported}
        for key in ("unsupportedClaims", "contradictedClaims"):
            value = _number(result, key)
            if value is not None:
                claims[key] = value
    return _signals(
        faithfulness_score=_number(result, "faithfulnessScore"),
        answer_relevance_score=_number(result, "answerRelevanceScore"),
        claim_support=claims,
        citation_coverage_score=_number(result, "citationCoverageScore"),
        invalid_citation_count=_number(result, "invalidCitationCount"),
        citation_count=_number(result, "citationCount"),
        has_conflict=_boolean(result, "hasConflict"),
        conflicting_candidate_count=_number(result, "conflictingCandidateCount"),
    )


def merge_evaluation_signals(
    inputs: ScoringInputs | Mapping[str, Any], signals: ExternalEvaluationSignals | Mapping[str, Any]
) -> EvaluationSignalMergeResult:
    """Fill the fields of ``inputs`` that were not given with the evaluator's ``signals``.

    A field given as ``None`` explicitly counts as given, as ``null`` does in the reference. The result's
    ``warnings`` list is always empty (kept for the reference's shape).

    >>> inputs = {"supportLevel": "high", "candidates": [], "faithfulnessScore": 0.7}
    >>> merged = merge_evaluation_signals(inputs, from_ragas_like({"faithfulness": 0.92, "answer_relevancy": 0.81}))
    >>> merged.inputs.faithfulness_score, merged.inputs.answer_relevance_score  # the given one is kept
    (0.7, 0.81)
    """
    if isinstance(inputs, ScoringInputs):
        model = inputs
    else:
        plain_inputs(inputs)  # wrong types raise InputValidationError naming the field, as compute does
        model = ScoringInputs.model_validate(inputs)
    extra = (
        signals
        if isinstance(signals, ExternalEvaluationSignals)
        else ExternalEvaluationSignals.model_validate(_check_signals(signals, "signals"))
    )
    update: dict[str, Any] = {}
    for field in MERGED_FIELDS:
        if field in model.model_fields_set:
            continue
        value = getattr(extra, field)
        if value is not None:
            update[field] = (
                # Only the counts the evaluator gave: the reference passes its object through as it is.
                ClaimSupport.model_validate(value.model_dump(exclude_unset=True))
                if field == "claim_support"
                else value
            )
    merged = model.model_copy(update=update)
    return EvaluationSignalMergeResult(inputs=merged, warnings=[])
