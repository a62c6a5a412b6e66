"""PyFlink's ``pyflink.datastream.state_backend``: re-exports of ``streamflow.state.backends``."""

from streamflow.api.pyflink_names import CustomStateBackend as CustomStateBackend
from streamflow.state.backends import EmbeddedRocksDBStateBackend as EmbeddedRocksDBStateBackend
from streamflow.state.backends import HashMapStateBackend as HashMapStateBackend
from streamflow.state.backends import PredefinedOptions as PredefinedOptions
from streamflow.state.backends import StateBackend as StateBackend

__all__ = [
    "CustomStateBackend",
    "EmbeddedRocksDBStateBackend",
    "HashMapStateBackend",
    "PredefinedOptions",
    "StateBackend",
]
