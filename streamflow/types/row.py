"""``Row`` and ``RowKind``: PyFlink's record type for declared row types.

Semantics follow ``pyflink.common.types.Row`` (apache-flink 2.3.0): fields by
index, by name (``row['name']``) and as attributes (``row.name``); a row built
from keyword arguments keeps their order; ``Row('name', 'age')`` makes a row
"class" whose call builds rows with those names; every row has a kind
(``+I``, ``-U``, ``+U``, ``-D``); equality compares kind, names and values;
``repr`` is ``Row(f0=1, f1='a')`` for named rows and ``<Row(1, 'a')>`` otherwise.
"""

from __future__ import annotations

from collections.abc import Iterator
from enum import Enum
from typing import Any

from ..errors import StreamflowError

__all__ = ["Row", "RowKind"]


class RowKind(Enum):
    INSERT = 0
    UPDATE_BEFORE = 1
    UPDATE_AFTER = 2
    DELETE = 3

    def __str__(self) -> str:
        return _SHORT[self.value]


_SHORT = ("+I", "-U", "+U", "-D")


def _create_row(fields: list[str] | None, values: tuple, row_kind: RowKind | None = None) -> Row:
    row = Row(*values)
    if fields is not None:
        row._fields = list(fields)
    if row_kind is not None:
        row._row_kind = row_kind
    return row


class FieldNotFound(StreamflowError, KeyError, ValueError):
    """``row["name"]`` for a name the row does not have: PyFlink raises ``ValueError``, a
    mapping ``KeyError``; this is both."""


class Row:
    """A row of fields, as PyFlink's ``Row``."""

    __slots__ = ("_fields", "_from_dict", "_row_kind", "_values")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args and kwargs:
            raise ValueError("Can not use both args and kwargs to create Row")
        if kwargs:
            object.__setattr__(self, "_fields", list(kwargs))
            object.__setattr__(self, "_values", list(kwargs.values()))
            object.__setattr__(self, "_from_dict", True)
        else:
            object.__setattr__(self, "_values", list(args))
            object.__setattr__(self, "_from_dict", False)
        object.__setattr__(self, "_row_kind", RowKind.INSERT)

    def _field_names(self) -> list[str] | None:
        try:
            return self._fields
        except AttributeError:
            return None

    def as_dict(self, recursive: bool = False) -> dict[str, Any]:
        fields = self._field_names()
        if fields is None:
            raise TypeError("Cannot convert a Row class into dict")

        def conv(obj: Any) -> Any:
            if isinstance(obj, Row):
                return obj.as_dict(True)
            if isinstance(obj, list):
                return [conv(o) for o in obj]
            if isinstance(obj, dict):
                return {k: conv(v) for k, v in obj.items()}
            return obj

        return dict(zip(fields, (conv(v) for v in self._values) if recursive else self._values, strict=False))

    def get_row_kind(self) -> RowKind:
        return self._row_kind

    def set_row_kind(self, row_kind: RowKind) -> None:
        self._row_kind = row_kind

    def set_field_names(self, field_names: list[str]) -> None:
        self._fields = list(field_names)

    def get_fields_by_names(self, names: list[str]) -> list[Any]:
        fields = self._field_names()
        if fields is None or names == fields:
            return self._values
        missing = [n for n in names if n not in fields]
        if missing:
            raise KeyError(f"Field names {missing} not exist in {fields}.")
        return [self._values[fields.index(n)] for n in names]

    @staticmethod
    def of_kind(row_kind: RowKind, *args: Any, **kwargs: Any) -> Row:
        row = Row(*args, **kwargs)
        row.set_row_kind(row_kind)
        return row

    def __contains__(self, item: Any) -> bool:
        fields = self._field_names()
        return item in (fields if fields is not None else self._values)

    def __call__(self, *args: Any) -> Row:
        """A row "class" (``Row('name', 'age')``) builds rows with those field names."""
        if len(args) > len(self):
            raise ValueError(
                f"Can not create Row with fields {self}, expected {len(self)} values but got {args}"
            )
        return _create_row(list(self._values), args, self._row_kind)

    def __getitem__(self, item: Any) -> Any:
        if isinstance(item, (int, slice)):
            return self._values[item]
        fields = self._field_names()
        if fields is None:
            raise KeyError(item)
        if item not in fields:
            raise FieldNotFound(item)
        return self._values[fields.index(item)]

    def __setitem__(self, key: Any, value: Any) -> None:
        if isinstance(key, (int, slice)):
            self._values[key] = value
            return
        fields = self._field_names()
        if fields is None:
            raise KeyError(key)
        if key not in fields:
            raise FieldNotFound(key)
        self._values[fields.index(key)] = value

    def __getattr__(self, item: str) -> Any:
        if item.startswith("_"):
            raise AttributeError(item)
        fields = self._field_names()
        if fields is None or item not in fields:
            raise AttributeError(item)
        return self._values[fields.index(item)]

    def __setattr__(self, key: str, value: Any) -> None:
        if key not in ("_fields", "_from_dict", "_row_kind", "_values"):
            raise AttributeError(key)
        object.__setattr__(self, key, value)

    def __reduce__(self) -> tuple:
        return _create_row, (self._field_names(), tuple(self._values), self._row_kind)

    def __repr__(self) -> str:
        fields = self._field_names()
        if fields is not None:
            return "Row({})".format(
                ", ".join(f"{k}={v!r}" for k, v in zip(fields, self._values, strict=False))
            )
        return "<Row({})>".format(", ".join(repr(v) for v in self._values))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Row) or self._row_kind != other._row_kind:
            return False
        mine, theirs = self._field_names(), other._field_names()
        if (mine is None) != (theirs is None):
            return False
        if mine is None or theirs is None:
            return self._values == other._values
        if sorted(mine) != sorted(theirs):
            return False
        return all(self._values[mine.index(n)] == other._values[theirs.index(n)] for n in mine)

    def __hash__(self) -> int:
        return hash(tuple(self._values))

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)
