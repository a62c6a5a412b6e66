"""PyFlink's ``pyflink.common.job_status``: re-exports of streamflow's implementations."""

from streamflow.common import JobStatus as JobStatus

__all__ = ["JobStatus"]
