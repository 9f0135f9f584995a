"""Retrievals of one answer to ScoringInputs candidates.

- **One retrieval, not two.** A retrieval span nested in another retrieval span and reporting the same set of
  documents (LlamaIndex ``retrieve`` around ``_retrieve``) counts once: the one with more scored documents is
  kept, the outer one on a tie. Two spans reporting the same documents in the same order with the same scores
  (two tracers on one retriever) also count once.
- **Hybrid.** Documents are merged across retrieval spans by id (any id a document is known by; the content
  hash when it has none) into one candidate with one ``retrievalScores`` entry per method. One method seen on
  several spans (multi-query) keeps the best score per document.
- **Reranker.** When the answer holds reranker spans, the last one to end decides: its output documents are
the
  candidates, in its order (``rank`` 1..n), each with a ``rerank`` score entry next to the retrieval methods'
  scores, and ``combinedScore`` is the reranker's score. Without a reranker, ``combinedScore`` is the best of
  the candidate's method scores (the single method's score for plain retrieval) and candidates are ordered by
  it; ``rank`` is that position unless the document's metadata gives one.
- A document without any score cannot be scored: it is left out of ``candidates`` and counted in the
  diagnostics, but it still counts as a retrieved document for citations (by id and position).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._model import Document, Retrieval
from .records import SpanRecord


@dataclass(slots=True, eq=False)
class Merged:
    """One candidate under construction (compared by identity)."""

    document: Document
    identities: set[str]
    scores: dict[str, float] = field(default_factory=dict)
    rerank_score: float | None = None
    fields: dict[str, Any] = field(default_factory=dict)

    def add_score(self, method: str, score: float | None) -> None:
        if score is None:
            return
        previous = self.scores.get(method)
        if previous is None or score > previous:
            self.scores[method] = score


@dataclass(slots=True)
class Assembled:
    candidates: list[dict[str, Any]]
    # Every retrieved document in the order it was presented (reranker order, else first appearance): the list
    # numeric citation markers point into.
    presented: list[Merged]
    retrievals: list[Retrieval]
    unscored: int
    dropped_by_reranker: int


def dedupe(retrievals: Sequence[Retrieval], spans: Sequence[SpanRecord]) -> list[Retrieval]:
    parents = {span.span_id: span.parent_span_id for span in spans}
    kept: list[Retrieval] = []
    for retrieval in retrievals:
        duplicate_of = None
        for index, other in enumerate(kept):
            if retrieval.rerank != other.rerank:
                continue
            if _same_report(retrieval, other) or (
                _nested(retrieval.span, other.span, parents) and _keys(retrieval) == _keys(other)
            ):
                duplicate_of = index
                break
        if duplicate_of is None:
            kept.append(retrieval)
            continue
        other = kept[duplicate_of]
        if _scored(retrieval) > _scored(other) or (
            _scored(retrieval) == _scored(other) and _is_ancestor(retrieval.span, other.span, parents)
        ):
            kept[duplicate_of] = retrieval
    return kept


def _keys(retrieval: Retrieval) -> frozenset[str]:
    return frozenset(document.key for document in retrieval.documents)


def _scored(retrieval: Retrieval) -> int:
    return sum(document.score is not None for document in retrieval.documents)


def _same_report(first: Retrieval, second: Retrieval) -> bool:
    if len(first.documents) != len(second.documents):
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


def _nested(first: SpanRecord, second: SpanRecord, parents: dict[int, int | None]) -> bool:
    return _is_ancestor(first, second, parents) or _is_ancestor(second, first, parents)


def assemble(retrievals: Sequence[Retrieval]) -> Assembled:
    """Merge deduplicated retrievals (in the order their spans ended) into candidates."""
    plain = [retrieval for retrieval in retrievals if not retrieval.rerank]
    rerankers = [retrieval for retrieval in retrievals if retrieval.rerank]
    merged: list[Merged] = []
    index: dict[str, Merged] = {}
    for retrieval in plain:
        for document in retrieval.documents:
            _merge(document, merged, index).add_score(retrieval.method, document.score)

    dropped = 0
    if rerankers:
        reranker = rerankers[-1]
        presented: list[Merged] = []
        for document in reranker.documents:
            entry = _merge(document, merged, index)
            if entry in presented:
                continue
            entry.rerank_score = document.score
            if document.score is not None:
                entry.scores[reranker.method] = document.score
            presented.append(entry)
        dropped = sum(1 for entry in merged if entry not in presented)
        ordered = presented
    else:
        presented = list(merged)
        ordered = sorted(merged, key=lambda entry: -max(entry.scores.values(), default=-1.0))

    candidates = []
    unscored = 0
    for position, entry in enumerate(ordered, start=1):
        if not entry.scores:
            unscored += 1
            continue
        combined = entry.rerank_score if entry.rerank_score is not None else max(entry.scores.values())
        candidate: dict[str, Any] = {"retrievalScores": dict(entry.scores), "combinedScore": combined}
        if entry.document.id is not None:
            candidate["documentId"] = entry.document.id
        candidate.update(entry.fields)
        if rerankers or "rank" not in candidate:
            candidate["rank"] = position
        candidates.append(candidate)
    return Assembled(
        candidates=candidates,
        presented=presented,
        retrievals=list(retrievals),
        unscored=unscored,
        dropped_by_reranker=dropped,
    )


def _merge(document: Document, merged: list[Merged], index: dict[str, Merged]) -> Merged:
    identities = _identities(document)
    entry = next((index[identity] for identity in identities if identity in index), None)
    if entry is None:
        entry = Merged(document=document, identities=set(identities))
        merged.append(entry)
    else:
        entry.identities.update(identities)
        if entry.document.id is None and document.id is not None:
            entry.document = document
    for name, value in document.fields.items():
        entry.fields.setdefault(name, value)
    for identity in identities:
        index.setdefault(identity, entry)
    return entry


def _identities(document: Document) -> Iterable[str]:
    return (document.key, *document.aliases)
