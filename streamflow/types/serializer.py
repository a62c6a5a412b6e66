"""``TypeSerializer`` and the window serializers, as PyFlink's ``pyflink.common.serializer``.

PyFlink needs a serializer for every window type a custom assigner makes,
to ship windows between Python and the JVM. streamflow keeps windows as
Python objects and checkpoints them through its state codec, so a custom
assigner's ``get_window_serializer()`` is accepted but not required; the
serializers below still round-trip their windows through a byte stream
(``serialize(element, stream)`` / ``deserialize(stream)``) for code that
calls them directly.
"""

from __future__ import annotations

import struct
from typing import Any, BinaryIO, Generic, TypeVar

from streamflow.windowing.windows import GlobalWindow, TimeWindow

__all__ = ["CountWindowSerializer", "GlobalWindowSerializer", "TimeWindowSerializer", "TypeSerializer"]

T = TypeVar("T")
_LONG = struct.Struct(">q")


class TypeSerializer(Generic[T]):
    """Writes values of one type to a byte stream and reads them back."""

    def serialize(self, element: T, stream: BinaryIO) -> None:
        raise NotImplementedError

    def deserialize(self, stream: BinaryIO) -> T:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class TimeWindowSerializer(TypeSerializer[TimeWindow]):
    def serialize(self, element: TimeWindow, stream: BinaryIO) -> None:
        stream.write(_LONG.pack(element.start) + _LONG.pack(element.end))

    def deserialize(self, stream: BinaryIO) -> TimeWindow:
        start, end = _LONG.unpack(stream.read(8))[0], _LONG.unpack(stream.read(8))[0]
        return TimeWindow(start, end)


class CountWindowSerializer(TypeSerializer[Any]):
    def serialize(self, element: Any, stream: BinaryIO) -> None:
        stream.write(_LONG.pack(element.id))

    def deserialize(self, stream: BinaryIO) -> Any:
        from streamflow.windowing.count import CountWindow

        return CountWindow(_LONG.unpack(stream.read(8))[0])


class GlobalWindowSerializer(TypeSerializer[GlobalWindow]):
    def serialize(self, element: GlobalWindow, stream: BinaryIO) -> None:
        stream.write(b"\x00")

    def deserialize(self, stream: BinaryIO) -> GlobalWindow:
        stream.read(1)
        return GlobalWindow.get()
