"""PyFlink's ``pyflink.table``, types only: :class:`DataTypes` and the :class:`DataType`s it builds.

streamflow has no Table API (no ``TableEnvironment``, ``Table``, SQL, catalogs or table
connectors). PyFlink's DataStream formats build some of their schemas from Table API type
descriptors (``CsvSchema.builder().add_number_column('id', DataTypes.INT())``), so this package
gives those descriptors (``types.py``) and nothing else. Any other name of ``pyflink.table``
(``from streamflow.table import TableEnvironment``) raises :class:`NotSupportedError` naming
what is missing and why, rather than an ``ImportError`` that could read as a packaging fault.
"""

from __future__ import annotations

from typing import NoReturn

from streamflow.errors import NotSupportedError
from streamflow.table.types import DataType as DataType
from streamflow.table.types import DataTypes as DataTypes
from streamflow.table.types import RowField as RowField

__all__ = ["DataType", "DataTypes", "RowField"]


def __getattr__(name: str) -> NoReturn:
    if name.startswith("_"):  # dunder and private look-ups (hasattr, copy, inspect) stay AttributeErrors
        raise AttributeError(name)
    raise NotSupportedError(
        f"pyflink.table.{name} is not supported by streamflow: streamflow has no Table API (Table, "
        "TableEnvironment, SQL, catalogs, table connectors); streamflow.table gives only DataTypes, the "
        "type descriptors PyFlink's DataStream formats take (CsvSchema); use the DataStream API"
    )
