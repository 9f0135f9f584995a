"""Calibration: how well do scores predict good outcomes, and which thresholds would a policy need?

Samples (a scorecard total and what happened: ``correct``, ``accepted``, ...) are counted into half-open score
bands ``[min, max)`` (default 0-40, 40-65, 65-85, 85-101). The recommended ``answerAt`` is the lower edge of the
highest non-empty band whose positive rate reaches ``targetPrecisionForAnswer`` (0.85), else 85. The
recommended ``abstainBelow`` (and ``reviewAt``) is the smallest band upper edge at or below ``answerAt`` under
which at least ``targetRecallForAbstain`` of the negative samples fall, else 40.

>>> report = analyze_calibration([{"total": 90, "outcome": "correct"}, {"total": 30, "outcome": "incorrect"}])
>>> report.recommended_policy.answer_at
85
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import CalibrationValidationError
from ._js import is_finite
from ._plain import compile_model
from .models import CalibrationConfig, CalibrationReport, CalibrationSample
from .warnings import warning

DEFAULT_POSITIVE_OUTCOMES = ("correct", "accepted")
DEFAULT_BANDS: tuple[dict[str, float], ...] = (
    {"min": 0, "max": 40},
    {"min": 40, "max": 65},
    {"min": 65, "max": 85},
    {"min": 85, "max": 101},
)
ACTIONS = ("answer", "review", "abstain")

_check_sample = compile_model(CalibrationSample, CalibrationValidationError)
_check_config = compile_model(CalibrationConfig, CalibrationValidationError)


def analyze_calibration(
    samples: Sequence[CalibrationSample | Mapping[str, Any]],
    config: CalibrationConfig | Mapping[str, Any] | None = None,
) -> CalibrationReport:
    """Band statistics, per-action outcome rates and a recommended action policy for labelled samples.

    Raises :class:`~rag_confidence.errors.CalibrationValidationError` for no samples, a total outside 0..100,
    or bands that are empty, out of 0..101 or overlapping.

    >>> labelled = [(92, "correct"), (88, "correct"), (71, "correct"), (66, "incorrect"), (45, "incorrect")]
    >>> report = analyze_calibration([{"total": total, "outcome": outcome} for total, outcome in labelled])
    >>> report.positive_rate, report.bands[-1].positive_rate
    (0.6, 1.0)
    >>> report.recommended_policy
    RecommendedPolicy(answer_at=85, review_at=40, abstain_below=40)
    """
    plain = [_check_sample(sample, f"samples[{index}]") for index, sample in enumerate(samples)]
    settings: dict[str, Any] = {} if config is None else _check_config(config, "config")
    if not plain:
        raise CalibrationValidationError("analyze_calibration needs at least one sample.", path="samples")
    for index, sample in enumerate(plain):
        total = sample["total"]
        if not is_finite(total) or total < 0 or total > 100:
            raise CalibrationValidationError(
                f"samples[{index}].total must be a finite number from 0 to 100.",
                path=f"samples[{index}].total",
            )
    bands = _resolve_bands(settings.get("bands"))
    outcomes = settings.get("positiveOutcomes")
    # Only an absent list means the default: an empty one counts no outcome as positive.
    positive = frozenset(DEFAULT_POSITIVE_OUTCOMES if outcomes is None else outcomes)

    positives = sum(1 for sample in plain if sample["outcome"] in positive)
    summaries = [_summarize_band(plain, band, positive) for band in bands]
    report = {
        "sample_count": len(plain),
        "positive_count": positives,
        "positive_rate": positives / len(plain),
        "bands": summaries,
        "action_summary": _summarize_actions(plain, positive),
        "recommended_policy": _recommend(plain, summaries, positive, settings),
        "warnings": _warnings(summaries, settings),
    }
    return CalibrationReport.model_validate(report)


def _resolve_bands(given: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    bands = sorted(given if given is not None else DEFAULT_BANDS, key=lambda band: band["min"])
    for index, band in enumerate(bands):
        low, high = band["min"], band["max"]
        if not (is_finite(low) and is_finite(high)) or low < 0 or high > 101 or low >= high:
            raise CalibrationValidationError(
                f"bands[{index}] must satisfy 0 <= min < max <= 101 (bands sorted by min).",
                path=f"bands[{index}]",
            )
        if index > 0 and low < bands[index - 1]["max"]:
            raise CalibrationValidationError("Calibration bands must not overlap.", path="bands")
    return bands


def _summarize_band(
    samples: list[dict[str, Any]], band: dict[str, Any], positive: frozenset[str]
) -> dict[str, Any]:
    inside = [sample for sample in samples if band["min"] <= sample["total"] < band["max"]]
    hits = sum(1 for sample in inside if sample["outcome"] in positive)
    total: float = 0
    for sample in inside:
        total += sample["total"]
    return {
        "min": band["min"],
        "max": band["max"],
        "count": len(inside),
        "positive_count": hits,
        "positive_rate": hits / len(inside) if inside else 0,
        "average_score": total / len(inside) if inside else 0,
    }


def _summarize_actions(samples: list[dict[str, Any]], positive: frozenset[str]) -> dict[str, Any]:
    counts = {action: [0, 0] for action in ACTIONS}
    for sample in samples:
        action = sample.get("recommendedAction")
        if action is None:
            continue
        counts[action][0] += 1
        if sample["outcome"] in positive:
            counts[action][1] += 1
    return {
        action: {"count": count, "positive_rate": hits / count if count else 0}
        for action, (count, hits) in counts.items()
    }


def _recommend(
    samples: list[dict[str, Any]],
    bands: list[dict[str, Any]],
    positive: frozenset[str],
    settings: dict[str, Any],
) -> dict[str, Any]:
    precision = settings.get("targetPrecisionForAnswer", 0.85)
    answer_at = 85
    for band in reversed(bands):
        if band["count"] > 0 and band["positive_rate"] >= precision:
            answer_at = band["min"]
            break
    abstain_below = _recommend_abstain_below(
        samples, bands, positive, settings.get("targetRecallForAbstain"), answer_at
    )
    return {"answer_at": answer_at, "review_at": abstain_below, "abstain_below": abstain_below}


def _recommend_abstain_below(
    samples: list[dict[str, Any]],
    bands: list[dict[str, Any]],
    positive: frozenset[str],
    recall: float | None,
    answer_at: float,
) -> float:
    if recall is None:
        return 40
    negatives = [sample for sample in samples if sample["outcome"] not in positive]
    if not negatives:
        return 40
    for threshold in sorted(band["max"] for band in bands if band["max"] <= answer_at):
        caught = sum(1 for sample in negatives if sample["total"] < threshold)
        if caught / len(negatives) >= recall:
            return threshold  # type: ignore[no-any-return]
    return 40


def _warnings(bands: list[dict[str, Any]], settings: dict[str, Any]) -> list[dict[str, Any]]:
    minimum = settings.get("minSamplesPerBand", 0)
    if not minimum > 0:
        return []
    if any(band["count"] < minimum for band in bands):
        return [
            warning(
                "low-calibration-sample-size",
                f"At least one band holds fewer than {minimum} sample(s).",
                "bands",
            )
        ]
    return []
