"""PyFlink's ``pyflink.common.execution_config``: re-exports of streamflow's implementations."""

from streamflow.common import ExecutionConfig as ExecutionConfig

__all__ = ["ExecutionConfig"]
