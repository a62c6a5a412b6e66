"""Co-map and co-flat-map on keyed connected streams, with keyed state (as in PyFlink).

``a.connect(b).key_by(k1, k2).map(CoMapFunction)`` runs keyed: the current key
is set for every record, so the function may use keyed state shared by both
inputs. The function runs inside the keyed co-process operator through
:class:`KeyedCoMapAdapter` / :class:`KeyedCoFlatMapAdapter`, which keep its
lifecycle (``open``/``close``) and drain a ``flat_map`` generator while its
record's key is current.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..functions import Function, KeyedCoProcessFunction

__all__ = ["KeyedCoFlatMapAdapter", "KeyedCoMapAdapter"]


class _Adapter(KeyedCoProcessFunction):
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def open(self, runtime_context: Any) -> None:
        if isinstance(self.inner, Function):
            self.inner.open(runtime_context)

    def close(self) -> None:
        if isinstance(self.inner, Function):
            self.inner.close()


class KeyedCoMapAdapter(_Adapter):
    def process_element1(self, value: Any, ctx: Any) -> Iterable[Any]:
        return (self.inner.map1(value),)

    def process_element2(self, value: Any, ctx: Any) -> Iterable[Any]:
        return (self.inner.map2(value),)


class KeyedCoFlatMapAdapter(_Adapter):
    def process_element1(self, value: Any, ctx: Any) -> Iterable[Any]:
        out = self.inner.flat_map1(value)
        return () if out is None else list(out)

    def process_element2(self, value: Any, ctx: Any) -> Iterable[Any]:
        out = self.inner.flat_map2(value)
        return () if out is None else list(out)
