"""The options of the span processor and the decorator, checked where they are given: a wrong one fails at
construction, not silently at every span."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from ..errors import ConfigValidationError, UsageError
from ..signals import SignalOptions

__all__ = [
    "PROCESSOR_LIMITS",
    "check_callable_arity",
    "check_flags",
    "check_processor_limits",
    "check_providers",
    "check_signal_options",
    "check_span_processor",
]

#: The processor's numeric options, each of which must be positive.
PROCESSOR_LIMITS = ("max_pending_traces", "max_spans_per_trace", "pending_ttl_s", "max_scoring_queue")

# What each provider option must offer; duck-typed, so the API's proxy and no-op providers pass.
_PROVIDER_METHODS = {
    "tracer_provider": ("TracerProvider", "get_tracer"),
    "meter_provider": ("MeterProvider", "get_meter"),
    "logger_provider": ("LoggerProvider", "get_logger"),
}
_SPAN_PROCESSOR_METHODS = ("on_start", "on_end", "shutdown", "force_flush")


def check_processor_limits(**limits: Any) -> None:
    """Raise :class:`~rag_confidence.errors.ConfigValidationError` unless each given limit is a positive number
    (an int where a count is meant)."""
    for name, value in limits.items():
        whole = name != "pending_ttl_s"
        number = isinstance(value, int) or (not whole and isinstance(value, float))
        if isinstance(value, bool) or not number or not value > 0:
            kind = "a positive integer" if whole else "a positive number of seconds"
            raise ConfigValidationError(f"{name} must be {kind}, not {value!r}", path=name)


def check_flags(owner: str, **flags: Any) -> None:
    """Raise :class:`~rag_confidence.errors.UsageError` for a flag given as text: ``"no"`` and ``"false"`` are
    truthy, and would switch on what they mean to switch off. Other values count by their truth, as Python's
    own flags do (``1``, ``numpy.True_``)."""
    for name, value in flags.items():
        if isinstance(value, (str, bytes)):
            raise UsageError(f"{owner}({name}=...) must be True or False, not {value!r}")


def check_providers(owner: str, **providers: Any) -> None:
    """Raise :class:`~rag_confidence.errors.UsageError` for a provider option (``tracer_provider``,
    ``meter_provider``, ``logger_provider``) that is neither None nor a provider."""
    for name, value in providers.items():
        kind, method = _PROVIDER_METHODS[name]
        if value is not None and not callable(getattr(value, method, None)):
            raise UsageError(f"{owner}({name}=...) must be a {kind} or None, not {type(value).__name__}")


def check_signal_options(owner: str, value: object) -> None:
    """Raise :class:`~rag_confidence.errors.UsageError` unless ``value`` is None or a ``SignalOptions``:
    accepted, every answer's signal extraction would fail on it (a mapping of options is the usual slip)."""
    if value is not None and not isinstance(value, SignalOptions):
        raise UsageError(f"{owner}(signal_options=...) must be a SignalOptions, not {type(value).__name__}")


def check_span_processor(value: Any) -> None:
    """Raise :class:`~rag_confidence.errors.UsageError` unless ``value`` is a span processor. The usual slip is
    an exporter: accepted, it would fail at every span and export nothing."""
    missing = [method for method in _SPAN_PROCESSOR_METHODS if not callable(getattr(value, method, None))]
    if missing:
        hint = (
            f"; wrap the exporter: ConfidenceSpanProcessor(BatchSpanProcessor({type(value).__name__}(...)))"
            if callable(getattr(value, "export", None))
            else ""
        )
        raise UsageError(
            f"ConfidenceSpanProcessor needs a span processor to forward to, not {type(value).__name__} "
            f"(it has no {', '.join(missing)}){hint}"
        )


def check_callable_arity(
    owner: str, name: str, value: Callable[..., Any], arguments: str, count: int
) -> None:
    """Raise :class:`~rag_confidence.errors.UsageError` when ``value`` cannot be called with ``count``
    positional arguments; a callable whose signature cannot be read (some builtins) is taken on trust."""
    try:
        # The callable's own signature: a decorator around it (functools.wraps) may supply arguments itself.
        signature = inspect.signature(value, follow_wrapped=False)
    except Exception:  # no readable signature (some builtins; an object whose __getattr__ raises KeyError)
        return
    try:
        signature.bind(*range(count))
    except TypeError:
        raise UsageError(
            f"{owner}({name}=...) is called as {name}({arguments}); {getattr(value, '__name__', 'it')} "
            f"takes {signature}"
        ) from None
