"""The spans of one answer to a camelCase ScoringInputs dict, ready for ``compute_confidence``.

Precedence, lowest to highest: values read or derived from instrumentation conventions; values a structured
(JSON) answer states; ``rag.signal.*`` attributes (the answer span's own over other spans', later-ending spans
over earlier ones); the ``explicit`` mapping the caller passes (``@scored_answer``'s ``signals(result)``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import semconv
from . import genai, grounding, haystack, hosted, openinference, openllmetry, vercel_ai
from ._values import Evaluation, Generation, RawRetrieval, Reader
from .answers import is_marked_answer, is_retrieval_span, is_retrieval_step, retrieved_and_generated
from .candidates import assemble, organize
from .citations import summarize, with_explicit
from .documents import build_retrieval
from .generation import final_answer, without_judges
from .langgraph import graph_answer
from .llamaindex_react import react_answer
from .native import read_native
from .options import SignalOptions, normalize_evaluation_name
from .records import SpanRecord

Diagnostic = str | int | float | bool

_LEVELS = ("low", "medium", "high")
_DEFAULT_OPTIONS = SignalOptions()


@dataclass(frozen=True, slots=True)
class ExtractedSignals:
    """What :func:`extract_signals` found.

    ``inputs`` is the camelCase ScoringInputs dict; ``derived`` the inputs rag-confidence computed (citation
    counts from the answer text, ``supportLevel`` from faithfulness or claims) or assumed (the default support
    level), for ``rag.confidence.derived_signals``; ``skipped`` the attribute values skipped as wrong-typed,
    non-finite or unparsable; ``diagnostics`` attribute name -> value pairs (``rag.confidence.generation.
    truncated``, ...) to set next to the scorecard; ``sources`` where each input came from; ``response_id`` the
    ``gen_ai.response.id`` of the generation whose text is the answer, when its span has one (for the
    evaluation event).
    """

    inputs: dict[str, Any]
    derived: tuple[str, ...] = ()
    skipped: int = 0
    diagnostics: dict[str, Diagnostic] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    response_id: str | None = None


def extract_signals(
    spans: Sequence[SpanRecord],
    options: SignalOptions | None = None,
    *,
    explicit: Mapping[str, Any] | None = None,
) -> ExtractedSignals:
    """Build scoring inputs from the spans of one answer (``AnswerGroup.spans``). Never raises on span data.

    ``explicit`` holds camelCase inputs that win over everything read from spans (passed through unchecked;
    the scoring core validates them).

    >>> from rag_confidence.signals import SpanRecord
    >>> retriever = SpanRecord(1, 2, 1, "search", {
    ...     "gen_ai.operation.name": "retrieval",
    ...     "gen_ai.retrieval.documents": '[{"id": "a", "score": 0.9}, {"id": "b", "score": 0.4}]',
    ... })
    >>> answer = SpanRecord(1, 1, None, "answer", {"rag.answer": True, "rag.signal.faithfulness_score": 0.92})
    >>> signals = extract_signals([retriever, answer])
    >>> [candidate["documentId"] for candidate in signals.inputs["candidates"]]
    ['a', 'b']
    >>> signals.inputs["supportLevel"], signals.derived
    ('high', ('supportLevel',))
    """
    options = options or _DEFAULT_OPTIONS
    reader = Reader()
    ordered = _in_end_order(spans)
    answer_span: SpanRecord | None = None
    for span in reversed(ordered):
        if is_marked_answer(span):
            answer_span = span
            break
    if answer_span is None:
        answer_span = _root_of(ordered)

    raw_retrievals: list[RawRetrieval] = []
    evaluations: list[Evaluation] = []
    generations: list[Generation] = []
    native: dict[str, Any] = {}
    targets = _FeedbackTargets(ordered)
    searched = False  # a retrieval span recorded what it found (documents, or an empty list)
    for span in ordered:
        try:
            searched = _read_span(span, reader, raw_retrievals, evaluations, generations, targets) or searched
        except Exception:  # a reader bug on odd data must cost one span's signals, never the answer
            reader.skip()
    # The answer span's own values last, so they win.
    for span in ordered:
        if span is not answer_span:
            native.update(read_native(span.attributes, reader))
    for span in ordered:
        if span is answer_span:
            native.update(read_native(span.attributes, reader))

    retrievals = [build_retrieval(raw, options, reader) for raw in raw_retrievals]
    organized = organize(retrievals, ordered)
    methods = organized.methods
    assembled = assemble(methods, organized.presenters, organized.uncovered)

    inputs: dict[str, Any] = {"candidates": assembled.candidates}
    sources: dict[str, str] = {"candidates": "retrieval spans"} if retrievals else {}
    derived: list[str] = []
    diagnostics: dict[str, Diagnostic] = {}

    _apply_evaluations(evaluations, options, inputs, sources)

    answer = (
        final_answer(
            graph_answer(
                react_answer(without_judges(generations, ordered, answer_span), ordered, reader),
                ordered,
                options,
                reader,
            ),
            answer_span,
            options,
            reader,
        )
        if answer_span
        else None
    )
    if answer is not None:
        for name, value in answer.stated.items():
            inputs[name] = value
            sources[name] = "structured answer"
        # The application's explicit candidates are documents the generator was shown too (see with_explicit).
        explicit_targets = (
            with_explicit(assembled.presented, explicit.get("candidates")) if explicit else None
        )
        summary = summarize(
            answer.text,
            assembled.presented if explicit_targets is None else explicit_targets,
            options,
            answer.citations,
            assembled.dropped,
            answer.segments,
            answer.sources,
        )
        diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] = summary.markers
        if summary.unmatched:
            diagnostics[semconv.RAG_CONFIDENCE_CITATION_UNMATCHED_SOURCES] = summary.unmatched
        # With a retrieval span unreadable, the documents the markers point into are partly unknown: a marker
        # matching none of those read may be valid, so no citation input is derived rather than a wrong one. So
        # without documents to judge against: no retrieval span that recorded what it found (none at all, as for
        # a marked answer whose documents reached the model through a step no tracer reports as a retrieval,
        # such as an agent's function tool; or only spans that leave their documents unrecorded, as a GenAI
        # retrieval span without the opt-in ``gen_ai.retrieval.documents``) and no explicit candidates. Judged
        # against nothing, every marker would be invalid. A span that recorded an empty list found nothing: its
        # markers are invalid. A response's own citations (Anthropic's) are judged against no retrieval: they
        # name sources its request held, never invalid, and the text they back is covered whatever was
        # retrieved.
        judged = searched or explicit_targets is not None or summary.markers == len(answer.sources)
        if summary.markers and judged and not reader.unreadable_retrievals:
            for name, value in (
                ("citationCount", summary.cited),
                ("invalidCitationCount", summary.invalid),
                ("citationCoverageScore", summary.coverage),
            ):
                if value is not None:
                    inputs[name] = value
                    sources[name] = "answer text"
                    derived.append(name)
        if answer.truncated is not None:
            diagnostics[semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED] = answer.truncated
        if answer.finish_reason is not None:
            diagnostics[semconv.RAG_CONFIDENCE_GENERATION_FINISH_REASON] = answer.finish_reason

    for path, value in _nest(native, reader).items():
        inputs[path] = value
        sources[path] = "rag.signal"
        if path in derived:
            derived.remove(path)
    for name, value in (explicit or {}).items():
        inputs[name] = value
        sources[name] = "explicit"
        if name in derived:
            derived.remove(name)

    if "supportLevel" not in inputs:
        level, source = _derive_support_level(inputs, options)
        inputs["supportLevel"] = level
        sources["supportLevel"] = source
        derived.insert(0, "supportLevel")

    if retrievals:
        diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_SPANS] = len(methods)
    if any(retrieval.rescaled for retrieval in methods):
        diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_SCORES_RESCALED] = True
    if assembled.unscored:
        diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_UNSCORED_DOCUMENTS] = assembled.unscored
    if reader.dropped_documents:
        diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_DROPPED_DOCUMENTS] = reader.dropped_documents
    if reader.dropped_result_events:
        diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_DROPPED_RESULT_EVENTS] = reader.dropped_result_events
    if reader.unreadable_retrievals:
        diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_UNREADABLE_SPANS] = reader.unreadable_retrievals
    if reader.skipped:
        diagnostics[semconv.RAG_CONFIDENCE_SIGNALS_SKIPPED] = reader.skipped
    return ExtractedSignals(
        inputs=inputs,
        derived=tuple(derived),
        skipped=reader.skipped,
        diagnostics=diagnostics,
        sources=sources,
        response_id=answer.response_id if answer is not None else None,
    )


class _FeedbackTargets:
    """What the feedback a span carries is about, per the OpenInference feedback spec.

    Span feedback (OpenInference ``evaluations.*``/``annotations.*``, a ``gen_ai.evaluation.result`` event)
    describes the span carrying it; on a retrieval span it grades the retrieval, not the answer. An
    ``EVALUATOR`` span with links is a *carrier*: its feedback describes the linked span (span scope) or the
    linked span's trace (trace scope), never the span it happens to sit under, so it counts only when it links
    into this answer. Other spans with links (a consumer linking its producer) keep their own feedback.
    """

    __slots__ = ("_spans", "_retrieval")

    def __init__(self, spans: Sequence[SpanRecord]) -> None:
        self._spans = spans
        self._retrieval: dict[tuple[int, int], bool] | None = None  # built for the first carrier only

    def scopes(self, span: SpanRecord, retrieval: bool) -> tuple[bool, bool]:
        """(span feedback counts, trace feedback counts) for the feedback ``span`` carries."""
        if (
            not span.links
            or span.attributes.get(semconv.OPENINFERENCE_SPAN_KIND) != semconv.OPENINFERENCE_KIND_EVALUATOR
        ):
            return not retrieval, True
        if self._retrieval is None:
            self._retrieval = {
                (member.trace_id, member.span_id): is_retrieval_step(member) for member in self._spans
            }
        about_answer = any(self._retrieval.get(link) is False for link in span.links)
        about_trace = any(trace_id == span.trace_id for trace_id, _ in span.links)
        return about_answer, about_trace


def _read_span(
    span: SpanRecord,
    reader: Reader,
    retrievals: list[RawRetrieval],
    evaluations: list[Evaluation],
    generations: list[Generation],
    targets: _FeedbackTargets,
) -> bool:
    """Read one span into the lists; True when it is a retrieval span that recorded what it found: documents,
    or a document list that is empty (a span without one found what nobody can tell)."""
    retrieval = is_retrieval_span(span)
    recorded = False
    if retrieval:
        listed = len(retrievals)
        found_nothing = reader.found_nothing
        retrievals.extend(openinference.read_retrievals(span, reader))
        retrievals.extend(genai.read_retrievals(span, reader))
        retrievals.extend(openllmetry.read_retrievals(span, reader))
        retrievals.extend(haystack.read_retrievals(span, reader))
        retrievals.extend(hosted.read_retrievals(span, reader))
        retrievals.extend(grounding.read_retrievals(span, reader))
        recorded = len(retrievals) > listed or reader.found_nothing > found_nothing
    # Feedback on a model call that retrieved by itself (hosted file_search, grounding) is about its answer.
    span_scoped, trace_scoped = targets.scopes(span, retrieval and not retrieved_and_generated(span))
    evaluations.extend(openinference.read_evaluations(span, reader, span_scoped, trace_scoped))
    if span.events and span_scoped:
        evaluations.extend(genai.read_evaluations(span, reader))
    # One span is one generation, whichever conventions it speaks: the first reader that finds one gives it. A
    # generation without text (finish reasons only) lets the later readers supply the text, since a span may
    # say why the model stopped in one convention and what it said in another: OpenLLMetry-style instrumentors
    # write ``gen_ai.completion.{i}.content`` beside the GenAI ``gen_ai.response.finish_reason(s)``, and the
    # GenAI reader, which takes those reasons for a generation with content capture off, comes first.
    generation: Generation | None = None
    for read_generation in _GENERATION_READERS:
        found = read_generation(span, reader)
        if found is None:
            continue
        if generation is None:
            generation = found
        elif found.text is not None:
            reasons = generation.finish_reasons
            generation = Generation(
                span=span,
                text=found.text,
                finish_reasons=reasons
                + tuple(reason for reason in found.finish_reasons if reason not in reasons),
                citations=found.citations or generation.citations,
                segments=found.segments or generation.segments,
                sources=found.sources or generation.sources,
            )
        if generation.text is not None:
            break
    if generation is not None:
        generations.append(generation)
    return recorded


_GENERATION_READERS: tuple[Callable[[SpanRecord, Reader], Generation | None], ...] = (
    openinference.read_generation,
    vercel_ai.read_generation,  # before GenAI: its spans carry GenAI finish reasons only
    genai.read_generation,
    openllmetry.read_generation,
    haystack.read_generation,
)


def _in_end_order(spans: Sequence[SpanRecord]) -> list[SpanRecord]:
    # Spans without an end time keep their input position relative to each other, after the timed ones (the
    # sort is stable).
    timed: list[SpanRecord] = []
    untimed: list[SpanRecord] = []
    for span in spans:
        if span.end_time is None:
            untimed.append(span)
        else:
            timed.append(span)
    timed.sort(key=_end_time)
    if untimed:
        timed.extend(untimed)
    return timed


def _end_time(span: SpanRecord) -> int:
    return span.end_time or 0


def _root_of(spans: Sequence[SpanRecord]) -> SpanRecord | None:
    ids = {span.span_id for span in spans}
    for span in spans:
        if span.parent_span_id is None or span.parent_is_remote or span.parent_span_id not in ids:
            return span
    return spans[-1] if spans else None


def _apply_evaluations(
    evaluations: Sequence[Evaluation],
    options: SignalOptions,
    inputs: dict[str, Any],
    sources: dict[str, str],
) -> None:
    if not evaluations:
        return
    lookup = options.evaluation_lookup
    for evaluation in evaluations:  # in end order: a later evaluation replaces an earlier one
        target = lookup.get(normalize_evaluation_name(evaluation.name))
        if target is None or evaluation.score is None or not 0.0 <= evaluation.score <= 1.0:
            continue
        inputs[target] = evaluation.score
        sources[target] = f"evaluation {evaluation.name}"


def _nest(flat: Mapping[str, Any], reader: Reader) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    for path, value in flat.items():
        head, _, tail = path.partition(".")
        if tail:
            nested.setdefault(head, {})[tail] = value
        else:
            nested[head] = value
    claims = nested.get("claimSupport")
    if claims is not None and ("totalClaims" not in claims or "supportedClaims" not in claims):
        # The algorithm needs both counts; half a claim summary is dropped rather than guessed.
        reader.skip()
        del nested["claimSupport"]
    return nested


def _level(share: float, options: SignalOptions) -> str:
    high, medium = options.support_thresholds
    if share >= high:
        return "high"
    if share >= medium:
        return "medium"
    return "low"


def _whole(value: Any) -> int | None:
    """A count given as an int or an integral float (an explicit input or a judge's result may be a double)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


def _derive_support_level(inputs: Mapping[str, Any], options: SignalOptions) -> tuple[str, str]:
    """The lower of the levels faithfulness and claim support imply; the default when neither is present."""
    levels: list[tuple[str, str]] = []
    faithfulness = inputs.get("faithfulnessScore")
    if isinstance(faithfulness, (int, float)) and not isinstance(faithfulness, bool):
        levels.append((_level(float(faithfulness), options), "faithfulnessScore"))
    claims = inputs.get("claimSupport")
    if isinstance(claims, Mapping):
        total = _whole(claims.get("totalClaims"))
        supported = _whole(claims.get("supportedClaims"))
        contradicted = _whole(claims.get("contradictedClaims") or 0)
        if total is not None and supported is not None and total > 0:
            level = (
                "low" if contradicted is not None and contradicted > 0 else _level(supported / total, options)
            )
            levels.append((level, "claimSupport"))
    if not levels:
        return options.default_support_level, "default"
    return min(levels, key=lambda item: _LEVELS.index(item[0]))
