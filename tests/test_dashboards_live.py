"""Every dashboard query and alert expression, evaluated by a real Prometheus against metrics we really emit.

Two subprocesses (``dashboards/demo_traffic.py``) score RAG traces, one through the real
``ConfidenceSpanProcessor`` in-process, one through the real gateway fed over OTLP/HTTP on loopback; each
serves the OpenTelemetry Prometheus exporter's endpoint on an ephemeral loopback port. A real Prometheus
(Debian's package, see ``scripts/ensure-prometheus.sh``) scrapes it every second with the alert rules loaded,
in a temporary data directory. Then every Prometheus target of every dashboard is run through the HTTP API
with Grafana's variables substituted as Grafana would (``All`` = ``.+``), and must return data; every series
selector of the dashboards and the alert rules must match series that exist.
"""

from __future__ import annotations

import json
import math
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parent.parent
DASHBOARDS = sorted((REPO / "dashboards" / "grafana").glob("*.json"))
ALERT_FILES = sorted((REPO / "dashboards" / "alerts").glob("*-alerts.yml"))
TRAFFIC = REPO / "dashboards" / "demo_traffic.py"
# Scrape job -> extra arguments of the traffic process.
JOBS = {"rag-demo": [], "rag-gateway": ["--gateway"]}
# What Grafana puts in for its macros and for an `All` selection of a variable with allValue `.+`. The rate
# interval is 4 scrape intervals and more, as Grafana's $__rate_interval is.
SUBSTITUTIONS = {
    "$__rate_interval": "20s",
    "$__range": "1m",
    "$job": ".+",
    "$instance": ".+",
    "$dimension": ".+",
}


def substitute(expr: str) -> str:
    for variable, value in SUBSTITUTIONS.items():
        expr = expr.replace(variable, value)
    assert "$" not in expr, f"unsubstituted variable in {expr!r}"
    return expr


@dataclass(frozen=True)
class Query:
    where: str
    expr: str


def dashboard_queries() -> list[Query]:
    queries = []
    for path in DASHBOARDS:
        dashboard = json.loads(path.read_text())
        for panel in dashboard["panels"]:
            for target in panel.get("targets", []):
                if target["datasource"]["type"] == "prometheus":
                    queries.append(
                        Query(f"{path.stem} / {panel['title']} / {target['refId']}", target["expr"])
                    )
    return queries


def variable_queries() -> list[Query]:
    queries = []
    for path in DASHBOARDS:
        for variable in json.loads(path.read_text())["templating"]["list"]:
            if variable["type"] == "query":
                queries.append(Query(f"{path.stem} / ${variable['name']}", variable["query"]))
    return queries


def alert_expressions() -> list[Query]:
    return [
        Query(f"{path.name} / {rule['alert']}", rule["expr"])
        for path in ALERT_FILES
        for group in yaml.safe_load(path.read_text())["groups"]
        for rule in group["rules"]
    ]


MATCH_OPS = {"Equal": "=", "NotEqual": "!=", "Re": "=~", "NotRe": "!~"}


def _op(op: Any) -> str:
    return MATCH_OPS[repr(op).rpartition(".")[2]]


def selectors(expr: str) -> list[str]:
    """Every series selector in a PromQL expression, without range or offset, as PromQL text."""
    found: list[str] = []

    def visit(node: Any) -> bool:
        if isinstance(node, promql_parser.VectorSelector):
            matchers = [
                f"{m.name}{_op(m.op)}{json.dumps(m.value)}"
                for m in node.matchers.matchers
                if m.name != "__name__"
            ]
            found.append(f"{node.name or ''}{{{', '.join(matchers)}}}")
        return True

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found


# ------------------------------------------------------------------------------------------------------------
# The stack: a scoring process and a Prometheus scraping it
# ------------------------------------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str, timeout: float = 5.0) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (loopback only)
            return json.loads(response.read())
    except urllib.error.HTTPError as error:  # Prometheus explains a bad query in the body
        raise AssertionError(f"{url}: {error.code} {error.read().decode(errors='replace')}") from None


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@dataclass
class Stack:
    prometheus_url: str
    metrics_urls: dict[str, str]

    def api(self, path: str, **params: str) -> Any:
        body = _get(f"{self.prometheus_url}/api/v1/{path}?{urllib.parse.urlencode(params)}")
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = self.api("query", query=expr)
        assert data["resultType"] in ("vector", "scalar"), data
        return list(data["result"]) if data["resultType"] == "vector" else [{"value": data["result"]}]


def _start_traffic(tmp: Path, job: str, extra: list[str]) -> tuple[subprocess.Popen[bytes], int]:
    port_file = tmp / f"{job}.port"
    log = tmp / f"{job}.log"
    process = subprocess.Popen(
        [
            sys.executable,
            str(TRAFFIC),
            "--port",
            "0",
            "--port-file",
            str(port_file),
            "--interval",
            "0.25",
            *extra,
        ],
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
    )
    deadline = time.monotonic() + 60
    while not port_file.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            _stop(process)
            raise RuntimeError(f"traffic process {job} did not start: {log.read_text()}")
        time.sleep(0.1)
    return process, int(port_file.read_text())


def _start_prometheus(tmp: Path, target_ports: dict[str, int]) -> tuple[subprocess.Popen[bytes], str]:
    rule_files = []
    for path in ALERT_FILES:
        # Same rules, evaluated every second instead of every minute so a test run sees them evaluated.
        rules = yaml.safe_load(path.read_text())
        for group in rules["groups"]:
            group["interval"] = "1s"
        (tmp / path.name).write_text(yaml.safe_dump(rules, sort_keys=False))
        rule_files.append(path.name)
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": rule_files,
        "scrape_configs": [
            {"job_name": job, "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}
            for job, port in target_ports.items()
        ],
    }
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
    last_error = ""
    for _attempt in range(3):  # the free port can be taken between probing and binding
        port = _free_port()
        log = tmp / "prometheus.log"
        process = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={tmp / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--storage.tsdb.retention.time=1h",
            ],
            stdout=subprocess.DEVNULL,
            stderr=log.open("wb"),
        )
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while process.poll() is None and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:  # noqa: S310
                    if response.status == 200:
                        return process, url
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.2)
        _stop(process)
        last_error = log.read_text(errors="replace")[-3000:]
    raise RuntimeError(f"prometheus did not become ready: {last_error}")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    if shutil.which("prometheus") is None:
        pytest.fail("prometheus is not installed: run scripts/ensure-prometheus.sh (CI does)")
    tmp = tmp_path_factory.mktemp("prometheus")
    processes: list[subprocess.Popen[bytes]] = []
    try:
        ports = {}
        for job, extra in JOBS.items():
            process, ports[job] = _start_traffic(tmp, job, extra)
            processes.append(process)
        prometheus, url = _start_prometheus(tmp, ports)
        processes.append(prometheus)
        stack = Stack(url, {job: f"http://127.0.0.1:{port}/metrics" for job, port in ports.items()})
        # Rates over the 20s rate interval need a handful of scrapes of every series of every job.
        deadline = time.monotonic() + 90
        while True:
            ready = stack.query(
                "min by (job) (count_over_time(rag_confidence_scoring_duration_seconds_count[20s]))"
            )
            samples = {r["metric"].get("job"): float(r["value"][1]) for r in ready}
            if set(samples) == set(JOBS) and min(samples.values()) >= 8:
                break
            if time.monotonic() > deadline:
                logs = {p.name: p.read_text(errors="replace")[-2000:] for p in tmp.glob("*.log")}
                pytest.fail(f"Prometheus scraped too little: samples per job {samples}; logs {logs}")
            time.sleep(0.5)
        yield stack
    finally:
        for process in reversed(processes):
            _stop(process)


# ------------------------------------------------------------------------------------------------------------
# Tests
# ------------------------------------------------------------------------------------------------------------
def test_prometheus_scrapes_both_scoring_processes(stack: Stack) -> None:
    targets = stack.api("targets")["activeTargets"]
    assert sorted((t["labels"]["job"], t["health"]) for t in targets) == [(job, "up") for job in sorted(JOBS)]


@pytest.mark.parametrize("query", dashboard_queries(), ids=lambda q: q.where)
def test_every_dashboard_query_returns_data(stack: Stack, query: Query) -> None:
    result = stack.query(substitute(query.expr))
    values = [float(sample["value"][1]) for sample in result]
    assert values, f"{query.where}: no data for {query.expr}"
    assert any(not math.isnan(v) for v in values), f"{query.where}: only NaN for {query.expr}"


@pytest.mark.parametrize("query", variable_queries(), ids=lambda q: q.where)
def test_every_template_variable_finds_values(stack: Stack, query: Query) -> None:
    inner = substitute(query.expr)
    assert inner.startswith("label_values(") and inner.endswith(")"), inner
    metric, _, label = inner[len("label_values(") : -1].rpartition(",")
    series = stack.api("series", **{"match[]": metric.strip()})
    assert {s.get(label.strip()) for s in series} - {None}, f"{query.where}: no values of {label} on {metric}"


@pytest.mark.parametrize("query", dashboard_queries() + alert_expressions(), ids=lambda q: q.where)
def test_every_selector_names_series_that_exist(stack: Stack, query: Query) -> None:
    """Names and label values (codes, dimensions, tiers, actions) are really emitted, not just the metric."""
    for selector in selectors(substitute(query.expr)):
        assert stack.api("series", **{"match[]": selector}), f"{query.where}: nothing matches {selector}"


def test_every_metric_name_is_in_an_exporters_exposition(stack: Stack) -> None:
    exposed = set()
    for url in stack.metrics_urls.values():
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310
            exposition = response.read().decode()
        exposed |= {s.name for family in text_string_to_metric_families(exposition) for s in family.samples}
    used = set()
    for query in dashboard_queries() + alert_expressions():
        for selector in selectors(substitute(query.expr)):
            used.add(selector.partition("{")[0])
    assert used, "no metric names found"
    assert used <= exposed, f"not exposed by the scoring processes: {sorted(used - exposed)}"


def test_prometheus_loaded_and_evaluates_every_alert_rule(stack: Stack) -> None:
    expected = {q.where.split(" / ")[1] for q in alert_expressions()}
    deadline = time.monotonic() + 30
    while True:
        rules = [rule for group in stack.api("rules")["groups"] for rule in group["rules"]]
        evaluated = [rule for rule in rules if rule.get("lastEvaluation", "").startswith("0001") is False]
        if len(evaluated) == len(expected):
            break
        assert time.monotonic() < deadline, "rules were not all evaluated"
        time.sleep(0.5)
    assert {rule["name"] for rule in rules} == expected
    assert [(r["name"], r["health"], r.get("lastError", "")) for r in rules if r["health"] != "ok"] == []


def test_leakage_alert_fires_on_the_real_first_occurrence(stack: Stack) -> None:
    """The traffic has deleted-source leakage from its first round: the critical alert must be active now,
    though the counter series was born at its first increment (increase() alone would miss that)."""
    deadline = time.monotonic() + 30
    while True:
        alerts = stack.api("alerts")["alerts"]
        names = {a["labels"]["alertname"] for a in alerts}
        if "RagConfidenceDeletedSourceLeakage" in names:
            break
        assert time.monotonic() < deadline, f"leakage alert not active; active: {sorted(names)}"
        time.sleep(0.5)
    leakage = [a for a in alerts if a["labels"]["alertname"] == "RagConfidenceDeletedSourceLeakage"]
    assert {a["labels"]["severity"] for a in leakage} == {"critical"}
    assert {a["labels"]["job"] for a in leakage} <= set(JOBS)
    assert "RagConfidenceScorerDown" not in names, "both processes score: the scorer is not down"


def test_the_in_process_job_reports_its_span_processor(stack: Stack) -> None:
    """The in-process job's ConfidenceSpanProcessor reports its pipeline metrics through the meter provider it
    was given; the gateway job's application exports unscored spans and has no span processor to report."""

    def by_job(expr: str) -> dict[str, float]:
        return {r["metric"]["job"]: float(r["value"][1]) for r in stack.query(expr)}

    received = by_job("sum by (job) (rag_confidence_processor_spans_received_total)")
    forwarded = by_job("sum by (job) (rag_confidence_processor_spans_forwarded_total)")
    assert set(received) == set(forwarded) == {"rag-demo"}
    # Inline scoring: each span is counted in and out under one lock, so the two never differ.
    assert received["rag-demo"] == forwarded["rag-demo"] > 0
    answers = stack.query(
        "sum by (rag_confidence_processor_outcome) (rag_confidence_processor_answers_total)"
    )
    outcomes = {r["metric"]["rag_confidence_processor_outcome"]: float(r["value"][1]) for r in answers}
    assert outcomes["failed"] == 0 and outcomes["already_scored"] == 0
    # Scored answers and recorded scorecards come from the same scrape; at most one round of the demo's
    # eight scenarios can be scored between the two reads of one collection.
    scorecards = by_job("sum by (job) (rag_confidence_score_count)")["rag-demo"]
    assert outcomes["scored"] > 0 and abs(outcomes["scored"] - scorecards) <= 8
    failures = stack.query("sum (rag_confidence_processor_failures_total)")
    assert [float(r["value"][1]) for r in failures] == [0.0]
    evictions = stack.query("sum (rag_confidence_processor_buffer_evictions_total)")
    assert [float(r["value"][1]) for r in evictions] == [0.0]
