"""Peak memory of a real gateway subprocess under many gRPC connections, and one connection's upload rate.

    python benchmarks/grpc_memory.py --connections 100 --size 4000000 [--slow-downstream 3] [--bdp-probe]
    python benchmarks/grpc_memory.py --connections 1 --size 4194304 --repeat 50 [--bdp-probe]

Each upstream has its own connection and sends its messages at once (after all are connected). Messages are
not OTLP unless the downstream is slow (then valid, so that they hold slots and the others wait): the gateway
refuses them once read, so the figures are grpcio's buffering and reading, not scoring. Prints the gateway's
peak RSS (VmHWM, Linux) and the rate of the whole run.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading
import time
from concurrent import futures

import grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"


def _body(size: int, valid: bool) -> bytes:
    if not valid:
        return b"\x0a" + b"\xff" * (size - 1)
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = b"\1" * 16, b"\2" * 8, "x"
    span.start_time_unix_nano, span.end_time_unix_nano = 1, 2
    blob = span.attributes.add()
    blob.key, blob.value.string_value = "blob", "y" * (size - 100)
    return request.SerializeToString()


def _peak_mib(pid: int, field: str = "VmHWM:") -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) // 1024 for line in status if line.startswith(field))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--connections", type=int, default=100)
    parser.add_argument("--size", type=int, default=4_000_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--slow-downstream", type=float, default=0.0, metavar="SECONDS")
    parser.add_argument("--bdp-probe", action="store_true")
    args = parser.parse_args()

    def export(request: bytes, context: object) -> bytes:
        time.sleep(args.slow_downstream)
        return b""

    sink = grpc.server(
        futures.ThreadPoolExecutor(64), options=[("grpc.max_receive_message_length", 64 << 20)]
    )
    handler = grpc.unary_unary_rpc_method_handler(export)
    sink.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(_SERVICE, {"Export": handler}),))
    sink_port = sink.add_insecure_port("127.0.0.1:0")
    sink.start()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = dict(
        os.environ,
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{sink_port}",
        OTEL_EXPORTER_OTLP_INSECURE="true",
        OTEL_METRICS_EXPORTER="none",
    )
    command = [sys.executable, "-m", "rag_confidence.cli", "gateway", "--grpc-listen", f"127.0.0.1:{port}"]
    command += ["--http-listen", "off", "--max-request-bytes", str(2 * args.size)]
    command += ["--grpc-bdp-probe" if args.bdp_probe else "--no-grpc-bdp-probe"]
    gateway = subprocess.Popen(command, env=env, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        body = _body(args.size, valid=args.slow_downstream > 0)
        codes: dict[str, int] = {}
        lock = threading.Lock()
        ready = threading.Barrier(args.connections + 1)

        def upstream() -> None:
            target = f"127.0.0.1:{port}"
            with grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
                grpc.channel_ready_future(channel).result(30)
                call = channel.unary_unary(f"/{_SERVICE}/Export")
                ready.wait()
                for _ in range(args.repeat):
                    try:
                        call(body, timeout=60)
                        code = "OK"
                    except grpc.RpcError as error:
                        code = error.code().name
                    with lock:
                        codes[code] = codes.get(code, 0) + 1

        threads = [threading.Thread(target=upstream) for _ in range(args.connections)]
        for thread in threads:
            thread.start()
        ready.wait()
        started = time.monotonic()
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - started
        sent = args.connections * args.repeat * args.size / (1 << 20)
        print(
            f"bdp_probe={int(args.bdp_probe)} connections={args.connections} size={args.size} "
            f"peak_rss={_peak_mib(gateway.pid)}MiB {sent / elapsed:.0f}MiB/s in {elapsed:.1f}s codes={codes}"
        )
    finally:
        gateway.terminate()
        gateway.wait(60)
        sink.stop(0)


if __name__ == "__main__":
    main()
