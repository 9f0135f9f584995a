"""Structure of the OpenTelemetry Collector configs under ``collector/``.

The Collector itself cannot run here (no binary download, no Docker engine), so ``otelcol validate`` is out of
reach. These tests check what it would check first (every component a pipeline names is defined, every defined
one is used, the keys each component takes) plus the rules this project depends on: memory_limiter first,
groupbytrace before batch, trace-ID load balancing, persistent queues with retries on every push exporter.
The component keys below are those documented for otelcol-contrib 0.143 (the version the configs pin).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
COLLECTOR = ROOT / "collector"
CONFIGS = [
    COLLECTOR / "single-node.yaml",
    COLLECTOR / "kubernetes" / "tier1-otelcol.yaml",
    COLLECTOR / "kubernetes" / "tier2-otelcol.yaml",
]
KINDS = ("receivers", "processors", "exporters", "extensions", "connectors")

# Component type -> top-level keys it accepts (otelcol-contrib 0.143 documentation), for the types we use.
_EXPORTER_HELPER = {"timeout", "retry_on_failure", "sending_queue"}
_GRPC_CLIENT = {
    "endpoint",
    "tls",
    "headers",
    "compression",
    "keepalive",
    "balancer_name",
    "auth",
    "write_buffer_size",
}
KNOWN_KEYS: dict[str, dict[str, set[str]]] = {
    "receivers": {"otlp": {"protocols"}},
    "processors": {
        "memory_limiter": {
            "check_interval",
            "limit_mib",
            "spike_limit_mib",
            "limit_percentage",
            "spike_limit_percentage",
        },
        "groupbytrace": {"wait_duration", "num_traces", "num_workers", "discard_orphans", "store_on_disk"},
        "batch": {
            "send_batch_size",
            "send_batch_max_size",
            "timeout",
            "metadata_keys",
            "metadata_cardinality_limit",
        },
    },
    "exporters": {
        "otlp": _EXPORTER_HELPER | _GRPC_CLIENT,
        "otlphttp": _EXPORTER_HELPER
        | {
            "endpoint",
            "traces_endpoint",
            "metrics_endpoint",
            "logs_endpoint",
            "tls",
            "headers",
            "compression",
        },
        "loadbalancing": _EXPORTER_HELPER | {"routing_key", "routing_attributes", "protocol", "resolver"},
        "prometheus": {
            "endpoint",
            "enable_open_metrics",
            "metric_expiration",
            "namespace",
            "const_labels",
            "send_timestamps",
            "resource_to_telemetry_conversion",
            "add_metric_suffixes",
            "tls",
        },
        "debug": {"verbosity", "sampling_initial", "sampling_thereafter", "use_internal_logger"},
    },
    "extensions": {
        "health_check": {"endpoint", "path", "check_collector_pipeline", "tls", "response_body"},
        "file_storage": {
            "directory",
            "timeout",
            "compaction",
            "fsync",
            "create_directory",
            "directory_permissions",
        },
    },
    "connectors": {},
}
# Nested settings blocks shared by several components -> the keys they accept (same documentation).
NESTED_KEYS: dict[str, set[str]] = {
    "sending_queue": {
        "enabled",
        "num_consumers",
        "queue_size",
        "storage",
        "blocking",
        "block_on_overflow",
        "sizer",
        "wait_for_result",
        "batch",
    },
    "retry_on_failure": {
        "enabled",
        "initial_interval",
        "max_interval",
        "max_elapsed_time",
        "multiplier",
        "randomization_factor",
    },
    "tls": {
        "insecure",
        "insecure_skip_verify",
        "ca_file",
        "cert_file",
        "key_file",
        "server_name_override",
        "min_version",
        "max_version",
    },
    "compaction": {
        "on_start",
        "on_rebound",
        "directory",
        "max_transaction_size",
        "rebound_needed_threshold_mib",
        "rebound_trigger_threshold_mib",
        "check_interval",
        "cleanup_on_start",
    },
    "k8s": {"service", "ports", "timeout", "return_hostnames"},
    "dns": {"hostname", "port", "interval", "timeout"},
    "grpc": {"endpoint", "tls", "max_recv_msg_size_mib", "max_concurrent_streams", "keepalive", "auth"},
    "http": {"endpoint", "tls", "cors", "auth", "max_request_body_size", "include_metadata"},
}
# The same components under their new names (core's otlp_grpc and otlp_http from 0.144, contrib's
# load_balancing from 0.153); a config uses one set, not both.
RENAMED = {"otlp_grpc": "otlp", "otlp_http": "otlphttp", "load_balancing": "loadbalancing"}
PUSH_EXPORTERS = {"otlp", "otlphttp", "loadbalancing"}


def load(path: Path) -> dict[str, Any]:
    with path.open(encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    assert isinstance(data, dict)
    return data


def ctype(component_id: str) -> str:
    return component_id.split("/", 1)[0]


@pytest.fixture(params=CONFIGS, ids=lambda p: str(p.relative_to(COLLECTOR)))
def config(request: pytest.FixtureRequest) -> dict[str, Any]:
    return load(request.param)


def test_every_yaml_file_parses() -> None:
    files = sorted(COLLECTOR.rglob("*.yaml")) + sorted(COLLECTOR.rglob("*.yml"))
    assert len(files) >= 10
    for path in files:
        with path.open(encoding="utf-8") as fh:
            docs = [d for d in yaml.safe_load_all(fh) if d is not None]
        assert docs, f"{path} is empty"


def test_every_collector_config_is_covered() -> None:
    found = set()
    for path in COLLECTOR.rglob("*.yaml"):
        with path.open(encoding="utf-8") as fh:
            docs = [d for d in yaml.safe_load_all(fh) if isinstance(d, dict)]
        if any("pipelines" in (d.get("service") or {}) for d in docs):
            found.add(path)
    assert found == set(CONFIGS)


def test_pipelines_reference_defined_components(config: dict[str, Any]) -> None:
    service = config["service"]
    connectors = set(config.get("connectors") or {})
    for pid, pipeline in service["pipelines"].items():
        assert ctype(pid) in ("traces", "metrics", "logs"), pid
        assert pipeline["receivers"] and pipeline["exporters"], f"{pid} needs receivers and exporters"
        for rid in pipeline["receivers"]:
            assert rid in (config.get("receivers") or {}) or rid in connectors, (
                f"{pid}: receiver {rid} undefined"
            )
        for prid in pipeline.get("processors", []):
            assert prid in (config.get("processors") or {}), f"{pid}: processor {prid} undefined"
        for eid in pipeline["exporters"]:
            assert eid in (config.get("exporters") or {}) or eid in connectors, (
                f"{pid}: exporter {eid} undefined"
            )
    for xid in service.get("extensions", []):
        assert xid in (config.get("extensions") or {}), f"extension {xid} undefined"


def test_every_defined_component_is_used(config: dict[str, Any]) -> None:
    pipelines = config["service"]["pipelines"].values()
    used = {
        "receivers": {r for p in pipelines for r in p["receivers"]},
        "processors": {r for p in pipelines for r in p.get("processors", [])},
        "exporters": {e for p in pipelines for e in p["exporters"]},
        "extensions": set(config["service"].get("extensions", [])),
    }
    for kind in ("receivers", "processors", "exporters", "extensions"):
        unused = set(config.get(kind) or {}) - used[kind]
        assert not unused, f"defined but unused {kind}: {sorted(unused)}"
    for cid in config.get("connectors") or {}:
        assert cid in used["exporters"] and cid in used["receivers"], f"connector {cid} must be both ends"


def test_components_are_known_and_take_their_documented_keys(config: dict[str, Any]) -> None:
    for kind in KINDS:
        for cid, body in (config.get(kind) or {}).items():
            assert ctype(cid) in KNOWN_KEYS[kind], f"{kind}: unknown component type {ctype(cid)!r}"
            unknown = set(body or {}) - KNOWN_KEYS[kind][ctype(cid)]
            assert not unknown, f"{kind}/{cid}: keys {sorted(unknown)} are not {ctype(cid)} settings"


def test_one_set_of_component_names_everywhere() -> None:
    """All configs use the names that load on 0.120-0.143 (otlp, otlphttp, loadbalancing, debug)."""
    for path in CONFIGS:
        cfg = load(path)
        for kind in KINDS:
            for cid in cfg.get(kind) or {}:
                assert ctype(cid) not in RENAMED, (
                    f"{path.name}: {cid} is the 0.144+ name; use {RENAMED[ctype(cid)]}"
                )
                assert ctype(cid) != "logging", f"{path.name}: the logging exporter is gone; use debug"


def test_memory_limiter_is_first_in_every_pipeline(config: dict[str, Any]) -> None:
    for pid, pipeline in config["service"]["pipelines"].items():
        procs = pipeline.get("processors", [])
        assert procs and ctype(procs[0]) == "memory_limiter", f"{pid}: memory_limiter must come first"


def test_groupbytrace_comes_before_batch(config: dict[str, Any]) -> None:
    for pid, pipeline in config["service"]["pipelines"].items():
        types = [ctype(p) for p in pipeline.get("processors", [])]
        if "groupbytrace" in types:
            assert ctype(pid) == "traces", f"{pid}: groupbytrace only groups spans"
            assert "batch" not in types[: types.index("groupbytrace")], f"{pid}: batch before groupbytrace"


def test_push_exporters_have_persistent_queues_and_retries(config: dict[str, Any]) -> None:
    storages = {x for x in config.get("extensions") or {} if ctype(x) == "file_storage"}
    for eid, body in (config.get("exporters") or {}).items():
        if ctype(eid) not in PUSH_EXPORTERS:
            continue
        queue = body.get("sending_queue") or {}
        assert queue.get("enabled", True) is True, f"{eid}: sending queue disabled"
        assert queue.get("storage") in storages, f"{eid}: sending queue is not persistent (file_storage)"
        assert (body.get("retry_on_failure") or {}).get("enabled") is True, f"{eid}: retry_on_failure off"


def test_loadbalancing_routes_by_trace_id() -> None:
    lbs = [
        (path.name, eid, body)
        for path in CONFIGS
        for eid, body in (load(path).get("exporters") or {}).items()
        if ctype(eid) == "loadbalancing"
    ]
    assert lbs, "the scale-out tier needs a loadbalancing exporter"
    for name, eid, body in lbs:
        assert body["routing_key"] == "traceID", f"{name}/{eid}"
        resolver = body["resolver"]
        assert len(resolver) == 1 and set(resolver) <= {"k8s", "dns"}, f"{name}/{eid}: one dynamic resolver"
        # The queue lives on the top level, where a retry is routed again over the current ring; a
        # per-backend queue would be dropped with its backend.
        sub = body["protocol"]["otlp"]
        assert sub["sending_queue"]["enabled"] is False and sub["retry_on_failure"]["enabled"] is False
        assert "endpoint" not in sub, "the loadbalancing exporter sets each backend's endpoint itself"


def test_loadbalancing_only_exports_traces() -> None:
    for path in CONFIGS:
        cfg = load(path)
        for pid, pipeline in cfg["service"]["pipelines"].items():
            for eid in pipeline["exporters"]:
                if ctype(eid) == "loadbalancing":
                    assert ctype(pid) == "traces", f"{path.name}/{pid}: traceID routing is for spans"


def test_listeners_do_not_share_a_port(config: dict[str, Any]) -> None:
    ports: list[str] = []
    for body in (config.get("receivers") or {}).values():
        for proto in (body.get("protocols") or {}).values():
            ports.append(proto["endpoint"].rsplit(":", 1)[1])
    for eid, body in (config.get("exporters") or {}).items():
        if ctype(eid) == "prometheus":
            ports.append(body["endpoint"].rsplit(":", 1)[1])
    for body in (config.get("extensions") or {}).values():
        if "endpoint" in (body or {}):
            ports.append(body["endpoint"].rsplit(":", 1)[1])
    telemetry = config["service"].get("telemetry", {}).get("metrics", {}).get("readers", [])
    ports += [str(r["pull"]["exporter"]["prometheus"]["port"]) for r in telemetry]
    assert len(ports) == len(set(ports)), f"port used twice: {ports}"


def test_queue_directory_is_where_the_deployments_mount_a_volume() -> None:
    compose = (COLLECTOR / "compose.yaml").read_text(encoding="utf-8")
    kube = (COLLECTOR / "kubernetes" / "tier1.yaml").read_text() + (
        COLLECTOR / "kubernetes" / "tier2.yaml"
    ).read_text()
    for path in CONFIGS:
        directory = load(path)["extensions"]["file_storage"]["directory"]
        text = compose if path.parent == COLLECTOR else kube
        assert re.search(rf"(:|mountPath: ){re.escape(directory)}\b", text), f"{directory} is not a volume"


def test_pinned_collector_version_is_the_documented_one() -> None:
    readme = (COLLECTOR / "README.md").read_text(encoding="utf-8")
    texts = [
        COLLECTOR / "compose.yaml",
        COLLECTOR / "kubernetes" / "tier1.yaml",
        COLLECTOR / "kubernetes" / "tier2.yaml",
    ]
    tags = {m for p in texts for m in re.findall(r"opentelemetry-collector-contrib:(\S+)", p.read_text())}
    assert len(tags) == 1, f"one Collector version everywhere, found {tags}"
    (tag,) = tags
    assert tag in readme, f"README.md must name the pinned Collector version {tag}"


def _nested_blocks(body: Any, path: str) -> list[tuple[str, str, dict[str, Any]]]:
    found: list[tuple[str, str, dict[str, Any]]] = []
    if isinstance(body, dict):
        for key, value in body.items():
            if key in NESTED_KEYS and isinstance(value, dict):
                found.append((f"{path}.{key}", key, value))
            found += _nested_blocks(value, f"{path}.{key}")
    return found


def test_nested_settings_use_their_documented_keys(config: dict[str, Any]) -> None:
    blocks = [
        b
        for kind in KINDS
        for cid, body in (config.get(kind) or {}).items()
        for b in _nested_blocks(body, cid)
    ]
    assert blocks
    for path, key, value in blocks:
        unknown = set(value) - NESTED_KEYS[key]
        assert not unknown, f"{path}: {sorted(unknown)} are not {key} settings"


def test_self_telemetry_keeps_the_documented_metric_names() -> None:
    """The docs name the Collector's own metrics as its default reader exposes them
    (``otelcol_exporter_send_failed_spans``). A reader written out in the config takes the exporter's own
    defaults instead, which add ``_total`` and unit suffixes: the same three switches keep the names."""
    documented = {
        name
        for path in (COLLECTOR / "README.md", ROOT / "examples" / "collector-stack" / "README.md")
        for name in re.findall(r"\b(otelcol_[a-z_]+)", path.read_text(encoding="utf-8"))
    }
    assert documented, "the docs point at the Collector's own metrics"
    assert not any(name.endswith("_total") for name in documented)
    for path in CONFIGS:
        for reader in load(path)["service"]["telemetry"]["metrics"]["readers"]:
            prometheus = reader["pull"]["exporter"]["prometheus"]
            switches = ("without_type_suffix", "without_units", "without_scope_info")
            assert all(prometheus.get(key) is True for key in switches), path.name
