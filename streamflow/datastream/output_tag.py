"""PyFlink's ``pyflink.datastream.output_tag``."""

from streamflow.functions import OutputTag as OutputTag

__all__ = ["OutputTag"]

# names PyFlink's module imports from its other modules (api/pyflink_reexports.py)
from streamflow.api.pyflink_reexports import reexports as _reexports

__getattr__ = _reexports(__name__)
