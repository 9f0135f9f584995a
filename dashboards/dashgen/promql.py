"""PromQL building blocks shared by the dashboards and the alert rules."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .names import Histogram

RATE_INTERVAL = "$__rate_interval"
RANGE = "$__range"


def eq(label: str, value: str) -> str:
    return f'{label}="{value}"'


def match(label: str, pattern: str) -> str:
    return f'{label}=~"{pattern}"'


def dash_sel(metric: str, *matchers: str) -> str:
    """A dashboard series selector: always filtered by the job and instance variables."""
    return metric + "{" + ", ".join((match("job", "$job"), match("instance", "$instance"), *matchers)) + "}"


def first_or_increase(selector: str, window: str) -> str:
    """How much a counter grew over ``window``, counting a series that first appeared inside the window.

    ``increase()`` needs two samples of a series, so the very first increments of a counter that is born with
    value 1 (OpenTelemetry counters appear on first use) count as nothing. The ``unless ... offset`` branch
    takes a series that did not exist ``window`` ago at its full value.
    """
    return f"(\n  {selector}\nunless\n  {selector} offset {window}\n)\nor\nincrease({selector}[{window}])"


def indent(text: str, spaces: int) -> str:
    return "\n".join(" " * spaces + line for line in text.splitlines())


def quantile(
    q: float,
    histogram: Histogram,
    selector_fn: Callable[[str], str],
    by: Sequence[str],
    window: str,
    offset: str = "",
) -> str:
    labels = ", ".join((*by, "le"))
    shifted = f" offset {offset}" if offset else ""
    buckets = f"{selector_fn(histogram.bucket)}[{window}]{shifted}"
    return f"histogram_quantile({q:g}, sum by ({labels}) (rate({buckets})))"
