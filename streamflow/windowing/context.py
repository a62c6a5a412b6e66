"""Contexts: the protocols the window operator implements for assigners, triggers, evictors.

Theory of operation
-------------------
Assigners, triggers and evictors are stateless objects shared by every key.
Whatever they need from the running operator comes through a context object
that the window operator creates, bound to the current key and window:

* :class:`WindowAssignerContext` -- the current processing time (used by the
  processing-time assigners). Flink's ``WindowAssigner.WindowAssignerContext``.
* :class:`TriggerContext` -- watermark, processing time, timers and state for
  the current (key, window). Flink's ``Trigger.TriggerContext``, with
  PyFlink's method names (``flink-python/pyflink/datastream/window.py``).
  Timers registered here are the window operator's timers with namespace =
  the window; when one fires, the operator calls the trigger's
  ``on_event_time`` / ``on_processing_time`` for that window.
* :class:`OnMergeContext` -- the :class:`TriggerContext` given to
  ``Trigger.on_merge``; its window is the merge result.
* :class:`EvictorContext` -- watermark and processing time for evictors.

Trigger state is kept deliberately small. A trigger declares a
:class:`TriggerStateDescriptor` (name + reduce function, like PyFlink's
``ReducingStateDescriptor``); ``get_partitioned_state`` returns a
:class:`TriggerState` with PyFlink's ``ReducingState`` surface (``get`` /
``add`` / ``clear``) scoped to (key, window, descriptor name).
``merge_partitioned_state`` reduces the state of every window that took part
in the merge into the merge-result window and clears the sources. As in
Flink's ``WindowOperator``, trigger state and trigger timers are namespaced
by the *actual* window (the merge result), not by the merging set's state
window. :class:`DictReducingState` is a ready-made :class:`TriggerState`
over a plain dict slot, and :func:`merge_reducing_state` the matching merge.
A trigger written for PyFlink declares its state with PyFlink's keyed-state
descriptors instead; the window operator accepts those too (``trigger_state.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "DictReducingState",
    "EvictorContext",
    "OnMergeContext",
    "TriggerContext",
    "TriggerState",
    "TriggerStateDescriptor",
    "WindowAssignerContext",
    "merge_reducing_state",
]


@runtime_checkable
class WindowAssignerContext(Protocol):
    """What an assigner may ask: the current processing time (epoch ms)."""

    def get_current_processing_time(self) -> int: ...


@runtime_checkable
class EvictorContext(Protocol):
    """What an evictor may ask (Flink's ``Evictor.EvictorContext``, minus metrics)."""

    def get_current_processing_time(self) -> int: ...

    def get_current_watermark(self) -> int: ...


@dataclass(frozen=True, slots=True)
class TriggerStateDescriptor:
    """Declares a piece of per-(key, window) trigger state: a name and how values combine."""

    name: str
    reduce_function: Callable[[Any, Any], Any]


@runtime_checkable
class TriggerState(Protocol):
    """Reducing state scoped to the current key and window (PyFlink's ``ReducingState``)."""

    def get(self) -> Any | None:
        """The current value, or ``None`` when empty."""
        ...

    def add(self, value: Any) -> None:
        """Combine ``value`` into the state with the descriptor's reduce function."""
        ...

    def clear(self) -> None:
        """Empty the state."""
        ...


@runtime_checkable
class TriggerContext(Protocol):
    """What a trigger may ask of the window operator, bound to the current key and window."""

    def get_current_watermark(self) -> int: ...

    def get_current_processing_time(self) -> int: ...

    def register_event_time_timer(self, time: int) -> None:
        """Call ``on_event_time(time, window)`` once the watermark reaches ``time``."""
        ...

    def register_processing_time_timer(self, time: int) -> None:
        """Call ``on_processing_time(time, window)`` once processing time reaches ``time``."""
        ...

    def delete_event_time_timer(self, time: int) -> None: ...

    def delete_processing_time_timer(self, time: int) -> None: ...

    def get_partitioned_state(self, descriptor: TriggerStateDescriptor) -> TriggerState:
        """The state named by ``descriptor`` for the current key and window."""
        ...


@runtime_checkable
class OnMergeContext(TriggerContext, Protocol):
    """The context of ``Trigger.on_merge``: the current window is the merge result."""

    def merge_partitioned_state(self, descriptor: TriggerStateDescriptor) -> None:
        """Reduce the ``descriptor`` state of every merged window into the result window."""
        ...


class DictReducingState:
    """A :class:`TriggerState` kept in ``store[slot]``; an absent slot is empty state.

    The window operator can keep one dict per operator and use
    ``(key, window, descriptor.name)`` as the slot.
    """

    __slots__ = ("_reduce", "_slot", "_store")

    def __init__(
        self,
        store: MutableMapping[Hashable, Any],
        slot: Hashable,
        reduce_function: Callable[[Any, Any], Any],
    ) -> None:
        self._store = store
        self._slot = slot
        self._reduce = reduce_function

    def get(self) -> Any | None:
        return self._store.get(self._slot)

    def add(self, value: Any) -> None:
        """Null is no value (Flink's HeapReducingState): adding it, or a null result, clears."""
        current = None if value is None else self._store.get(self._slot)
        result = value if current is None else self._reduce(current, value)
        if result is None:
            self.clear()
        else:
            self._store[self._slot] = result

    def clear(self) -> None:
        self._store.pop(self._slot, None)


def merge_reducing_state(
    store: MutableMapping[Hashable, Any],
    source_slots: Iterable[Hashable],
    target_slot: Hashable,
    reduce_function: Callable[[Any, Any], Any],
) -> None:
    """Fold the values of ``source_slots`` into ``target_slot`` and remove the sources.

    Empty sources are skipped; the target keeps its own value (if any) as
    the first operand. A source equal to the target is left alone.
    """
    acc = store.get(target_slot)
    for slot in source_slots:
        if slot == target_slot:
            continue
        value = store.pop(slot, None)
        if value is not None:
            acc = value if acc is None else reduce_function(acc, value)
    if acc is not None:
        store[target_slot] = acc
