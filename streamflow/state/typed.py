"""Value state that stores what its declared type says, as PyFlink's does.

PyFlink serializes a state value with the descriptor's type on every
``update``: a ``Types.FLOAT()`` value comes back as a 32-bit float, a row type
comes back as a ``Row``. Types that convert (``TypeInformation.convert`` is not
the identity) get this wrapper; other descriptors get the plain state.
"""

from __future__ import annotations

from typing import Any

__all__ = ["typed_value_state"]


class TypedValueState:
    __slots__ = ("_convert", "_inner")

    def __init__(self, inner: Any, convert: Any) -> None:
        self._inner = inner
        self._convert = convert

    def value(self) -> Any:
        return self._inner.value()

    def update(self, value: Any) -> None:
        self._inner.update(None if value is None else self._convert(value))

    def clear(self) -> None:
        self._inner.clear()


def typed_value_state(state: Any, descriptor: Any) -> Any:
    from ..types.typeinfo import TypeInformation

    type_info = getattr(descriptor, "type_info", None)
    if isinstance(type_info, TypeInformation) and type_info.converts():
        return TypedValueState(state, type_info.convert)
    return state
