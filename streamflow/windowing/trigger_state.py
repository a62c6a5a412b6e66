"""Trigger state declared with PyFlink's keyed-state descriptors.

Theory of operation
-------------------
PyFlink's ``Trigger.TriggerContext.get_partitioned_state(state_descriptor)`` takes any
keyed-state descriptor (``ValueStateDescriptor``, ``ListStateDescriptor``,
``ReducingStateDescriptor``, ``AggregatingStateDescriptor``) and returns that kind of
state, scoped to the current key and window; ``OnMergeContext.merge_partitioned_state``
merges the merging kinds (reducing, aggregating, list) into the merge-result window and
refuses the others, as Flink's ``WindowOperator.Context.mergePartitionedState`` does
("does not refer to a mergeable state"). Streamflow's own triggers declare a
:class:`~streamflow.windowing.context.TriggerStateDescriptor` (a name and a reduce
function), which stays a reducing state.

Every kind lives in one slot of the window operator's per-key trigger store (a dict,
checkpointed with the operator), ``(window, descriptor name)``: the views below read and
write that slot, so an absent slot is empty state and clearing removes it.
:func:`partitioned_state` picks the view, :func:`merge_function` the fold that
``merge_reducing_state`` applies to the merged windows' slots.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, MutableMapping
from typing import Any

from streamflow.state.state_objects import NULL_ELEMENT, checked_list
from streamflow.windowing.context import DictReducingState, TriggerStateDescriptor

__all__ = ["merge_function", "partitioned_state"]

Store = MutableMapping[Hashable, Any]


class _Slot:
    __slots__ = ("_slot", "_store")

    def __init__(self, store: Store, slot: Hashable) -> None:
        self._store, self._slot = store, slot

    def clear(self) -> None:
        self._store.pop(self._slot, None)


class DictValueState(_Slot):
    """PyFlink's ``ValueState`` over a slot."""

    __slots__ = ("_default",)

    def __init__(self, store: Store, slot: Hashable, default: Any = None) -> None:
        super().__init__(store, slot)
        self._default = default

    def value(self) -> Any:
        value = self._store.get(self._slot)
        return self._default if value is None else value

    def update(self, value: Any) -> None:
        if value is None:
            self.clear()
        else:
            self._store[self._slot] = value


class DictListState(_Slot):
    """PyFlink's ``ListState`` over a slot."""

    __slots__ = ()

    def get(self) -> list:
        return list(self._store.get(self._slot) or ())

    def __iter__(self) -> Iterator[Any]:
        return iter(self.get())

    def add(self, value: Any) -> None:
        if value is None:
            raise TypeError(NULL_ELEMENT)
        self._store[self._slot] = [*self.get(), value]

    def add_all(self, values: Iterable[Any]) -> None:
        added = checked_list(values)
        if added:  # adding nothing gives the slot no entry (Flink's addAll)
            self._store[self._slot] = [*self.get(), *added]

    def update(self, values: Iterable[Any]) -> None:
        values = checked_list(values)
        if values:
            self._store[self._slot] = values
        else:
            self.clear()


class DictAggregatingState(_Slot):
    """PyFlink's ``AggregatingState`` over a slot (the slot holds the accumulator)."""

    __slots__ = ("_agg",)

    def __init__(self, store: Store, slot: Hashable, agg: Any) -> None:
        super().__init__(store, slot)
        self._agg = agg

    def get(self) -> Any:
        acc = self._store.get(self._slot)
        return None if acc is None else self._agg.get_result(acc)

    def add(self, value: Any) -> None:
        """Adding null clears, as does a null accumulator (Flink's HeapAggregatingState)."""
        if value is None:
            self.clear()
            return
        acc = self._store.get(self._slot)
        acc = self._agg.add(value, self._agg.create_accumulator() if acc is None else acc)
        if acc is None:
            self.clear()
        else:
            self._store[self._slot] = acc


def partitioned_state(store: Store, slot: Hashable, descriptor: Any) -> Any:
    """The state ``descriptor`` declares, kept in ``store[slot]``."""
    if isinstance(descriptor, TriggerStateDescriptor):
        return DictReducingState(store, slot, descriptor.reduce_function)
    kind = getattr(descriptor, "kind", None)
    if kind == "reducing":
        return DictReducingState(store, slot, descriptor.reduce)
    if kind == "value":
        return DictValueState(store, slot, getattr(descriptor, "default", None))
    if kind == "list":
        return DictListState(store, slot)
    if kind == "aggregating":
        return DictAggregatingState(store, slot, descriptor.agg_function)
    raise NotImplementedError(
        f"trigger state {getattr(descriptor, 'name', descriptor)!r}: a trigger's partitioned state is a "
        "value, list, reducing or aggregating state (a TriggerStateDescriptor or PyFlink's descriptor)"
    )


def merge_function(descriptor: Any) -> Callable[[Any, Any], Any]:
    """How two windows' values of ``descriptor`` combine when the windows merge."""
    if isinstance(descriptor, TriggerStateDescriptor):
        return descriptor.reduce_function
    kind = getattr(descriptor, "kind", None)
    if kind == "reducing":
        return descriptor.reduce
    if kind == "list":
        return lambda a, b: [*a, *b]
    if kind == "aggregating":
        return descriptor.agg_function.merge
    raise ValueError(
        f"trigger state {getattr(descriptor, 'name', descriptor)!r}: the state descriptor does not refer "
        "to a mergeable state (reducing, aggregating or list), as in Flink"
    )
