"""PyFlink's ``pyflink.common.typeinfo``: re-exports of ``streamflow.types.typeinfo``."""

from streamflow.types.typeinfo import BasicArrayTypeInfo as BasicArrayTypeInfo
from streamflow.types.typeinfo import BasicTypeInfo as BasicTypeInfo
from streamflow.types.typeinfo import ListTypeInfo as ListTypeInfo
from streamflow.types.typeinfo import MapTypeInfo as MapTypeInfo
from streamflow.types.typeinfo import ObjectArrayTypeInfo as ObjectArrayTypeInfo
from streamflow.types.typeinfo import PickledBytesTypeInfo as PickledBytesTypeInfo
from streamflow.types.typeinfo import PrimitiveArrayTypeInfo as PrimitiveArrayTypeInfo
from streamflow.types.typeinfo import RowTypeInfo as RowTypeInfo
from streamflow.types.typeinfo import SqlTimeTypeInfo as SqlTimeTypeInfo
from streamflow.types.typeinfo import TupleTypeInfo as TupleTypeInfo
from streamflow.types.typeinfo import TypeInformation as TypeInformation
from streamflow.types.typeinfo import Types as Types

__all__ = [
    "BasicArrayTypeInfo",
    "BasicTypeInfo",
    "ListTypeInfo",
    "MapTypeInfo",
    "ObjectArrayTypeInfo",
    "PickledBytesTypeInfo",
    "PrimitiveArrayTypeInfo",
    "RowTypeInfo",
    "SqlTimeTypeInfo",
    "TupleTypeInfo",
    "TypeInformation",
    "Types",
]
