"""PyFlink's ``pyflink.datastream.connectors.number_seq``."""

from streamflow.connectors.number_seq import NumberSequenceSource as NumberSequenceSource

__all__ = ["NumberSequenceSource"]

# names PyFlink's module imports from its other modules (api/pyflink_reexports.py)
from streamflow.api.pyflink_reexports import reexports as _reexports

__getattr__ = _reexports(__name__)
