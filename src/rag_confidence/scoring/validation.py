"""The reference's semantic checks: config errors (always raised) and input warnings (raised in strict mode).

Structural problems (wrong types, unknown fields) are caught earlier by ``_plain``; what is checked here are
the values that the reference itself rejects or warns about, in the reference's order, because strict mode
raises on the *first* warning and the first config error wins.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Iterable
from typing import Any, get_args

from ..errors import ConfigValidationError, InputValidationError
from ._js import is_finite, is_integer, js_key_order
from .dimensions._shared import DOCUMENTS_SILENT_TEXT, MISSING_CANDIDATES_TEXT, MISSING_RELEVANCE_TEXT
from .dimensions.grounding import claim_counts_valid
from .dimensions.relevance import DEFAULT_BANDS as RELEVANCE_BANDS
from .dimensions.retrieval import DEFAULT_BANDS as RETRIEVAL_BANDS
from .models import SignalName, WarningCode
from .warnings import Warning_, warning

_logger = logging.getLogger(__name__)
# The reference's preset names (policy.py holds their meaning; it imports this module).
PRESETS = ("legacy-v0.2", "balanced-v0.3", "production-v0.3")

OUT_OF_RANGE = "input-out-of-range"

WARNING_CODES: tuple[str, ...] = get_args(WarningCode)
SIGNAL_NAMES: tuple[str, ...] = get_args(SignalName)
# The policy lists that name warning codes or signals. The reference takes any string there and an unknown one
# simply never matches (in ``require`` it is read as ``indexIntegrity``), so a typo is no error, only logged.
_NAMED_LISTS: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    ("actionPolicy", "reviewOnWarnings", WARNING_CODES, "warning code"),
    ("actionPolicy", "abstainOnWarnings", WARNING_CODES, "warning code"),
    ("signalPolicy", "require", SIGNAL_NAMES, "signal"),
    ("signalPolicy", "reviewWhenMissing", SIGNAL_NAMES, "signal"),
    ("signalPolicy", "abstainWhenMissing", SIGNAL_NAMES, "signal"),
)
_UNKNOWN_EFFECT = {
    "warning code": "no warning has that code, so it never matches",
    "signal": "it names no input (a required signal of unknown name is looked for as 'indexIntegrity')",
}


def _fail(path: str, message: str) -> ConfigValidationError:
    return ConfigValidationError(f"{path} {message}", path=path)


def validate_config(config: dict[str, Any]) -> None:
    """Raise :class:`ConfigValidationError` for the first invalid setting, in the reference's order.

    An unknown ``preset`` or ``validation`` is no error (the reference accepts any string and uses its
    defaults, and the golden cases hold us to that), but a typo there silently drops the production
    requirements or strict mode: it is logged as a warning, once per value. So is an unknown warning code or
    signal name in the action and signal policies' lists, which the reference ignores.
    """
    _warn_unknown("preset", config.get("preset"), PRESETS, "balanced-v0.3")
    _warn_unknown("validation", config.get("validation"), ("warn", "strict"), "warn")
    _warn_unknown_names(config)
    _validate_retrieval(config.get("retrieval"))
    relevance = config.get("relevance")
    if relevance is not None:
        _validate_bands("relevance.scoreBands", {**RELEVANCE_BANDS, **(relevance.get("scoreBands") or {})})
    _validate_freshness(config.get("freshness"))
    _validate_corpus(config.get("corpus"))
    _validate_index_integrity(config.get("indexIntegrity"))
    for name, weight in (config.get("weights") or {}).items():
        if not is_finite(weight) or weight <= 0:
            raise _fail(f"weights.{name}", "must be a positive finite number.")


def _validate_bands(name: str, bands: dict[str, Any]) -> None:
    for key, value in bands.items():
        if not is_finite(value):
            raise _fail(f"{name}.{key}", "must be finite.")
    if not (bands["full"] >= bands["high"] >= bands["medium"] >= bands["low"]):
        raise _fail(name, "must satisfy full >= high >= medium >= low.")


def _positive_integer_or_absent(value: Any) -> bool:
    return value is None or (is_integer(value) and value >= 1)


def _non_negative_or_absent(value: Any) -> bool:
    return value is None or (is_finite(value) and value >= 0)


_warned: set[tuple[str, str]] = set()


def did_you_mean(value: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``known`` names to a misspelt ``value``; empty if none is."""
    close = difflib.get_close_matches(value, list(known), 1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _warn_unknown(field: str, value: Any, known: tuple[str, ...], default: str) -> None:
    if value is None or value in known or (field, str(value)) in _warned:
        return
    _warned.add((field, str(value)))
    _logger.warning(
        "rag-confidence: unknown %s %r%s (known: %s): scoring as with %r, as the reference does",
        field,
        value,
        did_you_mean(str(value), known),
        ", ".join(known),
        default,
    )


def _warn_unknown_names(config: dict[str, Any]) -> None:
    for section, field, known, kind in _NAMED_LISTS:
        policy = config.get(section)
        names = None if policy is None else policy.get(field)
        if not names:
            continue
        path = f"{section}.{field}"
        for name in names:
            if name in known or (path, name) in _warned:
                continue
            _warned.add((path, name))
            _logger.warning(
                "rag-confidence: unknown %s %r in %s%s: kept, as the reference does; %s",
                kind,
                name,
                path,
                did_you_mean(name, known),
                _UNKNOWN_EFFECT[kind],
            )


def _validate_retrieval(retrieval: dict[str, Any] | None) -> None:
    if retrieval is None:
        return
    _validate_bands("retrieval.scoreBands", {**RETRIEVAL_BANDS, **(retrieval.get("scoreBands") or {})})
    if not _positive_integer_or_absent(retrieval.get("topK")):
        raise _fail("retrieval.topK", "must be an integer >= 1.")
    if not _positive_integer_or_absent(retrieval.get("minConfirmedMethods")):
        raise _fail("retrieval.minConfirmedMethods", "must be an integer >= 1.")
    threshold = retrieval.get("defaultMethodThreshold")
    if threshold is not None and not is_finite(threshold):
        raise _fail("retrieval.defaultMethodThreshold", "must be finite.")
    thresholds = retrieval.get("methodThresholds") or {}
    for method in js_key_order(list(thresholds)):  # the first bad one in the reference's key order
        if not is_finite(thresholds[method]):
            raise _fail(f"retrieval.methodThresholds.{method}", "must be finite.")
    duplicate = retrieval.get("duplicateContent")
    if duplicate is not None:
        if duplicate.get("mode") not in (None, "diagnostic", "penalize"):
            raise _fail("retrieval.duplicateContent.mode", "must be 'diagnostic' or 'penalize'.")
        for key in ("penaltyPerDuplicate", "maxPenalty"):
            if not _non_negative_or_absent(duplicate.get(key)):
                raise _fail(f"retrieval.duplicateContent.{key}", "must be a finite number >= 0.")
    rank = retrieval.get("rankPenalty")
    if rank is not None:
        if rank.get("mode") not in (None, "diagnostic", "penalize"):
            raise _fail("retrieval.rankPenalty.mode", "must be 'diagnostic' or 'penalize'.")
        if not _positive_integer_or_absent(rank.get("afterRank")):
            raise _fail("retrieval.rankPenalty.afterRank", "must be an integer >= 1.")
        for key in ("penaltyPerRank", "maxPenalty"):
            if not _non_negative_or_absent(rank.get(key)):
                raise _fail(f"retrieval.rankPenalty.{key}", "must be a finite number >= 0.")


def _validate_freshness(freshness: dict[str, Any] | None) -> None:
    if freshness is None:
        return
    # NaN settings pass, as in the reference: every comparison with NaN is false.
    if freshness.get("hardCutoffAge", 730) <= freshness.get("maxAgeForFullScore", 90):
        raise _fail("freshness.hardCutoffAge", "must be greater than freshness.maxAgeForFullScore.")
    if freshness.get("penaltyPerMonth", 1.5) < 0:
        raise _fail("freshness.penaltyPerMonth", "must be >= 0.")


def _validate_corpus(corpus: dict[str, Any] | None) -> None:
    if corpus is None:
        return
    count = corpus.get("expectedTypeCount")
    names = corpus.get("expectedTypes")
    if count is None and names is None:
        raise _fail("corpus", "needs expectedTypeCount or expectedTypes.")
    if count is not None and names is not None and count != len(names):
        raise _fail("corpus.expectedTypeCount", "must equal the length of corpus.expectedTypes.")
    if not _positive_integer_or_absent(count):
        raise _fail("corpus.expectedTypeCount", "must be an integer >= 1.")


def _validate_index_integrity(index: dict[str, Any] | None) -> None:
    if index is None:
        return
    allowed = index.get("maxFailedIngestionsForFullScore", 0)
    warn_at = index.get("staleRatioWarnAt", 0.01)
    zero_at = index.get("staleRatioZeroAt", 0.1)
    if not is_integer(allowed) or allowed < 0:
        raise _fail("indexIntegrity.maxFailedIngestionsForFullScore", "must be an integer >= 0.")
    if not is_finite(warn_at) or warn_at < 0 or warn_at > 1:
        raise _fail("indexIntegrity.staleRatioWarnAt", "must be within 0..1.")
    if not is_finite(zero_at) or zero_at < 0 or zero_at > 1:
        raise _fail("indexIntegrity.staleRatioZeroAt", "must be within 0..1.")
    if zero_at <= warn_at:
        raise _fail(
            "indexIntegrity.staleRatioZeroAt", "must be greater than indexIntegrity.staleRatioWarnAt."
        )


def _is_score(value: Any) -> bool:
    # NaN fails both comparisons and infinities the range, so this is the reference's finite-and-in-range test.
    return 0 <= value <= 1  # type: ignore[no-any-return]


def _non_negative_integer(value: Any) -> bool:
    return is_integer(value) and value >= 0


def input_warnings(inputs: dict[str, Any], config: dict[str, Any]) -> list[Warning_]:
    """Warnings about the inputs themselves, before any dimension is scored."""
    found: list[Warning_] = []
    if inputs.get("documentsSilent") is True:
        found.append(warning("documents-silent", DOCUMENTS_SILENT_TEXT, "documentsSilent"))
    candidates = inputs["candidates"]
    if not candidates:
        found.append(warning("missing-candidates", MISSING_CANDIDATES_TEXT, "candidates"))
    for index, candidate in enumerate(candidates):
        if not 0 <= candidate["combinedScore"] <= 1:
            found.append(
                warning(
                    OUT_OF_RANGE,
                    "combinedScore should be a finite number within 0..1.",
                    f"candidates[{index}].combinedScore",
                )
            )
        out_of_range: list[str] | None = None
        for method, score in candidate["retrievalScores"].items():
            if not 0 <= score <= 1:
                if out_of_range is None:
                    out_of_range = [method]
                else:
                    out_of_range.append(method)
        if out_of_range is None:
            continue
        if len(out_of_range) > 1:
            out_of_range = js_key_order(out_of_range)  # warnings in the reference's key order
        for method in out_of_range:
            found.append(
                warning(
                    OUT_OF_RANGE,
                    "Retrieval method scores should be finite numbers within 0..1.",
                    f"candidates[{index}].retrievalScores.{method}",
                )
            )
    claims = inputs.get("claimSupport")
    if claims is not None:
        problem = claim_counts_valid(claims)
        if problem is not None:
            found.append(warning(OUT_OF_RANGE, problem, "claimSupport"))
    for field in ("faithfulnessScore", "citationCoverageScore"):
        value = inputs.get(field)
        if value is not None and not _is_score(value):
            found.append(warning(OUT_OF_RANGE, f"{field} should be a finite number within 0..1.", field))
    if "freshness" in config and not any(c.get("lastUpdated") for c in candidates):
        found.append(
            warning(
                "missing-freshness-dates",
                "Freshness is configured, but no candidate has lastUpdated.",
                "candidates[].lastUpdated",
            )
        )
    if "corpus" in config and inputs.get("corpusTypeCount") is None and inputs.get("presentTypes") is None:
        found.append(
            warning(
                "missing-corpus-count",
                "Corpus completeness is configured, but neither corpusTypeCount nor presentTypes was supplied.",
                "corpusTypeCount",
            )
        )
    relevance = config.get("relevance")
    if (
        relevance is not None
        and relevance.get("required") is True
        and inputs.get("answerRelevanceScore") is None
    ):
        found.append(warning("missing-answer-relevance", MISSING_RELEVANCE_TEXT, "answerRelevanceScore"))
    index_inputs = inputs.get("indexIntegrity")
    if "indexIntegrity" in config and index_inputs is not None:
        for field in ("sourceVersionMatchRatio", "staleIndexedDocumentRatio"):
            value = index_inputs.get(field)
            if value is not None and not _is_score(value):
                found.append(
                    warning(
                        OUT_OF_RANGE,
                        f"indexIntegrity.{field} should be a finite number within 0..1.",
                        f"indexIntegrity.{field}",
                    )
                )
        for field in ("failedIngestionCount", "deletedSourceLeakageCount"):
            value = index_inputs.get(field)
            if value is not None and not _non_negative_integer(value):
                found.append(
                    warning(
                        OUT_OF_RANGE,
                        f"indexIntegrity.{field} should be a non-negative integer.",
                        f"indexIntegrity.{field}",
                    )
                )
    return found


def enforce_strict(warnings: list[Warning_]) -> None:
    """Raise on the first input warning (``validation="strict"`` mode)."""
    if warnings:
        first = warnings[0]
        where = first.get("path", first["code"])
        raise InputValidationError(f"{where}: {first['message']}", path=first.get("path"))
