"""The reference tables of the docs say what the code does: metric names, kinds, units, attributes and buckets
as a real SDK ``MeterProvider`` receives them, Prometheus series as the Prometheus exporter writes them, the
gateway's flags, variables and defaults as its parser and config builder apply them, and the keys the
gateway's screen reads.

Each table is parsed from the Markdown as a reader sees it, so a renamed metric, a changed default or a new
hint key fails here until the doc says so too.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import Histogram, InMemoryMetricReader, Metric, Sum
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

from rag_confidence import compute_confidence, semconv
from rag_confidence.gateway.config import MIB, GatewayConfig, add_arguments, config_from_arguments
from rag_confidence.gateway.telemetry import GatewayMetrics
from rag_confidence.otel import (
    ConfidenceSpanProcessor,
    evaluation_event_attributes,
    record_signals,
    scorecard_attributes,
)
from rag_confidence.signals import ANSWER_HINT_KEYS

ROOT = Path(__file__).resolve().parents[1]
_CODE = re.compile(r"`([^`]+)`")
_KINDS = {"histogram": "histogram", "counter": "counter", "up-down counter": "updown"}


def _section(path: str, start: str, end: str | None = None) -> str:
    text = (ROOT / path).read_text(encoding="utf-8")
    section = text[text.index(start) :]
    return section[: section.index(end)] if end else section


def _rows(section: str) -> Iterator[list[str]]:
    """The cells of the Markdown table rows in ``section`` that describe an instrument."""
    for line in section.splitlines():
        if line.startswith("| ") and "`rag.confidence." in line.split("|")[1]:
            yield [cell.strip() for cell in line.strip().strip("|").split("|")]


def _instrument(cell: str) -> tuple[str, str]:
    """``histogram `rag.confidence.score` (buckets ...)`` -> ("histogram", "rag.confidence.score")."""
    kind, _, rest = cell.partition("`")
    kind = kind.strip().removeprefix("observable ")
    return _KINDS[kind], rest.partition("`")[0]


def _kind(metric: Metric) -> str:
    if isinstance(metric.data, Histogram):
        return "histogram"
    assert isinstance(metric.data, Sum)
    return "counter" if metric.data.is_monotonic else "updown"


def _collected(reader: InMemoryMetricReader) -> dict[str, Metric]:
    data = reader.get_metrics_data()
    assert data is not None
    return {
        metric.name: metric
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }


def _attribute_keys(metric: Metric) -> set[str]:
    return {key for point in metric.data.data_points for key in (point.attributes or {})}


def _attribute_values(metric: Metric, key: str) -> set[str]:
    return {
        str(point.attributes[key]) for point in metric.data.data_points if key in (point.attributes or {})
    }


def score_one_answer(meters: MeterProvider) -> None:
    """A real answer scored by the processor, with tier 2 on and warnings, recorded on ``meters``."""
    provider = TracerProvider()
    provider.add_span_processor(
        ConfidenceSpanProcessor(SpanProcessor(), meter_provider=meters, config={"freshness": {}})
    )
    tracer = provider.get_tracer("docs")
    with tracer.start_as_current_span("request"):
        record_signals(support_level="high", has_conflict=False)
        with tracer.start_as_current_span("retrieve") as span:
            span.set_attribute(semconv.OPENINFERENCE_SPAN_KIND, semconv.OPENINFERENCE_KIND_RETRIEVER)
            for index, score in enumerate((0.9, 0.8, 0.7)):
                prefix = f"{semconv.OI_RETRIEVAL_DOCUMENTS}.{index}."
                span.set_attribute(prefix + semconv.OI_DOCUMENT_ID, f"doc-{index}")
                span.set_attribute(prefix + semconv.OI_DOCUMENT_SCORE, score)


def record_every_gateway_metric(meters: MeterProvider) -> None:
    """One measurement on each of the gateway's instruments."""
    metrics = GatewayMetrics(meters)
    metrics.watch_window(lambda: 0)
    metrics.received(semconv.GATEWAY_TRANSPORT_GRPC, 1)
    metrics.forwarded(semconv.GATEWAY_TRANSPORT_GRPC, 1)
    metrics.rejected(semconv.GATEWAY_TRANSPORT_GRPC, 1, semconv.GATEWAY_REASON_INVALID_SPAN)
    metrics.export_failed()
    metrics.active(semconv.GATEWAY_TRANSPORT_GRPC, 1)
    metrics.request_done(semconv.GATEWAY_TRANSPORT_GRPC, semconv.GATEWAY_OUTCOME_OK, 0.01)
    metrics.answer(semconv.PIPELINE_OUTCOME_SCORED)
    metrics.evicted(semconv.PIPELINE_EVICTION_MAX_AGE, 1)


@pytest.fixture(scope="module")
def scored() -> dict[str, Metric]:
    reader = InMemoryMetricReader()
    score_one_answer(MeterProvider(metric_readers=[reader]))
    return _collected(reader)


_CONFIDENCE_TABLES = [
    ("README.md", "### Reference: metrics and events", "Attribute values are bounded"),
    ("docs/otel.md", "## Metrics\n", "### Pipeline metrics of the span processor"),
]


@pytest.mark.parametrize(("path", "start", "end"), _CONFIDENCE_TABLES, ids=[t[0] for t in _CONFIDENCE_TABLES])
def test_confidence_metric_tables_match_the_recorded_instruments(
    scored: dict[str, Metric], path: str, start: str, end: str
) -> None:
    rows = list(_rows(_section(path, start, end)))
    assert {_instrument(row[0])[1] for row in rows} == {
        name for name in scored if not name.startswith("rag.confidence.processor.")
    }
    for row in rows:
        kind, name = _instrument(row[0])
        metric = scored[name]
        assert (kind, row[1].strip("`")) == (_kind(metric), metric.unit), row
        documented = {code for code in _CODE.findall(row[2]) if code.startswith("rag.confidence.")}
        assert documented == _attribute_keys(metric), row
    # Bucket boundaries, as each table writes them.
    bounds = {
        name: tuple(metric.data.data_points[0].explicit_bounds)
        for name, metric in scored.items()
        if isinstance(metric.data, Histogram)
    }
    tens = tuple(float(step) for step in range(0, 101, 10))
    for name in (semconv.METRIC_SCORE, semconv.METRIC_TIER_SCORE, semconv.METRIC_DIMENSION_SCORE):
        assert bounds[name] == tens
    duration = bounds[semconv.METRIC_SCORING_DURATION]
    assert (duration[0], duration[-1]) == (50e-6, 1.0)  # "50 µs … 1 s"
    readme = _section("README.md", *_CONFIDENCE_TABLES[0][1:])
    assert "(buckets 0, 10, …, 100)" in readme and "50 µs … 1 s" in _section("docs/otel.md", "## Metrics\n")


def test_processor_metric_table_matches_the_instruments_and_stats() -> None:
    reader = InMemoryMetricReader()
    processor = ConfidenceSpanProcessor(
        SpanProcessor(), meter_provider=MeterProvider(metric_readers=[reader])
    )
    collected = _collected(reader)  # every attribute value is reported from the first collection
    stats = {field.name for field in dataclasses.fields(processor.stats())}
    fields: set[str] = set()
    rows = list(_rows(_section("docs/otel.md", "### Pipeline metrics of the span processor", "## Event")))
    assert {_instrument(row[0])[1] for row in rows} == {
        name for name in collected if name.startswith("rag.confidence.processor.")
    }
    for instrument, unit, attributes, _prometheus, field in rows:
        kind, name = _instrument(instrument)
        metric = collected[name]
        assert (kind, unit.strip("`")) == (_kind(metric), metric.unit), instrument
        key, _, values = attributes.partition(" = ")
        keys = {code for code in _CODE.findall(key) if code.startswith("rag.confidence.")}
        assert keys == _attribute_keys(metric), instrument
        for found in keys:
            assert set(_CODE.findall(values)) == _attribute_values(metric, found), instrument
        if not field.startswith("("):  # "(...)": no stats() field, said in words
            fields |= set(_CODE.findall(field))
    assert fields == stats


def test_gateway_metric_table_matches_its_instruments() -> None:
    reader = InMemoryMetricReader()
    record_every_gateway_metric(MeterProvider(metric_readers=[reader]))
    collected = _collected(reader)
    # The table names the gateway's keys in full once, then by their last word.
    short = {
        "transport": semconv.METRIC_ATTR_GATEWAY_TRANSPORT,
        "outcome": semconv.METRIC_ATTR_GATEWAY_OUTCOME,
        "reason": semconv.METRIC_ATTR_GATEWAY_REASON,
    }
    rows = list(_rows(_section("docs/gateway.md", "## Metrics\n", "## Security")))
    assert {_instrument(row[0])[1] for row in rows} == set(collected)
    documented_values: dict[str, set[str]] = {key: set() for key in short.values()}
    for instrument, unit, attributes, _prometheus in rows:
        kind, name = _instrument(instrument)
        metric = collected[name]
        assert (kind, unit.strip("`")) == (_kind(metric), metric.unit), instrument
        keys = {short[word] for word in short if re.search(rf"\b{word}\b", attributes)}
        assert keys == _attribute_keys(metric), instrument
        for key, values in re.findall(r"`(rag\.confidence\.gateway\.\w+)`\s*\(([^)]*)\)", attributes):
            documented_values[key] |= set(_CODE.findall(values))
        for word, values in re.findall(r"(?<![.`])\b(outcome|reason)\s*\(([^)]*)\)", attributes):
            documented_values[short[word]] |= set(_CODE.findall(values))
    constants = {
        short["transport"]: "GATEWAY_TRANSPORT_",
        short["outcome"]: ("GATEWAY_OUTCOME_", "PIPELINE_OUTCOME_"),
        short["reason"]: ("GATEWAY_REASON_", "GATEWAY_EVICTION_", "PIPELINE_EVICTION_"),
    }
    for key, prefixes in constants.items():
        known = {value for name, value in vars(semconv).items() if name.startswith(prefixes)}
        assert documented_values[key] == known, key


def test_prometheus_series_in_the_tables_are_what_the_exporter_writes() -> None:
    # A process of its own: the Prometheus exporter registers with prometheus_client's global registry.
    script = """
import json, prometheus_client
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from tests.test_docs_reference import record_every_gateway_metric, score_one_answer
score_one_answer(MeterProvider(metric_readers=[PrometheusMetricReader()]))
record_every_gateway_metric(MeterProvider(metric_readers=[PrometheusMetricReader()]))
text = prometheus_client.generate_latest().decode()
print(json.dumps(sorted({line.split("{")[0].split(" ")[0] for line in text.splitlines()
                         if line.startswith("rag_confidence_")})))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    series = set(json.loads(done.stdout))
    documented: set[str] = set()
    for path, start, end in [
        *_CONFIDENCE_TABLES,
        ("docs/otel.md", "### Pipeline metrics of the span processor", "## Event"),
        ("docs/gateway.md", "## Metrics\n", "## Security"),
    ]:
        for row in _rows(_section(path, start, end)):
            (written,) = [cell for cell in row if cell.startswith(("`rag_confidence_", "`..._"))]
            name = written.strip("`").replace("...", "rag_confidence_gateway")
            stem, _, suffixes = name.partition("/")
            if name.endswith("_*"):  # a histogram: bucket, sum and count
                stem = name.removesuffix("_*")
                documented |= {f"{stem}_{part}" for part in ("bucket", "sum", "count")}
            elif suffixes:  # rag_confidence_score_bucket/_sum/_count
                base = stem.removesuffix("_bucket")
                documented |= {stem, *(base + suffix for suffix in suffixes.split("/"))}
            else:
                documented.add(name)
    assert documented == series


# --------------------------------------------------------------------------------------------------------------
# The gateway's flags and variables
# --------------------------------------------------------------------------------------------------------------
# How the value of each flag that takes one shows in the config. The others (files, switches, the log level)
# are named in _NOT_VALUES; the gateway's own tests run them.
_FIELDS: dict[str, Callable[[GatewayConfig], Any]] = {
    "--grpc-listen": lambda config: str(config.grpc_listen),
    "--http-listen": lambda config: str(config.http_listen),
    "--max-request-bytes": lambda config: config.max_request_bytes,
    "--max-concurrent-requests": lambda config: config.max_concurrent_requests,
    "--max-queued-requests": lambda config: config.max_queued_requests,
    "--max-answers-per-request": lambda config: config.max_answers_per_request,
    "--queue-timeout": lambda config: config.queue_timeout,
    "--body-timeout": lambda config: config.body_timeout,
    "--retry-after": lambda config: config.retry_after,
    "--shutdown-timeout": lambda config: config.shutdown_timeout,
    "--assembly-max-age": lambda config: config.assembly.max_age,
    "--assembly-max-traces": lambda config: config.assembly.max_traces,
    "--assembly-max-bytes": lambda config: config.assembly.max_bytes,
    "--assembly-max-spans": lambda config: config.assembly.max_spans,
}
_NOT_VALUES = {
    "--auth-token-file",
    "--tls-cert",
    "--tls-key",
    "--tls-client-ca",
    "--scoring-config",
    "--no-scoring",
    "--scoring",
    "--grpc-bdp-probe",
    "--no-grpc-bdp-probe",
    "--log-level",
}


def _flag_table() -> list[tuple[list[str], list[str], str]]:
    rows = []
    for line in _section("docs/gateway.md", "## Flags and environment", "### Downstream").splitlines():
        if line.startswith("| `--"):
            flag, variables, default, _meaning = (cell.strip() for cell in line.strip("|").split("|"))
            flags = [code.split()[0] for code in _CODE.findall(flag)]
            rows.append((flags, _CODE.findall(variables), default))
    return rows


def _documented_default(text: str) -> object:
    text = text.strip("`")
    match = re.fullmatch(r"(\d+(?:\.\d+)?)( MiB)?(?: \(.*\))?", text)
    if match:
        number = float(match.group(1)) * (MIB if match.group(2) else 1)
        return int(number) if number.is_integer() else number
    return text


def test_gateway_flag_table_matches_the_parser() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    parsed = {option for action in parser._actions for option in action.option_strings}
    documented = {flag for flags, _, _ in _flag_table() for flag in flags}
    assert documented - {"--log-level"} == parsed - {"-h", "--help"}  # --log-level belongs to the command
    assert documented == set(_FIELDS) | _NOT_VALUES


@pytest.mark.parametrize(
    "row", [row for row in _flag_table() if row[0][0] in _FIELDS], ids=lambda row: row[0][0]
)
def test_gateway_flag_defaults_and_variables_are_what_the_config_applies(
    row: tuple[list[str], list[str], str],
) -> None:
    (flag,), (variable,), default = row
    getter = _FIELDS[flag]
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert getter(config_from_arguments(parser.parse_args([]), environ={})) == _documented_default(default)
    from_env, from_flag = ("127.0.0.1:9", "127.0.0.1:8") if flag.endswith("-listen") else ("7", "8")
    config = config_from_arguments(parser.parse_args([]), environ={variable: from_env})
    assert getter(config) == _documented_default(from_env), variable
    # A flag wins over its variable.
    config = config_from_arguments(parser.parse_args([flag, from_flag]), environ={variable: from_env})
    assert getter(config) == _documented_default(from_flag), flag


def test_gateway_doc_names_every_key_the_screen_reads() -> None:
    section = _section("docs/gateway.md", "`rag_confidence.signals.ANSWER_HINT_KEYS`:", ") and event names")
    documented = {code for code in _CODE.findall(section) if re.fullmatch(r"[a-z_]+(\.[a-z_]+)+", code)}
    assert documented == ANSWER_HINT_KEYS


def test_event_section_names_the_attributes_of_the_evaluation_record() -> None:
    section = _section("docs/otel.md", "## Event\n", "## Building blocks")
    names = {re.split(r"[\s=]", code)[0] for code in _CODE.findall(section)}
    documented = {name for name in names if re.fullmatch(r"(gen_ai|rag)\.[\w.]+", name)}
    card = compute_confidence({"supportLevel": "high", "hasConflict": False, "candidates": []})
    emitted = set(evaluation_event_attributes(card, response_id="chatcmpl-1"))
    assert documented - {semconv.GEN_AI_EVALUATION_RESULT} == emitted


_SPAN_TABLES = [
    ("README.md", "### Reference: span attributes", "Read from any span of the answer"),
    ("docs/otel.md", "## Span attributes (on the answer span)", "Inputs you may set on any span"),
]


def _attribute_names(cell: str) -> list[list[str]]:
    """The names of a table cell, each with its readings: a name written from its dot on (``.tier1.label``,
    ``.max``) continues ``rag.confidence.`` or replaces the end of the name before it."""
    names: list[list[str]] = []
    previous = ""
    for code in _CODE.findall(cell):
        if code.startswith("."):
            kept = previous.split(".")[: -code.count(".")]
            readings = [semconv.RAG_CONFIDENCE_PREFIX + code[1:], ".".join(kept) + code]
        elif code.startswith(semconv.RAG_CONFIDENCE_PREFIX):
            readings = [code]
        else:
            continue
        previous = readings[-1]
        names.append(readings)
    return names


def _pattern(name: str) -> re.Pattern[str]:
    """``<name>`` and ``*`` stand for any part of a name."""
    return re.compile(
        re.escape(name).replace(re.escape("<name>"), "[a-z_]+").replace(re.escape("*"), "[a-z_.]+")
    )


@pytest.mark.parametrize(("path", "start", "end"), _SPAN_TABLES, ids=[t[0] for t in _SPAN_TABLES])
def test_span_attribute_tables_match_what_is_written_on_the_answer_span(
    path: str, start: str, end: str
) -> None:
    documented = [
        readings
        for line in _section(path, start, end).splitlines()
        if line.startswith("| `")
        for readings in _attribute_names(line.split("|")[1])
    ]
    # Every optional dimension on, so tier 2 and every dimension name is written.
    card = compute_confidence(
        {"supportLevel": "high", "hasConflict": False, "answerRelevanceScore": 0.9, "candidates": []},
        {"authority": {}, "corpus": {"expectedTypes": ["policy"]}, "freshness": {}, "indexIntegrity": {}},
    )
    written = set(scorecard_attributes(card))
    assert semconv.RAG_CONFIDENCE_TIER2_SCORE in written
    patterns = [_pattern(name) for readings in documented for name in readings]
    assert not {name for name in written if not any(pattern.fullmatch(name) for pattern in patterns)}
    # Each name spelled out in full is one the code writes (the diagnostics and the error are constants).
    ours = {value for value in vars(semconv).values() if isinstance(value, str)} | written
    spelled = [readings for readings in documented if not any("*" in n or "<" in n for n in readings)]
    assert [readings for readings in spelled if not ours & set(readings)] == []


def _expand(code: str) -> set[str]:
    """``rag.signal.claims.{total,supported}`` -> both names."""
    match = re.fullmatch(r"(.*)\.\{(.*)\}", code)
    return {f"{match.group(1)}.{part}" for part in match.group(2).split(",")} if match else {code}


_SIGNAL_LISTS = [
    ("README.md", "Read from any span of the answer", "### Reference: metrics and events"),
    ("docs/otel.md", "Inputs you may set on any span of the answer", "The keywords are"),
]


@pytest.mark.parametrize(("path", "start", "end"), _SIGNAL_LISTS, ids=[t[0] for t in _SIGNAL_LISTS])
def test_signal_lists_name_every_rag_signal_attribute(path: str, start: str, end: str) -> None:
    listed: set[str] = set()
    for code in _CODE.findall(_section(path, start, end)):
        if code.startswith("record_signals") or (" " in code and "<" not in code):
            continue
        name = code if code.startswith(semconv.RAG_SIGNAL_PREFIX) else semconv.RAG_SIGNAL_PREFIX + code
        listed |= _expand(name)
    known = {
        value
        for key, value in vars(semconv).items()
        if key.startswith("RAG_SIGNAL_") and not key.endswith("PREFIX")
    }
    # The index inputs are listed as a pattern: rag.signal.index.<field>.
    index = {name for name in known if name.startswith(semconv.RAG_SIGNAL_INDEX_PREFIX)}
    assert {name for name in listed if "<" not in name} == known - index
    patterned = [name for name in listed if "<" in name]
    assert len(patterned) == 1 and patterned[0].startswith(semconv.RAG_SIGNAL_INDEX_PREFIX + "<")
    assert index  # what that pattern stands for


def test_diagnostics_table_names_every_extraction_diagnostic() -> None:
    section = _section("docs/signals.md", "## Diagnostics (attributes under `rag.confidence.`)", "## Key map")
    documented = {
        code
        for code in _CODE.findall(section)
        if code.startswith(semconv.RAG_CONFIDENCE_PREFIX) and code != semconv.RAG_CONFIDENCE_PREFIX
    }
    diagnostics = {
        value
        for key, value in vars(semconv).items()
        if key.startswith(
            (
                "RAG_CONFIDENCE_RETRIEVAL_",
                "RAG_CONFIDENCE_CITATION_",
                "RAG_CONFIDENCE_GENERATION_",
                "RAG_CONFIDENCE_SIGNALS_",
            )
        )
    }
    assert documented == diagnostics
