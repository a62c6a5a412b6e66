"""Metrics: counters and gauges per operator, readable from the JobClient."""

from __future__ import annotations

from collections.abc import Callable


class Counter:
    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    def inc(self, n: int = 1) -> None:
        self.count += n

    def get_count(self) -> int:
        return self.count


class MetricGroup:
    """A flat registry named by scope (``operator.uid[subtask]``)."""

    def __init__(self, scope: str, registry: dict[str, object]) -> None:
        self._scope = scope
        self._registry = registry

    def counter(self, name: str) -> Counter:
        key = f"{self._scope}.{name}"
        c = self._registry.get(key)
        if not isinstance(c, Counter):
            c = Counter()
            self._registry[key] = c
        return c

    def gauge(self, name: str, fn: Callable[[], float | int]) -> None:
        self._registry[f"{self._scope}.{name}"] = fn


def read_metrics(registry: dict[str, object]) -> dict[str, float | int]:
    out: dict[str, float | int] = {}
    for key, m in registry.items():
        if isinstance(m, Counter):
            out[key] = m.count
        elif callable(m):
            out[key] = m()
    return out
