"""The gateway's request path counted in CPU instructions: a noise-free A/B of two builds. One command:

    python benchmarks/bench_instructions.py [--requests 20] [--compare /other/venv/bin/python] [--only WORKLOAD]

``bench_gateway.py`` measures what the issue asks (spans per second against the pass-through, real gRPC on both
sides), but on a shared 2-core machine its rounds move by ±10% and a 5% change in the scoring path disappears in
that noise. This benchmark runs the same requests through the same code in-process, under valgrind's callgrind,
and counts the instructions executed: the count of one build does not move with the neighbours' load, so two
builds (``--compare``: another interpreter with another install of the package) can be compared to the percent.

Each request goes through ``Gateway.process`` as a received one does: decode, validation, screening, scoring,
the span attributes, the encoding an OTLP exporter does before the network (the forwarder serializes and drops
the bytes), the gateway's own metrics and the scorecard metrics (an SDK meter provider with a reader, exemplars
on). Left out, because both gateways pay it alike and instructions would not say it better than the CPU
clock: the gRPC server and client. So the pass-through here is the gateway's own part of its cost; its
instructions per request and the scoring's extra per answer are the figures to compare, not a spans-per-second
ratio.

With the assembly window on (``--assembly-max-age 30``), the mixed request is counted twice more, pass-through and
scoring: ``window`` sends the same request again and again, as bench_gateway.py does (every request after the first
finds its 40 traces kept: each is a retry to the window), and ``window, fresh`` gives every request trace ids of its
own (new traces, as a service's traffic brings them). Their figure is scoring against the pass-through with the
window, the ratio bench_gateway.py's "assembly window on" row measures in spans per second.

Also counted: bench_processor.py's traced pipeline (a root, two retrievers with 10 documents, a reranker, an LLM
span) with BatchSpanProcessor alone and wrapped in ConfidenceSpanProcessor, every span encoded as the OTLP
exporter would; the ratio of instructions per trace stands beside that benchmark's CPU ratio.

Needs valgrind (``apt-get install -y valgrind``); callgrind runs the code about 50 times slower, so the default
is 20 requests per workload after 3 unmeasured ones.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
WARM_UP = 3

# (name, RAG answers, plain traces): the workloads of bench_gateway.py.
WORKLOADS = (("mixed", 2, 38), ("answer-dense", 20, 20))
# The mixed request with the assembly window on: (name, whether each request has trace ids of its own).
WINDOW_WORKLOADS = (("window", False), ("window, fresh", True))


def _instrumentation(state: str) -> None:
    subprocess.run(
        ["callgrind_control", "--instr", state, str(os.getpid())], check=True, stdout=subprocess.DEVNULL
    )


def processor_child(mode: str, traces: int) -> None:
    """Runs inside valgrind: ``traces`` traces of bench_processor.py's pipeline, BatchSpanProcessor alone or
    wrapped in ConfidenceSpanProcessor (with its metrics and event), every span exported through the encoder."""
    sys.path.insert(0, str(HERE))
    from bench_processor import build, run_pipeline

    provider, sink, _ = build(wrapped=mode == "scoring")
    tracer = provider.get_tracer("bench")
    for _ in range(WARM_UP):
        run_pipeline(tracer)
    provider.force_flush()
    _instrumentation("on")
    for _ in range(traces):
        run_pipeline(tracer)
    provider.force_flush()  # the batch worker's export of these traces is counted too
    _instrumentation("off")
    assert sink.spans == (WARM_UP + traces) * 5, "every span must reach the exporter"


def fresh_bodies(body: bytes, count: int) -> list[bytes]:
    """``body`` ``count`` times, each with trace ids (and parents' links to them) of its own."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    bodies: list[bytes] = []
    for index in range(1, count + 1):
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    span.trace_id = (int.from_bytes(span.trace_id, "big") ^ index).to_bytes(16, "big")
        bodies.append(request.SerializeToString())
    return bodies


def child(workload: str, mode: str, requests: int) -> None:
    """Runs inside valgrind: process ``requests`` requests with instrumentation switched on around them."""
    if workload == "processor":
        processor_child(mode, requests)
        return
    sys.path.insert(0, str(HERE))
    from bench_gateway import build_request
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from rag_confidence.gateway.config import AssemblySettings, GatewayConfig
    from rag_confidence.gateway.decode import CONTENT_TYPE_PROTOBUF
    from rag_confidence.gateway.forward import ForwardResult
    from rag_confidence.gateway.service import Gateway

    class EncodingForwarder:
        """Serializes each request as the OTLP exporters do before the network, then drops the bytes."""

        description = "encode only"

        def forward(self, request: object) -> ForwardResult:
            request.SerializeToString()  # type: ignore[attr-defined]
            return ForwardResult(ok=True)

        def shutdown(self) -> None:
            pass

    windowed = dict(WINDOW_WORKLOADS)
    if workload in windowed:
        body, _ = build_request()
        bodies = (
            fresh_bodies(body, WARM_UP + requests) if windowed[workload] else [body] * (WARM_UP + requests)
        )
        assembly = AssemblySettings(max_age=30.0)
    else:
        rag, plain = next((rag, plain) for name, rag, plain in WORKLOADS if name == workload)
        body, _ = build_request(rag, plain)
        bodies = [body] * (WARM_UP + requests)
        assembly = AssemblySettings()
    gateway = Gateway(
        GatewayConfig(scoring_enabled=mode == "scoring", assembly=assembly),
        EncodingForwarder(),  # type: ignore[arg-type]
        meter_provider=MeterProvider(metric_readers=[InMemoryMetricReader()]),
    )

    def run(sent: list[bytes]) -> None:
        for body in sent:
            outcome = gateway.process("grpc", body, CONTENT_TYPE_PROTOBUF, None)
            assert outcome.error is None, outcome.error

    run(bodies[:WARM_UP])
    _instrumentation("on")
    run(bodies[WARM_UP:])
    _instrumentation("off")


def count(python: str, workload: str, mode: str, requests: int) -> int:
    """Instructions executed by ``requests`` requests of ``workload`` in ``mode``, under ``python``."""
    with tempfile.TemporaryDirectory() as folder:
        completed = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--instr-atstart=no",
                f"--callgrind-out-file={folder}/callgrind.out",
                python,
                __file__,
                "--child",
                workload,
                mode,
                str(requests),
            ],
            capture_output=True,
            text=True,
            check=False,
            # Hash-ordered work (sets, dict iteration of str keys) would move the count from run to run.
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
    found = re.search(r"Collected : ([\d,]+)", completed.stderr)
    if completed.returncode != 0 or found is None:
        raise RuntimeError(f"the {workload}/{mode} run failed:\n{completed.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument(
        "--compare", metavar="PYTHON", help="another interpreter (with its own install of the package)"
    )
    names = [name for name, _, _ in WORKLOADS] + [name for name, _ in WINDOW_WORKLOADS] + ["processor"]
    parser.add_argument(
        "--only", action="append", choices=names, help="count only this workload (repeatable; default: all)"
    )
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        workload, mode, requests = args.child
        child(workload, mode, int(requests))
        return 0
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("valgrind is not installed (apt-get install -y valgrind); nothing measured", file=sys.stderr)
        return 2
    chosen = set(args.only or names)
    builds = {"this": sys.executable}
    if args.compare:
        builds["compared"] = args.compare
    print(f"instructions per request ({args.requests} requests after {WARM_UP} unmeasured), callgrind")
    figures: dict[str, dict[str, tuple[float, float]]] = {}
    for label, python in builds.items():
        location = subprocess.run(
            [python, "-c", "import rag_confidence, os; print(os.path.dirname(rag_confidence.__file__))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        print(f"{label}: {python} ({location})")
        for workload, rag, _ in WORKLOADS:
            if workload not in chosen:
                continue
            passing = count(python, workload, "pass-through", args.requests) / args.requests
            scoring = count(python, workload, "scoring", args.requests) / args.requests
            per_answer = (scoring - passing) / rag
            figures.setdefault(workload, {})[label] = (passing, per_answer)
            print(
                f"  {workload:>13}: pass-through {passing / 1e6:6.2f} M, scoring {scoring / 1e6:6.2f} M, "
                f"extra per answer {per_answer / 1e6:5.2f} M"
            )
        for workload, _ in WINDOW_WORKLOADS:
            if workload not in chosen:
                continue
            passing = count(python, workload, "pass-through", args.requests) / args.requests
            scoring = count(python, workload, "scoring", args.requests) / args.requests
            figures.setdefault(workload, {})[label] = (passing, scoring)
            print(
                f"  {workload:>13}: pass-through {passing / 1e6:6.2f} M, scoring {scoring / 1e6:6.2f} M: "
                f"scoring at {passing / scoring:.2f}x the pass-through's speed (bench_gateway.py's ratio "
                "adds the gRPC both pay)"
            )
        if "processor" not in chosen:
            continue
        alone = count(python, "processor", "pass-through", args.requests) / args.requests
        wrapped = count(python, "processor", "scoring", args.requests) / args.requests
        figures.setdefault("processor", {})[label] = (alone, wrapped - alone)
        print(
            f"  {'processor':>13}: BatchSpanProcessor alone {alone / 1e6:6.2f} M per trace, wrapped "
            f"{wrapped / 1e6:6.2f} M: {wrapped / alone:.2f}x (target of bench_processor.py: <= 1.10x in CPU)"
        )
    if args.compare:
        print("this build against the compared one:")
        for workload, by_build in figures.items():
            (pass_a, answer_a), (pass_b, answer_b) = by_build["this"], by_build["compared"]
            second = (
                "scoring"
                if workload in dict(WINDOW_WORKLOADS)
                else f"extra per {'trace' if workload == 'processor' else 'answer'}"
            )
            print(
                f"  {workload:>13}: {'alone' if workload == 'processor' else 'pass-through'} "
                f"{100 * (pass_a / pass_b - 1):+5.1f}%, {second} {100 * (answer_a / answer_b - 1):+5.1f}%"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
