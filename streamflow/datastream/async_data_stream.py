"""PyFlink's ``pyflink.datastream.async_data_stream``."""

from streamflow.async_io import AsyncDataStream as AsyncDataStream

__all__ = ["AsyncDataStream"]
