"""PyFlink's ``pyflink.common.job_id``: re-exports of streamflow's implementations."""

from streamflow.common import JobID as JobID

__all__ = ["JobID"]
