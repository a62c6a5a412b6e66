"""PyFlink's ``pyflink.datastream.data_stream``: re-exports of ``streamflow.api``."""

from streamflow.api.broadcast import BroadcastConnectedStream as BroadcastConnectedStream
from streamflow.api.broadcast import BroadcastStream as BroadcastStream
from streamflow.api.connected import ConnectedStreams as ConnectedStreams
from streamflow.api.datastream import DataStream as DataStream
from streamflow.api.datastream import DataStreamSink as DataStreamSink
from streamflow.api.datastream import KeyedStream as KeyedStream
from streamflow.api.surface import CloseableIterator as CloseableIterator
from streamflow.api.windowed import WindowedStream as WindowedStream

__all__ = [
    "BroadcastConnectedStream",
    "BroadcastStream",
    "CloseableIterator",
    "ConnectedStreams",
    "DataStream",
    "DataStreamSink",
    "KeyedStream",
    "WindowedStream",
]

# names PyFlink's module imports from its other modules (api/pyflink_reexports.py)
from streamflow.api.pyflink_reexports import reexports as _reexports

__getattr__ = _reexports(__name__)
