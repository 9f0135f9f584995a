"""Metric and label names as Prometheus sees them, derived from ``rag_confidence.semconv``, and the closed sets
of label values the dashboards and rules select on."""

from __future__ import annotations

from dataclasses import dataclass

from rag_confidence import semconv

# Every OTLP -> Prometheus path (Python exporter, Collector, Prometheus' OTLP receiver) turns dots into
# underscores, appends these unit suffixes, and `_total` to counters; `{curly}` units add nothing.
_UNIT_SUFFIXES = {"s": "_seconds", "ms": "_milliseconds", "By": "_bytes", "%": "_percent"}


def prometheus_label(attribute: str) -> str:
    """``rag.confidence.action`` -> ``rag_confidence_action``."""
    return attribute.replace(".", "_")


def prometheus_metric(instrument: str, unit: str) -> str:
    """The Prometheus base name of an OpenTelemetry instrument (before ``_total``/``_bucket``...)."""
    return instrument.replace(".", "_") + _UNIT_SUFFIXES.get(unit, "")


@dataclass(frozen=True)
class Histogram:
    name: str

    @property
    def bucket(self) -> str:
        return f"{self.name}_bucket"

    @property
    def sum(self) -> str:
        return f"{self.name}_sum"

    @property
    def count(self) -> str:
        return f"{self.name}_count"


SCORE = Histogram(prometheus_metric(semconv.METRIC_SCORE, semconv.UNIT_SCORE))
TIER_SCORE = Histogram(prometheus_metric(semconv.METRIC_TIER_SCORE, semconv.UNIT_SCORE))
DIMENSION_SCORE = Histogram(prometheus_metric(semconv.METRIC_DIMENSION_SCORE, semconv.UNIT_SCORE))
DURATION = Histogram(prometheus_metric(semconv.METRIC_SCORING_DURATION, semconv.UNIT_SECONDS))
WARNINGS = prometheus_metric(semconv.METRIC_WARNINGS, semconv.UNIT_WARNING) + "_total"
# The gateway's own metrics (rag_confidence.gateway.telemetry).
GW_RECEIVED = prometheus_metric(semconv.METRIC_GATEWAY_SPANS_RECEIVED, semconv.UNIT_SPAN) + "_total"
GW_FORWARDED = prometheus_metric(semconv.METRIC_GATEWAY_SPANS_FORWARDED, semconv.UNIT_SPAN) + "_total"
GW_REJECTED = prometheus_metric(semconv.METRIC_GATEWAY_SPANS_REJECTED, semconv.UNIT_SPAN) + "_total"
GW_EXPORT_FAILURES = (
    prometheus_metric(semconv.METRIC_GATEWAY_EXPORT_FAILURES, semconv.UNIT_FAILURE) + "_total"
)
GW_ACTIVE = prometheus_metric(semconv.METRIC_GATEWAY_ACTIVE_REQUESTS, semconv.UNIT_REQUEST)
GW_DURATION = Histogram(prometheus_metric(semconv.METRIC_GATEWAY_REQUEST_DURATION, semconv.UNIT_SECONDS))
GW_ANSWERS = prometheus_metric(semconv.METRIC_GATEWAY_ANSWERS, semconv.UNIT_ANSWER) + "_total"
GW_EVICTIONS = prometheus_metric(semconv.METRIC_GATEWAY_ASSEMBLY_EVICTIONS, semconv.UNIT_TRACE) + "_total"
GW_WINDOW = prometheus_metric(semconv.METRIC_GATEWAY_ASSEMBLY_TRACES, semconv.UNIT_TRACE)
# The in-process span processor's (rag_confidence.otel.pipeline): observable, so every series exists from 0.
PROC_RECEIVED = prometheus_metric(semconv.METRIC_PROCESSOR_SPANS_RECEIVED, semconv.UNIT_SPAN) + "_total"
PROC_FORWARDED = prometheus_metric(semconv.METRIC_PROCESSOR_SPANS_FORWARDED, semconv.UNIT_SPAN) + "_total"
PROC_UNBUFFERED = prometheus_metric(semconv.METRIC_PROCESSOR_SPANS_UNBUFFERED, semconv.UNIT_SPAN) + "_total"
PROC_ANSWERS = prometheus_metric(semconv.METRIC_PROCESSOR_ANSWERS, semconv.UNIT_ANSWER) + "_total"
PROC_FAILURES = prometheus_metric(semconv.METRIC_PROCESSOR_FAILURES, semconv.UNIT_FAILURE) + "_total"
PROC_EVICTIONS = prometheus_metric(semconv.METRIC_PROCESSOR_BUFFER_EVICTIONS, semconv.UNIT_TRACE) + "_total"
PROC_BUFFERED = prometheus_metric(semconv.METRIC_PROCESSOR_BUFFER_TRACES, semconv.UNIT_TRACE)
PROC_QUEUE = prometheus_metric(semconv.METRIC_PROCESSOR_QUEUE_SIZE, semconv.UNIT_ANSWER)

L_ACTION = prometheus_label(semconv.METRIC_ATTR_ACTION)
L_LABEL = prometheus_label(semconv.METRIC_ATTR_LABEL)
L_TIER = prometheus_label(semconv.METRIC_ATTR_TIER)
L_DIMENSION = prometheus_label(semconv.METRIC_ATTR_DIMENSION)
L_CODE = prometheus_label(semconv.METRIC_ATTR_WARNING_CODE)
L_SEVERITY = prometheus_label(semconv.METRIC_ATTR_WARNING_SEVERITY)
L_TRANSPORT = prometheus_label(semconv.METRIC_ATTR_GATEWAY_TRANSPORT)
L_OUTCOME = prometheus_label(semconv.METRIC_ATTR_GATEWAY_OUTCOME)
L_REASON = prometheus_label(semconv.METRIC_ATTR_GATEWAY_REASON)
L_PROC_OUTCOME = prometheus_label(semconv.METRIC_ATTR_PROCESSOR_OUTCOME)
L_PROC_REASON = prometheus_label(semconv.METRIC_ATTR_PROCESSOR_REASON)
# Label the scorer-down alert adds to say which path carries spans without scorecards.
L_COMPONENT = "component"
COMPONENT_GATEWAY = "gateway"
COMPONENT_PROCESSOR = "processor"

# Values of those labels: the scoring core's closed sets (transparent-confidence 0.3 names). Dimension values
# are the scorecard's snake_case field names, as the metrics module records them.
ACTIONS = ("answer", "review", "abstain")
OUTCOME_COLORS = {
    semconv.PIPELINE_OUTCOME_SCORED: "green",
    semconv.PIPELINE_OUTCOME_FAILED: "red",
    semconv.PIPELINE_OUTCOME_ALREADY_SCORED: "blue",
}
ACTION_COLORS = {"answer": "green", "review": "yellow", "abstain": "red"}
LABEL_COLORS = {"Strong": "green", "Moderate": "yellow", "Limited": "orange", "Insufficient": "red"}
SEVERITY_COLORS = {"error": "red", "warn": "orange", "info": "blue"}
DIM_FRESHNESS = "freshness"
DIM_CORPUS = "corpus"
DIM_INDEX_INTEGRITY = "index_integrity"
W_DELETED_SOURCE_LEAKAGE = "deleted-source-leakage"
W_EMBEDDING_VERSION_MISMATCH = "embedding-version-mismatch"
W_ACL_FILTER_UNCONFIRMED = "acl-filter-unconfirmed"
W_INDEX_INTEGRITY_INCOMPLETE = "index-integrity-incomplete"
W_REQUIRED_SIGNAL_MISSING = "required-signal-missing"
W_MISSING_FRESHNESS_DATES = "missing-freshness-dates"
W_MISSING_CORPUS_COUNT = "missing-corpus-count"
INDEX_INTEGRITY_CODES = (
    W_DELETED_SOURCE_LEAKAGE,
    W_EMBEDDING_VERSION_MISMATCH,
    W_ACL_FILTER_UNCONFIRMED,
    W_INDEX_INTEGRITY_INCOMPLETE,
)
# Every `missing-*` code plus the policy's `required-signal-missing` (its path names the signal).
MISSING_SIGNAL_CODES_RE = f"missing-.+|{W_REQUIRED_SIGNAL_MISSING}"
# Label bands of the total and tier 1 (Strong >= 85, Moderate >= 65, Limited >= 40); tier 2 cuts alike.
SCORE_BANDS = ((None, "red"), (40, "orange"), (65, "yellow"), (85, "green"))

# TraceQL attribute paths for the Tempo panels (Tempo keeps dotted attribute names as they are).
TRACEQL_ACTION = f"span.{semconv.RAG_CONFIDENCE_ACTION}"
TRACEQL_TOTAL = f"span.{semconv.RAG_CONFIDENCE_TOTAL}"
