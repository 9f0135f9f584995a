"""``rag-confidence``: score answers from JSON, print schemas, run the demo or the OTLP gateway.

    rag-confidence score request.json            # readable scorecard
    rag-confidence score --json request.json     # the scorecard JSON (the TypeScript package's shape)
    rag-confidence score --jsonl < requests.jsonl  # one JSON line out per request line in
    rag-confidence schema                        # JSON Schema of inputs, config and scorecard
    rag-confidence demo                          # a traced, scored RAG pipeline, offline
    rag-confidence gateway --help                # the Collector-pipeline scoring service

A request is ``{"inputs": {...}, "config": {...}}`` or bare inputs. Unreadable input exits with status 2 and
a one-line error; in ``--jsonl`` mode a bad line yields an ``{"error": {...}}`` line and the batch goes on.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any, BinaryIO, TextIO

from .errors import InputValidationError, RagConfidenceError
from .scoring import compute_confidence
from .scoring.models import ConfidenceScorecard, ScoringConfig, ScoringInputs, published_json_schema
from .scoring.render import render_scorecard
from .scoring.serialize import to_reference_json

EXIT_BAD_INPUT = 2


def _split_request(request: Any) -> tuple[Any, Any]:
    if not isinstance(request, dict):
        raise InputValidationError("a request must be a JSON object")
    if "inputs" in request:
        unknown = set(request) - {"inputs", "config"}
        if unknown:
            raise InputValidationError(f"unknown request key(s): {', '.join(sorted(unknown))}")
        return request["inputs"], request.get("config")
    return request, None


def score_request(request: Any) -> ConfidenceScorecard:
    """Score one decoded request (``{"inputs", "config"}`` or bare inputs)."""
    inputs, config = _split_request(request)
    return compute_confidence(inputs, config)


def _error_line(kind: str, message: str, path: str | None, line: int) -> str:
    error = {"type": kind, "message": f"line {line}: {message}", "path": path, "line": line}
    return json.dumps({"error": error}, ensure_ascii=False)


def _score_jsonl(stream: BinaryIO, out: TextIO) -> int:
    """Score one request per line; a line that cannot be scored yields an error line, and the batch goes on.
    Blank lines are skipped (they hold no request)."""
    failures = 0
    for number, raw in enumerate(stream, start=1):
        if not raw.strip():
            continue
        try:
            card = score_request(_loads(raw.decode("utf-8-sig")))
        except RagConfidenceError as error:
            failures += 1
            out.write(_error_line(type(error).__name__, str(error), error.path, number) + "\n")
        except (ValueError, RecursionError, ArithmeticError) as error:  # not UTF-8 or JSON, too deep, ...
            failures += 1
            out.write(
                _error_line("JSONDecodeError", f"not a JSON request: {_reason(error)}", None, number) + "\n"
            )
        else:
            out.write(to_reference_json(card) + "\n")
        out.flush()
    return 1 if failures else 0


def _loads(text: str) -> Any:
    """JSON as the reference reads it: every number is a double, so an integer too large for one is an
    infinity (the scorer then reports it out of range), not an int Python cannot convert."""
    return json.loads(text, parse_int=_js_int)


def _js_int(text: str) -> int | float:
    return int(text) if len(text) < 300 else float(text)


def _reason(error: BaseException) -> str:
    if isinstance(error, RecursionError):
        return "nested too deeply"
    if isinstance(error, UnicodeDecodeError):
        return "not UTF-8"
    return str(error)


def _read(source: str) -> str:
    if source == "-":
        return sys.stdin.read()
    with open(source, encoding="utf-8-sig") as handle:  # a byte order mark is no JSON error
        return handle.read()


def _cmd_score(args: argparse.Namespace) -> int:
    if args.jsonl:
        if args.file == "-":
            return _score_jsonl(sys.stdin.buffer, sys.stdout)
        try:
            handle = open(args.file, "rb")  # noqa: SIM115 (closed below; read errors only are caught here)
        except OSError as error:
            print(f"rag-confidence score: cannot read {args.file}: {error.strerror}", file=sys.stderr)
            return EXIT_BAD_INPUT
        with handle:
            return _score_jsonl(handle, sys.stdout)
    try:
        text = _read(args.file)
    except OSError as error:
        print(f"rag-confidence score: cannot read {args.file}: {error.strerror}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except UnicodeDecodeError:
        print(f"rag-confidence score: {args.file} is not valid JSON: not UTF-8", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        card = score_request(_loads(text))
    except RagConfidenceError as error:
        print(f"rag-confidence score: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (ValueError, RecursionError, ArithmeticError) as error:
        print(f"rag-confidence score: {args.file} is not valid JSON: {_reason(error)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    sys.stdout.write(to_reference_json(card, indent=2) + "\n" if args.json else render_scorecard(card))
    return 0


def schemas() -> dict[str, Any]:
    """JSON Schemas (camelCase, as on the wire) of the inputs, the config and the scorecard."""
    return {
        "inputs": published_json_schema(ScoringInputs),
        "config": published_json_schema(ScoringConfig),
        "scorecard": published_json_schema(ConfidenceScorecard),
    }


def _cmd_schema(args: argparse.Namespace) -> int:
    selected = schemas() if args.which == "all" else schemas()[args.which]
    print(json.dumps(selected, indent=2))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from .otel.demo import run_demo  # OpenTelemetry is only needed for the demo

    return run_demo(sys.stdout)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rag-confidence",
        description="Deterministic, explainable confidence scorecards for RAG answers.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    score = commands.add_parser("score", help="score answers given as JSON", description=_cmd_score.__doc__)
    score.add_argument("file", nargs="?", default="-", help="a JSON request file, or - for stdin (default)")
    mode = score.add_mutually_exclusive_group()
    mode.add_argument("--json", action="store_true", help="print the scorecard JSON instead of text")
    mode.add_argument("--jsonl", action="store_true", help="one request per line in, one JSON line out")
    score.set_defaults(func=_cmd_score)

    schema = commands.add_parser("schema", help="print JSON Schemas of inputs, config and scorecard")
    schema.add_argument("which", nargs="?", choices=("all", "inputs", "config", "scorecard"), default="all")
    schema.set_defaults(func=_cmd_schema)

    demo = commands.add_parser("demo", help="trace and score a small offline RAG pipeline")
    demo.set_defaults(func=_cmd_demo)

    from .gateway.command import add_subparser as add_gateway

    add_gateway(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rag-confidence`` console script."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away (`| head`): nothing more to say
        # Python would flush stdout again at exit and complain; point it at /dev/null first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as error:  # writing the output failed (a full disk, say)
        print(f"rag-confidence: cannot write the output: {error.strerror or error}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
