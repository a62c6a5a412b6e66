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

import logging
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

log = logging.getLogger(__name__)


class SerializationSchema:
    def serialize(self, value: Any) -> bytes:
        raise NotImplementedError

    def serialize_batch(self, values: Sequence[Any]) -> list[bytes]:
        fn = self.serialize
        return [fn(v) for v in values]


class DeserializationSchema:
    # True when deserialize never returns None (a None result means "skip this record", as in
    # Flink): the Kafka source then does not look for one
    never_none = False

    def deserialize(self, message: bytes) -> Any:
        raise NotImplementedError

    def deserialize_batch(self, messages: Sequence[bytes]) -> list[Any]:
        fn = self.deserialize
        return [fn(m) for m in messages]


class SimpleStringSchema(SerializationSchema, DeserializationSchema):
    """Strings in a charset (UTF-8 by default), as PyFlink's ``SimpleStringSchema``."""

    never_none = True

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
    """JSON documents (orjson). With ``field_names`` (or a row ``type_info``, PyFlink's
    ``.Builder().with_type_info(Types.ROW_NAMED(...))``), a row, tuple or list becomes an object
    named by the fields."""

    def __init__(self, field_names: Sequence[str] | None = None, type_info: Any = None) -> None:
        if field_names is None and type_info is not None:
            field_names = _field_names(type_info)
        self.field_names = list(field_names) if field_names else None
        self.type_info = type_info
        # a row type with a nested row or array field converts each value by its type (slower);
        # a flat one zips the field names
        types = type_info.get_field_types() if _field_names(type_info) is not None else ()
        self._nested = any(_field_names(t) is not None or hasattr(t, "get_element_type") for t in types)

    @staticmethod
    def builder() -> _JsonRowBuilder:
        return _JsonRowBuilder(JsonRowSerializationSchema)

    @staticmethod
    def Builder() -> _JsonRowBuilder:  # PyFlink's name (a nested class there)
        return _JsonRowBuilder(JsonRowSerializationSchema)

    def serialize(self, value: Any) -> bytes:
        if self._nested:
            return orjson.dumps(_json_value(value, self.type_info))
        names = self.field_names
        if names is not None and not isinstance(value, (dict, str, bytes)) and hasattr(value, "__iter__"):
            value = dict(zip(names, value, strict=True))
        return orjson.dumps(value)

    def serialize_batch(self, values: Sequence[Any]) -> list[bytes]:
        if self.field_names is None:
            dumps = orjson.dumps
            return [dumps(v) for v in values]
        return [self.serialize(v) for v in values]

    def get_produced_type(self) -> Any:
        return self.type_info


class JsonRowDeserializationSchema(DeserializationSchema):
    """JSON documents (orjson) to dicts, or to tuples in ``field_names`` order when given, or to
    ``Row``s of a row ``type_info`` (PyFlink's ``.Builder().type_info(...)``: a missing field is
    ``None`` unless ``fail_on_missing_field``; with ``ignore_parse_errors`` a document that does
    not parse is skipped and logged)."""

    def __init__(
        self,
        field_names: Sequence[str] | None = None,
        type_info: Any = None,
        fail_on_missing_field: bool = False,
        ignore_parse_errors: bool = False,
    ) -> None:
        self.field_names = list(field_names) if field_names else None
        self.type_info = type_info
        self.fail_on_missing_field = fail_on_missing_field
        self.ignore_parse_errors = ignore_parse_errors

    @staticmethod
    def builder() -> _JsonRowBuilder:
        return _JsonRowBuilder(JsonRowDeserializationSchema)

    @staticmethod
    def Builder() -> _JsonRowBuilder:  # PyFlink's name (a nested class there)
        return _JsonRowBuilder(JsonRowDeserializationSchema)

    def get_produced_type(self) -> Any:
        return self.type_info

    def deserialize(self, message: bytes) -> Any:
        try:
            doc = orjson.loads(message)
        except orjson.JSONDecodeError as exc:
            if not self.ignore_parse_errors:
                raise  # (a dead letter of the source, or its failure, names JSONDecodeError)
            log.warning("JSON row: skipped a document that does not parse (%s): %r", exc, message[:100])
            return None
        if self.type_info is not None:
            if self.fail_on_missing_field:
                missing = [n for n in _field_names(self.type_info) or () if n not in doc]
                if missing:
                    raise ValueError(f"JSON row: field(s) {missing} missing in {message[:100]!r}")
            return self.type_info.convert(doc)
        if self.field_names is None:
            return doc
        return tuple(doc[name] for name in self.field_names)

    def deserialize_batch(self, messages: Sequence[bytes]) -> list[Any]:
        if self.field_names is None and self.type_info is None:
            loads = orjson.loads
            return [loads(m) for m in messages]
        out = [self.deserialize(m) for m in messages]
        return out if not self.ignore_parse_errors else [r for r in out if r is not None]


def _json_value(value: Any, type_info: Any) -> Any:
    """``value`` as orjson's input by its declared type, as Flink's JSON row format writes it: a
    row (also a nested one) is an object named by its type's fields, an array a JSON array of
    its elements' values; ``None`` is ``null``."""
    if value is None or isinstance(value, (str, bytes, int, float)):
        return value
    names = _field_names(type_info)
    if names is not None:
        types = type_info.get_field_types()
        items = value.items() if isinstance(value, dict) else zip(names, value, strict=True)
        typed = dict(zip(names, types, strict=True))
        return {n: _json_value(v, typed.get(n)) for n, v in items}
    element = getattr(type_info, "get_element_type", None)
    if callable(element) and isinstance(value, (list, tuple)):
        t = element()
        return [_json_value(v, t) for v in value]
    return value


def _field_names(type_info: Any) -> list[str] | None:
    names = getattr(type_info, "get_field_names", None)
    return list(names()) if callable(names) else None


class _JsonRowBuilder:
    """PyFlink's ``.builder()``/``.Builder()``: ``type_info``/``with_type_info`` (a row type, or a
    list of field names), ``fail_on_missing_field()``, ``ignore_parse_errors()``, ``build()``."""

    def __init__(self, cls: type) -> None:
        self._cls = cls
        self._fields: list[str] | None = None
        self._type_info: Any = None
        self._options: dict[str, bool] = {}

    def type_info(self, type_info: Any) -> _JsonRowBuilder:
        fields = _field_names(type_info)
        if fields is not None:
            self._type_info = type_info
        self._fields = fields if fields is not None else (list(type_info) if type_info else None)
        return self

    with_type_info = type_info

    def fail_on_missing_field(self) -> _JsonRowBuilder:
        self._options["fail_on_missing_field"] = True
        return self

    def ignore_parse_errors(self) -> _JsonRowBuilder:
        self._options["ignore_parse_errors"] = True
        return self

    def build(self) -> Any:
        if self._cls is JsonRowSerializationSchema:
            return JsonRowSerializationSchema(self._fields, self._type_info)
        return JsonRowDeserializationSchema(self._fields, self._type_info, **self._options)


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
