"""PyFlink's ``pyflink.table.types``, the part DataStream formats need: ``DataTypes`` and its types.

A :class:`DataType` describes a column of a table (Flink's logical types): its SQL name, whether
it is nullable (``DataTypes.INT()`` is, ``DataTypes.INT(False)`` is not) and, for the types that
have them, a precision/scale (``DECIMAL(p, s)``), an element type (``ARRAY``) or fields
(``ROW``). streamflow uses them as schemas of the CSV file formats (``formats/csv_bulk.py``):
:meth:`DataType.type_info` gives the DataStream type a record of the column has, as Flink's
``LegacyTypeInfoDataTypeConverter.toLegacyTypeInfo`` converts it (``TINYINT`` -> ``Types.BYTE()``,
``DECIMAL`` -> ``Types.BIG_DEC()``, ``ARRAY(INT())`` -> ``Types.OBJECT_ARRAY(Types.INT())``: its
conversion class ``Integer[]`` is no primitive array, so ``convertToObjectArrayTypeInfo``;
``ROW`` -> ``Types.ROW_NAMED``). Only the types listed in :class:`DataTypes` exist; any other
``DataTypes.X`` (``DATE``, whose record type ``Types.LOCAL_DATE`` streamflow lacks, ``MAP``...)
raises :class:`NotSupportedError`, and so does the Table API itself (``pyflink.table``'s other
names, refused by the package).
"""

from __future__ import annotations

from typing import Any, NoReturn

from streamflow.errors import NotSupportedError
from streamflow.types.typeinfo import Types

__all__ = ["DataType", "DataTypes", "RowField"]

#: SQL name -> the DataStream type of a value (LegacyTypeInfoDataTypeConverter)
_TYPE_INFO = {
    "TINYINT": Types.BYTE, "SMALLINT": Types.SHORT, "INT": Types.INT, "BIGINT": Types.LONG,
    "FLOAT": Types.FLOAT, "DOUBLE": Types.DOUBLE, "DECIMAL": Types.BIG_DEC, "BOOLEAN": Types.BOOLEAN,
    "STRING": Types.STRING,
}  # fmt: skip
_NUMERIC = ("TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL")


class DataType:
    """A logical type (``DataTypes.INT()``); equal when name, nullability and parameters are."""

    def __init__(self, name: str, nullable: bool = True, **params: Any) -> None:
        self.name = name
        self._nullable = nullable
        self.params = params

    @property
    def is_numeric(self) -> bool:
        return self.name in _NUMERIC

    def not_null(self) -> DataType:
        return DataType(self.name, False, **self.params)

    def nullable(self) -> DataType:
        return DataType(self.name, True, **self.params)

    def type_info(self) -> Any:
        """The DataStream type of a value of this type (Flink's ``toLegacyTypeInfo``)."""
        if self.name == "ARRAY":
            return Types.OBJECT_ARRAY(self.params["element_type"].type_info())
        if self.name == "ROW":
            fields: list[RowField] = self.params["fields"]
            return Types.ROW_NAMED([f.name for f in fields], [f.data_type.type_info() for f in fields])
        return _TYPE_INFO[self.name]()

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, DataType) and (self.name, self._nullable, self.params)
                == (other.name, other._nullable, other.params))  # fmt: skip

    def __hash__(self) -> int:
        return hash((self.name, self._nullable))

    def __repr__(self) -> str:
        if self.name == "DECIMAL":
            text = f"DECIMAL({self.params['precision']}, {self.params['scale']})"
        elif self.name == "ARRAY":
            text = f"ARRAY<{self.params['element_type']!r}>"
        elif self.name == "ROW":
            text = "ROW<" + ", ".join(f"{f.name} {f.data_type!r}" for f in self.params["fields"]) + ">"
        else:
            text = self.name
        return text if self._nullable else f"{text} NOT NULL"

    def __iter__(self) -> Any:
        """A ROW type's fields (PyFlink's ``RowType`` iterates its fields)."""
        if self.name != "ROW":
            raise TypeError(f"{self!r} is not a ROW type: it has no fields")
        return iter(self.params["fields"])


class RowField:
    """A named field of a ROW type (``DataTypes.FIELD(name, data_type)``)."""

    def __init__(self, name: str, data_type: DataType, description: str | None = None) -> None:
        if not isinstance(data_type, DataType):
            raise TypeError(f"field {name!r}: a DataType is needed, got {data_type!r}")
        self.name, self.data_type, self.description = name, data_type, description

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RowField) and (self.name, self.data_type) == (other.name, other.data_type)

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"RowField({self.name}, {self.data_type!r})"


class _DataTypesMeta(type):
    def __getattr__(cls, name: str) -> NoReturn:
        if name.startswith("_"):
            raise AttributeError(name)
        raise NotSupportedError(
            f"DataTypes.{name} is not supported by streamflow: streamflow.table has the types the CSV file "
            "formats' columns use (TINYINT, SMALLINT, INT, BIGINT, FLOAT, DOUBLE, DECIMAL, BOOLEAN, STRING, "
            "ARRAY, ROW, FIELD), not the Table API's type system"
        )


class DataTypes(metaclass=_DataTypesMeta):
    """PyFlink's ``DataTypes`` factories, for the types streamflow's formats use."""

    @staticmethod
    def TINYINT(nullable: bool = True) -> DataType:
        return DataType("TINYINT", nullable)

    @staticmethod
    def SMALLINT(nullable: bool = True) -> DataType:
        return DataType("SMALLINT", nullable)

    @staticmethod
    def INT(nullable: bool = True) -> DataType:
        return DataType("INT", nullable)

    @staticmethod
    def BIGINT(nullable: bool = True) -> DataType:
        return DataType("BIGINT", nullable)

    @staticmethod
    def FLOAT(nullable: bool = True) -> DataType:
        return DataType("FLOAT", nullable)

    @staticmethod
    def DOUBLE(nullable: bool = True) -> DataType:
        return DataType("DOUBLE", nullable)

    @staticmethod
    def DECIMAL(precision: int, scale: int, nullable: bool = True) -> DataType:
        """Flink's ``DECIMAL(p, s)``: 1 <= p <= 38, 0 <= s <= p."""
        if not 1 <= precision <= 38 or not 0 <= scale <= precision:
            raise ValueError(f"DECIMAL({precision}, {scale}): precision 1..38 and scale 0..precision needed")
        return DataType("DECIMAL", nullable, precision=precision, scale=scale)

    @staticmethod
    def BOOLEAN(nullable: bool = True) -> DataType:
        return DataType("BOOLEAN", nullable)

    @staticmethod
    def STRING(nullable: bool = True) -> DataType:
        return DataType("STRING", nullable)

    @staticmethod
    def ARRAY(element_type: DataType, nullable: bool = True) -> DataType:
        if not isinstance(element_type, DataType):
            raise TypeError(f"ARRAY: the element type must be a DataType, got {element_type!r}")
        return DataType("ARRAY", nullable, element_type=element_type)

    @staticmethod
    def FIELD(name: str, data_type: DataType, description: str | None = None) -> RowField:
        return RowField(name, data_type, description)

    @staticmethod
    def ROW(row_fields: list[RowField] | None = None, nullable: bool = True) -> DataType:
        fields = list(row_fields or [])
        for f in fields:
            if not isinstance(f, RowField):
                raise TypeError(f"ROW: fields are DataTypes.FIELD(name, type), got {f!r}")
        return DataType("ROW", nullable, fields=fields)
