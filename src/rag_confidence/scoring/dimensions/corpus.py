"""Corpus completeness (15 points, optional): is the knowledge base complete enough to answer?

The ratio is ``min(present, expected) / expected`` where *present* and *expected* are the lengths of
``inputs.presentTypes`` and ``config.corpus.expectedTypes`` when both are given, else ``corpusTypeCount`` and
``expectedTypeCount`` (default 5).

| ratio | points |
|---|---|
| >= 1.0 | 15 |
| >= 0.8 | 12 |
| >= 0.6 | 9 |
| >= 0.4 | 5 |
| >= 0.2 | 2 |
| lower | 0 |

``missingRelevantType`` takes 3 off, floored at 0.
"""

from __future__ import annotations

from typing import Any

from .._js import Number, clamp, js_div, js_max, js_min, js_str, round_to
from ..warnings import warning
from ._shared import Dimension, breakdown, dimension, normalized

MAX = 15
DEFAULT_EXPECTED = 5


def score_corpus(inputs: dict[str, Any], settings: dict[str, Any]) -> Dimension:
    """``settings`` is ``config.corpus``."""
    expected_types = settings.get("expectedTypes")
    present_types = inputs.get("presentTypes")
    named = expected_types is not None and present_types is not None
    present: Number | None
    if named:
        assert expected_types is not None and present_types is not None
        missing: list[str] | None = [name for name in expected_types if name not in present_types]
        present = len(present_types)
        expected: Number = len(expected_types)
    else:
        present = inputs.get("corpusTypeCount")
        given = settings.get("expectedTypeCount")
        if given is None:
            given = len(expected_types) if expected_types is not None else DEFAULT_EXPECTED
        expected = given
        missing = inputs.get("missingTypes")

    if present is None:
        return dimension(
            0,
            MAX,
            0,
            "The number of document types in the corpus was not supplied, so completeness is unknown.",
            breakdown({"base": 0}, {}, {"effectiveExpectedTypeCount": expected}, 0, 0),
            [
                warning(
                    "missing-corpus-count",
                    "Corpus completeness needs corpusTypeCount, or presentTypes with config.corpus.expectedTypes.",
                    "corpusTypeCount",
                )
            ],
        )

    notes: list[str] = []
    ratio = js_div(js_min(present, expected), expected)
    base = (
        15
        if ratio >= 1
        else 12
        if ratio >= 0.8
        else 9
        if ratio >= 0.6
        else 5
        if ratio >= 0.4
        else 2
        if ratio >= 0.2
        else 0
    )
    notes.append(
        f"{js_str(present)} of {js_str(expected)} expected document types are loaded ({base}/{MAX})."
    )
    if missing:
        notes.append(f"Missing: {', '.join(missing)}.")

    score: Number = base
    penalised = inputs.get("missingRelevantType") is True
    if penalised:
        score = js_max(0, score - 3)
        notes.append("The document type this question needs seems to be missing (-3).")
    raw = clamp(score, 0, MAX)
    diagnostics: dict[str, Any] = {
        "corpusTypeCount": present,
        "expectedTypeCount": expected,
        "ratio": round_to(ratio, 2),
        "namedTypes": named,
    }
    if missing:
        diagnostics["missingTypes"] = ", ".join(missing)
    return dimension(
        raw,
        MAX,
        normalized(raw, MAX),
        " ".join(notes),
        breakdown(
            {"base": base}, {"missingRelevantTypePenalty": -3} if penalised else {}, diagnostics, score, raw
        ),
        warnings=[],
    )
