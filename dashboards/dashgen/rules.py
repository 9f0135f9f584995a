"""The alert rules: one Prometheus rule group, its PrometheusRule and Grafana-managed copies."""

from __future__ import annotations

import copy
import re

from .grafana import JSON
from .names import (
    COMPONENT_GATEWAY,
    COMPONENT_PROCESSOR,
    DURATION,
    GW_EXPORT_FAILURES,
    GW_RECEIVED,
    L_ACTION,
    L_CODE,
    L_COMPONENT,
    PROC_RECEIVED,
    SCORE,
    W_ACL_FILTER_UNCONFIRMED,
    W_DELETED_SOURCE_LEAKAGE,
    W_EMBEDDING_VERSION_MISMATCH,
    WARNINGS,
)
from .promql import eq, first_or_increase, indent, match, quantile
from .settings import Settings


class Rules:
    """Builds the alerting rules of one group with the configured selector and grouping labels."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.by = ", ".join(settings.group_by)
        self.where = " ".join(f"{{{{ $labels.{label} }}}}" for label in settings.group_by)
        self.rules: list[JSON] = []

    def sel(self, metric: str, *matchers: str) -> str:
        parts = [m for m in (self.settings.selector, *matchers) if m]
        return f"{metric}{{{', '.join(parts)}}}" if parts else metric

    def answers(self, window: str, *matchers: str, offset: str = "") -> str:
        shifted = f" offset {offset}" if offset else ""
        return f"sum by ({self.by}) (rate({self.sel(SCORE.count, *matchers)}[{window}]{shifted}))"

    def enough_answers(self, window: str, minimum: object) -> str:
        answers = f"sum by ({self.by}) (increase({self.sel(SCORE.count)}[{window}]))"
        return f"and on ({self.by})\n  {answers} >= {minimum}"

    def add(self, name: str, key: str, expr: str, summary: str, description: str) -> None:
        cfg = self.settings.alert(key)
        rule: JSON = {"alert": name, "expr": expr.strip() + "\n"}
        if str(cfg["for"]) not in ("0", "0s", "0m"):
            rule["for"] = str(cfg["for"])
        rule["labels"] = {"severity": str(cfg["severity"])}
        rule["annotations"] = {
            "summary": summary,
            "description": description,
            "runbook_url": f"{self.settings.runbook_base_url}#{name.lower()}",
        }
        self.rules.append(rule)

    def share_alert(self, name: str, key: str, action: str, summary: str, meaning: str) -> None:
        cfg = self.settings.alert(key)
        window = cfg["window"]
        self.add(
            name,
            key,
            f"(\n  {self.answers(window, eq(L_ACTION, action))}\n/\n  {self.answers(window)}\n)"
            f" > {cfg['threshold']}\n{self.enough_answers(window, cfg['min_answers'])}",
            summary,
            f"{self.where}: {{{{ $value | humanizePercentage }}}} of scored answers {meaning} over the last "
            f"{window} (threshold {float(cfg['threshold']):.0%}).",
        )

    def any_warning_alert(self, name: str, key: str, code: str, summary: str, meaning: str) -> None:
        cfg = self.settings.alert(key)
        window = cfg["window"]
        series = self.sel(WARNINGS, eq(L_CODE, code))
        self.add(
            name,
            key,
            f"sum by ({self.by}) (\n{indent(first_or_increase(series, window), 2)}\n) > 0",
            summary,
            f"{self.where}: {{{{ $value | humanize }}}} scorecard(s) in the last {window} carried the "
            f"`{code}` warning: {meaning}.",
        )


def alert_rules(settings: Settings) -> JSON:
    r = Rules(settings)
    r.share_alert(
        "RagConfidenceAbstainRateHigh",
        "abstain_rate",
        "abstain",
        "Many RAG answers are recommended to abstain.",
        "were recommended to abstain",
    )
    r.share_alert(
        "RagConfidenceReviewRateHigh",
        "review_rate",
        "review",
        "Many RAG answers are sent to human review.",
        "were sent to review",
    )

    drop = settings.alert("median_score_drop")
    window, offset = drop["window"], drop["baseline_offset"]
    median_now = quantile(0.5, SCORE, r.sel, settings.group_by, window)
    median_then = quantile(0.5, SCORE, r.sel, settings.group_by, window, offset)
    r.add(
        "RagConfidenceMedianScoreDropped",
        "median_score_drop",
        f"(\n  {median_then}\n-\n  {median_now}\n) >= {drop['points']}\n"
        f"{r.enough_answers(window, drop['min_answers'])}",
        "The median confidence score dropped against the same time yesterday.",
        f'{r.where}: the median confidence score over the last {window} is {{{{ $value | printf "%.0f" }}}} '
        f"points below the median over the same {window} {offset} earlier (threshold {drop['points']} "
        "points).",
    )

    r.any_warning_alert(
        "RagConfidenceDeletedSourceLeakage",
        "deleted_source_leakage",
        W_DELETED_SOURCE_LEAKAGE,
        "A RAG answer was built from a source that has been deleted.",
        "retrieval returned content whose source was deleted, so deleted (possibly withdrawn or "
        "confidential) content reached an answer",
    )
    r.any_warning_alert(
        "RagConfidenceEmbeddingVersionMismatch",
        "embedding_version_mismatch",
        W_EMBEDDING_VERSION_MISMATCH,
        "Queries are embedded with a different model version than the index.",
        "the embedding model version used for queries differs from the one the index was built with, so "
        "similarity scores are unreliable",
    )
    r.any_warning_alert(
        "RagConfidenceAclFilterUnconfirmed",
        "acl_filter_unconfirmed",
        W_ACL_FILTER_UNCONFIRMED,
        "Retrieval ran without a confirmed access-control filter.",
        "retrieval did not confirm that the access-control filter was applied",
    )

    missing = settings.alert("signals_missing")
    window, offset = missing["window"], missing["baseline_offset"]
    codes = match(L_CODE, "|".join(missing["codes"]))
    by_code = f"{r.by}, {L_CODE}"
    warnings_now = f"sum by ({by_code}) (rate({r.sel(WARNINGS, codes)}[{window}]))"
    warnings_then = f"sum by ({by_code}) (rate({r.sel(WARNINGS, codes)}[{window}] offset {offset}))"
    join = f"/ on ({r.by}) group_left ()"
    r.add(
        "RagConfidenceSignalsMissing",
        "signals_missing",
        f"""
(
    {warnings_now}
  {join}
    {r.answers(window)}
)
- on ({by_code})
(
  (
      {warnings_then}
    {join}
      {r.answers(window, offset=offset)}
  )
  or
  (
    0 * {warnings_now}
    and on ({r.by})
    {r.answers(window, offset=offset)} > 0
  )
)
> {missing["increase"]}
{r.enough_answers(window, missing["min_answers"])}
""",
        "Scoring signals stopped arriving: missing-signal warnings rose against yesterday.",
        f"{r.where}: `{{{{ $labels.{L_CODE} }}}}` warnings per scored answer over the last {window} are "
        f'{{{{ $value | printf "%.2f" }}}} above the same {window} {offset} earlier (threshold '
        f"{missing['increase']}). Instrumentation probably stopped recording a signal the scoring policy "
        "requires.",
    )

    down = settings.alert("scorer_down")
    window = down["window"]
    # Spans through either path, labelled with the path, so the alert says which one carries them.
    spans_in = "\nor\n".join(
        f'  label_replace(sum by ({r.by}) (rate({r.sel(metric)}[{window}])), "{L_COMPONENT}", "{component}", "", "")'
        for metric, component in ((GW_RECEIVED, COMPONENT_GATEWAY), (PROC_RECEIVED, COMPONENT_PROCESSOR))
    )
    r.add(
        "RagConfidenceScorerDown",
        "scorer_down",
        f"(\n{spans_in}\n) > 0\nunless on ({r.by})\n{r.answers(window)} > 0",
        "Spans arrive but no scorecards are produced.",
        f"{r.where}: the {{{{ $labels.{L_COMPONENT} }}}} received {{{{ $value | humanize }}}} spans/s over the "
        f"last {window} but no scorecard was recorded: scoring is failing or off, or no span is recognised as "
        "an answer.",
    )
    failures = settings.alert("export_failures")
    window = failures["window"]
    r.add(
        "RagConfidenceExportFailing",
        "export_failures",
        f"sum by ({r.by}) (\n{indent(first_or_increase(r.sel(GW_EXPORT_FAILURES), window), 2)}\n) > 0",
        "The gateway fails to export spans downstream.",
        f"{r.where}: {{{{ $value | humanize }}}} downstream export(s) failed in the last {window} after the "
        "exporter's retries; the upstream was answered with a retryable status and must retry.",
    )

    slow = settings.alert("slow_scoring")
    r.add(
        "RagConfidenceScoringSlow",
        "slow_scoring",
        f"{quantile(float(slow['quantile']), DURATION, r.sel, settings.group_by, slow['window'])}"
        f" > {slow['threshold_seconds']}",
        "Scoring RAG answers is slow.",
        f"{r.where}: p{float(slow['quantile']) * 100:g} scoring time over the last {slow['window']} is "
        f"{{{{ $value | humanizeDuration }}}} (threshold {slow['threshold_seconds']} s).",
    )
    return {"groups": [{"name": "rag-confidence", "interval": settings.interval, "rules": r.rules}]}


def prometheus_rule(rules: JSON) -> JSON:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": "rag-confidence",
            "labels": {"app.kubernetes.io/name": "rag-confidence", "role": "alert-rules"},
        },
        "spec": copy.deepcopy(rules),
    }


def _duration_seconds(text: str) -> int:
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    return sum(int(n) * units[u] for n, u in re.findall(r"(\d+)([smhdw])", text))


def grafana_alert_rules(rules: JSON, settings: Settings) -> JSON:
    """The same group as Grafana-managed alert rules (alerting file provisioning, apiVersion 1).

    Each rule queries the Prometheus data source with the rule's own expression (instant) and fires when it
    returns a series (every expression returns only firing series, with a positive value). Grafana's
    ``$value`` is a summary string, so the descriptions read ``$values.A.Value`` instead.
    """
    group = rules["groups"][0]
    converted = []
    for rule in group["rules"]:
        longest = max([_duration_seconds(d) for d in re.findall(r"\[(\w+)\]", rule["expr"])] or [600])
        annotations = dict(rule["annotations"])
        annotations["description"] = annotations["description"].replace("$value ", "$values.A.Value ")
        converted.append(
            {
                "uid": "rc-"
                + re.sub(r"(?<!^)(?=[A-Z])", "-", rule["alert"].removeprefix("RagConfidence")).lower(),
                "title": rule["alert"],
                "condition": "B",
                "data": [
                    {
                        "refId": "A",
                        "relativeTimeRange": {"from": longest, "to": 0},
                        "datasourceUid": settings.grafana_datasource_uid,
                        "model": {"refId": "A", "expr": rule["expr"], "instant": True, "range": False},
                    },
                    {
                        "refId": "B",
                        "datasourceUid": "__expr__",
                        "model": {
                            "refId": "B",
                            "type": "threshold",
                            "expression": "A",
                            "conditions": [{"evaluator": {"type": "gt", "params": [0]}}],
                        },
                    },
                ],
                "noDataState": "OK",
                "execErrState": "Error",
                "for": rule.get("for", "0s"),
                "labels": dict(rule["labels"]),
                "annotations": annotations,
                "isPaused": False,
            }
        )
    return {
        "apiVersion": 1,
        "groups": [
            {
                "orgId": 1,
                "name": group["name"],
                "folder": "RAG confidence",
                "interval": group["interval"],
                "rules": converted,
            }
        ],
    }
