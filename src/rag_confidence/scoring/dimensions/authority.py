"""Source authority (20 points, optional): how authoritative are the top sources?

Each of the top-K candidates (by ``combinedScore``, default K = 5) gets a rank: its ``authorityRank`` when
given, else the rank of the first tier whose keyword occurs in its ``documentType`` (case-insensitive), else 99
("unclassified"). Ranks map to points:

| rank | points |
|---|---|
| <= 10 | 18 |
| <= 20 | 13 |
| <= 30 | 7 |
| otherwise | 2 |

``weighted`` (default) averages the points weighted by ``combinedScore`` (uniform when the scores do not sum
above 0) and rounds; ``best`` takes the points of the strongest rank. Bonuses: +1 when an amendment is among
them, +1 when more than one rank bucket (<=10, <=20, <=30, other) is present. Capped at 20.
Default tiers: Primary 10, Secondary 20, Supporting 30, with no keywords.
"""

from __future__ import annotations

from typing import Any

from .._js import Number, js_min, js_round, js_str, slice_end, to_fixed
from ..warnings import warning
from ._shared import Dimension, breakdown, dimension, normalized
from .retrieval import sort_by_combined_score

MAX = 20
UNCLASSIFIED = 99
DEFAULT_TIERS: list[dict[str, Any]] = [
    {"name": "Primary", "rank": 10},
    {"name": "Secondary", "rank": 20},
    {"name": "Supporting", "rank": 30},
]
DEFAULT_TOP_K = 5


def resolve_authority_config(config: dict[str, Any]) -> dict[str, Any]:
    given = config.get("authority") or {}
    tiers = given.get("tiers")
    return {
        "tiers": DEFAULT_TIERS if tiers is None else tiers,
        "aggregation": given.get("aggregation", "weighted"),
        "topK": given.get("topK", DEFAULT_TOP_K),
    }


def score_authority(inputs: dict[str, Any], settings: dict[str, Any]) -> Dimension:
    tiers = settings["tiers"]
    aggregation = settings["aggregation"]
    top_k = settings["topK"]
    candidates: list[dict[str, Any]] = inputs["candidates"]
    if not candidates:
        return dimension(
            0,
            MAX,
            0,
            "Nothing was retrieved, so authority cannot be judged.",
            breakdown(
                {"weightedAuthority": 0},
                {},
                {"candidateCount": 0, "unclassifiedCount": 0, "topK": top_k},
                0,
                0,
            ),
            [],
        )

    notes: list[str] = []
    warnings: list[dict[str, Any]] = []
    included = sort_by_combined_score(candidates)[: slice_end(top_k, len(candidates))]
    ranks = [_resolve_rank(c.get("authorityRank"), c.get("documentType"), tiers) for c in included]
    unclassified = sum(1 for rank in ranks if rank == UNCLASSIFIED)
    if unclassified > 0:
        warnings.append(
            warning(
                "authority-unclassified",
                f"{unclassified} of {len(included)} top candidate(s) match no authority tier.",
                "candidates[].authorityRank",
            )
        )

    base: Number
    if aggregation == "best":
        best = js_min(*ranks)
        base = rank_points(best)
        notes.append(f"Strongest source has rank {js_str(best)}: {base} points.")
    else:
        total = 0.0
        for candidate in included:
            total += candidate["combinedScore"]
        if total > 0:
            weights = [candidate["combinedScore"] / total for candidate in included]
        else:
            weights = [1 / len(included) for _ in included]
        weighted = 0.0
        for weight, rank in zip(weights, ranks, strict=True):
            weighted += weight * rank_points(rank)
        base = js_round(weighted)
        notes.append(
            f"Score-weighted authority of {len(included)} source(s): {to_fixed(weighted, 2)}, "
            f"rounded to {js_str(base)}."
        )

    bonus = 0
    if any(candidate.get("isAmendment") is True for candidate in included):
        bonus += 1
        notes.append("An amendment is among the sources; the amended text governs (+1).")
    buckets = {_bucket(rank) for rank in ranks}
    if len(buckets) > 1:
        bonus += 1
        notes.append("Sources span several authority tiers (+1).")
    if unclassified == len(included):
        notes.append("No top source could be classified, so authority is not really known.")

    uncapped = base + bonus
    raw = js_min(MAX, uncapped)
    return dimension(
        raw,
        MAX,
        normalized(raw, MAX),
        " ".join(notes),
        breakdown(
            {"weightedAuthority": base, "bonuses": bonus},
            {"cap": raw - uncapped} if raw < uncapped else {},
            {
                "aggregation": aggregation,
                "topK": top_k,
                "includedCount": len(included),
                "unclassifiedCount": unclassified,
                "uniqueTierCount": len(buckets),
            },
            uncapped,
            raw,
        ),
        warnings,
    )


def rank_points(rank: float) -> int:
    if rank <= 10:
        return 18
    if rank <= 20:
        return 13
    if rank <= 30:
        return 7
    return 2


def _resolve_rank(explicit: float | None, document_type: str | None, tiers: list[dict[str, Any]]) -> float:
    if explicit is not None:
        return explicit
    if not document_type:
        return UNCLASSIFIED
    lowered = document_type.lower()
    for tier in tiers:
        keywords = tier.get("keywords")
        if keywords and any(keyword.lower() in lowered for keyword in keywords):
            return tier["rank"]  # type: ignore[no-any-return]
    return UNCLASSIFIED


def _bucket(rank: float) -> str:
    if rank <= 10:
        return "tier1"
    if rank <= 20:
        return "tier2"
    if rank <= 30:
        return "tier3"
    return "unclassified"  # includes NaN, for which every comparison is false
