"""Citation markers in the answer text, matched against the retrieved documents.

Markers are the matches of ``SignalOptions.citation_patterns``, plus (``citation_bracketed_ids``) any
bracketed token equal to a retrieved document's id, such as ``[8f3c2a...]``, or a list of them (when one names
an id, each is a reference); other bracketed text is ignored. Markers inside code (a fenced block, an inline
span; a fence never closed hides nothing) are none. A marker's reference (``[doc-3]`` -> ``doc-3``; ``[1, 3]``
-> ``1`` and ``3``; ``[1-3]`` -> ``1``, ``2`` and ``3``, see :data:`_RANGE`) is valid when it
equals an id a document shown to the generator is known by (exactly, then ignoring case; also after a
doc/source/ref/chunk word: ``Source: 8f3c``), or else when it is a position
(``3``, ``doc-3``, ``source 3``: a number, optionally after a doc/source/ref/chunk word) into the documents in
the order they were presented (see :mod:`.candidates`), counted from ``SignalOptions.citation_position_base``.
The id of a document retrieved but dropped before the generator saw it (by a reranker, say) is invalid.

- ``citationCount``: distinct retrieved documents cited validly.
- ``invalidCitationCount``: distinct references that match no retrieved document.
- ``citationCoverageScore``: the share of answer sentences carrying at least one valid marker (markers after a
  full stop on its line, as in ``Paris. [1]`` or ``Paris.[1] The``, belong to the sentence it ends; a heading
  line is no sentence unless it carries a valid marker) or overlapping a segment the
  response says its sources back (Gemini grounding supports, Anthropic cited text blocks, found in the text by
  their own text).

A response's own citations of the sources its request held (Anthropic's, :mod:`.anthropic_citations`) come as
*sources*, each a tuple of the names it may be known by (ids, content keys): one is cited when a name matches a
document shown to the generator (an id exactly or ignoring case, never as a position; a content key by the
document's text). One matching none is no invalid citation (the provider cites only what the request held) but
an unmatched one, and with any of those ``citationCount`` is unknown (``None``).

Nothing is derived when the answer holds no marker at all: a pipeline that does not ask for citations is not
penalised for missing ones (the diagnostics still report ``0`` markers).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .. import semconv
from ._values import Document
from .candidates import Merged
from .documents import TEXT_KEY_PREFIX, content_key
from .options import DEFAULT_CITATION_PATTERNS, SignalOptions
from .url_citations import URL_KEY_PREFIX, url_key

# At most 18 digits: a position beyond that is no position, and Python refuses to read more than 4,300 digits.
_POSITION = re.compile(r"(?i)^(?:doc|document|source|src|ref|chunk)?[-_: ]{0,8}(\d{1,18})$")
_MAX_ID_DIGITS = 18
# The word a reference may open with (``[Source: 8f3c]``, as a prompt labelling each document ``Source: <id>``
# gets back): what follows it may be an id.
_PREFIX = re.compile(r"(?i)^(?:doc|document|source|src|ref|chunk)[-_:\s]{1,8}")
# Western full stops end a sentence before whitespace; CJK ones (。！？) end it at once, as those scripts put
# no space between sentences, and markers right after one (``。[1]``, the usual place there) belong to the
# sentence it ends. So do markers after a western full stop on its line (``France.[1] The``, where Wikipedia
# puts them, or ``France. [1] The``) when whitespace follows them: models put a marker at the end of the
# sentence it supports, seldom at the start of the next (``[1] shows that ...`` is read as citing the sentence
# before).
_SENTENCE_BREAK = re.compile(
    r"(?P<cjk>[。！？](?:\[[^\[\]\s]{1,256}\])*)\s*"
    r"|(?<=[.!?])(?P<west>(?:[ \t]{0,8}\[[^\[\]\n]{1,256}\])+)\s+"
    r"|(?<=[.!?])\s+|\n+"
)
_WORD = re.compile(r"\w")
# A full stop before whitespace ends no sentence after these (lower-cased, without the stop): titles, and
# reference words a number follows (``Fig. 3``, ``No. 5``). Dotted initials (``U.S.``, ``e.g.``) end none
# either, nor does a capital letter before a capitalised word (``J. Smith``, ``J. R. R. Tolkien``): an initial
# before a name is far commoner in an answer than a sentence ending in a one-letter word, which is then run into
# the next (``see Appendix A. The``). ``I`` is the pronoun unless another initial follows (``I. M. Pei``). A
# word that starts lower-case may end a sentence before one (``iPhone sales rose.``).
_TITLES = frozenset(
    {"mr", "mrs", "ms", "mx", "dr", "prof", "sr", "jr", "st", "mt", "rev", "hon", "vs", "cf", "approx", "viz"}
)
_BEFORE_NUMBER = frozenset(
    {"no", "nos", "fig", "figs", "vol", "pp", "p", "ch", "sec", "art", "eq", "para", "tab", "ex"}
)
_INITIALS = re.compile(r"(?:[^\W\d_]\.){2,}")
# How far back a word before a full stop is looked at: an abbreviation is short.
_ABBREVIATION_CHARS = 12
_OPENERS = "([{\"'“‘*_"
# Bracketed text that may name retrieved ids: one id (a file name may hold spaces) or several, separated by
# commas or semicolons.
_BRACKETED = re.compile(r"\[([^\[\]\n]{1,256})\](?!\()")
# Code an answer quotes (a fenced block, an inline `span`) is program text: ``rows[0]`` there indexes a list and
# cites nothing, and a block's lines are no sentences of the answer. A fence whose info string says Markdown or
# plain text (some models wrap a whole answer in one) holds prose: only its fence lines are left out.
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})([^\n`]*)$", re.MULTILINE)
_BACKTICKS = re.compile(r"`+")
_PROSE_FENCES = frozenset({"markdown", "md", "text", "txt", "plaintext"})
_PARAGRAPH = re.compile(r"\n[ \t]*\n")
# Lines naming sources rather than claiming anything: a Markdown footnote or link reference definition
# (``[^1]: Atlas``, ``[1]: https://...``), and the entries of a sources list under its heading (``Sources:``,
# ``**References**``), each a line opening with a marker, after an optional bullet. They are no sentences of the
# answer; their markers still count (a listed source that was never retrieved is an invalid citation).
_DEFINITION = re.compile(r"^ {0,3}\[[^\[\]\n]{1,256}\]:[^\n]*", re.MULTILINE)
_SOURCES_HEADING = re.compile(
    r"(?im)^[ \t]{0,3}(?:#{1,6}[ \t]{1,8})?[*_]{0,2}"
    r"(?:sources?|references?|citations?|bibliography|works cited)[ \t]{0,8}:?[*_]{0,2}:?"
    # the entries may follow on the heading's own line: ``Sources: [1], [3]``
    r"(?:[ \t]{0,8}\[[^\[\]\n]{1,256}\][,;]?){0,64}[ \t]*$"
)
# A heading titles a section and claims nothing: an ATX heading (``## Rivers``), or a line that is only bold text
# without a full stop (``**Rivers of France**``), as models title sections.
_HEADING = re.compile(
    r"(?m)^ {0,3}(?:#{1,6}(?:[ \t][^\n]*)?|(?:\*\*|__)[^\n.!?*_]{1,256}(?:\*\*|__):?)[ \t]*$"
)
_SOURCE_ENTRY = re.compile(r"[ \t]{0,8}(?:[-*+][ \t]{1,8}|\d{1,3}[.)][ \t]{1,8})?\[")
# A range of positions (``1-3``, ``2–4``) stands for each number in it. A range of more than _RANGE_NUMBERS
# numbers, one that descends, and any past the first _RANGE_BUDGET numbers of an answer's distinct ranges are
# one reference as written (invalid unless a document has that id): ``[1-100000]`` costs one look-up and counts
# one invalid citation, and a text of ranges made up to be costly costs no more than as many single markers.
_RANGE = re.compile(r"(\d{1,18})\s{0,8}[-–—]\s{0,8}(\d{1,18})")
_RANGE_NUMBERS = 20
_RANGE_BUDGET = 1000


def with_explicit(presented: Sequence[Merged], candidates: Any) -> list[Merged] | None:
    """The documents markers are judged against when the application gives its candidates explicitly
    (``@scored_answer``'s ``signals(result)`` returning ``candidates``): ``presented`` (the retrieval spans'),
    then each explicit candidate none of them is known by (its ``documentId``, exactly), in ``rank`` order when
    every candidate gives one (ties as given), else as given. None when ``candidates`` is no list.

    Explicit candidates only add targets: a marker a retrieval span makes valid stays valid at the same
    position. A candidate without an id is cited by position only. Candidates sharing an id (chunks of one
    source document) each keep their position, so the application's own numbering holds.

    >>> given = [{"documentId": "b", "rank": 2}, {"documentId": "a", "rank": 1}]
    >>> [entry.document.id for entry in with_explicit([], given) or ()]
    ['a', 'b']
    """
    if not isinstance(candidates, (list, tuple)):
        return None
    entries: list[tuple[str | None, Any]] = []
    ranked = True
    for candidate in candidates:
        if isinstance(candidate, Mapping):
            document_id = candidate.get("documentId")
            if not isinstance(document_id, str) or not document_id:
                document_id = candidate.get("document_id")
            rank = candidate.get("rank")
        else:  # a ``Candidate`` model passed as it is
            document_id = getattr(candidate, "document_id", None)
            rank = getattr(candidate, "rank", None)
        if not isinstance(rank, (int, float)) or isinstance(rank, bool) or rank != rank:
            ranked = False
        entries.append((document_id if isinstance(document_id, str) and document_id else None, rank))
    order = list(range(len(entries)))
    if ranked:  # compared as they are: an int rank beyond a float's range must not raise
        order.sort(key=lambda position: entries[position][1])
    known = {
        identity
        for entry in presented
        for identity in entry.identities
        if not identity.startswith(TEXT_KEY_PREFIX)
    }
    targets = list(presented)
    # Candidates sharing an id stand at their own positions as one document (cited once, as a retrieval span's
    # chunks of one source are: see summarize).
    added: dict[str, Merged] = {}
    for position in order:
        document_id = entries[position][0]
        if document_id is None:
            targets.append(Merged(Document("", None, None, None), []))
        elif document_id not in known:
            entry = added.get(document_id)
            if entry is None:
                entry = added[document_id] = Merged(
                    Document(document_id, document_id, None, None), [document_id]
                )
            targets.append(entry)
    return targets


class CitationSummary:
    __slots__ = ("markers", "cited", "invalid", "coverage", "unmatched")

    def __init__(
        self, markers: int, cited: int | None, invalid: int, coverage: float | None, unmatched: int = 0
    ) -> None:
        self.markers = markers
        self.cited = cited
        self.invalid = invalid
        self.coverage = coverage
        self.unmatched = unmatched


class _Matcher:
    def __init__(
        self, presented: Sequence[Merged], options: SignalOptions, dropped: Sequence[Merged]
    ) -> None:
        self._presented = presented
        self._base = options.citation_position_base
        self._exact: dict[str, int] = {}
        for position, entry in enumerate(presented):
            for identity in entry.identities:
                if not identity.startswith(TEXT_KEY_PREFIX):
                    self._exact.setdefault(identity, position)
        # Ids of documents the generator was not shown (case-folded), built on the first reference that matches
        # no id shown: a reference to one is invalid.
        self._dropped_entries = dropped
        self._dropped: set[str] | None = None
        # Case-folded ids, built on the first reference that matches no id exactly (most answers cite none).
        self._folded: dict[str, int] | None = None
        # Per reference prefix (``doc-``), the lowest and highest number of the ids in that series, if any.
        self._series: dict[str, tuple[int, int] | tuple[()]] = {}
        # Content keys of the shown documents' texts (stripped), built on the first source named by its text.
        self._texts: dict[str, int] | None = None
        # URL keys of the shown documents' ids and URL metadata, built on the first source named by a URL.
        self._urls: dict[str, int] | None = None

    def match_source(self, names: Sequence[str]) -> int | None:
        """The position of the first shown document one of ``names`` names: an id (exactly, then ignoring
        case; never a position), a content key (:func:`.documents.content_key`) of its text, or a URL key
        (:func:`.url_citations.url_key`) of its id or URL metadata."""
        for name in names:
            if name.startswith(URL_KEY_PREFIX):
                if self._urls is None:
                    self._urls = self._url_keys()
                found = self._urls.get(name)
            elif name.startswith(TEXT_KEY_PREFIX):
                if self._texts is None:
                    self._texts = {}
                    for position, entry in enumerate(self._presented):
                        content = entry.document.content
                        if content and content.strip():
                            self._texts.setdefault(content_key(content.strip()), position)
                found = self._texts.get(name)
            else:
                found = self.match_id(name.strip())
            if found is not None:
                return found
        return None

    def _url_keys(self) -> dict[str, int]:
        urls: dict[str, int] = {}
        for position, entry in enumerate(self._presented):
            metadata = entry.document.metadata
            named = [identity for identity in entry.identities if not identity.startswith(TEXT_KEY_PREFIX)]
            if metadata:
                for name in semconv.URL_METADATA_KEYS:
                    value = metadata.get(name)
                    if isinstance(value, str):
                        named.append(value)
            for value in named:
                key = url_key(value)
                if key is not None:
                    urls.setdefault(key, position)
        return urls

    def match_id(self, reference: str) -> int | None:
        if reference in self._exact:
            return self._exact[reference]
        if self._folded is None:
            # Positions ascend with insertion, so setdefault keeps each folded id's first position, as when
            # both maps were built together.
            self._folded = {}
            for identity, position in self._exact.items():
                self._folded.setdefault(identity.casefold(), position)
        return self._folded.get(reference.casefold())

    def is_dropped_id(self, reference: str) -> bool:
        if not self._dropped_entries:
            return False
        if self._dropped is None:
            self._dropped = {
                identity.casefold()
                for entry in self._dropped_entries
                for identity in entry.identities
                if not identity.startswith(TEXT_KEY_PREFIX)
            }
        return reference.casefold() in self._dropped

    def match(self, reference: str) -> int | None:
        reference = reference.strip()
        if not reference:
            return None
        by_id = self.match_id(reference)
        if by_id is not None:
            return by_id
        if not reference.isdigit() and self.is_dropped_id(reference):
            # The id of a document dropped before the generator, not a position either (a bare number stays
            # a position, as in _id_shaped: the model numbers what it was shown).
            return None
        prefixed = _PREFIX.match(reference)
        if prefixed is not None:
            # ``Source: 8f3c`` names the id after its prefix as ``8f3c`` would (an id first, as for a bare
            # reference), else it is read as below (``doc-3`` a position, or one of a series of ids).
            named = reference[prefixed.end() :]
            by_id = self.match_id(named)
            if by_id is not None:
                return by_id
            if not named.isdigit() and self.is_dropped_id(named):
                return None
        position = _POSITION.match(reference)
        if position is not None and not self._id_shaped(reference, position.start(1)):
            index = int(position.group(1)) - self._base
            if 0 <= index < len(self._presented):
                return index
        return None

    def _id_shaped(self, reference: str, digits_at: int) -> bool:
        """True when ``reference`` (``doc-3``) names one of a numbered series of ids the documents carry
        (``doc-1``, ``doc-2``, ``doc-4``): its prefix is theirs and its number lies within their numbers. Then
        one not retrieved is invalid, not a position. Ids of another scale (``doc-98765``) leave ``doc-1`` a
        position."""
        prefix = reference[:digits_at].casefold()
        if not prefix:
            return False  # a bare number is a position whatever the ids look like
        numbers = self._series.get(prefix)
        if numbers is None:
            found = [
                int(identity[len(prefix) :])
                for identity in self._exact
                if identity.casefold().startswith(prefix)
                and identity[len(prefix) :].isascii()
                and identity[len(prefix) :].isdigit()
                and len(identity) - len(prefix) <= _MAX_ID_DIGITS
            ]
            numbers = self._series[prefix] = (min(found), max(found)) if found else ()
        if not numbers:
            return False
        number = int(reference[digits_at:])
        return numbers[0] <= number <= numbers[1]


class _Ranges:
    """Expands the ranges of one answer's references, within :data:`_RANGE_BUDGET` numbers in all."""

    __slots__ = ("_expanded", "_budget")

    def __init__(self) -> None:
        self._expanded: dict[str, tuple[str, ...]] = {}
        self._budget = _RANGE_BUDGET

    def references(self, reference: str, matcher: _Matcher) -> Sequence[str]:
        """The references ``reference`` stands for: each number of a range, else itself."""
        # Most references hold no dash: three substring tests spare them the regex.
        if not reference[:1].isdigit() or (
            "-" not in reference and "–" not in reference and "—" not in reference
        ):
            return (reference,)
        expanded = self._expanded.get(reference)
        if expanded is not None:
            return expanded
        found = _RANGE.fullmatch(reference)
        if found is None or matcher.match_id(reference) is not None or matcher.is_dropped_id(reference):
            return (reference,)  # an id shaped like a range (``2024-07``) names its document
        low, high = int(found.group(1)), int(found.group(2))
        count = high - low + 1
        if not 0 < count <= min(_RANGE_NUMBERS, self._budget):
            return (reference,)
        self._budget -= count
        expanded = self._expanded[reference] = tuple(str(number) for number in range(low, high + 1))
        return expanded


class _Taken:
    """Non-overlapping ``[start, end)`` spans, sorted, for overlap checks in logarithmic time: an answer with
    thousands of markers must not cost quadratic time. Spans are added a batch at a time (one pattern's
    matches), merged in one sort, never inserted one by one into the middle."""

    __slots__ = ("_starts", "_ends")

    def __init__(self, spans: Iterable[tuple[int, int]] = ()) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []
        self.extend(spans)

    def overlaps(self, start: int, end: int) -> bool:
        # Spans are disjoint and sorted, so ends ascend with starts: only the neighbours can overlap.
        index = bisect.bisect_right(self._starts, start)
        if index and self._ends[index - 1] > start:
            return True
        return index < len(self._starts) and self._starts[index] < end

    def extend(self, spans: Iterable[tuple[int, int]]) -> None:
        """Add spans that overlap neither each other nor those already taken."""
        added = list(spans)
        if not added:
            return
        merged = sorted([*zip(self._starts, self._ends, strict=True), *added])
        self._starts = [start for start, _ in merged]
        self._ends = [end for _, end in merged]


def _references(text: str, patterns: Iterable[re.Pattern[str]]) -> list[tuple[int, int, str]]:
    """``(start, end, reference)`` of every marker, without overlapping matches of different patterns."""
    found: list[tuple[int, int, str]] = []
    taken = _Taken()
    for pattern in patterns:
        # One pattern's matches never overlap each other: they are checked against the earlier patterns'
        # only, and taken together.
        accepted: list[tuple[int, int]] = []
        for match in pattern.finditer(text):
            start, end = match.span()
            if taken.overlaps(start, end):
                continue
            accepted.append((start, end))
            group = match.group(1) or ""
            # Split and stripped without a regex: ``\s*[,;]\s*`` rescans a long run of spaces from each of them.
            for piece in group.replace(";", ",").split(","):
                reference = piece.strip()
                if reference:
                    found.append((start, end, reference))
        taken.extend(accepted)
    found.sort()
    return found


def _with_bracketed_ids(
    text: str, references: list[tuple[int, int, str]], matcher: _Matcher
) -> list[tuple[int, int, str]]:
    # A marker may hold several references: its span is taken once.
    taken = _Taken(dict.fromkeys((start, end) for start, end, _ in references))
    extra: list[tuple[int, int, str]] = []
    for match in _BRACKETED.finditer(text):
        start, end = match.span()
        if taken.overlaps(start, end):
            continue
        token = match.group(1).strip()
        if matcher.match_id(token) is not None or matcher.is_dropped_id(token):
            extra.append((start, end, token))
            continue
        if "," not in token and ";" not in token:
            continue
        # A list is a marker when one of its items names an id; then each item is a reference (one that names
        # none is invalid, as a made-up id in a pattern's list is).
        pieces = [piece.strip() for piece in token.replace(";", ",").split(",")]
        if any(
            piece and (matcher.match_id(piece) is not None or matcher.is_dropped_id(piece))
            for piece in pieces
        ):
            extra.extend((start, end, piece) for piece in pieces if piece)
    return sorted([*references, *extra]) if extra else references


def _code_regions(text: str) -> list[tuple[int, int]]:
    """Sorted disjoint ``[start, end)`` spans of ``text`` that are code (CommonMark's rules, simplified): fenced
    blocks (of a fence never closed, only its line) and inline code spans, whose opening backticks close at the
    next run of as many within the same paragraph."""
    if "`" not in text and "~~~" not in text:
        return []
    regions: list[tuple[int, int]] = []
    opening: re.Match[str] | None = None
    for fence in _FENCE.finditer(text):
        if opening is None:
            opening = fence
            continue
        marks = opening.group(1)
        closer = fence.group(1)
        if closer[0] == marks[0] and len(closer) >= len(marks) and not fence.group(2).strip():
            if opening.group(2).strip().lower() in _PROSE_FENCES:
                regions.append(opening.span())
                regions.append(fence.span())
            else:
                regions.append((opening.start(), fence.end()))
            opening = None
    if opening is not None:
        # A fence never closed hides nothing but its own line: CommonMark runs it to the end of the text, and
        # one stray fence from a model would then drop every citation after it. Code cut short by a length
        # limit is read as prose instead (such an answer is marked truncated anyway).
        regions.append(opening.span())
    fenced = _Taken(regions)
    runs = [run.span() for run in _BACKTICKS.finditer(text) if not fenced.overlaps(*run.span())]
    if len(runs) > 1:
        paragraphs = [found.start() for found in _PARAGRAPH.finditer(text)]
        by_length: dict[int, list[int]] = {}
        for index, (start, end) in enumerate(runs):
            by_length.setdefault(end - start, []).append(index)
        index = 0
        while index < len(runs):
            start, end = runs[index]
            same = by_length[end - start]
            following = bisect.bisect_right(same, index)
            if following < len(same):
                closing = same[following]
                close_start, close_end = runs[closing]
                if bisect.bisect_left(paragraphs, start) == bisect.bisect_left(
                    paragraphs, close_start
                ) and not fenced.overlaps(start, close_end):
                    regions.append((start, close_end))
                    index = closing + 1
                    continue
            index += 1
    regions.sort()
    return regions


def _source_lines(text: str, valid: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """``[start, end)`` spans of the lines of ``text`` that claim nothing: headings (:data:`_HEADING`) without a
    ``valid`` marker, and lines that name sources (see :data:`_DEFINITION`): footnote definitions, and a sources
    heading with the marker-led entries after it."""
    # Each rule is run only on a text holding what it cannot match without: most answers hold none of it, and a
    # substring test is far cheaper than a line-anchored (and, for the sources heading, case-blind) scan.
    regions = [found.span() for found in _DEFINITION.finditer(text)] if "]:" in text else []
    if "#" in text or "**" in text or "__" in text:
        # A heading line that cites a document (``**Paris is the capital [1]**``) is a claim written in bold, not
        # a section's title: it stays a sentence, and a cited one.
        valid_starts = [start for start, _ in valid]
        for found in _HEADING.finditer(text):
            start, end = found.span()
            if bisect.bisect_left(valid_starts, start) == bisect.bisect_left(valid_starts, end):
                regions.append((start, end))
    if text.isascii() and not _names_sources(text.lower()):
        return regions  # (outside ASCII, the pattern's case-blind matching has equivalents lower() lacks)
    for heading in _SOURCES_HEADING.finditer(text):
        end = heading.end()
        while end < len(text):
            line_end = text.find("\n", end + 1)
            line_end = len(text) if line_end < 0 else line_end
            line = end + 1
            if line < line_end and _SOURCE_ENTRY.match(text, line, line_end) is None:
                break
            end = line_end
        regions.append((heading.start(), end))
    return regions


def _names_sources(lowered: str) -> bool:
    """Whether lower-cased ASCII text holds a word :data:`_SOURCES_HEADING` needs."""
    return (
        "source" in lowered
        or "reference" in lowered
        or "citation" in lowered
        or "bibliography" in lowered
        or "works cited" in lowered
    )


def _union(regions: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``regions`` sorted, overlapping ones merged."""
    if len(regions) < 2:
        return regions
    regions.sort()
    merged = [regions[0]]
    for start, end in regions[1:]:
        if start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _outside(
    references: list[tuple[int, int, str]], code: Sequence[tuple[int, int]]
) -> list[tuple[int, int, str]]:
    if not code or not references:
        return references
    taken = _Taken(code)
    return [reference for reference in references if not taken.overlaps(reference[0], reference[1])]


def _may_hold_markers(text: str, options: SignalOptions) -> bool:
    """False when no marker can be in ``text``: every default pattern (and bracketed ids) needs a ``[``."""
    if "[" in text:
        return True
    patterns = options.citation_patterns
    return not (patterns is DEFAULT_CITATION_PATTERNS or patterns == DEFAULT_CITATION_PATTERNS)


def summarize(
    text: str | None,
    presented: Sequence[Merged],
    options: SignalOptions,
    structured: Sequence[str] = (),
    dropped: Sequence[Merged] = (),
    segments: Sequence[str] = (),
    sources: Sequence[Sequence[str]] = (),
) -> CitationSummary:
    """Count markers in ``text`` plus ``structured`` references (a JSON answer's citation list, a response's
    own citations) against the ``presented`` documents; references to ``dropped`` ones (retrieved, not shown)
    are invalid. ``segments`` are pieces of ``text`` the response says its sources back: a sentence
    overlapping one is covered. ``sources`` are the sources a response's citations name, each by the names it
    may be known by (see the module's docstring): never invalid, and ``cited`` is ``None`` when one matches no
    shown document."""
    matcher = _Matcher(presented, options, dropped)
    references: list[tuple[int, int, str]] = []
    code: list[tuple[int, int]] = []
    if text and _may_hold_markers(text, options):
        references = _references(text, options.compiled_citation_patterns)
        if options.citation_bracketed_ids:
            references = _with_bracketed_ids(text, references, matcher)
        code = _code_regions(text)
        references = _outside(references, code)
    # Documents cited, by identity: a document listed at several positions (chunks of one source) is one.
    cited: set[int] = set()
    invalid: set[str] = set()
    valid_spans: list[tuple[int, int]] = []
    ranges = _Ranges()
    markers = len(sources)
    for start, end, marked in references:
        for reference in ranges.references(marked, matcher):
            markers += 1
            index = matcher.match(reference)
            if index is None:
                invalid.add(reference.strip().casefold())
            else:
                cited.add(id(presented[index]))
                valid_spans.append((start, end))
    for listed in structured:
        for reference in ranges.references(listed.strip(), matcher):
            markers += 1
            index = matcher.match(reference)
            if index is None:
                invalid.add(reference.strip().casefold())
            else:
                cited.add(id(presented[index]))
    unmatched = 0
    for names in sources:
        index = matcher.match_source(names)
        if index is None:
            unmatched += 1
        else:
            cited.add(id(presented[index]))
    backed = _located(text, segments) if segments and text else []
    coverage = (
        _coverage(
            text,
            valid_spans,
            [(start, end) for start, end, _ in references],
            backed,
            _union([*code, *_source_lines(text, valid_spans)]) if text else code,
        )
        if references or backed
        else None
    )
    return CitationSummary(
        markers=markers,
        cited=None if unmatched else len(cited),
        invalid=len(invalid),
        coverage=coverage,
        unmatched=unmatched,
    )


# How many passes over an answer's text locating its segments may cost. Segments in text order cost about one
# pass in all; each one the text does not hold (or out of order) costs a pass of its own, so a response naming
# thousands of segments absent from a long text (span data a sender shaped, to the gateway) cost thousands of
# passes: seconds per span. Past this budget the remaining segments are not located, and cover nothing.
_SEGMENT_PASSES = 32


def _located(text: str, segments: Sequence[str]) -> list[tuple[int, int]]:
    """Where each segment stands in ``text``, as disjoint sorted ``[start, end)`` spans (a segment not found
    is left out: the text read is not the one the response's segments point into). Segments come in text
    order, so each is searched from where the last one started, then from the beginning; the searches stop once
    they have scanned :data:`_SEGMENT_PASSES` times the text."""
    found: list[tuple[int, int]] = []
    cursor = 0
    length = len(text)
    budget = _SEGMENT_PASSES * (length + 1)
    for segment in segments:
        if budget <= 0:
            break
        start = text.find(segment, cursor)
        if start < 0:
            # Scanned from the cursor to the end, then from the beginning (to the end again when not there).
            start = text.find(segment)
            budget -= length - cursor + (length if start < 0 else start + len(segment))
            if start < 0:
                continue
        else:
            budget -= start + len(segment) - cursor
        found.append((start, start + len(segment)))
        cursor = start
    found.sort()
    merged: list[tuple[int, int]] = []
    for start, end in found:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _coverage(
    text: str | None,
    valid: list[tuple[int, int]],
    markers: list[tuple[int, int]],
    backed: Sequence[tuple[int, int]] = (),
    not_prose: Sequence[tuple[int, int]] = (),
) -> float | None:
    if not text:
        return None
    grounded = _Taken(backed) if backed else None
    not_prose_starts = [start for start, _ in not_prose]
    # Both lists are in text order and their spans disjoint (a span repeats once per reference it holds), so
    # each sentence finds its markers by bisection instead of scanning them all.
    valid_starts = [start for start, _ in valid]
    spans = sorted(set(markers))
    ends = [end for _, end in spans]
    sentences: list[list[int]] = []  # [start, end, has_valid]
    position = 0
    pieces: list[tuple[int, int]] = []
    for match in _SENTENCE_BREAK.finditer(text):
        if _no_sentence_end(text, match.start(), match.end()):
            continue
        ended = max(match.end("cjk"), match.end("west"))
        pieces.append((position, ended if ended >= 0 else match.start()))
        position = match.end()
    pieces.append((position, len(text)))
    for start, end in pieces:
        if not_prose_starts:
            # A piece inside code (a line of a fenced block, a line that is only inline code) is program text, one
            # inside a list of sources names them: no sentence either way.
            region = bisect.bisect_right(not_prose_starts, start) - 1
            if region >= 0 and not_prose[region][1] >= end:
                continue
        stripped = _strip_markers(text, start, end, spans, ends)
        has_valid = bisect.bisect_left(valid_starts, start) < bisect.bisect_left(valid_starts, end)
        if not has_valid and grounded is not None:
            has_valid = grounded.overlaps(start, end)
        if not _WORD.search(stripped):
            if sentences and has_valid:  # a trailing ``[1]`` cites the sentence before it
                sentences[-1][2] = 1
            continue
        sentences.append([start, end, int(has_valid)])
    if not sentences:
        return None
    covered = 0
    for sentence in sentences:
        covered += sentence[2]
    return covered / len(sentences)


def _no_sentence_end(text: str, stop: int, following: int) -> bool:
    """Whether the break ``[stop, following)`` after a full stop ends no sentence: an abbreviation or dotted
    initials before it, an initial before a name, or a numbered list's enumerator (``2.`` opening a line)."""
    if stop == 0 or text[stop - 1] != "." or "\n" in text[stop:following]:
        return False
    start = stop - 1
    limit = max(0, stop - 1 - _ABBREVIATION_CHARS)
    while start > limit and not text[start - 1].isspace():
        start -= 1
    if start > 0 and not text[start - 1].isspace():
        return False  # longer than any abbreviation
    word = text[start : stop - 1].lstrip(_OPENERS)
    lowered = word.lower()
    if lowered in _TITLES or _INITIALS.fullmatch(word + "."):
        return True
    if (
        len(word) == 1
        and word.isupper()
        and following < len(text)
        and text[following].isupper()
        and "[" not in text[stop:following]  # a marker after the stop (``vitamin C.[1] The``) ends a sentence
    ):
        return word != "I" or text[following + 1 : following + 2] == "."
    if lowered in _BEFORE_NUMBER:
        return following < len(text) and text[following].isdigit()
    if word.isdigit() and len(word) <= 3:
        line = start
        while line > 0 and text[line - 1] in " \t":
            line -= 1
        return line == 0 or text[line - 1] == "\n"
    return False


def _strip_markers(text: str, start: int, end: int, spans: list[tuple[int, int]], ends: list[int]) -> str:
    """The text of ``[start, end)`` without the marker spans in it (``spans`` sorted and disjoint)."""
    pieces: list[str] = []
    cursor = start
    index = bisect.bisect_right(ends, start)  # the first span ending after ``start``
    while index < len(spans) and spans[index][0] < end:
        marker_start, marker_end = spans[index]
        pieces.append(text[cursor : max(cursor, marker_start)])
        cursor = max(cursor, marker_end)
        index += 1
    pieces.append(text[cursor:end])
    return "".join(pieces)
