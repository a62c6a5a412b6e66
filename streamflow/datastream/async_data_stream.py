"""PyFlink's ``pyflink.datastream.async_data_stream``."""

from streamflow.async_io import AsyncDataStream as AsyncDataStream

__all__ = ["AsyncDataStream"]

# names PyFlink's module imports from its other modules (api/pyflink_reexports.py)
from streamflow.api.pyflink_reexports import reexports as _reexports

__getattr__ = _reexports(__name__)
