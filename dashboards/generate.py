#!/usr/bin/env python3
"""Generate rag-confidence's Grafana dashboards and Prometheus alert rules from one source.

    python dashboards/generate.py            # rewrite the generated files under dashboards/
    python dashboards/generate.py --check    # exit 1, naming the files, if any generated file is out of date

Metric and label names come from :mod:`rag_confidence.semconv`, translated the way every OTLP-to-Prometheus
path translates them, so a rename there shows up here on the next run (and ``--check`` fails until then).
Thresholds, the alert selector and the grouping labels come from ``dashboards/config.yaml``; the dashboards
draw the same thresholds the alerts use.

What is written (all committed; Grafana and Prometheus load these files, not this script):

* ``grafana/*.json``: four dashboards (Overview, Dimensions and warnings, System readiness, Pipeline health).
* ``alerts/rag-confidence-alerts.yml``: a Prometheus rule file (Prometheus, Thanos, Mimir, vmalert, Grafana
  data-source-managed rules).
* ``alerts/prometheus-operator/rag-confidence-prometheusrule.yaml``: the same group as a PrometheusRule.
* ``provisioning/alerting/rag-confidence-alerts.yaml``: the same rules as Grafana-managed alert rules.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
try:
    from rag_confidence import semconv
except ImportError:  # a source checkout that was never installed
    sys.path.insert(0, str(REPO / "src"))
    from rag_confidence import semconv

JSON = dict[str, Any]

GRAFANA_DIR = "grafana"
ALERTS_FILE = "alerts/rag-confidence-alerts.yml"
OPERATOR_FILE = "alerts/prometheus-operator/rag-confidence-prometheusrule.yaml"
GRAFANA_ALERTING_FILE = "provisioning/alerting/rag-confidence-alerts.yaml"
SCHEMA_VERSION = 39  # loads on Grafana 10.4 and every later release
TAG = "rag-confidence"

# ------------------------------------------------------------------------------------------------------------
# Names, as Prometheus sees them
# ------------------------------------------------------------------------------------------------------------
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

L_ACTION = prometheus_label(semconv.METRIC_ATTR_ACTION)
L_LABEL = prometheus_label(semconv.METRIC_ATTR_LABEL)
L_TIER = prometheus_label(semconv.METRIC_ATTR_TIER)
L_DIMENSION = prometheus_label(semconv.METRIC_ATTR_DIMENSION)
L_CODE = prometheus_label(semconv.METRIC_ATTR_WARNING_CODE)
L_SEVERITY = prometheus_label(semconv.METRIC_ATTR_WARNING_SEVERITY)
L_TRANSPORT = prometheus_label(semconv.METRIC_ATTR_GATEWAY_TRANSPORT)
L_OUTCOME = prometheus_label(semconv.METRIC_ATTR_GATEWAY_OUTCOME)
L_REASON = prometheus_label(semconv.METRIC_ATTR_GATEWAY_REASON)

# Values of those labels: the scoring core's closed sets (transparent-confidence 0.3 names). Dimension values
# are the scorecard's snake_case field names, as the metrics module records them.
ACTIONS = ("answer", "review", "abstain")
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


# ------------------------------------------------------------------------------------------------------------
# Settings (dashboards/config.yaml)
# ------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Settings:
    selector: str
    group_by: tuple[str, ...]
    runbook_base_url: str
    interval: str
    alerts: dict[str, dict[str, Any]]
    grafana_datasource_uid: str = "prometheus"

    @classmethod
    def load(cls, path: Path) -> Settings:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        if not isinstance(raw, dict):
            raise SystemExit(f"{path}: expected a mapping")
        group_by = tuple(str(label) for label in raw.get("group_by") or ("job",))
        if not group_by:
            raise SystemExit(f"{path}: group_by must name at least one label")
        return cls(
            selector=str(raw.get("selector") or "").strip().strip("{}").strip(),
            group_by=group_by,
            runbook_base_url=str(raw["runbook_base_url"]),
            interval=str(raw.get("interval", "1m")),
            alerts={str(k): dict(v) for k, v in (raw.get("alerts") or {}).items()},
            grafana_datasource_uid=str(raw.get("grafana_datasource_uid", "prometheus")),
        )

    def alert(self, key: str) -> dict[str, Any]:
        try:
            return self.alerts[key]
        except KeyError:
            raise SystemExit(f"config: alerts.{key} is missing") from None


# ------------------------------------------------------------------------------------------------------------
# PromQL helpers
# ------------------------------------------------------------------------------------------------------------
RATE_INTERVAL = "$__rate_interval"
RANGE = "$__range"


def eq(label: str, value: str) -> str:
    return f'{label}="{value}"'


def match(label: str, pattern: str) -> str:
    return f'{label}=~"{pattern}"'


def dash_sel(metric: str, *matchers: str) -> str:
    """A dashboard series selector: always filtered by the job and instance variables."""
    return metric + "{" + ", ".join((match("job", "$job"), match("instance", "$instance"), *matchers)) + "}"


def first_or_increase(selector: str, window: str) -> str:
    """How much a counter grew over ``window``, counting a series that first appeared inside the window.

    ``increase()`` needs two samples of a series, so the very first increments of a counter that is born with
    value 1 (OpenTelemetry counters appear on first use) count as nothing. The ``unless ... offset`` branch
    takes a series that did not exist ``window`` ago at its full value.
    """
    return f"(\n  {selector}\nunless\n  {selector} offset {window}\n)\nor\nincrease({selector}[{window}])"


def _indent(text: str, spaces: int) -> str:
    return "\n".join(" " * spaces + line for line in text.splitlines())


def quantile(
    q: float,
    histogram: Histogram,
    selector_fn: Callable[[str], str],
    by: Sequence[str],
    window: str,
    offset: str = "",
) -> str:
    labels = ", ".join((*by, "le"))
    shifted = f" offset {offset}" if offset else ""
    buckets = f"{selector_fn(histogram.bucket)}[{window}]{shifted}"
    return f"histogram_quantile({q:g}, sum by ({labels}) (rate({buckets})))"


# ------------------------------------------------------------------------------------------------------------
# Grafana building blocks
# ------------------------------------------------------------------------------------------------------------
PROM_DS = {"type": "prometheus", "uid": "${datasource}"}
TEMPO_DS = {"type": "tempo", "uid": "${tempo_datasource}"}


def thresholds(*steps: tuple[float | None, str]) -> JSON:
    return {"mode": "absolute", "steps": [{"color": color, "value": value} for value, color in steps]}


def score_thresholds() -> JSON:
    return thresholds(*SCORE_BANDS)


def share_thresholds(limit: float) -> JSON:
    """Green below half the alert threshold, orange up to it, red from it."""
    return thresholds((None, "green"), (round(limit / 2, 4), "orange"), (limit, "red"))


def target(expr: str, legend: str = "__auto", *, instant: bool = False, exemplar: bool = False) -> JSON:
    return {
        "datasource": PROM_DS,
        "editorMode": "code",
        "exemplar": exemplar,
        "expr": expr,
        "format": "time_series",
        "instant": instant,
        "legendFormat": legend,
        "range": not instant,
    }


def _with_refs(targets: Iterable[JSON]) -> list[JSON]:
    out = []
    for index, item in enumerate(targets):
        item = dict(item)
        item["refId"] = chr(ord("A") + index)
        out.append(item)
    return out


def color_overrides(colors: dict[str, str]) -> list[JSON]:
    return [
        {
            "matcher": {"id": "byName", "options": name},
            "properties": [{"id": "color", "value": {"fixedColor": color, "mode": "fixed"}}],
        }
        for name, color in colors.items()
    ]


def _defaults(
    unit: str, steps: JSON, *, minimum: float | None, maximum: float | None, decimals: int | None
) -> JSON:
    defaults: JSON = {"color": {"mode": "palette-classic"}, "unit": unit, "thresholds": steps, "mappings": []}
    if minimum is not None:
        defaults["min"] = minimum
    if maximum is not None:
        defaults["max"] = maximum
    if decimals is not None:
        defaults["decimals"] = decimals
    return defaults


def timeseries(
    title: str,
    description: str,
    targets: Sequence[JSON],
    *,
    unit: str,
    steps: JSON,
    minimum: float | None = 0,
    maximum: float | None = None,
    decimals: int | None = None,
    stack: bool = False,
    threshold_style: str = "off",
    overrides: Sequence[JSON] = (),
) -> JSON:
    defaults = _defaults(unit, steps, minimum=minimum, maximum=maximum, decimals=decimals)
    defaults["custom"] = {
        "axisBorderShow": False,
        "axisPlacement": "auto",
        "drawStyle": "line",
        "fillOpacity": 25 if stack else 5,
        "gradientMode": "none",
        "lineInterpolation": "linear",
        "lineWidth": 1,
        "pointSize": 4,
        "showPoints": "never",
        "spanNulls": False,
        "stacking": {"group": "A", "mode": "normal" if stack else "none"},
        "thresholdsStyle": {"mode": threshold_style},
    }
    return {
        "type": "timeseries",
        "title": title,
        "description": description,
        "datasource": PROM_DS,
        "fieldConfig": {"defaults": defaults, "overrides": list(overrides)},
        "options": {
            "legend": {"calcs": [], "displayMode": "list", "placement": "bottom", "showLegend": True},
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
        "targets": _with_refs(targets),
    }


def stat(
    title: str,
    description: str,
    expr: str,
    *,
    unit: str,
    steps: JSON,
    minimum: float | None = None,
    maximum: float | None = None,
    decimals: int | None = None,
) -> JSON:
    defaults = _defaults(unit, steps, minimum=minimum, maximum=maximum, decimals=decimals)
    defaults["color"] = {"mode": "thresholds"}
    return {
        "type": "stat",
        "title": title,
        "description": description,
        "datasource": PROM_DS,
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {
            "colorMode": "value",
            "graphMode": "area",
            "justifyMode": "auto",
            "orientation": "auto",
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "showPercentChange": False,
            "textMode": "auto",
            "wideLayout": True,
        },
        "targets": _with_refs([target(expr, "__auto")]),
    }


def heatmap(title: str, description: str, expr: str) -> JSON:
    """A heatmap straight from the histogram's buckets (no re-bucketing in Grafana)."""
    defaults = _defaults("none", score_thresholds(), minimum=None, maximum=None, decimals=None)
    defaults["custom"] = {
        "hideFrom": {"legend": False, "tooltip": False, "viz": False},
        "scaleDistribution": {"type": "linear"},
    }
    heat_target = target(expr, "{{le}}", exemplar=True)
    heat_target["format"] = "heatmap"
    return {
        "type": "heatmap",
        "title": title,
        "description": description,
        "datasource": PROM_DS,
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {
            "calculate": False,
            "cellGap": 1,
            "cellValues": {"unit": "short"},
            "color": {
                "exponent": 0.5,
                "fill": "dark-orange",
                "mode": "scheme",
                "reverse": False,
                "scale": "exponential",
                "scheme": "Oranges",
                "steps": 64,
            },
            "exemplars": {"color": "rgba(255,0,255,0.7)"},
            "filterValues": {"le": 1e-9},
            "legend": {"show": True},
            "rowsFrame": {"layout": "le", "value": "Answers"},
            "tooltip": {"mode": "single", "showColorScale": False, "yHistogram": True},
            "yAxis": {"axisLabel": "score", "axisPlacement": "left", "reverse": False, "unit": "none"},
        },
        "targets": _with_refs([heat_target]),
    }


def piechart(title: str, description: str, expr: str, legend: str, colors: dict[str, str]) -> JSON:
    defaults = _defaults("short", thresholds((None, "green")), minimum=None, maximum=None, decimals=0)
    return {
        "type": "piechart",
        "title": title,
        "description": description,
        "datasource": PROM_DS,
        "fieldConfig": {"defaults": defaults, "overrides": color_overrides(colors)},
        "options": {
            "displayLabels": ["percent"],
            "legend": {
                "displayMode": "table",
                "placement": "right",
                "showLegend": True,
                "values": ["value", "percent"],
            },
            "pieType": "donut",
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "tooltip": {"mode": "single", "sort": "none"},
        },
        "targets": _with_refs([target(expr, legend, instant=True)]),
    }


def bargauge(
    title: str, description: str, expr: str, legend: str, *, unit: str, steps: JSON, maximum: float
) -> JSON:
    defaults = _defaults(unit, steps, minimum=0, maximum=maximum, decimals=0)
    defaults["color"] = {"mode": "thresholds"}
    return {
        "type": "bargauge",
        "title": title,
        "description": description,
        "datasource": PROM_DS,
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {
            "displayMode": "gradient",
            "maxVizHeight": 300,
            "minVizHeight": 16,
            "minVizWidth": 8,
            "namePlacement": "auto",
            "orientation": "horizontal",
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "showUnfilled": True,
            "sizing": "auto",
            "valueMode": "color",
        },
        "targets": _with_refs([target(expr, legend, instant=True)]),
    }


def table(title: str, description: str, expr: str, rename: dict[str, str], *, unit: str, steps: JSON) -> JSON:
    item = target(expr, "__auto", instant=True)
    item["format"] = "table"
    defaults = _defaults(unit, steps, minimum=None, maximum=None, decimals=0)
    defaults["custom"] = {
        "align": "auto",
        "cellOptions": {"type": "auto"},
        "filterable": True,
        "inspect": False,
    }
    return {
        "type": "table",
        "title": title,
        "description": description,
        "datasource": PROM_DS,
        "fieldConfig": {
            "defaults": defaults,
            "overrides": [
                {
                    "matcher": {"id": "byName", "options": "Value"},
                    "properties": [{"id": "custom.cellOptions", "value": {"type": "color-text"}}],
                }
            ],
        },
        "options": {
            "cellHeight": "sm",
            "footer": {"show": False, "reducer": ["sum"], "fields": ""},
            "showHeader": True,
            "sortBy": [{"desc": True, "displayName": "Value"}],
        },
        "targets": _with_refs([item]),
        "transformations": [
            {
                "id": "organize",
                "options": {"excludeByName": {"Time": True}, "indexByName": {}, "renameByName": rename},
            }
        ],
    }


def traces_table(title: str, description: str, traceql: str) -> JSON:
    """Traces found by TraceQL in the Tempo data source (score exemplars link to the same traces)."""
    defaults = _defaults("none", thresholds((None, "green")), minimum=None, maximum=None, decimals=None)
    defaults["custom"] = {"align": "auto", "cellOptions": {"type": "auto"}, "inspect": False}
    return {
        "type": "table",
        "title": title,
        "description": description,
        "datasource": TEMPO_DS,
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {"cellHeight": "sm", "showHeader": True},
        "targets": [
            {
                "datasource": TEMPO_DS,
                "limit": 20,
                "query": traceql,
                "queryType": "traceql",
                "refId": "A",
                "spss": 3,
                "tableType": "traces",
            }
        ],
    }


def datasource_variable() -> JSON:
    return {
        "current": {},
        "hide": 0,
        "includeAll": False,
        "label": "Data source",
        "multi": False,
        "name": "datasource",
        "options": [],
        "query": "prometheus",
        "refresh": 1,
        "regex": "",
        "skipUrlSync": False,
        "type": "datasource",
    }


def tempo_variable() -> JSON:
    variable = datasource_variable()
    variable.update({"label": "Tempo data source", "name": "tempo_datasource", "query": "tempo"})
    return variable


def query_variable(name: str, label: str, definition: str) -> JSON:
    return {
        "allValue": ".+",
        "current": {},
        "datasource": PROM_DS,
        "definition": definition,
        "hide": 0,
        "includeAll": True,
        "label": label,
        "multi": True,
        "name": name,
        "options": [],
        "query": definition,
        "refresh": 2,
        "regex": "",
        "skipUrlSync": False,
        "sort": 1,
        "type": "query",
    }


def _with_matcher(selector: str, matcher: str) -> str:
    """``metric`` -> ``metric{matcher}``; ``{a="b"}`` -> ``{a="b", matcher}``."""
    if selector.endswith("}"):
        return f"{selector[:-1]}, {matcher}}}"
    return f"{selector}{{{matcher}}}"


def standard_variables(metric: str) -> list[JSON]:
    """Data source, job and instance; ``metric`` is a series every target of the dashboard has."""
    return [
        datasource_variable(),
        query_variable("job", "Job", f"label_values({metric}, job)"),
        query_variable(
            "instance", "Instance", f"label_values({_with_matcher(metric, match('job', '$job'))}, instance)"
        ),
    ]


class Dashboard:
    """Lays panels out left to right in rows of 24 columns."""

    def __init__(self, uid: str, title: str, description: str, variables: list[JSON]) -> None:
        self.uid, self.title, self.description, self.variables = uid, title, description, variables
        self.panels: list[JSON] = []
        self._x = self._y = self._line_height = 0

    def _newline(self) -> None:
        if self._x:
            self._y += self._line_height
            self._x = self._line_height = 0

    def row(self, title: str) -> None:
        self._newline()
        self.panels.append(
            {
                "collapsed": False,
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": self._y},
                "panels": [],
                "title": title,
                "type": "row",
            }
        )
        self._y += 1

    def add(self, panel: JSON, *, w: int, h: int = 8) -> None:
        if self._x + w > 24:
            self._newline()
        panel = dict(panel)
        panel["gridPos"] = {"h": h, "w": w, "x": self._x, "y": self._y}
        self.panels.append(panel)
        self._x += w
        self._line_height = max(self._line_height, h)

    def to_json(self) -> JSON:
        panels = []
        for panel_id, panel in enumerate(self.panels, start=1):
            panel = {"id": panel_id, **panel}
            panels.append(dict(sorted(panel.items())))
        return {
            "annotations": {
                "list": [
                    {
                        "builtIn": 1,
                        "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                        "enable": True,
                        "hide": True,
                        "iconColor": "rgba(0, 211, 255, 1)",
                        "name": "Annotations & Alerts",
                        "type": "dashboard",
                    }
                ]
            },
            "description": self.description,
            "editable": True,
            "fiscalYearStartMonth": 0,
            "graphTooltip": 1,
            "id": None,
            "links": [
                {
                    "asDropdown": True,
                    "icon": "external link",
                    "includeVars": True,
                    "keepTime": True,
                    "tags": [TAG],
                    "targetBlank": False,
                    "title": "RAG confidence",
                    "type": "dashboards",
                }
            ],
            "panels": panels,
            "refresh": "1m",
            "schemaVersion": SCHEMA_VERSION,
            "tags": [TAG],
            "templating": {"list": self.variables},
            "time": {"from": "now-6h", "to": "now"},
            "timepicker": {},
            "timezone": "",
            "title": self.title,
            "uid": self.uid,
            "version": 1,
            "weekStart": "",
        }


# ------------------------------------------------------------------------------------------------------------
# The dashboards
# ------------------------------------------------------------------------------------------------------------
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


def pipeline(settings: Settings) -> Dashboard:
    slow = settings.alert("slow_scoring")
    slow_q = float(slow["quantile"])
    slow_s = float(slow["threshold_seconds"])
    d = Dashboard(
        "rag-confidence-pipeline",
        "RAG confidence / Pipeline health",
        "Is scoring keeping up? Scorecards produced, time spent scoring, and the gateway: spans in and out, "
        "rejections, export failures, request durations and its trace assembly window.",
        standard_variables(f'{{__name__=~"{DURATION.count}|{GW_RECEIVED}"}}'),
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
            "Scorecards produced per second, by job.",
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
    d.row("Gateway")
    d.add(
        timeseries(
            "Spans in and out",
            "Spans per second received by the gateway, handed downstream, and not forwarded (rejected). "
            "Received minus forwarded is what the upstream has to retry or has lost.",
            [
                target(f"sum (rate({S(GW_RECEIVED)}[{RATE_INTERVAL}]))", "received"),
                target(f"sum (rate({S(GW_FORWARDED)}[{RATE_INTERVAL}]))", "forwarded"),
                target(f"sum (rate({S(GW_REJECTED)}[{RATE_INTERVAL}]))", "rejected"),
            ],
            unit="cps",
            steps=thresholds((None, "green")),
            overrides=color_overrides({"received": "blue", "forwarded": "green", "rejected": "red"}),
        ),
        w=12,
    )
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
            "(RagConfidenceExportFailing).",
            [target(f"sum by (job) (rate({S(GW_EXPORT_FAILURES)}[{RATE_INTERVAL}]))", "{{job}}")],
            unit="cps",
            steps=thresholds((None, "green"), (0.0001, "red")),
            threshold_style="area",
        ),
        w=12,
    )
    d.add(
        timeseries(
            "Answers found by outcome",
            "Answer spans the gateway found per second: scored, failed (forwarded with rag.confidence.error) "
            "or already scored upstream.",
            [
                target(
                    f"sum by ({L_OUTCOME}) (rate({S(GW_ANSWERS)}[{RATE_INTERVAL}]))", f"{{{{{L_OUTCOME}}}}}"
                )
            ],
            unit="reqps",
            steps=thresholds((None, "green")),
            stack=True,
            overrides=color_overrides({"scored": "green", "failed": "red", "already_scored": "blue"}),
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
    d.add(
        timeseries(
            "Assembly window",
            "Traces held in the gateway's assembly window (left axis) and traces evicted per second before "
            "they completed, by reason (an evicted trace's answer is scored without the evicted spans).",
            [
                target(f"sum ({S(GW_WINDOW)})", "traces held"),
                target(
                    f"sum by ({L_REASON}) (rate({S(GW_EVICTIONS)}[{RATE_INTERVAL}]))",
                    f"evicted: {{{{{L_REASON}}}}}",
                ),
            ],
            unit="short",
            steps=thresholds((None, "green")),
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


# ------------------------------------------------------------------------------------------------------------
# Alert rules
# ------------------------------------------------------------------------------------------------------------
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
            f"sum by ({self.by}) (\n{_indent(first_or_increase(series, window), 2)}\n) > 0",
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
    spans_in = f"sum by ({r.by}) (rate({r.sel(GW_RECEIVED)}[{window}]))"
    r.add(
        "RagConfidenceScorerDown",
        "scorer_down",
        f"{spans_in} > 0\nunless on ({r.by})\n{r.answers(window)} > 0",
        "Spans arrive but no scorecards are produced.",
        f"{r.where}: the gateway received {{{{ $value | humanize }}}} spans/s over the last {window} but "
        "recorded no scorecard: scoring is off or failing, or no span is recognised as an answer.",
    )
    failures = settings.alert("export_failures")
    window = failures["window"]
    r.add(
        "RagConfidenceExportFailing",
        "export_failures",
        f"sum by ({r.by}) (\n{_indent(first_or_increase(r.sel(GW_EXPORT_FAILURES), window), 2)}\n) > 0",
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


# ------------------------------------------------------------------------------------------------------------
# Output
# ------------------------------------------------------------------------------------------------------------
HEADER = "# Generated by dashboards/generate.py from dashboards/config.yaml: edit those and regenerate.\n"


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (PromQL) as literal blocks, so the YAML reads like hand-written rules."""


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else ">" if len(data) > 80 and " " in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _represent_str)


def to_yaml(document: JSON) -> str:
    return HEADER + yaml.dump(document, Dumper=_Dumper, sort_keys=False, width=110, allow_unicode=True)


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


def render(settings: Settings) -> dict[str, str]:
    """Every generated file: path relative to dashboards/ -> content."""
    files = {
        f"{GRAFANA_DIR}/{name}": json.dumps(build(settings).to_json(), indent=2, ensure_ascii=False) + "\n"
        for name, build in DASHBOARDS.items()
    }
    rules = alert_rules(settings)
    files[ALERTS_FILE] = to_yaml(rules)
    files[OPERATOR_FILE] = to_yaml(prometheus_rule(rules))
    files[GRAFANA_ALERTING_FILE] = to_yaml(grafana_alert_rules(rules, settings))
    return files


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--config", type=Path, default=HERE / "config.yaml", help="thresholds and selectors")
    parser.add_argument(
        "--out", type=Path, default=HERE, help="directory to write into (default: dashboards/)"
    )
    parser.add_argument("--check", action="store_true", help="only report files that differ; exit 1 if any")
    args = parser.parse_args(argv)
    files = render(Settings.load(args.config))
    stale = []
    for relative, content in files.items():
        path = args.out / relative
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == content:
            continue
        stale.append(relative)
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
    if args.check and stale:
        print("out of date (run python dashboards/generate.py):", *stale, sep="\n  ", file=sys.stderr)
        return 1
    for relative in stale:
        print(f"wrote {args.out / relative}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
