"""How the answer text is read for citations: fences never closed, ranges of positions, initials, a JSON answer
after a line of prose, headings that cite, markers after a full stop (docs/signals.md, *Answer text, citations,
structured answers*).

Each expectation is counted by hand from the text and the five retrieved documents (positions 1 to 5).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from rag_confidence import semconv
from rag_confidence.signals import ExtractedSignals, extract_signals
from tests.test_signals_extract import answer, generation, retrieval

FIVE = [{"id": name, "score": 0.9 - index / 10} for index, name in enumerate(("a", "b", "c", "d", "e"))]


def read(text: str, documents: list[dict[str, Any]] = FIVE) -> ExtractedSignals:
    return extract_signals([answer(), retrieval(2, documents), generation(text)])


def assert_citations(signals: ExtractedSignals, cited: int, invalid: int, coverage: float) -> None:
    assert signals.inputs["citationCount"] == cited
    assert signals.inputs["invalidCitationCount"] == invalid
    assert signals.inputs["citationCoverageScore"] == pytest.approx(coverage)


# -- fences never closed --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        # A stray opening fence: CommonMark runs it to the end, which dropped both later markers.
        "Paris is the capital [1].\n```\nThe Loire is long [2]. Lyon is large [3].",
        "Paris is the capital [1].\n```python\nThe Loire is long [2]. Lyon is large [3].",
        # A closed block (its rows[0] no marker) before the stray fence is still code.
        "Paris is the capital [1].\n```python\nrows[0]\n```\nThe Loire is long [2].\n```\nLyon is large [3].",
    ],
)
def test_a_fence_never_closed_hides_no_marker_after_it(text: str) -> None:
    """Three prose sentences, each citing its own document; the fence lines are no sentences."""
    assert_citations(read(text), cited=3, invalid=0, coverage=1.0)


def test_a_closed_fence_still_hides_its_code() -> None:
    text = "Paris is the capital [1].\n```\nprint(rows[4])\n```\nThe Loire is long [2]."
    signals = read(text)
    assert_citations(signals, cited=2, invalid=0, coverage=1.0)
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2


# -- ranges ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "cited", "invalid", "coverage", "markers"),
    [
        ("Paris is the capital [1-3]. Nothing else is known.", 3, 0, 0.5, 3),
        ("Paris is the capital [2–4]. Nothing else is known.", 3, 0, 0.5, 3),  # an en dash
        ("Paris is the capital [2 - 3]. Nothing else is known.", 2, 0, 0.5, 2),
        ("Paris is the capital [1, 3-5]. Nothing else is known.", 4, 0, 0.5, 4),
        ("Paris is the capital [1-2; 4–5].", 4, 0, 1.0, 4),
        ("Paris is the capital [3-3].", 1, 0, 1.0, 1),
        # Positions past the five documents are invalid, as [6] and [7] are.
        ("Paris is the capital [4-7]. The Loire is long [7].", 2, 2, 0.5, 5),
        ("Paris is the capital [6-7].", 0, 2, 0.0, 2),
        # Wider than 20 numbers, or descending: one reference as written, naming no document.
        ("Paris is the capital [1-100000].", 0, 1, 0.0, 1),
        ("Paris is the capital [1-21].", 0, 1, 0.0, 1),
        ("Paris is the capital [1-20].", 5, 15, 1.0, 20),
        ("Paris is the capital [3-1].", 0, 1, 0.0, 1),
    ],
)
def test_a_range_of_positions_cites_each_position(
    text: str, cited: int, invalid: int, coverage: float, markers: int
) -> None:
    signals = read(text)
    assert_citations(signals, cited, invalid, coverage)
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == markers


def test_a_structured_answers_range_cites_each_position() -> None:
    signals = read(json.dumps({"answer": "Paris is the capital.", "citations": ["1-2", 5]}))
    assert (signals.inputs["citationCount"], signals.inputs["invalidCitationCount"]) == (3, 0)
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 3


def test_a_range_shaped_id_names_its_document() -> None:
    documents = [{"id": "2024-07", "score": 0.9}, {"id": "2024-08", "score": 0.8}]
    assert_citations(read("Filed in July [2024-07].", documents), cited=1, invalid=0, coverage=1.0)


def test_the_numbers_an_answers_ranges_stand_for_are_bounded() -> None:
    """Sixty distinct ranges of 20 numbers: the first 50 stand for their 1,000 numbers (positions 1 to 5 cited,
    6 to 69 invalid), the last 10 are one invalid reference each, as written."""
    text = " ".join(f"Claim [{first}-{first + 19}]." for first in range(1, 61))
    signals = read(text)
    assert_citations(signals, cited=5, invalid=64 + 10, coverage=5 / 60)
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 1000 + 10


def test_a_range_repeated_stands_for_its_numbers_each_time() -> None:
    text = " ".join("Claim [1-20]." for _ in range(80))
    signals = read(text)
    assert_citations(signals, cited=5, invalid=15, coverage=1.0)
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 80 * 20


# -- initials --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "J. Smith wrote the atlas [1]. Nothing else is known.",
        "The atlas by J. R. R. Tolkien says so [1]. Nothing else is known.",
        "I. M. Pei designed it [1]. Nothing else is known.",
        "(É. Zola) wrote it [1]. Nothing else is known.",
    ],
)
def test_an_initial_before_a_name_ends_no_sentence(text: str) -> None:
    """Two sentences, the first cited."""
    assert_citations(read(text), cited=1, invalid=0, coverage=0.5)


@pytest.mark.parametrize(
    "text",
    [
        "The atlas says so [1]. So do I. Nothing else is known.",
        "The atlas says so [1]. We chose plan B.\nNothing else is known.",
        "The atlas says so [1]. We chose plan b. nothing else is known.",
    ],
)
def test_a_one_letter_word_still_ends_a_sentence_where_no_name_follows(text: str) -> None:
    """Three sentences, the first cited: ``I`` ends one before a word, any letter before a line break or a
    lower-case word."""
    assert_citations(read(text), cited=1, invalid=0, coverage=1 / 3)


def test_a_capital_letter_before_a_marker_after_the_stop_ends_a_sentence() -> None:
    """A marker placed after the stop says a sentence ended there, as for any word."""
    assert_citations(read("Take vitamin C.[1] The Loire is long."), cited=1, invalid=0, coverage=0.5)


def test_a_sentence_ending_in_a_capital_letter_runs_into_the_next() -> None:
    """The documented trade-off: ``Appendix A. The`` reads as ``J. Smith`` does, one sentence."""
    assert_citations(read("See Appendix A. The atlas says so [1]."), cited=1, invalid=0, coverage=1.0)


# -- a JSON answer after a line of prose -----------------------------------------------------------------------

STRUCTURED = {"answer": "Paris is the capital [1]. The Loire is long.", "support_level": "high"}


@pytest.mark.parametrize(
    "text",
    [
        f"Here is the answer:\n```json\n{json.dumps(STRUCTURED)}\n```",
        f"Here is the answer in JSON, as requested.\n\n```JSON\n{json.dumps(STRUCTURED, indent=2)}\n```\n",
        f"Sure!\n```\n{json.dumps(STRUCTURED)}\n```",
    ],
)
def test_a_fenced_json_answer_after_a_short_lead_in_is_a_structured_answer(text: str) -> None:
    signals = read(text)
    assert signals.inputs["supportLevel"] == "high"
    assert signals.sources["supportLevel"] == "structured answer"
    assert_citations(signals, cited=1, invalid=0, coverage=0.5)


@pytest.mark.parametrize(
    "text",
    [
        # A lead-in longer than a line of prose is an answer of its own that shows some JSON.
        "The atlas [2] describes the record format at length. " * 6
        + f"\n```json\n{json.dumps(STRUCTURED)}\n```",
        # So is JSON with text after its fence, or a fenced object naming none of the answer keys.
        f"Here is the answer:\n```json\n{json.dumps(STRUCTURED)}\n```\nThe atlas [2] says more.",
        'Here is the record [2]:\n```json\n{"port": 8080}\n```',
    ],
)
def test_json_inside_a_longer_prose_answer_is_no_structured_answer(text: str) -> None:
    """Read as prose: the fenced block is code (its [1] no marker), the prose cites the second document."""
    signals = read(text)
    assert signals.sources.get("supportLevel") != "structured answer"
    assert signals.inputs["citationCount"] == 1
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] >= 1


# -- headings that cite ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "**Paris is the capital of France [1]**\nThe Loire is the longest river.",
        "## Paris is the capital of France [1]\nThe Loire is the longest river.",
        "# Paris is the capital of France [a]\n\nThe Loire is the longest river.",
    ],
)
def test_a_heading_line_carrying_a_valid_marker_is_a_cited_sentence(text: str) -> None:
    """Two sentences, the first (written as a heading) cited."""
    assert_citations(read(text), cited=1, invalid=0, coverage=0.5)


def test_a_heading_with_only_an_invalid_marker_stays_a_heading() -> None:
    text = "## Rivers [9]\nThe Loire is the longest river [2]."
    assert_citations(read(text), cited=1, invalid=1, coverage=1.0)


def test_a_sources_heading_naming_its_markers_is_still_no_sentence() -> None:
    text = "Paris is the capital [1]. The Loire is long.\n\n## Sources [1], [2]"
    assert_citations(read(text), cited=2, invalid=0, coverage=0.5)


# -- markers after a full stop ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Paris is the capital. [1] The Loire is long. [2]",
        "Paris is the capital. [1] [2] The Loire is long. [3]",
        "Paris is the capital.[1] The Loire is long.[2]",
        "Paris is the capital.[1][2] The Loire is long. [3]\n",
        "Paris is the capital. [1]\nThe Loire is long. [2]",
        "Paris is the capital [1]. The Loire is long [2].",
    ],
)
def test_markers_after_a_full_stop_cite_the_sentence_before(text: str) -> None:
    """Each of the two sentences carries the markers written after its full stop: full coverage."""
    assert read(text).inputs["citationCoverageScore"] == 1.0


def test_a_marker_ahead_of_a_link_is_no_trailing_marker() -> None:
    """``[see](url)`` after a full stop is a Markdown link, no marker: the break there is a plain one."""
    text = "Paris is the capital [1]. [see](https://example.com) The Loire is long."
    assert_citations(read(text), cited=1, invalid=0, coverage=0.5)
