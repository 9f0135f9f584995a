"""Consistency (10 points): do the retrieved candidates agree with each other?

| sub-signal | points |
|---|---|
| stability: population std dev of ``combinedScore`` | < 0.1: 6, < 0.2: 5, < 0.3: 3, else 1; one candidate: 3 |
| conflict: ``conflictingCandidateCount`` when given | 0: 4, 1: 1, anything else: 0 |
| conflict: otherwise ``hasConflict`` | false: 4, true: 0 |
| conflict: no signal at all | 2, and a ``missing-conflict-signal`` warning |
"""

from __future__ import annotations

from typing import Any

from .._js import Number, clamp, js_str, to_fixed, to_fixed_number
from ..warnings import warning
from ._shared import Dimension, breakdown, dimension, normalized
from .retrieval import population_std_dev

MAX = 10


def score_consistency(inputs: dict[str, Any]) -> Dimension:
    candidates: list[dict[str, Any]] = inputs["candidates"]
    if not candidates:
        return dimension(
            0,
            MAX,
            0,
            "Nothing was retrieved, so agreement between sources cannot be judged.",
            breakdown({"scoreStability": 0, "conflictStatus": 0}, {}, {"candidateCount": 0}, 0, 0),
            [],
        )
    notes: list[str] = []
    warnings: list[dict[str, Any]] = []

    spread: Number = 0
    if len(candidates) == 1:
        stability = 3
        notes.append("One candidate: stability cannot be measured, so it scores neutral.")
    else:
        spread = population_std_dev([candidate["combinedScore"] for candidate in candidates])
        stability = 6 if spread < 0.1 else 5 if spread < 0.2 else 3 if spread < 0.3 else 1
        notes.append(f"Candidate scores spread by a std dev of {to_fixed(spread, 3)} ({stability}/6).")

    count = inputs.get("conflictingCandidateCount")
    has_conflict = inputs.get("hasConflict")
    if count is not None:
        conflict = 4 if count == 0 else 1 if count == 1 else 0
        notes.append(f"{js_str(count)} conflicting candidate(s) reported (+{conflict}).")
    elif has_conflict is not None:
        conflict = 4 if has_conflict is False else 0
        notes.append("No conflict reported (+4)." if conflict else "A conflict was reported (+0).")
    else:
        conflict = 2
        notes.append("No conflict signal was given; scored neutral (+2).")
        warnings.append(
            warning(
                "missing-conflict-signal",
                "Neither hasConflict nor conflictingCandidateCount was supplied; consistency is conservative.",
                "hasConflict",
            )
        )

    uncapped = stability + conflict
    raw = clamp(uncapped, 0, MAX)
    return dimension(
        raw,
        MAX,
        normalized(raw, MAX),
        " ".join(notes),
        breakdown(
            {"scoreStability": stability, "conflictStatus": conflict},
            {"cap": raw - uncapped} if raw < uncapped else {},
            {"candidateCount": len(candidates), "scoreStdDev": to_fixed_number(spread, 4)},
            uncapped,
            raw,
        ),
        warnings,
    )
