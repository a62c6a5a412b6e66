"""Metrics that user functions and operators register: PyFlink's ``MetricGroup``.

``get_runtime_context().get_metrics_group()`` gives each operator subtask its
group, scoped ``<operator uid>[<subtask>]``; ``counter``, ``gauge``, ``meter``
and ``distribution`` register a metric under ``<scope>.<name>`` in the job's
registry (``add_group`` nests a name: ``<scope>.<group>.<name>``). The job
reads the registry for ``JobClient.get_metrics()``, the REST API and the
Prometheus endpoint; registering the same name twice returns the same metric.

All metric objects are plain counters updated in place: the cost is an
attribute increment, so a function may update them per record, and the
runtime updates its own per batch.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

_log = logging.getLogger(__name__)


class Counter:
    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    def inc(self, n: int = 1) -> None:
        self.count += n

    def dec(self, n: int = 1) -> None:
        self.count -= n

    def get_count(self) -> int:
        return self.count


class Meter:
    """Counts events; the rate (events per second over ``time_span_in_seconds``) is derived
    by the job's metric reader from successive samples of the count, as Flink's MeterView does."""

    __slots__ = ("count", "time_span_in_seconds")

    def __init__(self, time_span_in_seconds: int = 60) -> None:
        self.count = 0
        self.time_span_in_seconds = max(1, int(time_span_in_seconds))

    def mark_event(self, value: int = 1) -> None:
        self.count += value

    def get_count(self) -> int:
        return self.count


class Distribution:
    """Running count, sum, min, max and mean of the values given to ``update`` (PyFlink's
    Distribution; exposed in Prometheus as a summary's ``_count`` and ``_sum``)."""

    __slots__ = ("count", "max", "min", "sum")

    def __init__(self) -> None:
        self.count = 0
        self.sum = 0.0
        self.min = math.inf
        self.max = -math.inf

    def update(self, value: float) -> None:
        self.count += 1
        self.sum += value
        if value < self.min:
            self.min = value
        if value > self.max:
            self.max = value

    @property
    def mean(self) -> float:
        return self.sum / self.count if self.count else 0.0


class Gauge:
    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], float | int]) -> None:
        self.fn = fn

    def get_value(self) -> float | int:
        return self.fn()


Metric = Counter | Meter | Distribution | Gauge


class MetricGroup:
    """A scope in the job's flat registry (``operator.uid[subtask]``)."""

    def __init__(self, scope: str, registry: dict[str, object]) -> None:
        self._scope = scope
        self._registry = registry

    def _get(self, name: str, kind: type, make: Callable[[], Any]) -> Any:
        key = f"{self._scope}.{name}"
        metric = self._registry.get(key)
        if not isinstance(metric, kind):
            metric = make()
            self._registry[key] = metric
        return metric

    def counter(self, name: str) -> Counter:
        return self._get(name, Counter, Counter)

    def gauge(self, name: str, obj: Callable[[], float | int]) -> Gauge:
        gauge = Gauge(obj)
        self._registry[f"{self._scope}.{name}"] = gauge
        return gauge

    def meter(self, name: str, time_span_in_seconds: int = 60) -> Meter:
        return self._get(name, Meter, lambda: Meter(time_span_in_seconds))

    def distribution(self, name: str) -> Distribution:
        return self._get(name, Distribution, Distribution)

    def add_group(self, name: str, extra: str | None = None) -> MetricGroup:
        """A nested scope; with ``extra``, a key-value group (``name.extra``), as in PyFlink."""
        return MetricGroup(
            f"{self._scope}.{name}" + (f".{extra}" if extra is not None else ""), self._registry
        )

    def get_metric_identifier(self, name: str) -> str:
        return f"{self._scope}.{name}"


def read_metrics(registry: dict[str, object]) -> dict[str, float | int]:
    """Every registered metric as a number (a distribution as its ``.count``/``.sum``/``.min``
    /``.max``/``.mean``; a gauge that raises is left out and logged by the caller's reader)."""
    out: dict[str, float | int] = {}
    for key, m in registry.items():
        if isinstance(m, Counter | Meter):
            out[key] = m.count
        elif isinstance(m, Gauge):
            try:
                out[key] = m.fn()
            except Exception as exc:
                _log.warning("gauge %s failed (left out of this reading): %r", key, exc)
        elif isinstance(m, Distribution):
            d = m
            out[f"{key}.count"] = d.count
            out[f"{key}.sum"] = d.sum
            if d.count:
                out[f"{key}.min"], out[f"{key}.max"], out[f"{key}.mean"] = d.min, d.max, d.mean
        elif callable(m):  # a bare callable registered by older code
            out[key] = m()
    return out
