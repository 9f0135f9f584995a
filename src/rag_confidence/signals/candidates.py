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
- **Presented lists.** A reranker presents to the generator what it kept of the retrievals beneath its own
  parent span that no earlier reranker covered (one right after another under the same parent, with no such
  retrieval between them, is a further stage of it and replaces it); a wrapper no reranker covers presents
  what it wraps. Candidates are the documents each presenter kept, presenter by presenter in the order they
  ended and each in its own order (``rank`` 1..n over them all), then the documents of retrievals no presenter
  covers (an agent's round without a reranker). What a presenter dropped is no candidate. A reranked document
  gets a ``rerank`` score entry next to the retrieval methods' scores, and ``combinedScore`` is the reranker's
  score. Without any presenter, ``combinedScore`` is the best of the candidate's method scores (the single
  method's score for plain retrieval) and candidates are ordered by it; ``rank`` is that position unless the
  document's metadata gives one.
- A document without any score cannot be scored: it is left out of ``candidates`` and counted in the
  diagnostics, but it still counts as a retrieved document for citations (by id and position).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Mapping, Sequence
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
    __slots__ = ("candidates", "presented", "unscored", "dropped")

    def __init__(
        self,
        candidates: list[dict[str, Any]],
        presented: list[Merged],
        unscored: int,
        dropped: list[Merged],
    ) -> None:
        self.candidates = candidates
        # Every document the generator was shown, in the order it was presented (presenters' order, then first
        # appearance): the list numeric citation markers point into. A document a span listed several times
        # (chunks sharing their source's id) stands once per listing there, as the prompt numbered them; one an
        # earlier span listed is not repeated.
        self.presented = presented
        self.unscored = unscored
        # Documents retrieved but left out of every presented list (reranked or fused away): citing one cites
        # what the generator was not shown.
        self.dropped = dropped


class Organized:
    """The retrievals of one answer sorted out by :func:`organize`."""

    __slots__ = ("methods", "presenters", "uncovered")

    def __init__(
        self, methods: list[Retrieval], presenters: list[Retrieval], uncovered: list[Retrieval]
    ) -> None:
        # Retrieval spans that are methods of their own (no wrappers, no rerankers), in end order.
        self.methods = methods
        # The lists shown to the generator, in end order: rerankers, and wrappers no reranker covers.
        self.presenters = presenters
        # Methods that no presenter covers: all of their documents were shown.
        self.uncovered = uncovered


def organize(retrievals: Sequence[Retrieval], spans: Sequence[SpanRecord]) -> Organized:
    """Split retrievals (in end order) into methods and the lists presented to the generator.

    A retrieval span with other document-reporting retrieval spans beneath it wraps them (LlamaIndex
    ``retrieve`` around ``_retrieve``, a fusion, router or ensemble retriever): it is not a method of its own.
    A reranker covers the retrievals (methods and wrappers) beneath its own parent span that ended since the
    previous reranker, and presents what it kept of them; with none, under the parent of the previous one, it
    reranks that one's output and replaces it (a cascade). A wrapper no reranker covers presents what it wraps
    (the outermost one, when they nest).

    Runs in O(n log n) for n spans and retrievals, whatever their shape: span data comes from senders, and a
    trace of thousands of nested or sibling retrievers must not cost quadratic time or worse (a reranker
    relates at most ``_MAX_SCOPED`` pending retrievals to its scope).
    """
    plain = [retrieval for retrieval in retrievals if not retrieval.rerank]
    # Most answers nest no retrieval in another: then no wrapper, and no numbering of the spans is needed.
    tree = _Tree(spans) if _any_nested(plain, spans) else None
    wrappers: list[Retrieval] = []
    # id(wrapper) -> where the plain retrievals beneath it lie in ``nested``
    wrapped: dict[int, tuple[int, int]] = {}
    nested: list[Retrieval] = []
    end_order: dict[int, int] = {}  # id(retrieval) -> its place in ``retrievals``
    if tree is not None:
        end_order = {id(retrieval): index for index, retrieval in enumerate(retrievals)}
        # Plain retrievals in tree order: those beneath one are a contiguous run after it.
        nested = sorted(plain, key=lambda retrieval: tree.enter(retrieval.span))
        entries = [tree.enter(retrieval.span) for retrieval in nested]
        for index, retrieval in enumerate(nested):
            first = bisect.bisect_right(entries, entries[index])  # past every retrieval of the same span
            last = bisect.bisect_left(entries, tree.exit(retrieval.span), first)
            if last > first:
                wrappers.append(retrieval)
                if _may_link(retrieval):
                    wrapped[id(retrieval)] = (first, last)
    is_wrapper = {id(wrapper) for wrapper in wrappers}
    for wrapper in wrappers:
        bounds = wrapped.get(id(wrapper))
        if bounds is not None:
            link_by_position(wrapper, itertools.islice(nested, *bounds), end_order)
    methods: list[Retrieval] = []
    reports: dict[tuple[str, int, str | None], list[Retrieval]] = {}
    for retrieval in plain:
        if id(retrieval) in is_wrapper:
            continue
        documents = retrieval.documents
        report = (retrieval.method, len(documents), documents[0].key if documents else None)
        same = reports.setdefault(report, [])
        if any(_same_report(retrieval, kept) for kept in same):
            continue  # two tracers reporting one retriever
        same.append(retrieval)
        methods.append(retrieval)

    presenters: list[Retrieval] = []
    pending: list[Retrieval] = []  # plain retrievals no reranker has covered yet, in end order
    last_reranker: int | None = None  # its index in presenters
    scopes = tree
    for retrieval in retrievals:
        if not retrieval.rerank:
            pending.append(retrieval)
            continue
        # A reranker covers the pending retrievals beneath its own parent span (its query's), not those of a
        # branch running beside it or of an earlier round. Past _MAX_SCOPED pending ones (only hostile data
        # has that many), it covers them all, keeping the work linear.
        scope = retrieval.span.parent_span_id
        if scope is None or len(pending) > _MAX_SCOPED:
            covered, pending = pending, []
        else:
            covered, kept = [], []
            for candidate in pending:
                if candidate.span.parent_span_id != scope:
                    if scopes is None:
                        scopes = _Tree(spans)
                    if not scopes.within(candidate.span, scope):
                        kept.append(candidate)
                        continue
                covered.append(candidate)
            pending = kept
        if (
            not covered
            and last_reranker is not None
            and presenters[last_reranker].span.parent_span_id == scope
        ):
            presenters[last_reranker] = retrieval  # reranks the previous reranker's output: a cascade
        else:
            last_reranker = len(presenters)
            presenters.append(retrieval)
    # What no reranker covers: each outermost wrapper presents what it wraps, and methods beneath no wrapper
    # were shown as they are. Any retrieval above a wrapper is a wrapper, so the outermost ones are those no
    # earlier one in tree order encloses; their subtrees are disjoint.
    uncovered_ids = {id(retrieval) for retrieval in pending}
    if tree is None:
        return Organized(methods, presenters, [method for method in methods if id(method) in uncovered_ids])
    open_wrappers: list[Retrieval] = []
    reach = -1  # the furthest exit of the wrappers seen so far, in tree order
    for wrapper in sorted(wrappers, key=lambda retrieval: tree.enter(retrieval.span)):
        exit_number = tree.exit(wrapper.span)
        if exit_number < reach:  # enclosed (equal: another reading of the same span)
            continue
        reach = exit_number
        if id(wrapper) in uncovered_ids:
            open_wrappers.append(wrapper)
    presenters.extend(open_wrappers)
    if len(presenters) > 1:
        presenters.sort(key=lambda retrieval: end_order[id(retrieval)])
    open_entries = [tree.enter(wrapper.span) for wrapper in open_wrappers]
    uncovered = [
        method
        for method in methods
        if id(method) in uncovered_ids and not _beneath(method, open_wrappers, open_entries, tree)
    ]
    return Organized(methods, presenters, uncovered)


# Pending retrievals a reranker relates to its own scope one by one; past that, it covers them all.
_MAX_SCOPED = 256


def _any_nested(plain: Sequence[Retrieval], spans: Sequence[SpanRecord]) -> bool:
    """True when a plain retrieval has another one's span above it. Linear: each span's nearest retrieval at or
    above it is worked out once (a parent cycle ends a walk)."""
    if len(plain) < 2:
        return False
    parents = {span.span_id: span.parent_span_id for span in spans}
    retrieval_ids = {retrieval.span.span_id for retrieval in plain}
    nearest: dict[int, int | None] = {}  # span id -> the nearest retrieval span at or above it
    for retrieval in plain:
        own = retrieval.span.span_id
        path: list[int] = []
        walked: set[int] = set()
        current = parents.get(own)
        found: int | None = None
        while current is not None:
            if current in nearest:
                found = nearest[current]
                break
            if current in retrieval_ids:
                found = current
                break
            if current in walked:  # a parent cycle
                break
            path.append(current)
            walked.add(current)
            current = parents.get(current)
        for node in path:
            nearest[node] = found
        if found is not None and found != own:
            return True
    return False


def _beneath(
    retrieval: Retrieval, wrappers: Sequence[Retrieval], entries: Sequence[int], tree: _Tree
) -> bool:
    """True when ``retrieval`` lies strictly beneath one of ``wrappers`` (disjoint subtrees, in tree order)."""
    number = tree.enter(retrieval.span)
    index = bisect.bisect_left(entries, number) - 1
    return index >= 0 and tree.exit(retrieval.span) <= tree.exit(wrappers[index].span)


class _Tree:
    """Depth-first numbers of the answer's spans: ``a`` is above ``b`` when ``b`` is entered after ``a`` and left
    no later. Spans whose parent is not among them, or that sit in a parent cycle, are roots."""

    __slots__ = ("_enter", "_exit")

    def __init__(self, spans: Sequence[SpanRecord]) -> None:
        children: dict[int, list[int]] = {}
        ids = {span.span_id for span in spans}
        roots: list[int] = []
        for span in spans:
            parent = span.parent_span_id
            if parent is None or parent not in ids or parent == span.span_id:
                roots.append(span.span_id)
            else:
                children.setdefault(parent, []).append(span.span_id)
        self._enter: dict[int, int] = {}
        self._exit: dict[int, int] = {}
        counter = 0
        for start in [*roots, *ids]:  # then spans only a parent cycle leads to
            if start in self._enter:
                continue
            self._enter[start] = counter
            counter += 1
            stack: list[tuple[int, int]] = [(start, 0)]
            while stack:
                node, next_child = stack[-1]
                below = children.get(node, ())
                if next_child < len(below):
                    stack[-1] = (node, next_child + 1)
                    child = below[next_child]
                    if child not in self._enter:
                        self._enter[child] = counter
                        counter += 1
                        stack.append((child, 0))
                else:
                    stack.pop()
                    self._exit[node] = counter
                    counter += 1

    def enter(self, span: SpanRecord) -> int:
        return self._enter.get(span.span_id, -1)

    def exit(self, span: SpanRecord) -> int:
        return self._exit.get(span.span_id, -1)

    def within(self, span: SpanRecord, ancestor: int) -> bool:
        """``span`` lies beneath the span ``ancestor`` (an id); True as well when that span is not among them."""
        top = self._enter.get(ancestor)
        if top is None:
            return True
        return top < self.enter(span) and self.exit(span) <= self._exit[ancestor]


def _may_link(wrapper: Retrieval) -> bool:
    """The cheap first condition of :func:`link_by_position`: documents without any id or score."""
    documents = wrapper.documents
    return bool(documents) and all(document.id is None and document.score is None for document in documents)


def link_by_position(
    wrapper: Retrieval, inner: Iterable[Retrieval], end_order: Mapping[int, int] | None = None
) -> bool:
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
    # Stops at the second distinct report: a wrapper above thousands of retrievals costs two steps, not a pass
    # over all of them (and a chain of such wrappers no quadratic time). Of identical copies, the one that
    # ended first is read (``end_order``: position by ``id()``), as when the inner list came in end order.
    only: Retrieval | None = None
    for retrieval in inner:
        if only is None:
            only = retrieval
        elif not _same_report(retrieval, only):
            return False
        elif end_order is not None and end_order[id(retrieval)] < end_order[id(only)]:
            only = retrieval
    if only is None:
        return False
    wrapped = only.documents
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


def assemble(
    methods: Sequence[Retrieval],
    presenters: Sequence[Retrieval] = (),
    uncovered: Sequence[Retrieval] = (),
) -> Assembled:
    """Merge method retrievals (in the order their spans ended) into candidates: what ``presenters`` kept, in
    their order, then the documents of the ``uncovered`` methods (see :func:`organize`). Without presenters,
    every retrieved document, best score first."""
    merged: list[Merged] = []
    index: dict[str, Merged] = {}
    _alias_content_when_some_lack_ids(methods, presenters)
    listed: list[Merged] = []  # in listing order, per span: chunks sharing an id each keep their position
    listed_before: set[int] = set()
    for retrieval in methods:
        method = retrieval.method
        in_span: set[int] = set()
        for document in retrieval.documents:
            entry = _merge(document, merged, index)
            entry.add_score(method, document.score)
            if id(entry) not in listed_before:
                in_span.add(id(entry))
                listed.append(entry)
        listed_before |= in_span

    if presenters:
        presented: list[Merged] = []
        seen: set[int] = set()  # ids of the entries presented: Merged compares by identity
        for presenter in presenters:
            rerank = presenter.rerank
            in_span = set()
            for document in presenter.documents:
                entry = _merge(document, merged, index)
                if rerank:
                    entry.rerank_score = document.score
                    entry.add_score(presenter.method, document.score)
                elif not entry.scores:
                    # A wrapper's own score is used only when the wrapped spans gave none (ensemble of unscored).
                    entry.add_score(presenter.method, document.score)
                if id(entry) not in seen:
                    in_span.add(id(entry))
                    presented.append(entry)
            seen |= in_span
        shown: list[Merged] = []
        for retrieval in uncovered:
            for document in retrieval.documents:
                entry = _merge(document, merged, index)
                if id(entry) not in seen:
                    seen.add(id(entry))
                    shown.append(entry)
        shown.sort(key=_best_score_first)
        presented.extend(shown)
        dropped = [entry for entry in merged if id(entry) not in seen]
        ordered = list(dict.fromkeys(presented))
    else:
        presented = listed
        dropped = []
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
        if presenters or "rank" not in candidate:
            candidate["rank"] = position
        candidates.append(candidate)
    return Assembled(candidates, presented, unscored, dropped)


def _alias_content_when_some_lack_ids(methods: Sequence[Retrieval], presenters: Sequence[Retrieval]) -> None:
    """When some document is known by its text only (a retriever that sets no ids, such as LangChain's
    ``BM25Retriever.from_texts``), documents with ids become known by their text too, so that the same text
    from two methods is one candidate. Only then: hashing every document's text costs."""
    retrievals = [*methods, *presenters]
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
