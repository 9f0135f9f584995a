"""The dashboards follow the rules that make them portable and correct (grafana/dashboard-linter's, and ours).

Static checks on the committed JSON: it loads by file provisioning (no ``${DS_...}``, ``id: null``, stable
uid, schemaVersion 39-41), every Prometheus query goes through the ``datasource`` variable, filters by the
job and instance variables, aggregates explicitly (the Python exporter adds ``otel_scope_*`` labels), uses
``$__rate_interval`` for rates, wraps counters in rate/increase and quantiles in ``by (le)``; every panel has
a description, a unit and thresholds. The generator's output is what is committed.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import promql_parser
import pytest

from rag_confidence import semconv

REPO = Path(__file__).resolve().parent.parent
DASHBOARD_DIR = REPO / "dashboards" / "grafana"
DASHBOARDS = sorted(DASHBOARD_DIR.glob("*.json"))
# Magic durations standing in for Grafana's macros, so the parsed ranges tell which macro was used.
RATE_INTERVAL = "7m13s"
RANGE = "11m17s"
RANGE_SECONDS = {RATE_INTERVAL: 7 * 60 + 13, RANGE: 11 * 60 + 17}
AGGREGATIONS = {"sum", "max", "min", "avg", "count", "topk", "bottomk", "quantile", "group"}
VALID_UNITS = {"none", "short", "percentunit", "percent", "reqps", "cps", "ops", "s", "ms"}


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "rag_confidence_dashboards", REPO / "dashboards" / "generate.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def dashboards() -> list[tuple[str, dict[str, Any]]]:
    return [(path.name, json.loads(path.read_text())) for path in DASHBOARDS]


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    return [panel for panel in dashboard["panels"] if panel["type"] != "row"]


def prometheus_targets(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (panel["title"], target["expr"])
        for panel in panels(dashboard)
        for target in panel.get("targets", [])
        if target["datasource"]["type"] == "prometheus"
    ]


def substitute(expr: str) -> str:
    for variable, value in (
        ("$__rate_interval", RATE_INTERVAL),
        ("$__range", RANGE),
        ("$job", "job-value"),
        ("$instance", "instance-value"),
        ("$dimension", "dimension-value"),
    ):
        expr = expr.replace(variable, value)
    return expr


def seconds(node: Any) -> float:
    return float(node.range.total_seconds())


def walk_with_parents(expr: str) -> list[tuple[Any, list[Any]]]:
    """(node, ancestors) for every node of the parsed expression."""
    out: list[tuple[Any, list[Any]]] = []
    stack: list[Any] = []

    def pre(node: Any) -> bool:
        out.append((node, list(stack)))
        stack.append(node)
        return True

    def post(node: Any) -> bool:
        stack.pop()
        return True

    promql_parser.walk(promql_parser.parse(expr), pre, post)
    return out


def _rated_or_first_occurrence(parents: list[Any]) -> bool:
    """A counter sits in rate()/increase(), or is an operand of the `x unless x offset w` branch that counts
    a series born inside the window (an OpenTelemetry counter appears at its first increment)."""
    nearest = next(p for p in reversed(parents) if not isinstance(p, promql_parser.ParenExpr))
    if isinstance(nearest, promql_parser.BinaryExpr):
        return str(nearest.op) == "unless"
    calls = [p for p in parents if isinstance(p, promql_parser.Call)]
    return bool(calls) and calls[-1].func.name in ("rate", "increase")


def test_there_are_four_dashboards_with_the_titles_of_the_issue() -> None:
    titles = sorted(d["title"] for _, d in dashboards())
    assert titles == [
        "RAG confidence / Dimensions and warnings",
        "RAG confidence / Overview",
        "RAG confidence / Pipeline health",
        "RAG confidence / System readiness",
    ]


@pytest.mark.parametrize(("name", "dashboard"), dashboards(), ids=lambda v: v if isinstance(v, str) else "")
def test_dashboard_loads_by_file_provisioning(name: str, dashboard: dict[str, Any]) -> None:
    text = (DASHBOARD_DIR / name).read_text()
    assert "${DS_" not in text and "__inputs" not in dashboard, "import placeholders do not resolve on disk"
    assert dashboard["id"] is None
    assert re.fullmatch(r"rag-confidence-[a-z-]+", dashboard["uid"]) and len(dashboard["uid"]) <= 40
    assert 39 <= dashboard["schemaVersion"] <= 41
    assert dashboard["description"] and "rag-confidence" in dashboard["tags"]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize(("name", "dashboard"), dashboards(), ids=lambda v: v if isinstance(v, str) else "")
def test_template_variables(name: str, dashboard: dict[str, Any]) -> None:
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    datasource = variables["datasource"]
    assert (datasource["type"], datasource["query"]) == ("datasource", "prometheus")
    for label in ("job", "instance"):
        variable = variables[label]
        assert variable["type"] == "query" and variable["label"] == label.title()
        assert variable["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert variable["multi"] and variable["includeAll"] and variable["allValue"] == ".+"
        assert variable["query"].startswith("label_values(") and variable["query"].endswith(f", {label})")
    assert "$job" in variables["instance"]["query"], "instances follow the selected jobs"
    for variable in variables.values():
        if variable["type"] == "datasource" and variable["query"] != "prometheus":
            assert variable["name"] == f"{variable['query']}_datasource"


@pytest.mark.parametrize(("name", "dashboard"), dashboards(), ids=lambda v: v if isinstance(v, str) else "")
def test_panels_have_description_unit_thresholds_and_templated_datasource(
    name: str, dashboard: dict[str, Any]
) -> None:
    datasource_variables = {
        f"${{{v['name']}}}" for v in dashboard["templating"]["list"] if v["type"] == "datasource"
    }
    for panel in panels(dashboard):
        where = f"{name} / {panel['title']}"
        assert panel["title"] and len(panel["description"]) > 20, where
        defaults = panel["fieldConfig"]["defaults"]
        assert defaults["unit"] in VALID_UNITS, where
        steps = defaults["thresholds"]["steps"]
        assert steps and steps[0]["value"] is None and all(s["value"] is not None for s in steps[1:]), where
        assert panel["datasource"]["uid"] in datasource_variables, where
        assert panel["targets"], where
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"], where


@pytest.mark.parametrize(("name", "dashboard"), dashboards(), ids=lambda v: v if isinstance(v, str) else "")
def test_prometheus_queries_follow_the_linter_rules(name: str, dashboard: dict[str, Any]) -> None:
    for title, raw in prometheus_targets(dashboard):
        where = f"{name} / {title}: {raw}"
        expr = substitute(raw)
        assert "$" not in expr, where
        for node, parents in walk_with_parents(expr):
            if isinstance(node, promql_parser.VectorSelector):
                matchers = {(m.name, m.value) for m in node.matchers.matchers}
                assert ("job", "job-value") in matchers and ("instance", "instance-value") in matchers, where
                aggregations = [p for p in parents if isinstance(p, promql_parser.AggregateExpr)]
                assert aggregations, f"unaggregated selector (otel_scope_* labels leak): {where}"
                assert all("without" not in str(a).split("(")[0] for a in aggregations), where
                if node.name.endswith("_total"):
                    assert _rated_or_first_occurrence(parents), f"counter not rated: {where}"
            if isinstance(node, promql_parser.MatrixSelector):
                call = parents[-1]
                assert isinstance(call, promql_parser.Call), where
                assert seconds(node) in RANGE_SECONDS.values(), f"fixed range: {where}"
                if call.func.name in ("rate", "irate"):
                    assert seconds(node) == RANGE_SECONDS[RATE_INTERVAL], (
                        f"rate without $__rate_interval: {where}"
                    )
            if isinstance(node, promql_parser.Call) and node.func.name == "histogram_quantile":
                assert re.search(r"by \((?:[^)]*, )?le[,)]", str(node)), f"quantile not by (le): {where}"


def test_tempo_panels_query_attributes_we_write() -> None:
    ours = {v for k, v in vars(semconv).items() if k.startswith("RAG_CONFIDENCE_") and isinstance(v, str)}
    found = 0
    for _, dashboard in dashboards():
        for panel in panels(dashboard):
            for target in panel["targets"]:
                if target["datasource"]["type"] == "tempo":
                    found += 1
                    attributes = re.findall(r"span\.([a-z_.0-9]+)", target["query"])
                    assert attributes and set(attributes) <= ours, target["query"]
    assert found, "no trace panel"


def test_score_panels_carry_exemplars() -> None:
    overview = json.loads((DASHBOARD_DIR / "rag-confidence-overview.json").read_text())
    exemplar_targets = [t for p in panels(overview) for t in p.get("targets", []) if t.get("exemplar")]
    assert any("rag_confidence_score_bucket" in t["expr"] for t in exemplar_targets)


def test_committed_files_are_what_the_generator_writes() -> None:
    generator = load_generator()
    assert generator.main(["--check"]) == 0, "run: python dashboards/generate.py"


def test_thresholds_and_selectors_come_from_the_config(tmp_path: Path) -> None:
    """Changing config.yaml changes both the alert rules and the dashboards' threshold steps."""
    generator = load_generator()
    config = generator.Settings.load(REPO / "dashboards" / "config.yaml")
    alerts = {key: dict(value) for key, value in config.alerts.items()}
    alerts["abstain_rate"]["threshold"] = 0.35
    changed = generator.Settings(
        selector='env="prod"',
        group_by=("job", "instance"),
        runbook_base_url="https://runbooks.example.invalid/rag.md",
        interval="30s",
        alerts=alerts,
    )
    files = generator.render(changed)
    rules = generator.yaml.safe_load(files[generator.ALERTS_FILE])["groups"][0]
    assert rules["interval"] == "30s"
    abstain = next(r for r in rules["rules"] if r["alert"] == "RagConfidenceAbstainRateHigh")
    assert ") > 0.35" in abstain["expr"]
    assert "{{ $labels.job }} {{ $labels.instance }}" in abstain["annotations"]["description"]
    for rule in rules["rules"]:
        assert rule["annotations"]["runbook_url"].startswith("https://runbooks.example.invalid/rag.md#")
        assert "by (job, instance" in rule["expr"]
        for node, _ in walk_with_parents(rule["expr"]):
            if isinstance(node, promql_parser.VectorSelector):
                assert ("env", "prod") in {(m.name, m.value) for m in node.matchers.matchers}, rule["alert"]
    overview = json.loads(files["grafana/rag-confidence-overview.json"])
    abstain_stat = next(p for p in overview["panels"] if p["title"] == "Abstain rate" and p["type"] == "stat")
    assert abstain_stat["fieldConfig"]["defaults"]["thresholds"]["steps"][-1] == {
        "color": "red",
        "value": 0.35,
    }


@pytest.mark.parametrize(
    "bad_expr",
    [
        'sum (rate(rag_confidence_score_count{job=~"$job"}[$__rate_interval]))',  # no instance filter
        'rate(rag_confidence_score_count{job=~"$job", instance=~"$instance"}[$__rate_interval])',  # no sum
        'sum (rate(rag_confidence_score_count{job=~"$job", instance=~"$instance"}[5m]))',  # fixed range
        'sum (rate(rag_confidence_score_count{job=~"$job", instance=~"$instance"}[$__range]))',  # rate/range
        'sum (rag_confidence_warnings_total{job=~"$job", instance=~"$instance"})',  # counter not rated
        'sum without (otel_scope_name) (rate(rag_confidence_score_count{job=~"$job", instance=~"$instance"}'
        "[$__rate_interval]))",
        'histogram_quantile(0.5, sum (rate(rag_confidence_score_bucket{job=~"$job", instance=~"$instance"}'
        "[$__rate_interval])))",  # no le
    ],
)
def test_the_query_lint_rejects_what_it_should(bad_expr: str) -> None:
    target = {"datasource": {"type": "prometheus", "uid": "${datasource}"}, "expr": bad_expr, "refId": "A"}
    dashboard = {"panels": [{"type": "timeseries", "title": "bad", "targets": [target]}]}
    with pytest.raises(AssertionError):
        test_prometheus_queries_follow_the_linter_rules("bad.json", dashboard)


PROVISIONING = REPO / "dashboards" / "provisioning"


def test_provisioned_prometheus_links_exemplars_to_the_provisioned_tempo() -> None:
    import yaml

    datasources = yaml.safe_load((PROVISIONING / "datasources" / "rag-confidence.yaml").read_text())[
        "datasources"
    ]
    by_uid = {ds["uid"]: ds for ds in datasources}
    prometheus = next(ds for ds in datasources if ds["type"] == "prometheus")
    destinations = prometheus["jsonData"]["exemplarTraceIdDestinations"]
    assert [d["name"] for d in destinations] == ["trace_id"]
    assert by_uid[destinations[0]["datasourceUid"]]["type"] == "tempo"


def test_provisioned_dashboard_provider_reads_files() -> None:
    import yaml

    providers = yaml.safe_load((PROVISIONING / "dashboards" / "rag-confidence.yaml").read_text())["providers"]
    assert [(p["type"], bool(p["options"]["path"])) for p in providers] == [("file", True)]


def test_example_prometheus_config_is_valid_and_loads_the_rules() -> None:
    import shutil
    import subprocess

    if shutil.which("promtool") is None:
        pytest.fail("promtool is not installed: run scripts/ensure-prometheus.sh (CI does)")
    result = subprocess.run(
        ["promtool", "check", "config", str(PROVISIONING / "prometheus" / "prometheus.yml")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 1 rule files found" in result.stdout


def test_grafana_managed_copy_of_the_rules_matches_the_prometheus_rules() -> None:
    """Not loaded into a Grafana here (none is available): the same expressions, labels and runbooks, wired to
    the provisioned Prometheus data source, with Grafana's `$values.A.Value` where Prometheus has `$value`."""
    import yaml

    prometheus = yaml.safe_load((REPO / "dashboards" / "alerts" / "rag-confidence-alerts.yml").read_text())
    grafana = yaml.safe_load((PROVISIONING / "alerting" / "rag-confidence-alerts.yaml").read_text())
    datasources = yaml.safe_load((PROVISIONING / "datasources" / "rag-confidence.yaml").read_text())[
        "datasources"
    ]
    prometheus_uid = next(ds["uid"] for ds in datasources if ds["type"] == "prometheus")
    assert grafana["apiVersion"] == 1
    source_rules = prometheus["groups"][0]["rules"]
    managed = grafana["groups"][0]["rules"]
    assert [r["title"] for r in managed] == [r["alert"] for r in source_rules]
    assert len({r["uid"] for r in managed}) == len(managed)
    for rule, source in zip(managed, source_rules, strict=True):
        assert len(rule["uid"]) <= 40 and re.fullmatch(r"[a-z0-9-]+", rule["uid"])
        queries = {d["refId"]: d for d in rule["data"]}
        assert rule["condition"] in queries
        assert queries["A"]["datasourceUid"] == prometheus_uid
        assert queries["A"]["model"]["expr"] == source["expr"]
        assert queries["B"]["model"]["expression"] == "A"
        assert rule["labels"] == source["labels"]
        assert rule["for"] == source.get("for", "0s")
        assert rule["annotations"]["runbook_url"] == source["annotations"]["runbook_url"]
        description = rule["annotations"]["description"]
        assert "$value " not in description and "$values.A.Value" in description
