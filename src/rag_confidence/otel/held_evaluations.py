"""Evaluation results (``gen_ai.evaluation.result`` log records) held for spans until their answer is scored.

An evaluator that logs its verdict while the answer is still being produced refers to a span by id; the result
is held by span id and handed to signal extraction as an event of that span.
"""

from __future__ import annotations

import dataclasses

from ..signals.records import EventRecord, SpanRecord

__all__ = ["Evaluations", "by_span", "split_evaluations", "with_evaluations"]

#: Evaluation results held per span id (see ``ConfidenceSpanProcessor.add_evaluation``).
Evaluations = dict[int, list[EventRecord]]


def with_evaluations(records: list[SpanRecord], evaluations: Evaluations) -> list[SpanRecord]:
    """``records`` with the evaluation results held for each appended to its events."""
    return [
        dataclasses.replace(record, events=(*record.events, *evaluations[record.span_id]))
        if record.span_id in evaluations
        else record
        for record in records
    ]


def split_evaluations(
    items: list[tuple[int, EventRecord]], span_ids: set[int]
) -> tuple[list[tuple[int, EventRecord]], list[tuple[int, EventRecord]]]:
    """The evaluations of ``span_ids``, and the others."""
    mine = [item for item in items if item[0] in span_ids]
    if len(mine) == len(items):
        return mine, []
    return mine, [item for item in items if item[0] not in span_ids]


def by_span(items: list[tuple[int, EventRecord]]) -> Evaluations:
    grouped: Evaluations = {}
    for span_id, event in items:
        grouped.setdefault(span_id, []).append(event)
    return grouped
