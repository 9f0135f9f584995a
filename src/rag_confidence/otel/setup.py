"""One-call setup from the standard ``OTEL_*`` variables, and the ``opentelemetry-instrument`` configurator.

Both go through the SDK's own environment configuration (the configurator class distros are meant to
subclass), so every ``OTEL_*`` variable means what it means everywhere else; the only change is that each
exporting span processor is wrapped in one :class:`ConfidenceSpanProcessor`.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from opentelemetry import _logs, metrics, trace
from opentelemetry.sdk._configuration import _OTelSDKConfigurator
from opentelemetry.sdk._logs import LoggerProvider as SdkLoggerProvider
from opentelemetry.sdk.trace import SpanProcessor, SynchronousMultiSpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.trace import ProxyTracerProvider

# Imported for real: typing.get_type_hints reads the annotation (see recording.py).
from typing_extensions import TypedDict, Unpack

from .. import semconv
from ..errors import ConfigValidationError, TelemetrySetupError, UsageError
from ..scoring import create_scorer
from ..scoring.models import ScoringConfig
from ..scoring.validation import did_you_mean
from ..signals import SignalOptions
from .evaluations import EvaluationLogProcessor
from .limits import (
    PROCESSOR_LIMITS,
    check_flags,
    check_processor_limits,
    check_providers,
    check_signal_options,
)
from .processor import ConfidenceSpanProcessor

__all__ = [
    "ENV_BACKGROUND_SCORING",
    "ENV_CONFIG",
    "RagConfidenceConfigurator",
    "Telemetry",
    "configure_from_env",
]

_logger = logging.getLogger(__name__)

#: Path of a JSON scoring config (camelCase, as for ``compute_confidence``) used by the zero-code setup.
ENV_CONFIG = "RAG_CONFIDENCE_CONFIG"
#: ``true`` scores answers on a background thread (``background_scoring=True``) in the zero-code setup.
ENV_BACKGROUND_SCORING = "RAG_CONFIDENCE_BACKGROUND_SCORING"
_CONFIGURATOR_ENV = "OTEL_PYTHON_CONFIGURATOR"
_CONFIGURATOR_GROUP = "opentelemetry_configurator"
_EXPORTER_ENVS = {
    "traces": "OTEL_TRACES_EXPORTER",
    "metrics": "OTEL_METRICS_EXPORTER",
    "logs": "OTEL_LOGS_EXPORTER",
}
# The SDK reads OTEL_EXPORTER_OTLP_[SIGNAL_]PROTOCOL only for exporters named in OTEL_*_EXPORTER; an exporter
# named in code is taken as is (and "otlp" is the gRPC one). Defaults chosen here go by the protocol too.
_OTLP_BY_PROTOCOL = {"grpc": "otlp_proto_grpc", "http/protobuf": "otlp_proto_http"}
_PROTOCOL_ENV = "OTEL_EXPORTER_OTLP_PROTOCOL"


class ProcessorOptions(TypedDict, total=False):
    """The :class:`ConfidenceSpanProcessor` options :func:`configure_from_env` passes on, for type checkers
    (a misspelt or wrong-typed option is an error before it runs)."""

    meter_provider: metrics.MeterProvider | None
    logger_provider: _logs.LoggerProvider | None
    emit_events: bool
    max_pending_traces: int
    max_spans_per_trace: int
    pending_ttl_s: float
    background_scoring: bool
    max_scoring_queue: int


@dataclass(frozen=True)
class Telemetry:
    """The providers :func:`configure_from_env` installed globally, and the confidence processor."""

    tracer_provider: trace.TracerProvider
    meter_provider: metrics.MeterProvider
    logger_provider: _logs.LoggerProvider
    processor: ConfidenceSpanProcessor | None

    def force_flush(self, timeout_millis: int = 30_000) -> None:
        """Export everything pending on all three signals."""
        for provider in (self.tracer_provider, self.meter_provider, self.logger_provider):
            flush = getattr(provider, "force_flush", None)
            if flush is not None:
                flush(timeout_millis)

    def shutdown(self) -> None:
        """Flush and shut down all three providers (call once, at exit)."""
        for provider in (self.tracer_provider, self.meter_provider, self.logger_provider):
            shutdown = getattr(provider, "shutdown", None)
            if shutdown is not None:
                shutdown()


class RagConfidenceConfigurator(_OTelSDKConfigurator):
    """The ``opentelemetry_configurator`` entry point ``rag_confidence``: zero-code scoring.

    Turn it on by selecting it::

        OTEL_PYTHON_CONFIGURATOR=rag_confidence opentelemetry-instrument python app.py

    Selected, it configures traces, metrics and logs from the ``OTEL_*`` variables (defaulting each
    ``OTEL_*_EXPORTER`` to ``otlp``, as ``opentelemetry-distro`` does), wraps the exporting span processors
    in a :class:`ConfidenceSpanProcessor` and lets it read evaluators' ``gen_ai.evaluation.result`` log
    records (:class:`~rag_confidence.otel.EvaluationLogProcessor`); ``RAG_CONFIDENCE_CONFIG`` may name a JSON
    scoring config file and ``RAG_CONFIDENCE_BACKGROUND_SCORING=true`` moves scoring off the application
    threads. Not selected (``opentelemetry-instrument`` loads the first configurator it finds when none is
    named, and that may be this one), it runs the configurator that would have been loaded without it (a
    distro's), or none, so installing rag-confidence changes nothing by itself.
    """

    def _configure(self, **kwargs: Any) -> None:
        if os.environ.get(_CONFIGURATOR_ENV, "").strip() != semconv.CONFIGURATOR_NAME:
            _configure_as_if_absent(**kwargs)
            return
        options = {"background_scoring": _flag(ENV_BACKGROUND_SCORING)}
        try:
            config = _config_from_env()
            create_scorer(config)  # a bad config fails here, before any provider is set up
        except ConfigValidationError as error:
            # Telemetry must not be lost to a scoring config mistake: set it up, without scoring.
            _logger.error(
                "rag-confidence: %s; traces, metrics and logs are set up WITHOUT confidence scoring", error
            )
            _default_exporters(kwargs)
            super()._configure(**kwargs)  # type: ignore[no-untyped-call]
            return
        processor = _configure_sdk(self, _ProcessorFactory(config=config, options=options), kwargs)
        _remember(processor, by_configurator=True)  # configure_from_env in the application returns it


def _configure_as_if_absent(**kwargs: Any) -> None:
    """What ``opentelemetry-instrument`` would have done without rag-confidence installed.

    With no configurator named, it loads the first one it finds, which may be ours, and skips the rest. So
    ours runs the first other configurator (a distro's, say) when there is one, and otherwise sets nothing up:
    an application that configures its own providers keeps them.
    """
    for entry_point in entry_points(group=_CONFIGURATOR_GROUP):
        if entry_point.name != semconv.CONFIGURATOR_NAME:
            entry_point.load()().configure(**kwargs)
            return


def configure_from_env(
    config: ScoringConfig | Mapping[str, Any] | None = None,
    *,
    signal_options: SignalOptions | None = None,
    **processor_options: Unpack[ProcessorOptions],
) -> Telemetry:
    """Set up traces, metrics and logs over OTLP from the standard ``OTEL_*`` variables, with scoring on.

    ``OTEL_SERVICE_NAME``, ``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_PROTOCOL``,
    ``OTEL_TRACES_SAMPLER``, ``OTEL_METRIC_EXPORT_INTERVAL``, ... all apply; each ``OTEL_*_EXPORTER``
    defaults to ``otlp``; ``RAG_CONFIDENCE_CONFIG`` (a JSON scoring config file) applies when ``config`` is None
    and ``RAG_CONFIDENCE_BACKGROUND_SCORING`` when ``background_scoring`` is not passed, as in the zero-code
    setup. The providers become the global ones: call this once, at startup, before anything
    sets a global tracer provider (else :class:`~rag_confidence.errors.TelemetrySetupError`; a second call
    returns the first call's setup). ``config`` and
    ``processor_options`` go to :class:`ConfidenceSpanProcessor`; evaluators' ``gen_ai.evaluation.result`` log
    records on the logger provider are read for their answers (:class:`~rag_confidence.otel.EvaluationLogProcessor`)::

        telemetry = configure_from_env({"preset": "production-v0.3"})
        ...  # serve requests
        telemetry.shutdown()
    """
    current = trace.get_tracer_provider()
    if _installed is not None and current is _installed.tracer_provider:
        if _installed_by_configurator:  # the same application run under opentelemetry-instrument: expected
            _logger.info(
                "rag-confidence: telemetry was set up by the rag_confidence configurator "
                "(opentelemetry-instrument); configure_from_env returns that setup"
            )
        else:
            _logger.warning(
                "rag-confidence: configure_from_env was called again; the first call's setup stays in place "
                "(a second one would score every answer twice)"
            )
        return _installed
    if not isinstance(current, ProxyTracerProvider):
        # The SDK would refuse to replace it with only a log line, and nothing would be scored.
        raise TelemetrySetupError(
            f"a global tracer provider is set already ({type(current).__name__}): call configure_from_env "
            "before anything sets one, or add the processor to yours: "
            "provider.add_span_processor(ConfidenceSpanProcessor(BatchSpanProcessor(exporter)))"
        )
    _check_processor_options(processor_options)
    check_signal_options("configure_from_env", signal_options)
    if config is None:
        config = _config_from_env()  # as the zero-code setup reads it
    create_scorer(config)  # a bad config raises here, before any provider is installed
    options: dict[str, Any] = dict(processor_options)
    options.setdefault("background_scoring", _flag(ENV_BACKGROUND_SCORING))
    factory = _ProcessorFactory(config=config, signal_options=signal_options, options=options)
    configurator = RagConfidenceConfigurator()  # type: ignore[no-untyped-call]
    return _remember(_configure_sdk(configurator, factory, {}))


_FLAGS = ("emit_events", "background_scoring")
_PROVIDERS = ("meter_provider", "logger_provider")


def _check_processor_options(options: Mapping[str, Any]) -> None:
    """Misspelt or misplaced options fail here, before any provider is installed (the processor itself is
    built inside the SDK's setup, after the global providers are set)."""
    accepted = inspect.signature(ConfidenceSpanProcessor).parameters
    for option in options:
        parameter = accepted.get(option)
        if parameter is None or parameter.kind is not inspect.Parameter.KEYWORD_ONLY:
            hint = did_you_mean(option, accepted)
            raise UsageError(f"configure_from_env: unknown ConfidenceSpanProcessor option {option!r}{hint}")
    check_processor_limits(**{name: options[name] for name in PROCESSOR_LIMITS if name in options})
    check_flags("configure_from_env", **{name: options[name] for name in _FLAGS if name in options})
    check_providers("configure_from_env", **{name: options[name] for name in _PROVIDERS if name in options})


_installed: Telemetry | None = None
_installed_by_configurator = False


def _remember(processor: ConfidenceSpanProcessor | None, *, by_configurator: bool = False) -> Telemetry:
    global _installed, _installed_by_configurator
    _installed_by_configurator = by_configurator
    _installed = Telemetry(
        tracer_provider=trace.get_tracer_provider(),
        meter_provider=metrics.get_meter_provider(),
        logger_provider=_logs.get_logger_provider(),
        processor=processor,
    )
    return _installed


def _default_exporters(kwargs: dict[str, Any]) -> None:
    """Each ``OTEL_*_EXPORTER`` left unset means ``otlp``, as with ``opentelemetry-distro``: the OTLP exporter of
    the protocol ``OTEL_EXPORTER_OTLP_[SIGNAL_]PROTOCOL`` names (gRPC when unset)."""
    for signal, variable in _EXPORTER_ENVS.items():
        key = f"{_singular(signal)}_exporter_names"
        if not os.environ.get(variable, "").strip() and key not in kwargs:
            kwargs[key] = [_otlp_exporter(signal)]


def _otlp_exporter(signal: str) -> str:
    """The exporter entry point for OTLP on ``signal`` (``traces``, ``metrics`` or ``logs``)."""
    for variable in (f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL", _PROTOCOL_ENV):
        protocol = os.environ.get(variable, "").strip()
        if protocol:
            name = _OTLP_BY_PROTOCOL.get(protocol)
            if name is None:
                raise TelemetrySetupError(
                    f"{variable}={protocol!r}: the Python OTLP exporters speak "
                    + " or ".join(repr(known) for known in _OTLP_BY_PROTOCOL)
                )
            return name
    return _OTLP_BY_PROTOCOL["grpc"]


def _configure_sdk(
    configurator: _OTelSDKConfigurator, factory: _ProcessorFactory, kwargs: dict[str, Any]
) -> ConfidenceSpanProcessor | None:
    _default_exporters(kwargs)
    kwargs["export_span_processor"] = factory
    # The SDK's own environment setup, bypassing only our selection check above.
    _OTelSDKConfigurator._configure(configurator, **kwargs)  # type: ignore[no-untyped-call]
    processor = factory.install_if_unused()
    logger_provider = _logs.get_logger_provider()
    if processor is not None and isinstance(logger_provider, SdkLoggerProvider):
        # Evaluators log gen_ai.evaluation.result through the same provider: read them for the answers.
        logger_provider.add_log_record_processor(EvaluationLogProcessor(processor))
    return processor


class _ProcessorFactory:
    """``export_span_processor`` for the SDK's setup: one confidence processor around all exporters.

    The SDK calls it once per configured span exporter. Scoring once per answer (not once per exporter) needs
    one processor: the first call returns it, wrapping a fan-out; later exporters join the fan-out and the SDK
    gets an inert processor for them.
    """

    def __init__(
        self,
        *,
        config: ScoringConfig | Mapping[str, Any] | None,
        signal_options: SignalOptions | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        self._config = config
        self._signal_options = signal_options
        self._options = dict(options or {})
        self._fan_out: SynchronousMultiSpanProcessor | None = None
        self.processor: ConfidenceSpanProcessor | None = None

    def __call__(self, span_exporter: SpanExporter, *args: Any, **kwargs: Any) -> SpanProcessor:
        exporting = BatchSpanProcessor(span_exporter, *args, **kwargs)
        if self._fan_out is not None:
            self._fan_out.add_span_processor(exporting)
            return SpanProcessor()
        self._fan_out = SynchronousMultiSpanProcessor()  # type: ignore[no-untyped-call]
        self._fan_out.add_span_processor(exporting)
        self.processor = self._new_processor(self._fan_out)
        return self.processor

    def install_if_unused(self) -> ConfidenceSpanProcessor | None:
        """With no span exporter configured, still score (for metrics and events) on the global provider."""
        if self.processor is not None:
            return self.processor
        provider = trace.get_tracer_provider()
        if not isinstance(provider, TracerProvider):
            return None
        self.processor = self._new_processor(SpanProcessor())
        provider.add_span_processor(self.processor)
        return self.processor

    def _new_processor(self, downstream: SpanProcessor) -> ConfidenceSpanProcessor:
        return ConfidenceSpanProcessor(
            downstream, config=self._config, signal_options=self._signal_options, **self._options
        )


def _config_from_env() -> dict[str, Any] | None:
    path = os.environ.get(ENV_CONFIG, "").strip()
    if not path:
        return None
    try:
        loaded = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as error:
        message = f"{ENV_CONFIG}={path!r} is not a readable JSON file: {error}"
        raise ConfigValidationError(message, path=ENV_CONFIG) from error
    if not isinstance(loaded, dict):
        raise ConfigValidationError(f"{ENV_CONFIG}={path!r} must hold a JSON object", path=ENV_CONFIG)
    return loaded


def _flag(variable: str) -> bool:
    value = os.environ.get(variable, "").strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value not in ("", "0", "false", "no", "off"):
        # Logged, not raised: a typo in a tuning switch must not cost the application its telemetry.
        _logger.warning("rag-confidence: %s=%r is not true or false; read as false", variable, value)
    return False


def _singular(signal: str) -> str:
    return {"traces": "trace", "metrics": "metric", "logs": "log"}[signal]
