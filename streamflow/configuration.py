"""``Configuration``: Flink's string-keyed settings, as PyFlink's ``Configuration``.

Values are kept as strings (as Flink does) and parsed by the typed getters.
``StreamExecutionEnvironment(configuration)`` and ``env.configure(config)``
apply the keys streamflow knows (see ``StreamExecutionEnvironment.configure``).
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from typing import Any, Generic, TypeVar

__all__ = ["ConfigOption", "ConfigOptions", "Configuration", "MemorySize"]

T = TypeVar("T")


class Configuration:
    def __init__(self, other: Configuration | None = None, j_configuration: Any = None) -> None:
        self._data: dict[str, str] = dict(other._data) if other is not None else {}

    @classmethod
    def from_dict(cls, mapping: dict[str, Any]) -> Configuration:
        config = cls()
        for key, value in mapping.items():
            config.set_string(key, _to_str(value))
        return config

    def get_string(self, key: str, default_value: str | None) -> str | None:
        return self._data.get(key, default_value)

    def set_string(self, key: str, value: str) -> Configuration:
        self._data[key] = str(value)
        return self

    def get_integer(self, key: str, default_value: int) -> int:
        return int(self._data[key]) if key in self._data else default_value

    def set_integer(self, key: str, value: int) -> Configuration:
        self._data[key] = str(int(value))
        return self

    def get_boolean(self, key: str, default_value: bool) -> bool:
        return self._data[key].lower() == "true" if key in self._data else default_value

    def set_boolean(self, key: str, value: bool) -> Configuration:
        self._data[key] = "true" if value else "false"
        return self

    def get_float(self, key: str, default_value: float) -> float:
        return float(self._data[key]) if key in self._data else default_value

    def set_float(self, key: str, value: float) -> Configuration:
        self._data[key] = str(float(value))
        return self

    def get_bytearray(self, key: str, default_value: bytearray) -> bytearray:
        return bytearray(self._data[key].encode("latin-1")) if key in self._data else default_value

    def set_bytearray(self, key: str, value: bytearray) -> Configuration:
        self._data[key] = bytes(value).decode("latin-1")
        return self

    def set(self, option: ConfigOption[Any] | str, value: Any) -> Configuration:
        key = option.key() if isinstance(option, ConfigOption) else option
        self._data[key] = _to_str(value)
        return self

    def get(self, option: ConfigOption[Any]) -> Any:
        raw = self._data.get(option.key())
        return option.default_value() if raw is None else option.parse(raw)

    def key_set(self) -> builtins.set[str]:
        return set(self._data)

    def add_all_to_dict(self, target_dict: dict[str, str]) -> None:
        target_dict.update(self._data)

    def add_all(self, other: Configuration, prefix: str | None = None) -> Configuration:
        for key, value in other._data.items():
            self._data[(prefix or "") + key] = value
        return self

    def contains_key(self, key: str) -> bool:
        return key in self._data

    def to_dict(self) -> dict[str, str]:
        return dict(self._data)

    def remove_config(self, key: str) -> bool:
        return self._data.pop(key, None) is not None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Configuration) and other._data == self._data

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._data.items())))

    def __str__(self) -> str:
        return str(self._data)


def _to_str(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ";".join(_to_str(v) for v in value)
    return str(value)


class ConfigOption(Generic[T]):
    """A typed configuration key with a default."""

    def __init__(self, key: str, parse: Any = str, default: T | None = None, description: str = "") -> None:
        self._key, self._parse, self._default, self._description = key, parse, default, description

    def key(self) -> str:
        return self._key

    def default_value(self) -> T | None:
        return self._default

    def has_default_value(self) -> bool:
        return self._default is not None

    def parse(self, raw: str) -> T:
        return self._parse(raw)

    def with_description(self, description: str) -> ConfigOption[T]:
        return ConfigOption(self._key, self._parse, self._default, description)

    def __repr__(self) -> str:
        return f"ConfigOption(key={self._key!r}, default={self._default!r})"


class ConfigOptions:
    """``ConfigOptions.key('a.b').int_type().default_value(3)``."""

    class _Builder:
        def __init__(self, key: str) -> None:
            self._key = key

        def _typed(self, parse: Any) -> ConfigOptions._Typed:
            return ConfigOptions._Typed(self._key, parse)

        def boolean_type(self) -> ConfigOptions._Typed:
            return self._typed(lambda s: s.lower() == "true")

        def int_type(self) -> ConfigOptions._Typed:
            return self._typed(int)

        def long_type(self) -> ConfigOptions._Typed:
            return self._typed(int)

        def float_type(self) -> ConfigOptions._Typed:
            return self._typed(float)

        def double_type(self) -> ConfigOptions._Typed:
            return self._typed(float)

        def string_type(self) -> ConfigOptions._Typed:
            return self._typed(str)

    class _Typed:
        def __init__(self, key: str, parse: Any) -> None:
            self._key, self._parse = key, parse

        def default_value(self, value: Any) -> ConfigOption[Any]:
            return ConfigOption(self._key, self._parse, value)

        def no_default_value(self) -> ConfigOption[Any]:
            return ConfigOption(self._key, self._parse, None)

    @staticmethod
    def key(key: str) -> ConfigOptions._Builder:
        return ConfigOptions._Builder(key)


class MemorySize:
    """A number of bytes (``MemorySize.parse('64m')``)."""

    _UNITS: Iterable[tuple[str, int]] = (("t", 1 << 40), ("g", 1 << 30), ("m", 1 << 20), ("k", 1 << 10))

    def __init__(self, bytes_size: int) -> None:
        if bytes_size < 0:
            raise ValueError(f"a memory size cannot be negative: {bytes_size}")
        self._bytes = int(bytes_size)

    @staticmethod
    def of_mebi_bytes(mebi_bytes: int) -> MemorySize:
        return MemorySize(mebi_bytes << 20)

    @staticmethod
    def parse(text: str) -> MemorySize:
        raw = text.strip().lower().rstrip("b").rstrip("i")
        for suffix, factor in MemorySize._UNITS:
            if raw.endswith(suffix):
                return MemorySize(int(raw[: -len(suffix)].strip()) * factor)
        return MemorySize(int(raw))

    def get_bytes(self) -> int:
        return self._bytes

    def get_kibi_bytes(self) -> int:
        return self._bytes >> 10

    def get_mebi_bytes(self) -> int:
        return self._bytes >> 20

    def get_gibi_bytes(self) -> int:
        return self._bytes >> 30

    def get_tebi_bytes(self) -> int:
        return self._bytes >> 40

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MemorySize) and other._bytes == self._bytes

    def __hash__(self) -> int:
        return hash(self._bytes)

    def __repr__(self) -> str:
        return f"MemorySize({self._bytes})"
