"""Grafana dashboard JSON building blocks: panels, targets, variables and a row layout."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .names import SCORE_BANDS
from .promql import match

JSON = dict[str, Any]
SCHEMA_VERSION = 39  # loads on Grafana 10.4 and every later release
TAG = "rag-confidence"

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
