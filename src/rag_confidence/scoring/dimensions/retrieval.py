"""Retrieval (25 points): did retrieval find strong, agreeing, varied evidence?

| sub-signal | points |
|---|---|
| agreement: candidates confirmed by >= ``minConfirmedMethods`` methods | >= 3: 15, 2: 12, 1: 8, 0: 3 |
| magnitude: mean effective score of the top K | >= full 8, >= high 6, >= medium 4, >= low 2, else 0 |
| diversity: distinct ``documentId`` (candidates with one) | >= 3: 3, 2: 1, else 0 |
| breadth: number of candidates | >= 5: 2, >= 3: 1, else 0 |
| duplicate content (``penalize`` mode) | -min(repeats x penaltyPerDuplicate, maxPenalty) |
| rank penalty (``penalize`` mode) | -min(sum of (rank - afterRank) x penaltyPerRank, maxPenalty) |

A method confirms a candidate when its score is above the method's threshold (default 0). The effective
score is ``combinedScore``, times ``extractionQuality`` when given. Only valid ranks (positive integers)
above ``afterRank`` count towards the rank penalty.

Default bands: full 0.80, high 0.65, medium 0.50, low 0.35; top-K 3. The result is clamped to 0..25.
"""

from __future__ import annotations

import math
from typing import Any

from .._js import (
    JS_INHERITED_MEMBERS,
    Number,
    as_double,
    clamp,
    is_integer,
    js_min,
    round_to,
    slice_end,
    to_fixed,
)
from ..warnings import warning
from ._shared import MISSING_CANDIDATES_TEXT, Dimension, breakdown, dimension, normalized

MAX = 25
DEFAULT_BANDS = {"full": 0.8, "high": 0.65, "medium": 0.5, "low": 0.35}


def resolve_retrieval_config(config: dict[str, Any]) -> dict[str, Any]:
    """The retrieval settings with every default filled in."""
    given = config.get("retrieval") or {}
    duplicate = given.get("duplicateContent") or {}
    rank = given.get("rankPenalty") or {}
    return {
        "scoreBands": {**DEFAULT_BANDS, **(given.get("scoreBands") or {})},
        "defaultMethodThreshold": given.get("defaultMethodThreshold", 0),
        "methodThresholds": given.get("methodThresholds") or {},
        "minConfirmedMethods": given.get("minConfirmedMethods", 2),
        "topK": given.get("topK", 3),
        "minTopScoreGapForClearWinner": given.get("minTopScoreGapForClearWinner", 0.05),
        "duplicateMode": duplicate.get("mode", "diagnostic"),
        "penaltyPerDuplicate": duplicate.get("penaltyPerDuplicate", 1),
        "duplicateMaxPenalty": duplicate.get("maxPenalty", 4),
        "rankMode": rank.get("mode", "diagnostic"),
        "afterRank": rank.get("afterRank", 10),
        "penaltyPerRank": rank.get("penaltyPerRank", 0.25),
        "rankMaxPenalty": rank.get("maxPenalty", 3),
    }


def sort_by_combined_score(candidates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Highest ``combinedScore`` first; ties keep input order (the reference's sort is stable)."""
    return sorted(candidates, key=_descending_score)


def _descending_score(candidate: dict[str, Any]) -> float:
    score: float = candidate["combinedScore"]
    return -score


def score_retrieval(inputs: dict[str, Any], cfg: dict[str, Any]) -> Dimension:
    candidates: list[dict[str, Any]] = inputs["candidates"]
    top_k = cfg["topK"]
    if not candidates:
        return dimension(
            0,
            MAX,
            0,
            "Nothing was retrieved.",
            breakdown(
                {"agreement": 0, "magnitude": 0, "diversity": 0, "breadth": 0},
                {},
                {
                    "candidateCount": 0,
                    "topK": top_k,
                    "duplicateContentHashCount": 0,
                    "rankedCandidateCount": 0,
                    "missingRankCount": 0,
                    "singleMethodCandidateCount": 0,
                },
                0,
                0,
            ),
            [warning("missing-candidates", MISSING_CANDIDATES_TEXT, "candidates")],
        )

    notes: list[str] = []
    warnings: list[dict[str, Any]] = []
    count = len(candidates)
    min_methods = cfg["minConfirmedMethods"]

    # One pass over the candidates for every per-candidate count: this is the hottest loop of scoring.
    thresholds = cfg["methodThresholds"]
    default_threshold = cfg["defaultMethodThreshold"]
    confirmed = 0
    single_method = 0
    with_ids = 0
    documents: set[str] = set()
    hashes: set[str] = set()
    duplicates = 0
    ranked = 0
    for candidate in candidates:
        scores = candidate["retrievalScores"]
        if len(scores) < 2:
            single_method += 1
        methods = 0
        for method, score in scores.items():
            threshold = thresholds.get(method)
            if threshold is None:
                if method in JS_INHERITED_MEMBERS:
                    continue  # the reference compares with an inherited member: never above it
                threshold = default_threshold
            if score > threshold:
                methods += 1
        if methods >= min_methods:
            confirmed += 1
        document = candidate.get("documentId")
        if document is not None:
            with_ids += 1
            documents.add(document)
        digest = candidate.get("contentHash")
        if digest is not None:
            if digest in hashes:
                duplicates += 1  # every repeat of a hash beyond its first occurrence
            else:
                hashes.add(digest)
        rank = candidate.get("rank")
        if rank is not None and rank > 0 and is_integer(rank):
            ranked += 1

    agreement = 15 if confirmed >= 3 else 12 if confirmed == 2 else 8 if confirmed == 1 else 3
    if confirmed:
        notes.append(f"{confirmed} candidate(s) confirmed by at least {min_methods} retrieval methods.")
    else:
        notes.append("No candidate is confirmed by enough retrieval methods.")
    if single_method == count and min_methods > 1:
        warnings.append(
            warning(
                "single-retrieval-method",
                "Every candidate came from one retrieval method, but minConfirmedMethods asks for more.",
                "candidates[].retrievalScores",
            )
        )

    ordered = sort_by_combined_score(candidates) if count > 1 else candidates
    top = ordered[: slice_end(top_k, count)]
    total = 0.0
    quality_applied = False
    for candidate in top:
        quality = candidate.get("extractionQuality")
        if quality is None:
            total += candidate["combinedScore"]
        else:
            quality_applied = True
            total += candidate["combinedScore"] * quality
    average = total / len(top) if top else math.nan
    bands = cfg["scoreBands"]
    magnitude = (
        8
        if average >= bands["full"]
        else 6
        if average >= bands["high"]
        else 4
        if average >= bands["medium"]
        else 2
        if average >= bands["low"]
        else 0
    )
    notes.append(f"Mean effective score of the top {len(top)}: {to_fixed(average, 2)}.")
    if quality_applied:
        notes.append("Extraction quality scales those scores.")

    distinct = len(documents)
    diversity = 0 if with_ids == 0 else 3 if distinct >= 3 else 1 if distinct == 2 else 0
    if with_ids:
        notes.append(f"{distinct} distinct source document(s).")

    breadth = 2 if count >= 5 else 1 if count >= 3 else 0
    notes.append(f"{count} candidate(s) in all.")

    if duplicates > 0:
        warnings.append(
            warning(
                "duplicate-content",
                f"{duplicates} candidate(s) repeat content already retrieved.",
                "candidates[].contentHash",
                "warn" if cfg["duplicateMode"] == "penalize" else "info",
            )
        )
    missing_ranks = count - ranked
    if cfg["rankMode"] == "penalize" and missing_ranks > 0:
        warnings.append(
            warning(
                "rank-signal-missing",
                f"{missing_ranks} candidate(s) have no usable rank while the rank penalty is on.",
                "candidates[].rank",
                "info",
            )
        )

    gap = as_double(ordered[0]["combinedScore"] - ordered[1]["combinedScore"]) if count >= 2 else 0
    if count >= 2 and gap < cfg["minTopScoreGapForClearWinner"]:
        warnings.append(
            warning(
                "ambiguous-top-results",
                "The top results score too close together to name a clear winner.",
                "candidates[].combinedScore",
            )
        )

    duplicate_penalty = _duplicate_penalty(duplicates, cfg)
    rank_penalty = _rank_penalty(candidates, cfg)
    uncapped = as_double(
        as_double(agreement + magnitude + diversity + breadth + duplicate_penalty) + rank_penalty
    )
    raw = clamp(uncapped, 0, MAX)
    adjustments: dict[str, Any] = {}
    if duplicate_penalty != 0:
        adjustments["duplicateContentPenalty"] = duplicate_penalty
    if rank_penalty != 0:
        adjustments["rankPenalty"] = rank_penalty
    if raw < uncapped:
        adjustments["cap"] = raw - uncapped

    scores = [candidate["combinedScore"] for candidate in ordered]
    diagnostics = {
        "avgEffectiveScore": round_to(average, 4),
        "candidateCount": count,
        "confirmedCandidateCount": confirmed,
        "duplicateContentHashCount": duplicates,
        "missingRankCount": missing_ranks,
        "rankedCandidateCount": ranked,
        "scoreStdDev": round_to(population_std_dev(scores), 4),
        "singleMethodCandidateCount": single_method,
        "topK": top_k,
        "topScoreGap": round_to(gap, 4),
        "uniqueDocumentCount": distinct,
    }
    return dimension(
        raw,
        MAX,
        normalized(raw, MAX),
        " ".join(notes),
        breakdown(
            {"agreement": agreement, "magnitude": magnitude, "diversity": diversity, "breadth": breadth},
            adjustments,
            diagnostics,
            uncapped,
            raw,
        ),
        warnings,
    )


def population_std_dev(values: list[float]) -> float:
    """Population standard deviation, summed left to right as the reference does (0 for fewer than 2)."""
    n = len(values)
    if n < 2:
        return 0
    total = 0.0
    for value in values:
        total += value
    mean = total / n
    spread = 0.0
    for value in values:
        delta = value - mean
        spread += delta * delta
    return math.sqrt(spread / n)


def _duplicate_penalty(duplicates: int, cfg: dict[str, Any]) -> float:
    if cfg["duplicateMode"] != "penalize":
        return 0
    return -js_min(as_double(duplicates * cfg["penaltyPerDuplicate"]), cfg["duplicateMaxPenalty"])


def _rank_penalty(candidates: list[dict[str, Any]], cfg: dict[str, Any]) -> float:
    if cfg["rankMode"] != "penalize":
        return 0
    after = cfg["afterRank"]
    per_rank = cfg["penaltyPerRank"]
    total: Number = 0
    for candidate in candidates:
        rank = candidate.get("rank")
        if _positive_integer(rank) and rank > after:
            total = as_double(total + as_double((rank - after) * per_rank))
    return -js_min(total, cfg["rankMaxPenalty"])


def _positive_integer(value: Any) -> bool:
    return value is not None and is_integer(value) and value > 0
