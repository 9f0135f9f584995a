"""Retrievals of one answer to ScoringInputs candidates.

- **One retrieval, not two.** A retrieval span with document-reporting retrieval spans beneath it wraps
  them (LlamaIndex ``retrieve`` around ``_retrieve``; fusion, router and ensemble retrievers) and is not a
  method of its own: the wrapped spans are. Two spans reporting the same documents in the same order with
  the same scores (two tracers on one retriever) count once.
- **Position links a wrapper to what it wraps** when nothing else can: a wrapper whose documents carry neither
  id nor score, around exactly one retrieval that reported as many documents and shares no id or text with
  it, presents that retrieval's documents in its order (a LangChain retriever over a Pinecone client under
  OpenLLMetry). Metadata both report with different values vetoes it (see :func:`link_by_position`).
- **Hybrid.** Documents are merged across retrieval spans by id (any id a document is known by; the content
  hash when it has none) into one candidate with one ``retrievalScores`` entry per method. One method seen on
  several spans (multi-query) keeps the best score per document.
- **Reranker.** When the answer holds reranker spans, the last one to end decides: its output documents are
  the candidates, in its order (``rank`` 1..n), each with a ``rerank`` score entry next to the retrieval
  methods' scores, and ``combinedScore`` is the reranker's score. Without a reranker, ``combinedScore`` is the
  best of the candidate's method scores (the single method's score for plain retrieval) and candidates are
  ordered by it; ``rank`` is that position unless the document's metadata gives one.
- A document without any score cannot be scored: it is left out of ``candidates`` and counted in the
  diagnostics, but it still counts as a retrieved document for citations (by id and position).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._values import Document, Retrieval
from .documents import TEXT_KEY_PREFIX, content_key
from .records import SpanRecord


class Merged:
    """One candidate under construction (compared by identity).

    A plain class with its own ``__init__`` (as :class:`Assembled`): mypyc compiles that, not a dataclass's.
    """

    __slots__ = ("document", "identities", "scores", "rerank_score", "fields")

    def __init__(self, document: Document, identities: list[str]) -> None:
        self.document = document
        # Every id and key of the documents merged here, repeats included (citations look them up).
        self.identities = identities
        self.scores: dict[str, float] = {}
        self.rerank_score: float | None = None
        self.fields: dict[str, Any] = {}

    def add_score(self, method: str, score: float | None) -> None:
        if score is None:
            return
        previous = self.scores.get(method)
        if previous is None or score > previous:
            self.scores[method] = score


class Assembled:
    __slots__ = ("candidates", "presented", "unscored", "dropped_by_presenter")

    def __init__(
        self,
        candidates: list[dict[str, Any]],
        presented: list[Merged],
        unscored: int,
        dropped_by_presenter: int,
    ) -> None:
        self.candidates = candidates
        # Every retrieved document in the order it was presented (reranker order, else first appearance): the
        # list numeric citation markers point into.
        self.presented = presented
        self.unscored = unscored
        # Documents retrieved but left out of the presented list (reranked or fused away).
        self.dropped_by_presenter = dropped_by_presenter


def organize(
    retrievals: Sequence[Retrieval], spans: Sequence[SpanRecord]
) -> tuple[list[Retrieval], Retrieval | None]:
    """Split retrievals (in end order) into methods and the one list presented to the generator, if any.

    A retrieval span with other document-reporting retrieval spans beneath it wraps them (LlamaIndex
    ``retrieve`` around ``_retrieve``, a fusion, router or ensemble retriever): it is not a method of its own.
    The presented list is the last reranker's output, else the last wrapper's documents.
    """
    parents = {span.span_id: span.parent_span_id for span in spans}
    plain = [retrieval for retrieval in retrievals if not retrieval.rerank]
    rerankers = [retrieval for retrieval in retrievals if retrieval.rerank]
    wrappers = [
        retrieval
        for retrieval in plain
        if any(
            other.span is not retrieval.span and _is_ancestor(retrieval.span, other.span, parents)
            for other in plain
        )
    ]
    for wrapper in wrappers:
        link_by_position(
            wrapper, [other for other in plain if _is_ancestor(wrapper.span, other.span, parents)]
        )
    methods: list[Retrieval] = []
    for retrieval in plain:
        if any(wrapper is retrieval for wrapper in wrappers):
            continue
        if any(_same_report(retrieval, kept) for kept in methods):
            continue  # two tracers reporting one retriever
        methods.append(retrieval)
    presenter = rerankers[-1] if rerankers else wrappers[-1] if wrappers else None
    return methods, presenter


def link_by_position(wrapper: Retrieval, inner: Sequence[Retrieval]) -> bool:
    """Make the i-th document ``wrapper`` presents known by the i-th one of the single retrieval it wraps, when
    nothing else can tell them apart; returns whether it did.

    A LangChain retriever over a vector-DB client reports text and metadata (the tracer drops ``Document.id``),
    while the client's span reports ids and scores but no text (Pinecone under OpenLLMetry): without a link
    every presented document is unscored. The retriever returns the store's results in the store's order, so
    position pairs them, but only when that is the one reading left: the wrapper's documents carry no id and no
    score; it wraps exactly one retrieval (two tracers' copies of one count once); that retrieval reported as
    many documents; no id or text already joins the two; and no pair contradicts itself (a metadata key both
    report with different values, which a wrapper that reorders or filters gives away).
    """
    documents = wrapper.documents
    if not documents:
        return False
    for document in documents:
        if document.id is not None or document.score is not None:
            return False
    distinct: list[Retrieval] = []
    for retrieval in inner:
        if not any(_same_report(retrieval, kept) for kept in distinct):
            distinct.append(retrieval)
    if len(distinct) != 1:
        return False
    wrapped = distinct[0].documents
    if len(wrapped) != len(documents):
        return False
    known: set[str] = set()
    for document in wrapped:
        known.add(document.key)
        known.update(document.aliases)
        if document.content:
            known.add(content_key(document.content))
    for document in documents:
        if document.key in known or not known.isdisjoint(document.aliases):
            return False
    for outer, own in zip(documents, wrapped, strict=True):
        if not _agree(outer.metadata, own.metadata):
            return False
    for outer, own in zip(documents, wrapped, strict=True):
        own.aliases = (*own.aliases, outer.key)
        outer.aliases = (*outer.aliases, own.key)
    return True


def _agree(first: Mapping[str, Any] | None, second: Mapping[str, Any] | None) -> bool:
    # Keys only one side reports say nothing (the store keeps the text under a key LangChain pops).
    if not first or not second:
        return True
    return all(key not in second or second[key] == value for key, value in first.items())


def _same_report(first: Retrieval, second: Retrieval) -> bool:
    # One retriever gets one method name under every tracer; two methods that happen to report the same
    # documents with the same (rescaled) scores are still two methods.
    if first.method != second.method or len(first.documents) != len(second.documents):
        return False
    for a, b in zip(first.documents, second.documents, strict=True):
        if a.key != b.key:
            return False
        if (a.score is None) != (b.score is None):
            return False
        if a.score is not None and b.score is not None and abs(a.score - b.score) > 1e-9:
            return False
    return True


def _is_ancestor(candidate: SpanRecord, span: SpanRecord, parents: dict[int, int | None]) -> bool:
    seen: set[int] = set()
    current = parents.get(span.span_id)
    while current is not None and current not in seen:
        if current == candidate.span_id:
            return True
        seen.add(current)
        current = parents.get(current)
    return False


def assemble(methods: Sequence[Retrieval], presenter: Retrieval | None = None) -> Assembled:
    """Merge method retrievals (in the order their spans ended) into candidates, ordered by ``presenter``."""
    merged: list[Merged] = []
    index: dict[str, Merged] = {}
    _alias_content_when_some_lack_ids(methods, presenter)
    for retrieval in methods:
        method = retrieval.method
        for document in retrieval.documents:
            _merge(document, merged, index).add_score(method, document.score)

    dropped = 0
    if presenter is not None:
        presented: list[Merged] = []
        seen: set[int] = set()  # ids of the entries presented: Merged compares by identity
        rerank = presenter.rerank
        for document in presenter.documents:
            entry = _merge(document, merged, index)
            if id(entry) in seen:
                continue
            seen.add(id(entry))
            if rerank:
                entry.rerank_score = document.score
                entry.add_score(presenter.method, document.score)
            elif not entry.scores:
                # A wrapper's own score is used only when the wrapped spans gave none (ensemble of unscored).
                entry.add_score(presenter.method, document.score)
            presented.append(entry)
        for entry in merged:
            if id(entry) not in seen:
                dropped += 1
        ordered = presented
    else:
        presented = list(merged)
        ordered = sorted(merged, key=_best_score_first)

    candidates: list[dict[str, Any]] = []
    unscored = 0
    position = 0
    for entry in ordered:
        position += 1
        scores = entry.scores
        if not scores:
            unscored += 1
            continue
        combined = entry.rerank_score if entry.rerank_score is not None else max(scores.values())
        candidate: dict[str, Any] = {"retrievalScores": dict(scores), "combinedScore": combined}
        document_id = entry.document.id
        if document_id is not None:
            candidate["documentId"] = document_id
        if entry.fields:
            candidate.update(entry.fields)
        if presenter is not None or "rank" not in candidate:
            candidate["rank"] = position
        candidates.append(candidate)
    return Assembled(candidates, presented, unscored, dropped)


def _alias_content_when_some_lack_ids(methods: Sequence[Retrieval], presenter: Retrieval | None) -> None:
    """When some document is known by its text only (a retriever that sets no ids, such as LangChain's
    ``BM25Retriever.from_texts``), documents with ids become known by their text too, so that the same text
    from two methods is one candidate. Only then: hashing every document's text costs."""
    retrievals = [*methods, presenter] if presenter is not None else list(methods)
    if not any(
        document.id is None and document.content
        for retrieval in retrievals
        for document in retrieval.documents
    ):
        return
    for retrieval in retrievals:
        for document in retrieval.documents:
            if document.id is not None and document.content:
                text_key = content_key(document.content)
                if text_key not in document.aliases:
                    document.aliases = (*document.aliases, text_key)


def _best_score_first(entry: Merged) -> float:
    return -max(entry.scores.values(), default=-1.0)


def _merge(document: Document, merged: list[Merged], index: dict[str, Merged]) -> Merged:
    # The entry of the first identity already known (the document's key, then its aliases), else a new one.
    key = document.key
    aliases = document.aliases
    entry = index.get(key)
    if entry is None:
        for alias in aliases:
            known = index.get(alias)
            # Text joins a document without an id to one with: two documents with different ids stay two,
            # whatever their text.
            if known is not None and (
                not alias.startswith(TEXT_KEY_PREFIX) or known.document.id is None or document.id is None
            ):
                entry = known
                break
    if entry is None:
        entry = Merged(document, [key, *aliases])
        merged.append(entry)
    else:
        identities = entry.identities
        identities.append(key)
        identities.extend(aliases)
        if entry.document.id is None and document.id is not None:
            entry.document = document
    found = document.fields
    if found:
        fields = entry.fields
        if fields:
            for name, value in found.items():
                if name not in fields:
                    fields[name] = value
        else:
            fields.update(found)
    if key not in index:
        index[key] = entry
    for alias in aliases:
        # A document's key is usually its first alias, set just above.
        if alias != key and alias not in index:
            index[alias] = entry
    return entry
