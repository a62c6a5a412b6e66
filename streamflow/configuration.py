"""``Configuration``: Flink's string-keyed settings, as PyFlink's ``Configuration``.

Values are kept as strings and parsed by the typed getters; a typed setter
(``set_integer``, ``set_float``, ``set_boolean``, ``set_bytearray``) also keeps the
typed value, as Flink's ``Configuration`` keeps the Java object, so
``add_all_to_dict`` hands out ``1``, ``1.2``, ``True`` and a ``bytearray`` where
``to_dict`` gives their strings. ``str(conf)`` is Java's ``{k1=v1, k2=1}`` with
sensitive values (passwords, secrets, tokens) hidden, as Flink's ``toString``.
``StreamExecutionEnvironment(configuration)`` and ``env.configure(config)``
apply the keys streamflow knows (see ``StreamExecutionEnvironment.configure``).
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Iterable
from typing import Any, Generic, TypeVar

from streamflow.types.java_text import java_string

__all__ = ["ConfigOption", "ConfigOptions", "Configuration", "MemorySize"]

T = TypeVar("T")


class Configuration:
    def __init__(self, other: Configuration | None = None, j_configuration: Any = None) -> None:
        self._data: dict[str, str] = dict(other._data) if other is not None else {}
        # the values the typed setters stored, by key (Flink's typed Java objects)
        self._typed: dict[str, Any] = dict(other._typed) if other is not None else {}

    def _put(self, key: str, text: str, typed: Any = None) -> Configuration:
        self._data[key] = text
        if typed is None:
            self._typed.pop(key, None)
        else:
            self._typed[key] = typed
        return self

    @classmethod
    def from_dict(cls, mapping: dict[str, Any]) -> Configuration:
        config = cls()
        for key, value in mapping.items():
            config.set_string(key, _to_str(value))
        return config

    def get_string(self, key: str, default_value: str | None) -> str | None:
        return self._data.get(key, default_value)

    def set_string(self, key: str, value: str) -> Configuration:
        return self._put(key, str(value))

    def get_integer(self, key: str, default_value: int) -> int:
        return int(self._data[key]) if key in self._data else default_value

    def set_integer(self, key: str, value: int) -> Configuration:
        return self._put(key, str(int(value)), int(value))

    def get_boolean(self, key: str, default_value: bool) -> bool:
        return _parse_bool(self._data[key]) if key in self._data else default_value

    def set_boolean(self, key: str, value: bool) -> Configuration:
        return self._put(key, "true" if value else "false", bool(value))

    def get_float(self, key: str, default_value: float) -> float:
        return float(self._data[key]) if key in self._data else default_value

    def set_float(self, key: str, value: float) -> Configuration:
        return self._put(key, java_string(float(value)), float(value))

    def get_bytearray(self, key: str, default_value: bytearray) -> bytearray:
        return bytearray(self._data[key].encode("latin-1")) if key in self._data else default_value

    def set_bytearray(self, key: str, value: bytearray) -> Configuration:
        return self._put(key, bytes(value).decode("latin-1"), bytearray(value))

    def set(self, option: ConfigOption[Any] | str, value: Any) -> Configuration:
        key = option.key() if isinstance(option, ConfigOption) else option
        return self._put(key, _to_str(value))

    def get(self, option: ConfigOption[Any]) -> Any:
        raw = self._data.get(option.key())
        return option.default_value() if raw is None else option.parse(raw)

    def key_set(self) -> builtins.set[str]:
        return set(self._data)

    def add_all_to_dict(self, target_dict: dict[str, Any]) -> None:
        """Flink's ``addAllToProperties``: each value as it was set (typed setters' values typed)."""
        for key, value in self._data.items():
            typed = self._typed.get(key)
            target_dict[key] = value if typed is None else _copy_typed(typed)

    def add_all(self, other: Configuration, prefix: str | None = None) -> Configuration:
        for key, value in other._data.items():
            typed = other._typed.get(key)
            self._put((prefix or "") + key, value, None if typed is None else _copy_typed(typed))
        return self

    def contains_key(self, key: str) -> bool:
        return key in self._data

    def to_dict(self) -> dict[str, str]:
        return dict(self._data)

    def remove_config(self, key: str) -> bool:
        self._typed.pop(key, None)
        return self._data.pop(key, None) is not None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Configuration) and other._data == self._data

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._data.items())))

    def __str__(self) -> str:
        """Java's ``Map.toString`` of the entries, sensitive values hidden (Flink's ``toString``)."""
        shown = (f"{k}={_HIDDEN if _is_sensitive(k) else v}" for k, v in self._data.items())
        return "{" + ", ".join(shown) + "}"

    @staticmethod
    def parse_list_value(value: str | None, standard_yaml: bool = True) -> list[str]:
        """PyFlink's ``parse_list_value``: a YAML list (``[a, b]`` or ``- a`` lines) when
        ``standard_yaml``, else (and for any other text) the legacy ``a;b;c``."""
        if not value:
            return []
        if standard_yaml:
            parsed = _yaml_list(value)
            if parsed is not None:
                return parsed
        return value.split(";")


# Flink's GlobalConfiguration.SENSITIVE_KEYS: a key containing one (any case) has its value hidden
_SENSITIVE = (
    "password", "secret", "fs.azure.account.key", "apikey", "api-key", "auth-params",
    "service-key", "token", "basic-auth", "jaas.config", "http-headers",
)
_HIDDEN = "******"


def _is_sensitive(key: str) -> bool:
    lowered = key.lower()
    return any(word in lowered for word in _SENSITIVE)


def _parse_bool(text: str) -> bool:
    """Flink's ``ConfigurationUtils.convertToBoolean``: ``true``/``false`` in any case, else an error
    (a misspelt value must not read as ``false``)."""
    lowered = text.strip().lower() if isinstance(text, str) else str(text).lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    raise ValueError(
        f"Unrecognized option for boolean: {text}. Expected either true or false(case insensitive)"
    )


def _copy_typed(value: Any) -> Any:
    return bytearray(value) if isinstance(value, bytearray) else value


def _unquote(item: str) -> str:
    item = item.strip()
    if len(item) >= 2 and item[0] == item[-1] and item[0] in "'\"":
        return item[1:-1]
    return item


def _yaml_list(text: str) -> list[str] | None:
    """A YAML flow list (``[a, b]``) or block list (``- a`` lines) of scalars, else None."""
    stripped = text.strip()
    if stripped.startswith("[") and stripped.endswith("]"):
        inner = stripped[1:-1].strip()
        return [_unquote(item) for item in inner.split(",")] if inner else []
    lines = [line.strip() for line in stripped.splitlines() if line.strip()]
    if lines and all(line == "-" or line.startswith("- ") for line in lines):
        return [_unquote(line[1:]) for line in lines]
    return None


def _to_str(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_string(value)
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
            return self._typed(_parse_bool)

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


@functools.total_ordering
class MemorySize:
    """A number of bytes (``MemorySize.parse('64m')``), ordered by size as PyFlink's
    (``m1 <= m2``, Java's ``compareTo``)."""

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

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, MemorySize):
            return NotImplemented
        return self._bytes < other._bytes

    def __hash__(self) -> int:
        return hash(self._bytes)

    def __repr__(self) -> str:
        return f"MemorySize({self._bytes})"
