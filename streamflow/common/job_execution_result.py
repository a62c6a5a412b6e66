"""PyFlink's ``pyflink.common.job_execution_result``: re-exports of streamflow's implementations."""

from streamflow.common import JobExecutionResult as JobExecutionResult

__all__ = ["JobExecutionResult"]

# names PyFlink's module imports from its other modules (api/pyflink_reexports.py)
from streamflow.api.pyflink_reexports import reexports as _reexports

__getattr__ = _reexports(__name__)
