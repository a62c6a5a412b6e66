"""Declared types on streams: ``output_type=`` / ``type_info=`` as PyFlink takes them.

A stream remembers the type its producer declared (``DataStream._type_info``,
``None`` when undeclared, PyFlink's pickled type). Where the declared type
converts records (rows, tuples, lists, maps: ``TypeInformation.convert``) the
user's function is wrapped so its results leave already converted: a map
declared ``Types.ROW([...])`` emits :class:`~streamflow.types.row.Row` records,
as PyFlink's do after the JVM round trip. ``print()`` of a typed stream writes
what the JVM's ``toString`` would (``(hi,1)``, ``+I[a, 1]``); of an untyped
one, ``str(record)``, as PyFlink's ``_align_output_type`` does.

Wrappers are :class:`~streamflow.functions.Function` objects holding the
user's function, so per-subtask copies copy both and ``open``/``close`` reach
the user's function.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import chain, islice
from typing import Any, TextIO, cast

from ..connectors.collection import CollectionSource
from ..connectors.sinks import PrintSink
from ..functions import (
    FlatMapFunction,
    Function,
    KeyedProcessFunction,
    MapFunction,
    OutputTag,
    ProcessFunction,
)
from ..runtime.basic_operators import is_async
from ..runtime.operator import StreamOperator
from ..types.fast_paths import batch_converter, formatter
from ..types.java_narrowing import narrow_collection
from ..types.typeinfo import (
    BasicArrayTypeInfo,
    ObjectArrayTypeInfo,
    PrimitiveArrayTypeInfo,
    RowTypeInfo,
    TupleTypeInfo,
    TypeInformation,
)

__all__ = [
    "TypedPrintSink",
    "collection_source",
    "configure_input_type",
    "convert_collection",
    "converted",
    "declared_type",
    "typed",
    "typed_key_selector",
    "with_output_type",
]


_SLICE = 512


def declared_type(type_info: Any, where: str = "output_type") -> TypeInformation | None:
    """A declared type as PyFlink takes it: a ``TypeInformation``, a list of them (a row of
    those fields: ``RowTypeInfo(list)``), or ``None``; anything else is refused (PyFlink
    fails on it too, when it asks the JVM for the Java type)."""
    if type_info is None or isinstance(type_info, TypeInformation):
        return type_info
    if isinstance(type_info, list) and all(isinstance(t, TypeInformation) for t in type_info):
        from ..types.typeinfo import Types

        return cast(TypeInformation, Types.ROW(type_info))
    raise TypeError(
        f"{where}: expected a TypeInformation (Types.INT(), Types.ROW([...]), ...) or a list of "
        f"them, got {type_info!r}"
    )


def _converter(type_info: Any) -> Callable[[Any], Any] | None:
    type_info = declared_type(type_info)
    if isinstance(type_info, TypeInformation) and type_info.converts():
        return type_info.convert
    return None


def _convert_all(conv: Callable[[Any], Any], results: Iterable[Any] | None) -> list[Any] | None:
    """Convert generated outputs; ``(OutputTag, value)`` side outputs pass unchanged."""
    if results is None:
        return None
    return [
        item if type(item) is tuple and len(item) == 2 and isinstance(item[0], OutputTag) else conv(item)
        for item in results
    ]


class _Typed(Function):
    def __init__(self, inner: Any, conv: Callable[[Any], Any]) -> None:
        self.inner = inner
        self.conv = conv

    def open(self, runtime_context: Any) -> None:
        if isinstance(self.inner, Function):
            self.inner.open(runtime_context)

    def close(self) -> None:
        if isinstance(self.inner, Function):
            self.inner.close()


class _TypedMap(_Typed, MapFunction):
    def map(self, value: Any) -> Any:
        call = getattr(self.inner, "map", self.inner)
        return self.conv(call(value))


class _TypedAsyncMap(_Typed, MapFunction):
    """An ``async def map`` with a declared output type: the awaited result is converted."""

    async def map(self, value: Any) -> Any:
        call = getattr(self.inner, "map", self.inner)
        return self.conv(await call(value))


class _TypedFlatMap(_Typed, FlatMapFunction):
    def flat_map(self, value: Any) -> Iterable[Any]:
        call = getattr(self.inner, "flat_map", self.inner)
        return _convert_all(self.conv, call(value)) or ()


class _TypedProcess(_Typed, ProcessFunction):
    def process_element(self, value: Any, ctx: Any) -> Iterable[Any] | None:
        call = getattr(self.inner, "process_element", self.inner)
        return _convert_all(self.conv, call(value, ctx))


class _TypedKeyedProcess(_Typed, KeyedProcessFunction):
    def process_element(self, value: Any, ctx: Any) -> Iterable[Any] | None:
        return _convert_all(self.conv, self.inner.process_element(value, ctx))

    def on_timer(self, timestamp: int, ctx: Any) -> Iterable[Any] | None:
        return _convert_all(self.conv, self.inner.on_timer(timestamp, ctx))


def with_output_type(func: Any, method: str, output_type: Any) -> Any:
    """``func`` whose results are converted to ``output_type`` (``func`` itself if no conversion)."""
    conv = _converter(output_type)
    if conv is None:
        return func
    if method == "map":
        if is_async(getattr(func, "map", func)):  # (the async map path awaits the wrapper)
            return _TypedAsyncMap(func, conv)
        if isinstance(func, Function) or hasattr(func, "map"):
            return _TypedMap(func, conv)
        return lambda value: conv(func(value))
    if method == "flat_map":
        if isinstance(func, Function) or hasattr(func, "flat_map"):
            return _TypedFlatMap(func, conv)
        return lambda value: _convert_all(conv, func(value))
    if method == "process":
        if isinstance(func, KeyedProcessFunction):
            return _TypedKeyedProcess(func, conv)
        if isinstance(func, Function) or hasattr(func, "process_element"):
            return _TypedProcess(func, conv)
        return lambda value, ctx: _convert_all(conv, func(value, ctx))
    raise ValueError(f"no output-type conversion for {method}()")


def convert_collection(collection: Any, type_info: Any) -> Any:
    """``from_collection(data, type_info=...)``: the elements as records of ``type_info`` (an
    iterable is converted a slice at a time; the source converts each batch it reads)."""
    convert_batch = batch_converter(type_info)
    if convert_batch is None:
        return collection
    if isinstance(collection, (list, tuple)):
        return convert_batch(collection if isinstance(collection, list) else list(collection))
    if callable(collection):
        return lambda: _converted(convert_batch, collection())
    return lambda: _converted(convert_batch, collection)


def collection_source(collection: Any, type_info: Any) -> CollectionSource:
    """The source of ``from_collection(collection, type_info=...)``: a list or tuple converted
    once, an iterable a batch at a time as the source reads it (no second buffer)."""
    convert_batch = batch_converter(type_info)
    if isinstance(collection, (list, tuple)):  # PyFlink's from_collection: the JVM narrows ints
        values = convert_collection(collection, type_info)
        return CollectionSource(narrow_collection(declared_type(type_info), values))
    if convert_batch is None:
        return CollectionSource(convert_collection(collection, type_info))
    return CollectionSource(collection, convert_batch)


def _converted(convert_batch: Callable[[list], list], values: Iterable[Any]) -> Iterator[Any]:
    """``values`` converted a slice at a time (the per-record work stays at C speed)."""
    it = iter(values)
    return chain.from_iterable(map(convert_batch, iter(lambda: list(islice(it, _SLICE)), [])))


class TypedPrintSink(PrintSink):
    """``print()`` of a stream: each record as PyFlink prints it for the stream's type."""

    def __init__(self, sink_identifier: str | None, type_info: Any, stream: TextIO | None = None) -> None:
        super().__init__(sink_identifier, stream)
        self.type_info = type_info

    def formatter(self) -> Callable[[Any], str]:
        info = self.type_info
        return formatter(info, info.format) if isinstance(info, TypeInformation) else _pickled


def _pickled(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


def converted(stream: Any, output_type: Any, where: str) -> Any:
    """``typed(stream, output_type)`` for an operator whose user functions are not wrapped to
    convert (windows, connected and broadcast streams): where the declared type converts
    (rows, tuples, lists, maps), the operator converts its main output a batch at a time
    (``StreamOperator.convert_output``), so the records become ``Row``s as after
    ``map(output_type=...)``; side outputs keep their own types."""
    info = declared_type(output_type, where)
    convert = batch_converter(info)
    if convert is not None:
        for node, _tag in stream._inputs:
            factory = node.operator_factory
            factory.build = _converting_build(factory.build, convert)
    return typed(stream, info)


def side_converted(node: Any, tag_id: str, type_info: Any) -> None:
    """``get_side_output(tag)``: the side output's records take the tag's type (PyFlink maps the
    side output with ``output_type=tag.type_info``; the records cross the JVM with that type's
    serializer), converted a batch at a time where they are emitted
    (``StreamOperator.convert_side``). Applied at the first request of the tag on ``node`` (a
    second is the same type, or refused); a type that converts nothing costs nothing."""
    if tag_id in node.requested_side_outputs:
        return
    convert = batch_converter(declared_type(type_info))
    factory = getattr(node, "operator_factory", None)
    if convert is None or factory is None:
        return
    build = factory.build

    def converting(*user_objects: Any) -> StreamOperator:
        operator = build(*user_objects)
        operator.convert_side = {**(operator.convert_side or {}), tag_id: convert}
        return operator

    factory.build = converting


def typed_key_selector(selector: Callable[[Any], Any], key_type: Any) -> Callable[[Any], Any]:
    """``key_by(selector, key_type=...)``: PyFlink serializes the key with ``key_type``, so a
    declared row type makes the key a ``Row`` (a tuple type a tuple, ...) before keyed state and
    ``ctx.get_current_key()`` see it. The selector is wrapped only when the type converts (no
    per-record cost otherwise); a declared type that is not a type is refused."""
    declared = declared_type(key_type, "key_by(key_type=...)")
    if declared is not None:
        _refuse_unhashable_key_type(declared)
    conv = _converter(declared)
    if conv is None:
        return selector

    def select(record: Any) -> Any:
        return conv(selector(record))

    return select


def _refuse_unhashable_key_type(key_type: TypeInformation) -> None:
    """Flink's KeyedStream.validateKeyType: a key type that is, or holds in a tuple or row field,
    an array type (primitive, basic or object array) has no hash Flink can rely on and is refused
    when the stream is keyed. List and map types are accepted."""
    unsupported: list[TypeInformation] = []
    stack = [key_type]
    while stack:
        t = stack.pop()
        if isinstance(t, (PrimitiveArrayTypeInfo, BasicArrayTypeInfo, ObjectArrayTypeInfo)):
            unsupported.append(t)
        if isinstance(t, (RowTypeInfo, TupleTypeInfo)):
            stack.extend(t.get_field_types())
    if unsupported:
        raise ValueError(
            f"Type {key_type} cannot be used as key. Contained UNSUPPORTED key types: "
            f"{', '.join(map(str, unsupported))}. Look at the keyBy() documentation for the conditions "
            "a type has to satisfy in order to be eligible for a key."
        )


def _converting_build(build: Callable[..., StreamOperator], convert: Callable[[list], list]) -> Callable:
    def converting(*user_objects: Any) -> StreamOperator:
        operator = build(*user_objects)
        operator.convert_output = convert
        return operator

    return converting


def typed(stream: Any, type_info: Any) -> Any:
    """``stream`` with its declared record type (``None`` passes through)."""
    type_info = declared_type(type_info)
    if stream is not None:
        stream._type_info = type_info
        inputs = getattr(stream, "_inputs", None)
        if type_info is not None and inputs is not None and len(inputs) == 1:
            node, tag = inputs[0]  # (a union's inputs keep their own types)
            node.declared_types[tag] = type_info
    return stream


def configure_input_type(sink: Any, type_info: Any, env: Any) -> None:
    """Flink's ``InputTypeConfigurable``: a sink with ``set_input_type(type_info, config)`` learns
    the declared type of the stream it is attached to (``None`` when undeclared)."""
    set_input_type = getattr(sink, "set_input_type", None)
    if callable(set_input_type):
        set_input_type(type_info, env.get_config())
