"""The one path from a graph node to a running operator: :class:`OperatorFactory`.

Flink serializes a transformation's operator factory, user functions included,
and every parallel subtask deserializes its own instance, so state a function
keeps in ``self`` (a state handle taken in ``open``, a counter, a buffer) is
per subtask. Here a graph node holds an :class:`OperatorFactory`: the user's
objects (functions, key selectors, window assigners, triggers, evictors,
watermark strategies) and a ``build`` callable that makes the operator from
them. ``create(subtask)`` hands ``build`` the user's own objects for subtask 0
of the first execution, and a deep copy of a pristine snapshot of all of them
(one copy, so objects shared between them stay shared) for every other
subtask and for every subtask of a restarted execution.

The API modules only describe: they never construct operators and never copy
functions themselves. So that a new operator cannot bypass the copy (a
``build`` closing over the user's function instead of taking it as an
argument), ``create`` checks the operator it built: none of the user
functions it declares (:attr:`StreamOperator.functions`) may be one of the
originals on a subtask other than 0, unless copying that object failed (then
the subtasks share it, and a warning says so).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from typing import Any

from .operator import StreamOperator

_log = logging.getLogger(__name__)


class OperatorFactory:
    """Builds one operator per subtask, each with its own copy of the user's objects.

    The first ``create`` takes a pristine copy of the user's objects, before any of them
    ran. Subtask 0 of the first execution runs the user's own objects; every other
    operator, and every operator of a restarted execution (failover), gets a fresh copy
    of the pristine one, as a Flink subtask deserializes the function again on failover:
    what a function kept in ``self`` during a failed attempt does not leak into the next.
    """

    __slots__ = ("_original_used", "_pristine", "_shared", "build", "user_objects", "what")

    def __init__(self, what: str, build: Callable[..., StreamOperator], *user_objects: Any) -> None:
        self.what = what
        self.build = build
        self.user_objects = user_objects
        self._pristine: tuple[Any, ...] | None = None
        self._shared: set[int] = set()
        self._original_used = False

    def create(self, subtask: int) -> StreamOperator:
        if not self.user_objects:
            return self.build()
        if self._pristine is None:
            self._pristine, self._shared = copy_for_subtask(self.user_objects, self.what)
        if subtask == 0 and not self._original_used:
            self._original_used = True
            return self.build(*self.user_objects)
        copies, shared = copy_for_subtask(self._pristine, self.what, warn=False)
        operator = self.build(*copies)
        _check_copied(operator, self.user_objects + self._pristine, self._shared | shared, self.what)
        return operator

    def __repr__(self) -> str:
        return f"<OperatorFactory {self.what!r}>"


def copy_for_subtask(
    objects: tuple[Any, ...], what: str, *, warn: bool = True
) -> tuple[tuple[Any, ...], set[int]]:
    """Deep copies of ``objects`` (one memo: shared references stay shared), and the ids of
    the objects that could not be copied and are therefore shared (with a warning, once)."""
    memo: dict[int, Any] = {}
    out: list[Any] = []
    shared: set[int] = set()
    for obj in objects:
        try:
            out.append(copy.deepcopy(obj, memo))
        except Exception as exc:
            if not warn:  # already reported when the pristine copy was taken
                shared.add(id(obj))
                out.append(obj)
                continue
            _log.warning(
                "%s: cannot copy %r for a parallel subtask (%s: %s); the subtasks share this one "
                "object, so state it keeps in self is shared across them",
                what,
                obj,
                type(exc).__name__,
                exc,
            )
            shared.add(id(obj))
            out.append(obj)
    return tuple(out), shared


def _check_copied(operator: StreamOperator, originals: tuple[Any, ...], shared: set[int], what: str) -> None:
    ids = {id(_owner(o)) for o in originals if _has_state(_owner(o))} - shared
    for fn in operator.functions:
        owner = _owner(fn)
        if id(owner) in ids:
            raise AssertionError(
                f"{what}: the operator factory passed the user's own {type(owner).__name__} to a "
                "subtask other than 0; build() must take its user objects as arguments"
            )


def _owner(obj: Any) -> Any:
    """A bound method's instance (deepcopy copies it with the method), else the object."""
    return getattr(obj, "__self__", obj)


def _has_state(obj: Any) -> bool:
    """Objects deepcopy returns unchanged (functions, classes, modules) carry no copyable state."""
    return hasattr(obj, "__dict__") and not hasattr(obj, "__code__") and not isinstance(obj, type)
