"""The four dashboards: Overview, Dimensions and warnings, System readiness, Pipeline health."""

from __future__ import annotations

from collections.abc import Sequence

from rag_confidence import semconv

from .grafana import (
    JSON,
    Dashboard,
    bargauge,
    color_overrides,
    heatmap,
    piechart,
    query_variable,
    score_thresholds,
    share_thresholds,
    standard_variables,
    stat,
    table,
    target,
    tempo_variable,
    thresholds,
    timeseries,
    traces_table,
)
from .names import (
    ACTION_COLORS,
    COMPONENT_GATEWAY,
    COMPONENT_PROCESSOR,
    DIM_CORPUS,
    DIM_FRESHNESS,
    DIM_INDEX_INTEGRITY,
    DIMENSION_SCORE,
    DURATION,
    GW_ACTIVE,
    GW_ANSWERS,
    GW_DURATION,
    GW_EVICTIONS,
    GW_EXPORT_FAILURES,
    GW_FORWARDED,
    GW_RECEIVED,
    GW_REJECTED,
    GW_WINDOW,
    INDEX_INTEGRITY_CODES,
    L_ACTION,
    L_CODE,
    L_DIMENSION,
    L_LABEL,
    L_OUTCOME,
    L_PROC_OUTCOME,
    L_PROC_REASON,
    L_REASON,
    L_SEVERITY,
    L_TIER,
    L_TRANSPORT,
    LABEL_COLORS,
    MISSING_SIGNAL_CODES_RE,
    OUTCOME_COLORS,
    PROC_ANSWERS,
    PROC_BUFFERED,
    PROC_EVICTIONS,
    PROC_FAILURES,
    PROC_FORWARDED,
    PROC_QUEUE,
    PROC_RECEIVED,
    PROC_UNBUFFERED,
    SCORE,
    SEVERITY_COLORS,
    TIER_SCORE,
    TRACEQL_ACTION,
    TRACEQL_TOTAL,
    W_ACL_FILTER_UNCONFIRMED,
    W_DELETED_SOURCE_LEAKAGE,
    W_EMBEDDING_VERSION_MISMATCH,
    W_INDEX_INTEGRITY_INCOMPLETE,
    W_MISSING_CORPUS_COUNT,
    W_MISSING_FRESHNESS_DATES,
    WARNINGS,
    Histogram,
)
from .promql import RANGE, RATE_INTERVAL, dash_sel, eq, first_or_increase, match, quantile
from .settings import Settings

S = dash_sel  # short alias: every dashboard selector goes through it


def _share(numerator_matchers: Sequence[str], *, by: Sequence[str] = ()) -> str:
    """Share of scored answers matching ``numerator_matchers`` (by ``by``), over the rate interval."""
    grouping = f" by ({', '.join(by)})" if by else ""
    numerator = f"sum{grouping} (rate({S(SCORE.count, *numerator_matchers)}[{RATE_INTERVAL}]))"
    denominator = f"sum (rate({S(SCORE.count)}[{RATE_INTERVAL}]))"
    if by:
        return f"{numerator}\n/ on () group_left ()\n{denominator}"
    return f"({numerator} or vector(0))\n/\n{denominator}"


def _per_answer(code_matcher: str, *, by: Sequence[str]) -> str:
    """Warnings of the matched codes per scored answer."""
    labels = ", ".join(by)
    return (
        f"sum by ({labels}) (rate({S(WARNINGS, code_matcher)}[{RATE_INTERVAL}]))\n"
        f"/ on () group_left ()\nsum (rate({S(SCORE.count)}[{RATE_INTERVAL}]))"
    )


def _seen_in_range(code: str) -> str:
    """Warnings of ``code`` in the dashboard's time range, counting a counter's first increments too."""
    return f"sum ({first_or_increase(S(WARNINGS, eq(L_CODE, code)), RANGE)})\nor vector(0)"


def _quantiles(histogram: Histogram, *matchers: str, by: Sequence[str] = (), legend: str = "") -> list[JSON]:
    def sel(metric: str) -> str:
        return S(metric, *matchers)

    return [
        target(
            quantile(q, histogram, sel, by, RATE_INTERVAL), f"{legend}p{round(q * 100)}", exemplar=q == 0.5
        )
        for q in (0.1, 0.5, 0.9)
    ]


def overview(settings: Settings) -> Dashboard:
    abstain = float(settings.alert("abstain_rate")["threshold"])
    review = float(settings.alert("review_rate")["threshold"])
    d = Dashboard(
        "rag-confidence-overview",
        "RAG confidence / Overview",
        "Confidence scorecards of RAG answers: traffic by recommended action, label mix, score distribution "
        "and tiers. Score panels carry exemplars that open the scored trace in Tempo.",
        [*standard_variables(SCORE.count), tempo_variable()],
    )
    d.row("Answers")
    d.add(
        stat(
            "Scored answers",
            "Answers scored per second over the rate interval, all actions.",
            f"sum (rate({S(SCORE.count)}[{RATE_INTERVAL}]))",
            unit="reqps",
            steps=thresholds((None, "blue")),
        ),
        w=6,
        h=5,
    )
    d.add(
        stat(
            "Abstain rate",
            f"Share of scored answers whose recommended action is abstain. Red from {abstain:.0%}, the "
            "RagConfidenceAbstainRateHigh alert's threshold.",
            _share([eq(L_ACTION, "abstain")]),
            unit="percentunit",
            steps=share_thresholds(abstain),
            minimum=0,
            maximum=1,
            decimals=1,
        ),
        w=6,
        h=5,
    )
    d.add(
        stat(
            "Review rate",
            f"Share of scored answers sent to human review. Red from {review:.0%}, the "
            "RagConfidenceReviewRateHigh alert's threshold.",
            _share([eq(L_ACTION, "review")]),
            unit="percentunit",
            steps=share_thresholds(review),
            minimum=0,
            maximum=1,
            decimals=1,
        ),
        w=6,
        h=5,
    )
    d.add(
        stat(
            "Median score",
            "Median confidence total (0-100), interpolated within the 10-point histogram buckets. Colours "
            "follow the label bands: Strong from 85, Moderate from 65, Limited from 40, Insufficient below.",
            quantile(0.5, SCORE, S, (), RATE_INTERVAL),
            unit="none",
            steps=score_thresholds(),
            minimum=0,
            maximum=100,
            decimals=0,
        ),
        w=6,
        h=5,
    )
    d.add(
        timeseries(
            "Scored answers by action",
            "Answers scored per second, stacked by recommended action (answer, review, abstain).",
            [target(f"sum by ({L_ACTION}) (rate({S(SCORE.count)}[{RATE_INTERVAL}]))", f"{{{{{L_ACTION}}}}}")],
            unit="reqps",
            steps=thresholds((None, "green")),
            stack=True,
            overrides=color_overrides(ACTION_COLORS),
        ),
        w=16,
    )
    d.add(
        piechart(
            "Action mix",
            "Scored answers by recommended action over the dashboard's time range.",
            f"sum by ({L_ACTION}) (increase({S(SCORE.count)}[{RANGE}]))",
            f"{{{{{L_ACTION}}}}}",
            ACTION_COLORS,
        ),
        w=8,
    )
    d.add(
        timeseries(
            "Abstain rate",
            "Share of scored answers that abstain. The red line is the RagConfidenceAbstainRateHigh "
            "threshold (dashboards/config.yaml).",
            [target(_share([eq(L_ACTION, "abstain")]), "abstain")],
            unit="percentunit",
            steps=share_thresholds(abstain),
            maximum=1,
            threshold_style="line",
        ),
        w=12,
    )
    d.add(
        timeseries(
            "Review rate",
            "Share of scored answers sent to review. The red line is the RagConfidenceReviewRateHigh "
            "threshold. Without a conflict signal the default policy never answers, so a review rate near "
            "100% usually "
            "means that signal is not recorded.",
            [target(_share([eq(L_ACTION, "review")]), "review")],
            unit="percentunit",
            steps=share_thresholds(review),
            maximum=1,
            threshold_style="line",
        ),
        w=12,
    )
    d.row("Scores")
    d.add(
        heatmap(
            "Score distribution",
            "Scored answers per 10-point score bucket over time, straight from the histogram buckets. "
            "Exemplars (when the pipeline carries them) link to the scored trace.",
            f"sum by (le) (increase({S(SCORE.bucket)}[{RATE_INTERVAL}]))",
        ),
        w=12,
    )
    d.add(
        timeseries(
            "Score percentiles",
            "10th, 50th and 90th percentile of the confidence total. The dashed lines are the label bands "
            "(40 Limited, 65 Moderate, 85 Strong). The median carries exemplars linking to traces.",
            _quantiles(SCORE),
            unit="none",
            steps=score_thresholds(),
            maximum=100,
            decimals=0,
            threshold_style="dashed",
        ),
        w=12,
    )
    d.add(
        timeseries(
            "Label mix",
            "Share of scored answers per confidence label (Strong, Moderate, Limited, Insufficient).",
            [target(_share([], by=[L_LABEL]), f"{{{{{L_LABEL}}}}}")],
            unit="percentunit",
            steps=thresholds((None, "green")),
            maximum=1,
            stack=True,
            overrides=color_overrides(LABEL_COLORS),
        ),
        w=12,
    )
    d.add(
        timeseries(
            "Tier scores",
            "Median and 10th percentile of tier 1 (grounding, retrieval, consistency, relevance, authority) "
            "and tier 2 (corpus, freshness, index integrity; only when a tier 2 extension is active).",
            [
                *_quantiles(TIER_SCORE, by=[L_TIER], legend=f"{{{{{L_TIER}}}}} ")[:2],
            ],
            unit="none",
            steps=score_thresholds(),
            maximum=100,
            decimals=0,
            threshold_style="dashed",
        ),
        w=12,
    )
    d.row("Traces")
    d.add(
        traces_table(
            "Answers that abstained or went to review",
            "Recent traces whose answer span recommends abstain or review (TraceQL, Tempo data source).",
            f'{{ {TRACEQL_ACTION} =~ "abstain|review" }}',
        ),
        w=24,
    )
    return d


def dimensions(settings: Settings) -> Dashboard:
    d = Dashboard(
        "rag-confidence-dimensions",
        "RAG confidence / Dimensions and warnings",
        "Per-dimension scores (normalized 0-100) and scorecard warnings by code and severity, including the "
        "warnings that say a scoring signal is missing.",
        [
            *standard_variables(SCORE.count),
            query_variable(
                "dimension",
                "Dimension",
                f'label_values({DIMENSION_SCORE.count}{{job=~"$job", instance=~"$instance"}}, {L_DIMENSION})',
            ),
        ],
    )
    dim = match(L_DIMENSION, "$dimension")
    legend = f"{{{{{L_DIMENSION}}}}}"
    d.row("Dimensions")
    for q, title, what in (
        (0.5, "Median score by dimension", "Median"),
        (0.1, "10th percentile by dimension", "10th percentile (the weak tail)"),
    ):
        d.add(
            timeseries(
                title,
                f"{what} of each active dimension's normalized score (0-100). Dashed lines: 40, 65, 85.",
                [
                    target(
                        quantile(q, DIMENSION_SCORE, lambda m: S(m, dim), [L_DIMENSION], RATE_INTERVAL),
                        legend,
                        exemplar=True,
                    )
                ],
                unit="none",
                steps=score_thresholds(),
                maximum=100,
                decimals=0,
                threshold_style="dashed",
            ),
            w=12,
        )
    d.add(
        bargauge(
            "Mean score by dimension",
            "Mean normalized score of each dimension over the dashboard's time range.",
            f"sum by ({L_DIMENSION}) (increase({S(DIMENSION_SCORE.sum, dim)}[{RANGE}]))\n"
            f"/\nsum by ({L_DIMENSION}) (increase({S(DIMENSION_SCORE.count, dim)}[{RANGE}]))",
            legend,
            unit="none",
            steps=score_thresholds(),
            maximum=100,
        ),
        w=12,
    )
    d.add(
        timeseries(
            "Dimension activity",
            "Share of scored answers in which each dimension was active. Optional dimensions (relevance, "
            "authority, corpus, freshness, index integrity) are active only when their inputs or config are "
            "set.",
            [
                target(
                    f"sum by ({L_DIMENSION}) (rate({S(DIMENSION_SCORE.count, dim)}[{RATE_INTERVAL}]))\n"
                    f"/ on () group_left ()\nsum (rate({S(SCORE.count)}[{RATE_INTERVAL}]))",
                    legend,
                )
            ],
            unit="percentunit",
            steps=thresholds((None, "green")),
            maximum=1,
        ),
        w=12,
    )
    d.row("Warnings")
    d.add(
        timeseries(
            "Warnings by code",
            "Scorecard warnings per second by code.",
            [target(f"sum by ({L_CODE}) (rate({S(WARNINGS)}[{RATE_INTERVAL}]))", f"{{{{{L_CODE}}}}}")],
            unit="cps",
            steps=thresholds((None, "green")),
            stack=True,
        ),
        w=12,
    )
    d.add(
        timeseries(
            "Warnings by severity",
            "Scorecard warnings per second by severity. `error` is deleted-source leakage only.",
            [
                target(
                    f"sum by ({L_SEVERITY}) (rate({S(WARNINGS)}[{RATE_INTERVAL}]))", f"{{{{{L_SEVERITY}}}}}"
                )
            ],
            unit="cps",
            steps=thresholds((None, "green")),
            stack=True,
            overrides=color_overrides(SEVERITY_COLORS),
        ),
        w=12,
    )
    d.add(
        table(
            "Warnings in time range",
            "Scorecard warnings by code and severity over the dashboard's time range.",
            f"sum by ({L_CODE}, {L_SEVERITY}) (increase({S(WARNINGS)}[{RANGE}]))",
            {L_CODE: "Code", L_SEVERITY: "Severity", "Value": "Warnings"},
            unit="short",
            steps=thresholds((None, "text"), (1, "orange")),
        ),
        w=12,
        h=10,
    )
    d.add(
        timeseries(
            "Missing-signal warnings per answer",
            "`missing-*` and `required-signal-missing` warnings per scored answer. A step up usually means "
            "an instrumentation change stopped recording a signal (see RagConfidenceSignalsMissing).",
            [target(_per_answer(match(L_CODE, MISSING_SIGNAL_CODES_RE), by=[L_CODE]), f"{{{{{L_CODE}}}}}")],
            unit="short",
            steps=thresholds((None, "green"), (1, "orange")),
            decimals=2,
        ),
        w=12,
        h=10,
    )
    return d


def readiness(settings: Settings) -> Dashboard:
    d = Dashboard(
        "rag-confidence-readiness",
        "RAG confidence / System readiness",
        "Tier 2 (corpus, freshness, index integrity): is the knowledge system fit to answer? "
        "Index-integrity warnings (deleted-source leakage, embedding version mismatch, unconfirmed ACL "
        "filter) and freshness.",
        [*standard_variables(SCORE.count), tempo_variable()],
    )
    tier2 = eq(L_TIER, semconv.TIER2)
    d.row("Tier 2 and index integrity")
    d.add(
        stat(
            "Tier 2 median",
            "Median tier 2 score (corpus, freshness, index integrity) of answers where a tier 2 extension is "
            "active. Bands: Complete from 85, Good from 65, Partial from 40, Thin below.",
            quantile(0.5, TIER_SCORE, lambda m: S(m, tier2), (), RATE_INTERVAL),
            unit="none",
            steps=score_thresholds(),
            minimum=0,
            maximum=100,
            decimals=0,
        ),
        w=6,
        h=5,
    )
    for code, title, what in (
        (
            W_DELETED_SOURCE_LEAKAGE,
            "Deleted-source leakage",
            "answers that served a deleted source (critical)",
        ),
        (
            W_EMBEDDING_VERSION_MISMATCH,
            "Embedding version mismatch",
            "answers retrieved from an index built with another embedding model version",
        ),
        (
            W_ACL_FILTER_UNCONFIRMED,
            "ACL filter unconfirmed",
            "answers whose retrieval ACL filter was not "
            "confirmed (emitted only when the config requires confirmation)",
        ),
    ):
        d.add(
            stat(
                title,
                f"`{code}` warnings in the dashboard's time range: {what}. Anything above 0 is red.",
                _seen_in_range(code),
                unit="short",
                steps=thresholds((None, "green"), (1, "red")),
                minimum=0,
                decimals=0,
            ),
            w=6,
            h=5,
        )
    d.add(
        timeseries(
            "Tier 2 score percentiles",
            "10th, 50th and 90th percentile of the tier 2 score. Dashed lines: 40, 65, 85.",
            _quantiles(TIER_SCORE, tier2),
            unit="none",
            steps=score_thresholds(),
            maximum=100,
            decimals=0,
            threshold_style="dashed",
        ),
        w=12,
    )
    d.add(
        timeseries(
            "Index-integrity warnings",
            "Index-integrity warnings per second by code.",
            [
                target(
                    f"sum by ({L_CODE}) (rate({S(WARNINGS, match(L_CODE, '|'.join(INDEX_INTEGRITY_CODES)))}"
                    f"[{RATE_INTERVAL}]))",
                    f"{{{{{L_CODE}}}}}",
                )
            ],
            unit="cps",
            steps=thresholds((None, "green")),
            overrides=color_overrides(
                {
                    W_DELETED_SOURCE_LEAKAGE: "red",
                    W_EMBEDDING_VERSION_MISMATCH: "orange",
                    W_ACL_FILTER_UNCONFIRMED: "purple",
                    W_INDEX_INTEGRITY_INCOMPLETE: "blue",
                }
            ),
        ),
        w=12,
    )
    d.add(
        timeseries(
            "Share of tier 2 answers",
            "Share of scored answers with a tier 2 score (a tier 2 extension was active).",
            [
                target(
                    f"sum (rate({S(TIER_SCORE.count, tier2)}[{RATE_INTERVAL}]))\n"
                    f"/\nsum (rate({S(SCORE.count)}[{RATE_INTERVAL}]))",
                    "tier 2 active",
                )
            ],
            unit="percentunit",
            steps=thresholds((None, "green")),
            maximum=1,
        ),
        w=12,
    )
    d.add(
        traces_table(
            "Low-confidence answers",
            "Recent traces whose answer span scored below 40 (TraceQL in the Tempo data source).",
            f"{{ {TRACEQL_TOTAL} < 40 }}",
        ),
        w=12,
    )
    d.row("Dimensions")
    for dimension, title in (
        (DIM_INDEX_INTEGRITY, "Index integrity score"),
        (DIM_FRESHNESS, "Freshness score"),
        (DIM_CORPUS, "Corpus coverage score"),
    ):
        d.add(
            timeseries(
                title,
                f"10th, 50th and 90th percentile of the `{dimension}` dimension's normalized score (0-100), "
                "for answers where it is active.",
                _quantiles(DIMENSION_SCORE, eq(L_DIMENSION, dimension)),
                unit="none",
                steps=score_thresholds(),
                maximum=100,
                decimals=0,
                threshold_style="dashed",
            ),
            w=8,
        )
    d.add(
        timeseries(
            "Readiness inputs missing",
            "Warnings per scored answer that say a tier 2 input is missing: no document dates for freshness, "
            "no corpus type count, incomplete index-integrity signals.",
            [
                target(
                    _per_answer(
                        match(
                            L_CODE,
                            f"{W_MISSING_FRESHNESS_DATES}|{W_MISSING_CORPUS_COUNT}|{W_INDEX_INTEGRITY_INCOMPLETE}",
                        ),
                        by=[L_CODE],
                    ),
                    f"{{{{{L_CODE}}}}}",
                )
            ],
            unit="short",
            steps=thresholds((None, "green"), (1, "orange")),
            decimals=2,
        ),
        w=24,
    )
    return d


def _both(gateway: str, processor: str, legend: str, *, by: str | None = None) -> list[JSON]:
    """The rate of a gateway counter and of its span processor counterpart, one target each, legends
    prefixed ``gateway`` / ``processor`` so one panel shows both paths. ``by`` (``outcome`` or ``reason``)
    groups each by its own label of that name; ``{by}`` in ``legend`` stands for the label's value."""
    out = []
    for component, metric, labels in (
        (COMPONENT_GATEWAY, gateway, {"outcome": L_OUTCOME, "reason": L_REASON}),
        (COMPONENT_PROCESSOR, processor, {"outcome": L_PROC_OUTCOME, "reason": L_PROC_REASON}),
    ):
        grouping = f" by ({labels[by]})" if by else ""
        text = legend.replace("{by}", f"{{{{{labels[by]}}}}}") if by else legend
        out.append(target(f"sum{grouping} (rate({S(metric)}[{RATE_INTERVAL}]))", f"{component} {text}"))
    return out


def _prefixed(colors: dict[str, str]) -> dict[str, str]:
    return {
        f"{c} {name}": color
        for c in (COMPONENT_GATEWAY, COMPONENT_PROCESSOR)
        for name, color in colors.items()
    }


def pipeline(settings: Settings) -> Dashboard:
    slow = settings.alert("slow_scoring")
    slow_q = float(slow["quantile"])
    slow_s = float(slow["threshold_seconds"])
    d = Dashboard(
        "rag-confidence-pipeline",
        "RAG confidence / Pipeline health",
        "Is scoring keeping up, on both paths: the in-process ConfidenceSpanProcessor "
        "(rag_confidence_processor_*) and the gateway (rag_confidence_gateway_*). Scorecards produced, time "
        "spent scoring, spans in and out, answers by outcome, failures, trace buffers and evictions; then "
        "the gateway's rejections, export failures and requests.",
        standard_variables(f'{{__name__=~"{DURATION.count}|{GW_RECEIVED}|{PROC_RECEIVED}"}}'),
    )
    d.row("Scoring")
    d.add(
        timeseries(
            "Scoring duration",
            f"50th, 90th and {slow_q:.0%} percentile of the time spent extracting signals and computing one "
            f"scorecard. The red line is the RagConfidenceScoringSlow threshold ({slow_s:g} s at "
            f"p{slow_q * 100:g}).",
            [
                target(quantile(q, DURATION, S, (), RATE_INTERVAL), f"p{q * 100:g}")
                for q in sorted({0.5, 0.9, slow_q})
            ],
            unit="s",
            steps=thresholds((None, "green"), (slow_s, "red")),
            threshold_style="line",
        ),
        w=12,
    )
    d.add(
        timeseries(
            "Scorecards",
            "Scorecards produced per second, by job. A job whose spans keep flowing (below) without "
            "scorecards here fires RagConfidenceScorerDown.",
            [target(f"sum by (job) (rate({S(DURATION.count)}[{RATE_INTERVAL}]))", "{{job}}")],
            unit="reqps",
            steps=thresholds((None, "green")),
        ),
        w=12,
    )
    d.add(
        stat(
            "Mean scoring time",
            "Mean time to score one answer over the rate interval.",
            f"sum (rate({S(DURATION.sum)}[{RATE_INTERVAL}]))\n/\n"
            f"sum (rate({S(DURATION.count)}[{RATE_INTERVAL}]))",
            unit="s",
            steps=thresholds((None, "green"), (slow_s, "red")),
            decimals=4,
        ),
        w=6,
        h=5,
    )
    d.add(
        stat(
            "Answers waiting for background scoring",
            "Answers queued for the span processors' background scoring threads (background_scoring=True; "
            "always 0 when scoring inline). A queue that stays near max_scoring_queue (2048 by default) "
            "means scoring does not keep up and callers score inline.",
            f"sum ({S(PROC_QUEUE)})",
            unit="short",
            steps=thresholds((None, "green"), (100, "orange"), (1000, "red")),
            decimals=0,
        ),
        w=6,
        h=5,
    )
    d.add(
        stat(
            "Traces buffered in-process",
            "Traces whose ended spans the span processors hold until their answer or local root ends "
            "(bounded by max_pending_traces, 10,000 by default).",
            f"sum ({S(PROC_BUFFERED)})",
            unit="short",
            steps=thresholds((None, "green"), (5000, "orange"), (9000, "red")),
            decimals=0,
        ),
        w=6,
        h=5,
    )
    d.add(
        stat(
            "Gateway requests in progress",
            "OTLP export requests the gateway is receiving, scoring or forwarding right now.",
            f"sum ({S(GW_ACTIVE)})",
            unit="short",
            steps=thresholds((None, "green")),
            decimals=0,
        ),
        w=6,
        h=5,
    )
    d.row("Spans and answers: span processor and gateway")
    d.add(
        timeseries(
            "Spans in and out",
            "Spans per second into and out of each path. Span processor: spans ended (received) and handed "
            "to the exporting processor (forwarded); it never drops one, so the two differ only by answers "
            "being scored in the background. Gateway: spans received, handed downstream, and not forwarded "
            "(rejected); received minus forwarded is what the upstream has to retry or has lost.",
            [
                *_both(GW_RECEIVED, PROC_RECEIVED, "received"),
                *_both(GW_FORWARDED, PROC_FORWARDED, "forwarded"),
                target(f"sum (rate({S(GW_REJECTED)}[{RATE_INTERVAL}]))", f"{COMPONENT_GATEWAY} rejected"),
            ],
            unit="cps",
            steps=thresholds((None, "green")),
            overrides=color_overrides(
                {
                    **_prefixed({"received": "blue", "forwarded": "green"}),
                    f"{COMPONENT_GATEWAY} rejected": "red",
                }
            ),
        ),
        w=12,
    )
    d.add(
        timeseries(
            "Answers found by outcome",
            "Answer spans found per second on each path: scored, failed (forwarded with "
            "rag.confidence.error) or already scored (by @scored_answer in the application, or upstream).",
            _both(GW_ANSWERS, PROC_ANSWERS, "{by}", by="outcome"),
            unit="reqps",
            steps=thresholds((None, "green")),
            stack=True,
            overrides=color_overrides(_prefixed(OUTCOME_COLORS)),
        ),
        w=12,
    )
    d.add(
        timeseries(
            "Span processor failures",
            "Failures the span processors caught, per second, by reason: `scoring` (the scorer raised; the "
            "answer was forwarded with rag.confidence.error), `recording` (the metrics or the evaluation "
            "event could not be recorded), `processing` (a bug on the span path; the span was forwarded "
            "as it was). The application never sees them; the processor logs the first five with a "
            "traceback. Any is red.",
            [
                target(
                    f"sum by ({L_PROC_REASON}) (rate({S(PROC_FAILURES)}[{RATE_INTERVAL}]))",
                    f"{{{{{L_PROC_REASON}}}}}",
                )
            ],
            unit="cps",
            steps=thresholds((None, "green"), (0.0001, "red")),
            threshold_style="area",
        ),
        w=12,
    )
    d.add(
        timeseries(
            "Trace evictions",
            "Traces dropped per second from a trace buffer before their answer ended, by path and reason: "
            "`max_age` (older than the span processor's pending_ttl_s or the gateway's assembly max age), "
            "`max_traces` (beyond the buffer's trace limit), `memory` (gateway). The span processor's "
            "evicted answers go unscored; the gateway scores them without the evicted spans.",
            _both(GW_EVICTIONS, PROC_EVICTIONS, "evicted: {by}", by="reason"),
            unit="cps",
            steps=thresholds((None, "green")),
        ),
        w=12,
    )
    d.add(
        timeseries(
            "Traces buffered",
            "Traces held right now: by the span processors (ended spans waiting for their answer or local "
            "root) and in the gateway's assembly window.",
            [
                target(f"sum ({S(GW_WINDOW)})", f"{COMPONENT_GATEWAY} assembly window"),
                target(f"sum ({S(PROC_BUFFERED)})", f"{COMPONENT_PROCESSOR} buffer"),
            ],
            unit="short",
            steps=thresholds((None, "green")),
        ),
        w=12,
    )
    d.add(
        timeseries(
            "Span processor: unbuffered spans and background queue",
            "Spans per second the span processors forwarded without buffering them for scoring (their trace "
            "already held max_spans_per_trace: its answer is scored without them), and answers waiting for "
            "the background scoring thread.",
            [
                target(f"sum (rate({S(PROC_UNBUFFERED)}[{RATE_INTERVAL}]))", "unbuffered spans/s"),
                target(f"sum ({S(PROC_QUEUE)})", "answers queued"),
            ],
            unit="short",
            steps=thresholds((None, "green")),
        ),
        w=12,
    )
    d.row("Gateway")
    d.add(
        timeseries(
            "Rejected spans by reason",
            "Spans not forwarded, by reason: `invalid_span` (bad ids, dropped with partial success; not "
            "retried) or `downstream_unavailable` (refused with a retryable status; the upstream retries).",
            [target(f"sum by ({L_REASON}) (rate({S(GW_REJECTED)}[{RATE_INTERVAL}]))", f"{{{{{L_REASON}}}}}")],
            unit="cps",
            steps=thresholds((None, "green")),
            stack=True,
        ),
        w=12,
    )
    d.add(
        timeseries(
            "Export failures",
            "Downstream exports that failed after the exporter's own retries, per second, by job. Any is red "
            "(RagConfidenceExportFailing). In-process, exports belong to the SDK exporter inside the span "
            "processor: see its own logs and metrics.",
            [target(f"sum by (job) (rate({S(GW_EXPORT_FAILURES)}[{RATE_INTERVAL}]))", "{{job}}")],
            unit="cps",
            steps=thresholds((None, "green"), (0.0001, "red")),
            threshold_style="area",
        ),
        w=12,
    )
    d.add(
        timeseries(
            "Requests by outcome",
            "OTLP export requests per second by outcome (ok, partial, invalid, overloaded, "
            "downstream_unavailable, ...).",
            [
                target(
                    f"sum by ({L_OUTCOME}) (rate({S(GW_DURATION.count)}[{RATE_INTERVAL}]))",
                    f"{{{{{L_OUTCOME}}}}}",
                )
            ],
            unit="reqps",
            steps=thresholds((None, "green")),
            stack=True,
        ),
        w=12,
    )
    d.add(
        timeseries(
            "Request duration",
            "50th and 99th percentile of the time from receiving an export request to answering it, by "
            "transport (includes scoring and the downstream export).",
            [
                target(
                    quantile(q, GW_DURATION, S, [L_TRANSPORT], RATE_INTERVAL),
                    f"{{{{{L_TRANSPORT}}}}} p{q * 100:g}",
                )
                for q in (0.5, 0.99)
            ],
            unit="s",
            steps=thresholds((None, "green"), (1, "orange")),
        ),
        w=12,
    )
    return d


DASHBOARDS = {
    "rag-confidence-overview.json": overview,
    "rag-confidence-dimensions.json": dimensions,
    "rag-confidence-readiness.json": readiness,
    "rag-confidence-pipeline.json": pipeline,
}
