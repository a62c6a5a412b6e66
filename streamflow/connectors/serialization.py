"""Serialization schemas with PyFlink's names: values to bytes and back, one batch per call.

``SimpleStringSchema`` (text in a charset) and the JSON row schemas
(``JsonRowSerializationSchema`` / ``JsonRowDeserializationSchema``, orjson;
rows are dicts, or tuples when field names are given) are what PyFlink
users know. Any callable ``bytes -> value`` or ``value -> bytes`` is accepted
where a schema is, wrapped by :func:`as_deserializer` / :func:`as_serializer`.

Connectors call the batch methods (``serialize_batch`` / ``deserialize_batch``),
so the per-record cost is one call of the underlying function in a
comprehension.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson

__all__ = [
    "ByteArraySchema",
    "DeserializationSchema",
    "JsonRowDeserializationSchema",
    "JsonRowSerializationSchema",
    "SerializationSchema",
    "SimpleStringSchema",
    "as_deserializer",
    "as_serializer",
]


class SerializationSchema:
    def serialize(self, value: Any) -> bytes:
        raise NotImplementedError

    def serialize_batch(self, values: Sequence[Any]) -> list[bytes]:
        fn = self.serialize
        return [fn(v) for v in values]


class DeserializationSchema:
    def deserialize(self, message: bytes) -> Any:
        raise NotImplementedError

    def deserialize_batch(self, messages: Sequence[bytes]) -> list[Any]:
        fn = self.deserialize
        return [fn(m) for m in messages]


class SimpleStringSchema(SerializationSchema, DeserializationSchema):
    """Strings in a charset (UTF-8 by default), as PyFlink's ``SimpleStringSchema``."""

    def __init__(self, charset: str = "UTF-8") -> None:
        self.charset = charset

    def serialize(self, value: Any) -> bytes:
        return value.encode(self.charset) if isinstance(value, str) else str(value).encode(self.charset)

    def serialize_batch(self, values: Sequence[Any]) -> list[bytes]:
        cs = self.charset
        try:
            return [v.encode(cs) for v in values]
        except AttributeError:  # not all str: fall back to str(value)
            return [self.serialize(v) for v in values]

    def deserialize(self, message: bytes) -> str:
        return message.decode(self.charset)

    def deserialize_batch(self, messages: Sequence[bytes]) -> list[Any]:
        cs = self.charset
        return [m.decode(cs) for m in messages]


class ByteArraySchema(SerializationSchema, DeserializationSchema):
    """Raw bytes both ways."""

    def serialize(self, value: Any) -> bytes:
        return bytes(value)

    def deserialize(self, message: bytes) -> bytes:
        return message

    def deserialize_batch(self, messages: Sequence[bytes]) -> list[Any]:
        return list(messages)


class JsonRowSerializationSchema(SerializationSchema):
    """JSON documents (orjson). With ``field_names``, a tuple/list row becomes an object."""

    def __init__(self, field_names: Sequence[str] | None = None) -> None:
        self.field_names = list(field_names) if field_names else None

    @staticmethod
    def builder() -> _JsonRowBuilder:
        return _JsonRowBuilder(JsonRowSerializationSchema)

    def serialize(self, value: Any) -> bytes:
        if self.field_names is not None and isinstance(value, (tuple, list)):
            value = dict(zip(self.field_names, value, strict=True))
        return orjson.dumps(value)

    def serialize_batch(self, values: Sequence[Any]) -> list[bytes]:
        if self.field_names is None:
            dumps = orjson.dumps
            return [dumps(v) for v in values]
        return [self.serialize(v) for v in values]


class JsonRowDeserializationSchema(DeserializationSchema):
    """JSON documents (orjson) to dicts, or to tuples in ``field_names`` order when given."""

    def __init__(self, field_names: Sequence[str] | None = None) -> None:
        self.field_names = list(field_names) if field_names else None

    @staticmethod
    def builder() -> _JsonRowBuilder:
        return _JsonRowBuilder(JsonRowDeserializationSchema)

    def deserialize(self, message: bytes) -> Any:
        doc = orjson.loads(message)
        if self.field_names is None:
            return doc
        return tuple(doc[name] for name in self.field_names)

    def deserialize_batch(self, messages: Sequence[bytes]) -> list[Any]:
        if self.field_names is None:
            loads = orjson.loads
            return [loads(m) for m in messages]
        return [self.deserialize(m) for m in messages]


class _JsonRowBuilder:
    """PyFlink's ``.builder().type_info(...).build()``: field names come from a row type or a list."""

    def __init__(self, cls: type) -> None:
        self._cls = cls
        self._fields: list[str] | None = None

    def type_info(self, type_info: Any) -> _JsonRowBuilder:
        names = getattr(type_info, "get_field_names", None)
        self._fields = list(names()) if callable(names) else (list(type_info) if type_info else None)
        return self

    with_type_info = type_info

    def build(self) -> Any:
        return self._cls(self._fields)


class _FnSerializer(SerializationSchema):
    def __init__(self, fn: Callable[[Any], bytes]) -> None:
        self._fn = fn

    def serialize(self, value: Any) -> bytes:
        return self._fn(value)


class _FnDeserializer(DeserializationSchema):
    def __init__(self, fn: Callable[[bytes], Any]) -> None:
        self._fn = fn

    def deserialize(self, message: bytes) -> Any:
        return self._fn(message)


def as_serializer(schema: SerializationSchema | Callable[[Any], bytes]) -> SerializationSchema:
    if isinstance(schema, SerializationSchema):
        return schema
    if callable(schema):
        return _FnSerializer(schema)
    raise TypeError(f"expected a SerializationSchema or a callable value -> bytes, got {schema!r}")


def as_deserializer(schema: DeserializationSchema | Callable[[bytes], Any]) -> DeserializationSchema:
    if isinstance(schema, DeserializationSchema):
        return schema
    if callable(schema):
        return _FnDeserializer(schema)
    raise TypeError(f"expected a DeserializationSchema or a callable bytes -> value, got {schema!r}")
