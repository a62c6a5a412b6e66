"""PyFlink's ``pyflink.datastream.formats.json``: JSON row (de)serialization schemas.

``JsonRowSerializationSchema.Builder().with_type_info(Types.ROW([...])).build()`` writes a
row as a JSON object named by the row type's fields (``{"f0":1,"f1":"hi"}``);
``JsonRowDeserializationSchema.Builder().type_info(...).build()`` reads such objects into
``Row``s of that type (a missing field is ``None`` unless ``fail_on_missing_field()``; a
document that does not parse fails the source unless ``ignore_parse_errors()``, which skips
it with a log line). The implementations are ``streamflow.connectors.serialization``'s
(orjson)."""

from __future__ import annotations

from streamflow.connectors.serialization import JsonRowDeserializationSchema as JsonRowDeserializationSchema
from streamflow.connectors.serialization import JsonRowSerializationSchema as JsonRowSerializationSchema

__all__ = ["JsonRowDeserializationSchema", "JsonRowSerializationSchema"]

# names PyFlink's module imports from its other modules (api/pyflink_reexports.py)
from streamflow.api.pyflink_reexports import reexports as _reexports

__getattr__ = _reexports(__name__)
