"""PyFlink's ``pyflink.common.job_client``: re-exports of streamflow's implementations."""

from streamflow.common import JobClient as JobClient

__all__ = ["JobClient"]

# names PyFlink's module imports from its other modules (api/pyflink_reexports.py)
from streamflow.api.pyflink_reexports import reexports as _reexports

__getattr__ = _reexports(__name__)
