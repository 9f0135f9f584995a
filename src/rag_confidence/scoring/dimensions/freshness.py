"""Document freshness (15 points, optional): how current are the sources?

The age of each dated candidate is ``(now - lastUpdated)`` in milliseconds / 86,400,000 (not calendar days).
The median age is scored by default (``oldest`` / ``newest`` on request):

| age | points |
|---|---|
| >= ``hardCutoffAge`` (730) | 0 |
| <= ``maxAgeForFullScore`` (90) | 15 |
| in between | 15 - (age - 90) / 30 x ``penaltyPerMonth`` (1.5), floored at 0, rounded |

``normalized`` and ``uncappedRaw`` use the unrounded value; ``raw`` (and the weighting) the rounded one.
"""

from __future__ import annotations

import datetime
from typing import Any

from .._js import js_max, js_min, js_round, round_to, to_fixed
from ..warnings import warning
from ._shared import Dimension, breakdown, dimension, normalized

MAX = 15
MS_PER_DAY = 86_400_000
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def epoch_ms(moment: datetime.datetime) -> int:
    """Whole milliseconds since the epoch, truncated as a JavaScript ``Date`` holds them."""
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def score_freshness(inputs: dict[str, Any], settings: dict[str, Any]) -> Dimension:
    """``settings`` is ``config.freshness``."""
    full_window = settings.get("maxAgeForFullScore", 90)
    per_month = settings.get("penaltyPerMonth", 1.5)
    cutoff = settings.get("hardCutoffAge", 730)
    aggregation = settings.get("aggregation", "median")
    now = settings.get("now")
    now_ms = epoch_ms(now if now is not None else datetime.datetime.now(datetime.timezone.utc))

    ages = sorted(
        (now_ms - epoch_ms(c["lastUpdated"])) / MS_PER_DAY
        for c in inputs["candidates"]
        if c.get("lastUpdated")
    )
    if not ages:
        return dimension(
            0,
            MAX,
            0,
            "No candidate carries lastUpdated, so freshness cannot be scored.",
            breakdown({"selectedAge": 0}, {}, {"aggregation": aggregation, "datedCandidateCount": 0}, 0, 0),
            [
                warning(
                    "missing-freshness-dates",
                    "Freshness needs Candidate.lastUpdated on at least one candidate.",
                    "candidates[].lastUpdated",
                )
            ],
        )

    if aggregation == "oldest":
        age, which = js_max(*ages), "Oldest"
    elif aggregation == "newest":
        age, which = js_min(*ages), "Newest"
    else:
        middle = len(ages) // 2
        age = (ages[middle - 1] + ages[middle]) / 2 if len(ages) % 2 == 0 else ages[middle]
        which = "Median"
    days = js_round(age)
    note = f"{which} source age: {days} days."
    common = {"aggregation": aggregation, "datedCandidateCount": len(ages), "selectedAgeDays": days}

    if age >= cutoff:
        return dimension(
            0,
            MAX,
            0,
            f"{note} Past the {cutoff}-day cutoff, so freshness is 0.",
            breakdown({"selectedAge": days}, {"hardCutoff": -MAX}, {**common, "hardCutoffAge": cutoff}, 0, 0),
            [],
        )
    if age <= full_window:
        return dimension(
            MAX,
            MAX,
            100,
            f"{note} Inside the {full_window}-day window for full marks.",
            breakdown({"selectedAge": days}, {}, {**common, "maxAgeForFullScore": full_window}, MAX, MAX),
            [],
        )

    over = age - full_window
    penalty = over / 30 * per_month
    exact = js_max(0, MAX - penalty)
    raw = js_round(exact)
    return dimension(
        raw,
        MAX,
        normalized(exact, MAX),
        f"{note} {js_round(over)} days past the {full_window}-day window cost {to_fixed(penalty, 1)} points.",
        breakdown(
            {"selectedAge": days},
            {"decayPenalty": -round_to(penalty, 1)},
            {**common, "daysOverWindow": js_round(over), "penaltyPerMonth": per_month},
            exact,
            raw,
        ),
        [],
    )
