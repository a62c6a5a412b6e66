"""PyFlink's ``pyflink.datastream.stream_execution_environment``: a re-export."""

from streamflow.datastream import StreamExecutionEnvironment as StreamExecutionEnvironment

__all__ = ["StreamExecutionEnvironment"]

# names PyFlink's module imports from its other modules (api/pyflink_reexports.py)
from streamflow.api.pyflink_reexports import reexports as _reexports

__getattr__ = _reexports(__name__)
