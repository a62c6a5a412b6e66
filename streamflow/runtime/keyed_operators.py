"""Keyed rolling aggregations: ``reduce``, ``sum``, ``min``, ``max``, ``min_by``, ``max_by``.

The per-key accumulator lives in the keyed state backend's table
``"reduce"`` (``{key: accumulated record}``); the hot loop touches that dict
directly, one lookup and one store per record. With incremental checkpoints the
batch's keys and new values are logged once per batch (``state/changes.py``).
"""

from __future__ import annotations

import copy
import decimal
from collections.abc import Callable, Iterator
from itertools import compress
from operator import itemgetter
from typing import Any

from ..functions import Function
from ..types.row import Row
from .basic_operators import expand, is_async, resolve_function
from .detach import detached
from .fold import inline_expression, key_expression, make_fold
from .item_getters import failed_record
from .timer_operator import TimerOperator

_FIELD_0 = itemgetter(0)

_MISSING = object()


class ReduceOperator(TimerOperator):
    """Emits, for every record, the key's accumulated value after folding the record in.
    (A TimerOperator for its keyed snapshot and restore; it registers no timers.)"""

    def __init__(self, name: str, key_selector: Callable[[Any], Any], function: Any) -> None:
        super().__init__(name, key_selector)
        self.functions = (function,)
        self.reduce = resolve_function(function, "reduce", name)
        self._specialize = getattr(self.reduce, "specialize", None)
        # a user's function may change its first argument in place and return it: the table
        # keeps its own copy of what flows on (detach.py); the built-in aggregations never do
        self._detach = getattr(self.reduce, "aggregation", None) is None

    async def open(self) -> None:
        self.table, self.dirty = self.backend.tracked_table("reduce", "value")
        # RocksDB: one multi-get per record batch for the keys not cached (state/rocksdb_table.py)
        self._prefetch = getattr(self.table, "prefetch", None)
        # a plain callable (a lambda, sum(1)...) has no runtime context, so no keyed state:
        # on the heap backend (a plain dict; RocksDB's table flushes when the current key is
        # set) it needs no current key per record
        fn = self.functions[0]
        self._plain = type(self.table) is dict and not isinstance(getattr(fn, "__self__", fn), Function)
        self._new_keys_often = True  # until a batch shows mostly known keys
        self._folds: tuple[Callable[..., Any], ...] | None = None
        self._guarded: tuple[Callable[..., Any], ...] | None = None
        self._patch: int | None = None  # the field the unguarded folds change
        self._fold_checked = False
        await super().open()

    def _inline_folds(self) -> tuple[Callable[..., Any], ...] | None:
        """The batch loops with the reduce function inlined (runtime/fold.py), when it has a
        recognised shape: (known keys, many new keys). ``sum``/``min``/``max`` on tuples
        declare their expression without its per-record guard too: while the table is
        empty at the first batch (no restored state), those folds run instead, testing
        each key's first record, and ``_guarded`` holds the others for when one fails."""
        inline = inline_expression(self.reduce)
        if inline is None:
            return None
        expression, namespace = inline
        key = key_expression(self.key_selector)
        # (known keys, many new keys), then the same returning the batch's keys too, for the
        # log of incremental checkpoints while it records (_fold_rest)
        folds = tuple(make_fold(expression, namespace, key, known, keys) for keys in (False, True)
                      for known in (True, False))  # fmt: skip
        unguarded = getattr(self.reduce, "inline_unguarded", None)
        if unguarded is None or len(self.table):
            return folds
        self._guarded = folds
        # every value is a tuple these folds made or a key's first record: a batch of known
        # keys changes only this field of each (the log's patch, state/heap_frames.py)
        self._patch = getattr(self.reduce, "patch_field", None)
        if self.dirty is not None:  # ... and every value a tuple of one length: the capture's shape
            self.dirty.shape = getattr(self.reduce, "tuple_arity", None)
            # keyed by field 0 (``lambda e: e[0]``), which the body carries: every value's field
            # 0 is its key, the very object (a key's first record holds it), so a base or a
            # whole-value delta writes the key once (state/heap_frames.py "putk")
            self.dirty.key_first = key == key_expression(_FIELD_0) and self._patch not in (None, 0)
        body, first = unguarded
        return tuple(make_fold(body, {}, key, known, keys, first) for keys in (False, True)
                     for known in (True, False))  # fmt: skip

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        if self._check_key_type:
            self.check_key_type(records)
        if self._specialize is not None and records:
            self.reduce, self._specialize = self._specialize(records[0]), None
        if self._plain:
            if not self._fold_checked and records:
                self._fold_checked = True
                self._folds = self._inline_folds()
            if self._folds is not None:
                await self._fold_batch(self._folds, records, timestamps)
                return
        key_of, reduce, table, backend = self.key_selector, self.reduce, self.table, self.backend
        get, missing = table.get, _MISSING
        out: list[Any] = []
        append = out.append
        it = iter(records)
        try:
            keys = list(map(key_of, it))  # the loop in C (an indexing selector is an itemgetter)
        except Exception as exc:
            record = failed_record(records, it)  # a local named record: found even when None
            raise self.failure(exc, record) from None
        if self._prefetch is not None:
            self._prefetch(keys)
        if self._detach:
            await self._reduce_detached(keys, records, timestamps)
            return
        key = record = None
        try:
            if self._plain and not self._new_keys_often:
                # no current key; a key's first record is the only KeyError (a try costs
                # nothing until it raises: about 170 fewer instructions a record than the get
                # below, and about 1,500 more for each new key)
                new = 0
                for key, record in zip(keys, records, strict=True):
                    try:
                        record = reduce(table[key], record)
                    except KeyError:
                        if key in table:  # raised by the function itself
                            raise
                        new += 1
                    table[key] = record
                    append(record)
                self._new_keys_often = new * 8 > len(records)
            elif self._plain:  # many new keys lately: no exceptions
                new = 0
                for key, record in zip(keys, records, strict=True):
                    acc = get(key, missing)
                    if acc is not missing:
                        record = reduce(acc, record)
                    else:
                        new += 1
                    table[key] = record
                    append(record)
                self._new_keys_often = new * 8 > len(records)
            else:
                for key, record in zip(keys, records, strict=True):
                    backend.current_key = key  # a ReduceFunction may use keyed state too
                    acc = get(key, missing)
                    if acc is not missing:
                        record = reduce(acc, record)
                    table[key] = record
                    append(record)
        except TypeError as exc:
            if "unhashable" in str(exc):
                raise self.failure(_unhashable_key(key), record) from exc
            raise self.failure(exc) from None
        except Exception as exc:
            raise self.failure(exc) from None
        if self.dirty is not None:  # incremental checkpoints: the batch's writes, logged as a batch
            self.dirty.extend(keys, out)
        await self.output.push(out, timestamps)

    async def _reduce_detached(self, keys: list, records: list, timestamps: list[int] | None) -> None:
        """The loop for a user's reduce function. The table never shares an object with a
        record received or emitted (detach.py): a key's first record goes in as a copy; a
        result that is the table's value changed in place (the function returned its first
        argument) goes out as a copy; a result that is the record received goes in as a copy.
        So a function changing its first argument never changes what flowed on."""
        reduce, table, backend, missing = self.reduce, self.table, self.backend, _MISSING
        out: list[Any] = []
        append = out.append
        key = record = None
        try:
            if self._plain and not self._new_keys_often:
                # no current key; a key's first record is the only KeyError (see process_batch)
                new = 0
                for key, record in zip(keys, records, strict=True):
                    try:
                        acc = table[key]
                    except KeyError:
                        new += 1
                        table[key] = detached(record)
                    else:
                        value = reduce(acc, record)
                        if value is acc:
                            record = detached(value)
                        else:
                            table[key] = detached(value) if value is record else value
                            record = value
                    append(record)
                self._new_keys_often = new * 8 > len(records)
            else:
                get, plain, new = table.get, self._plain, 0
                for key, record in zip(keys, records, strict=True):
                    if not plain:
                        backend.current_key = key  # a ReduceFunction may use keyed state too
                    acc = get(key, missing)
                    if acc is missing:
                        new += 1
                        table[key] = detached(record)
                    else:
                        value = reduce(acc, record)
                        if value is acc:
                            table[key] = value  # (RocksDB: written back)
                            record = detached(value)
                        else:
                            table[key] = detached(value) if value is record else value
                            record = value
                    append(record)
                self._new_keys_often = new * 8 > len(records)
        except TypeError as exc:
            if "unhashable" in str(exc):
                raise self.failure(_unhashable_key(key), record) from exc
            raise self.failure(exc) from None
        except Exception as exc:
            raise self.failure(exc) from None
        if self.dirty is not None:  # incremental checkpoints: the batch's writes, logged as a batch
            self.dirty.extend(keys, [table[k] for k in keys])
        await self.output.push(out, timestamps)

    async def _fold_batch(
        self, folds: tuple[Callable[..., Any], ...], records: list, timestamps: list[int] | None
    ) -> None:
        """The plain path with the reduce function inlined: one generated loop, the same
        results and state as the loop in ``process_batch``; a failure names its record."""
        it = iter(records)
        # incremental checkpoints: the batch's writes are logged; the folds return the keys too,
        # unless every value carries its key as field 0 (the log reads them there: changes.py)
        dirty = self.dirty
        logged = dirty is not None and dirty.recording
        with_keys = logged and not dirty.key_first  # type: ignore[union-attr]
        result = self._fold_rest(folds, records, it, with_keys)
        if self._guarded is not None and result[-1] is not True:
            # a key's first record the unguarded folds cannot take is in the table now: the
            # folds with the guard from here on, for the rest of this batch too
            self._folds, self._guarded, done = self._guarded, None, result
            if dirty is not None:
                dirty.shape = None  # that record is not a tuple of the length
                dirty.key_first = False
            result = self._fold_rest(self._folds, records, it, with_keys)
            result = tuple(a + b for a, b in zip(done[:-1], result, strict=False))
        out, new = result[0], result[1]
        self._new_keys_often = new * 8 > len(records)
        if logged:  # a batch of known keys through the unguarded folds: the changed fields only
            patch = self._patch if self._guarded is not None and not new else None
            if with_keys:
                keys = result[2]
            elif dirty.key_first:  # type: ignore[union-attr]
                keys = None
            else:  # key_first ended in this batch (once a job): the key selector (field 0) again
                keys = list(map(self.key_selector, records))
            dirty.extend(keys, out, patch)  # type: ignore[union-attr]
        await self.output.push(out, timestamps)

    def _fold_rest(
        self, folds: tuple[Callable[..., Any], ...], records: list, it: Iterator[Any], keys: bool
    ) -> tuple:
        """One of ``folds`` over the rest of ``it = iter(records)``; ``keys``: one returning the
        batch's keys too."""
        try:
            fold = folds[(1 if self._new_keys_often else 0) + (2 if keys else 0)]
            return fold(it, self.table, self.key_selector, _MISSING)
        except Exception as exc:
            record = failed_record(records, it)  # a local named record: found even when None
            if isinstance(exc, TypeError) and "unhashable" in str(exc):
                exc = _unhashable(self.key_selector, record, exc)
            raise self.failure(exc, record) from None


def _unhashable(key_of: Callable[[Any], Any], record: Any, exc: TypeError) -> TypeError:
    try:
        key = key_of(record)
    except Exception:  # the key selector itself failed: its own error says so
        return exc
    error = _unhashable_key(key)
    error.__cause__ = exc
    return error


def _unhashable_key(key: Any) -> TypeError:
    return TypeError(
        f"key_by() selector returned an unhashable key {key!r} ({type(key).__name__}) "
        "after hashable ones: list, dict and set keys get hashable stand-ins only when "
        "an operator's first key is one (state/hashable_keys.py); return one kind of key"
    )


class KeyedFunctionOperator(TimerOperator):
    """``map``/``flat_map``/``filter`` with a Function object on a KeyedStream: the current
    key is set for every record, so the function may use keyed state (as in PyFlink).

    A ``flat_map`` that is a generator runs lazily: it is drained right after its call,
    while the current key is still its record's, so every step of it reads and writes
    that key's state."""

    def __init__(self, name: str, key_selector: Callable[[Any], Any], function: Any, method: str) -> None:
        super().__init__(name, key_selector)
        self.functions = (function,)
        self.method = method
        self.call = resolve_function(function, method, name)
        if is_async(self.call):
            raise TypeError(
                f"{name}: an async {method}() cannot use keyed state (records of different keys "
                "would interleave); key the stream after the async step, or use a plain function"
            )

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        if self._check_key_type:
            self.check_key_type(records)
        backend, key_of, call = self.backend, self.key_selector, self.call
        results: list[Any] = []
        append = results.append
        try:
            if self.method == "flat_map":
                for record in records:
                    backend.current_key = key_of(record)
                    result = call(record)
                    append(None if result is None else list(result))  # drained under its key
                out, out_ts = expand(results, timestamps)
            else:
                for record in records:
                    backend.current_key = key_of(record)
                    append(call(record))
                if self.method == "map":
                    out, out_ts = results, timestamps
                else:
                    out = list(compress(records, results))
                    out_ts = None if timestamps is None else list(compress(timestamps, results))
        except Exception as exc:
            raise self.failure(exc) from None
        if out:
            await self.output.push(out, out_ts)


def aggregation(kind: str, field: int | str) -> Callable[[Any, Any], Any]:
    """PyFlink's rolling aggregations; the other fields come from the first record
    (sum/min/max) or from the record holding the extreme value (min_by/max_by)."""
    if kind not in ("sum", "min", "max", "min_by", "max_by"):
        raise ValueError(f"unknown aggregation {kind!r}")

    def get(v: Any) -> Any:
        if isinstance(field, int):
            if isinstance(v, (tuple, list, Row)):
                return v[field]
            if field == 0 and isinstance(v, (int, float, str, bytes, decimal.Decimal)):
                return v  # a scalar record is its own field 0 (PyFlink's basic types)
        elif isinstance(v, (dict, Row)):
            return v[field]
        else:
            return getattr(v, field)
        raise TypeError(f"cannot aggregate field {field!r} of {type(v).__name__} record {v!r}")

    def with_value(acc: Any, x: Any) -> Any:
        if isinstance(field, int) and isinstance(acc, (tuple, list)):
            out = list(acc)
            out[field] = x
            return tuple(out) if isinstance(acc, tuple) else out
        if isinstance(acc, dict):
            return {**acc, field: x}
        if isinstance(acc, Row):  # a row keeps its names and kind
            row = copy.copy(acc)
            row[field] = x
            return row
        if isinstance(acc, (int, float, str, bytes, decimal.Decimal)):
            return x
        if isinstance(field, str):
            obj = copy.copy(acc)
            setattr(obj, field, x)
            return obj
        raise TypeError(f"cannot aggregate field {field!r} of {type(acc).__name__} record {acc!r}")

    if kind == "sum":

        def slow(acc: Any, v: Any) -> Any:
            return with_value(acc, get(acc) + get(v))
    elif kind == "min":

        def slow(acc: Any, v: Any) -> Any:
            a, b = get(acc), get(v)
            return acc if a <= b else with_value(acc, b)
    elif kind == "max":

        def slow(acc: Any, v: Any) -> Any:
            a, b = get(acc), get(v)
            return acc if a >= b else with_value(acc, b)
    elif kind == "min_by":
        return lambda acc, v: acc if get(acc) <= get(v) else v
    else:
        return lambda acc, v: acc if get(acc) >= get(v) else v

    if not isinstance(field, int) or field < 0:
        return slow
    compiled: dict[int, Callable[[Any, Any], Any]] = {}

    def fn(acc: Any, v: Any) -> Any:
        if type(acc) is tuple:
            arity = len(acc)
            fast = compiled.get(arity)
            if fast is None:
                fast = compiled[arity] = _tuple_aggregation(kind, field, arity, slow)
            return fast(acc, v)
        return slow(acc, v)

    def specialize(sample: Any) -> Callable[[Any, Any], Any]:
        """One function call per record for streams of same-arity tuples."""
        if type(sample) is tuple and field < len(sample):
            return _tuple_aggregation(kind, field, len(sample), fn)
        return fn

    fn.specialize = specialize  # type: ignore[attr-defined]
    fn.aggregation = (kind, field)  # type: ignore[attr-defined]  # what it is (the Spark engine reads it)
    return fn


def _tuple_aggregation(
    kind: str, n: int, arity: int, fallback: Callable[[Any, Any], Any]
) -> Callable[[Any, Any], Any]:
    if n >= arity:
        return fallback

    def body(v: str) -> str:  # the aggregation of ``acc`` (a tuple of ``arity``) and the record ``v``
        parts = [f"acc[{i}]" for i in range(arity)]
        if kind == "sum":
            parts[n] = f"acc[{n}] + {v}[{n}]"
            return f"({', '.join(parts)},)"
        parts[n] = f"{v}[{n}]"
        op = "<=" if kind == "min" else ">="
        return f"acc if acc[{n}] {op} {v}[{n}] else ({', '.join(parts)},)"

    def expression(v: str) -> str:  # ... for any ``acc``
        return f"(({body(v)}) if type(acc) is tuple and len(acc) == {arity} else fallback(acc, {v}))"

    # generated from integers only; other shapes fall back to the generic function
    fast: Callable[[Any, Any], Any] = eval(f"lambda acc, v: {expression('v')}", {"fallback": fallback})
    fast.inline = (expression("r"), {"fallback": fallback})  # type: ignore[attr-defined]  # runtime/fold.py
    # without the guard, for a table whose values are all tuples of ``arity`` (what the body
    # returns is one too): the fold tests each key's first record instead (fold.make_fold)
    fast.inline_unguarded = (  # type: ignore[attr-defined]
        f"({body('r')})",
        f"type(r) is tuple and len(r) == {arity}",
    )
    # what the unguarded body changes of a tuple of ``arity``: field ``n`` (the rest is carried)
    fast.patch_field = n  # type: ignore[attr-defined]
    fast.tuple_arity = arity  # type: ignore[attr-defined]
    return fast
