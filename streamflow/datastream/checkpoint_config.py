"""PyFlink's ``pyflink.datastream.checkpoint_config``: re-exports of streamflow's implementations."""

from streamflow.datastream import CheckpointConfig as CheckpointConfig

__all__ = ["CheckpointConfig"]

# names PyFlink's module imports from its other modules (api/pyflink_reexports.py)
from streamflow.api.pyflink_reexports import reexports as _reexports

__getattr__ = _reexports(__name__)
